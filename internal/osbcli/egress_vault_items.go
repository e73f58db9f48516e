package osbcli

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) vaultCredentialListCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list <sandbox-id>",
		Aliases: []string{"ls"},
		Short:   "List credentials (names, never values)",
		Example: "  osb credential-vault credential list 3f2c9a1e-...",
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := a.sdk()
		if err != nil {
			return err
		}
		l, err := c.CredentialVault(args[0]).ListCredentials(cmd.Context())
		if err != nil {
			return vaultHint(err, args[0])
		}
		return render(a.io.out, *out, view{data: l, table: func(t *tableWriter) {
			t.row("NAME", "SOURCE", "REVISION")
			for _, m := range l.Credentials {
				t.row(m.Name, m.SourceType, strconv.FormatInt(m.Revision, 10))
			}
		}})
	}
	return cmd
}

func (a *app) vaultCredentialGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get <sandbox-id> <name>",
		Short:   "Show a credential (never its value)",
		Example: "  osb credential-vault credential get 3f2c9a1e-... github",
		Args:    exactArgs(2, "<sandbox-id> <name>"),
	}
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := a.sdk()
		if err != nil {
			return err
		}
		m, err := c.CredentialVault(args[0]).GetCredential(cmd.Context(), args[1])
		if err != nil {
			return vaultHint(err, args[0])
		}
		return render(a.io.out, *out, view{data: m, table: func(t *tableWriter) {
			t.row("NAME", m.Name)
			t.row("SOURCE", m.SourceType)
			t.row("REVISION", strconv.FormatInt(m.Revision, 10))
		}})
	}
	return cmd
}

func (a *app) vaultBindingListCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list <sandbox-id>",
		Aliases: []string{"ls"},
		Short:   "List bindings",
		Example: "  osb credential-vault binding list 3f2c9a1e-...",
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := a.sdk()
		if err != nil {
			return err
		}
		l, err := c.CredentialVault(args[0]).ListBindings(cmd.Context())
		if err != nil {
			return vaultHint(err, args[0])
		}
		return render(a.io.out, *out, view{data: l, table: func(t *tableWriter) {
			t.row("NAME", "HOSTS", "AUTH", "REVISION")
			for _, b := range l.Bindings {
				t.row(b.Name, bindingHosts(b), bindingAuth(b), strconv.FormatInt(b.Revision, 10))
			}
		}})
	}
	return cmd
}

func (a *app) vaultBindingGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get <sandbox-id> <name>",
		Short:   "Show a binding, with the sidecar's defaults filled in",
		Example: "  osb credential-vault binding get 3f2c9a1e-... github-api",
		Args:    exactArgs(2, "<sandbox-id> <name>"),
	}
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := a.sdk()
		if err != nil {
			return err
		}
		b, err := c.CredentialVault(args[0]).GetBinding(cmd.Context(), args[1])
		if err != nil {
			return vaultHint(err, args[0])
		}
		return render(a.io.out, *out, view{data: b, table: func(t *tableWriter) {
			t.row("NAME", b.Name)
			t.row("REVISION", strconv.FormatInt(b.Revision, 10))
			t.row("AUTH", bindingAuth(*b))
			if m := b.Match; m != nil {
				ports := make([]string, len(m.Ports))
				for i, p := range m.Ports {
					ports[i] = strconv.Itoa(p)
				}
				t.row("HOSTS", dash(strings.Join(m.Hosts, ",")))
				t.row("SCHEMES", dash(strings.Join(m.Schemes, ",")))
				t.row("PORTS", dash(strings.Join(ports, ",")))
				t.row("METHODS", dash(strings.Join(m.Methods, ",")))
				t.row("PATHS", dash(strings.Join(m.Paths, ",")))
			}
		}})
	}
	return cmd
}
