package osbcli

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) vaultCredentialListCommand() *cobra.Command {
	return a.sidecarView(&cobra.Command{
		Use:     "list <sandbox-id>",
		Aliases: []string{"ls"},
		Short:   "List credentials (names, never values)",
		Example: "  osb credential-vault credential list 3f2c9a1e-...",
		Args:    exactArgs(1, "<sandbox-id>"),
	}, vaultHint, func(ctx context.Context, c *sandbox.Client, args []string) (view, error) {
		l, err := c.CredentialVault(args[0]).ListCredentials(ctx)
		if err != nil {
			return view{}, err
		}
		return view{data: l, table: func(t *tableWriter) {
			t.row("NAME", "SOURCE", "REVISION")
			for _, m := range l.Credentials {
				t.row(m.Name, m.SourceType, strconv.FormatInt(m.Revision, 10))
			}
		}}, nil
	})
}

func (a *app) vaultCredentialGetCommand() *cobra.Command {
	return a.sidecarView(&cobra.Command{
		Use:     "get <sandbox-id> <name>",
		Short:   "Show a credential (never its value)",
		Example: "  osb credential-vault credential get 3f2c9a1e-... github",
		Args:    exactArgs(2, "<sandbox-id> <name>"),
	}, vaultHint, func(ctx context.Context, c *sandbox.Client, args []string) (view, error) {
		m, err := c.CredentialVault(args[0]).GetCredential(ctx, args[1])
		if err != nil {
			return view{}, err
		}
		return view{data: m, table: func(t *tableWriter) {
			t.row("NAME", m.Name)
			t.row("SOURCE", m.SourceType)
			t.row("REVISION", strconv.FormatInt(m.Revision, 10))
		}}, nil
	})
}

func (a *app) vaultBindingListCommand() *cobra.Command {
	return a.sidecarView(&cobra.Command{
		Use:     "list <sandbox-id>",
		Aliases: []string{"ls"},
		Short:   "List bindings",
		Example: "  osb credential-vault binding list 3f2c9a1e-...",
		Args:    exactArgs(1, "<sandbox-id>"),
	}, vaultHint, func(ctx context.Context, c *sandbox.Client, args []string) (view, error) {
		l, err := c.CredentialVault(args[0]).ListBindings(ctx)
		if err != nil {
			return view{}, err
		}
		return view{data: l, table: func(t *tableWriter) {
			t.row("NAME", "HOSTS", "AUTH", "REVISION")
			for _, b := range l.Bindings {
				t.row(b.Name, bindingHosts(b), bindingAuth(b), strconv.FormatInt(b.Revision, 10))
			}
		}}, nil
	})
}

func (a *app) vaultBindingGetCommand() *cobra.Command {
	return a.sidecarView(&cobra.Command{
		Use:     "get <sandbox-id> <name>",
		Short:   "Show a binding, with the sidecar's defaults filled in",
		Example: "  osb credential-vault binding get 3f2c9a1e-... github-api",
		Args:    exactArgs(2, "<sandbox-id> <name>"),
	}, vaultHint, func(ctx context.Context, c *sandbox.Client, args []string) (view, error) {
		b, err := c.CredentialVault(args[0]).GetBinding(ctx, args[1])
		if err != nil {
			return view{}, err
		}
		return view{data: b, table: func(t *tableWriter) {
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
		}}, nil
	})
}
