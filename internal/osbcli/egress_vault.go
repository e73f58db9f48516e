package osbcli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The credential-vault commands manage the credentials a sandbox's egress
// sidecar injects into outbound HTTPS requests. Secret values go in
// through --file and never come back out: every reply is metadata.

func (a *app) credentialVaultCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "credential-vault",
		Short: "Credentials injected into outbound HTTPS",
		Long: `Manage the credential vault of a sandbox created with --network-policy-file
and --credential-proxy. Credentials hold secret values (write-only); bindings
say which requests receive which credential. Replies never contain secrets.`,
	}
	credential := &cobra.Command{Use: "credential", Short: "Credential metadata"}
	credential.AddCommand(a.vaultCredentialListCommand(), a.vaultCredentialGetCommand())
	binding := &cobra.Command{Use: "binding", Short: "Credential bindings"}
	binding.AddCommand(a.vaultBindingListCommand(), a.vaultBindingGetCommand())
	cmd.AddCommand(
		a.vaultCreateCommand(),
		a.vaultPatchCommand(),
		a.vaultGetCommand(),
		a.vaultDeleteCommand(),
		credential, binding,
	)
	return cmd
}

// vaultHint adds what to do next to credential vault errors.
func vaultHint(err error, id string) error {
	var ae *sandbox.APIError
	if errors.As(err, &ae) && strings.HasPrefix(ae.Code, "EGRESS::") {
		switch ae.StatusCode {
		case 404:
			return withHint(err, "create the vault with: osb credential-vault create "+id+" --file vault.yaml")
		case 409:
			return withHint(err, "the vault exists already or changed meanwhile; see it with: osb credential-vault get "+id)
		case 412:
			return withHint(err, "the credential proxy is not ready; was the sandbox created with --credential-proxy?")
		}
	}
	return egressHint(err, id)
}

func (a *app) vaultCreateCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "create <sandbox-id> --file <vault>",
		Short: "Create the vault from a JSON/YAML file",
		Long: `Create the vault from a JSON or YAML file ("-" for stdin):
  credentials:
    - name: github
      source: {type: inline, value: ghp_xxx}
  bindings:
    - name: github-api
      match: {hosts: [api.github.com]}
      auth: {type: bearer, credential: github}`,
		Example: "  osb credential-vault create 3f2c9a1e-... --file vault.yaml\n  osb credential-vault create 3f2c9a1e-... --file - < vault.json",
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", `vault file (JSON or YAML, "-" for stdin; required)`)
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		if file == "" {
			return view{}, usagef("no vault: give --file <path> (or - for stdin)")
		}
		var req sandbox.CreateCredentialVaultRequest
		if err := a.readStructured(file, &req); err != nil {
			return view{}, err
		}
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		st, err := c.CredentialVault(args[0]).Create(cmd.Context(), req)
		if err != nil {
			return view{}, vaultHint(err, args[0])
		}
		return vaultView(st), nil
	})
}

func (a *app) vaultPatchCommand() *cobra.Command {
	var (
		file     string
		revision int64
	)
	cmd := &cobra.Command{
		Use:   "patch <sandbox-id> --file <patch>",
		Short: "Change credentials and bindings in one step",
		Long: `Apply a patch from a JSON or YAML file ("-" for stdin):
  expectedRevision: 3          # optional; fail if the vault changed
  credentials: {add: [...], replace: [...], delete: [name, ...]}
  bindings:    {add: [...], replace: [...], delete: [name, ...]}`,
		Example: "  osb credential-vault patch 3f2c9a1e-... --file patch.json --expected-revision 3",
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", `patch file (JSON or YAML, "-" for stdin; required)`)
	cmd.Flags().Int64Var(&revision, "expected-revision", 0, "fail unless the vault is at this revision (overrides expectedRevision in the file)")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		if file == "" {
			return view{}, usagef("no patch: give --file <path> (or - for stdin)")
		}
		var req sandbox.PatchCredentialVaultRequest
		if err := a.readStructured(file, &req); err != nil {
			return view{}, err
		}
		if cmd.Flags().Changed("expected-revision") {
			req.ExpectedRevision = &revision
		}
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		st, err := c.CredentialVault(args[0]).Patch(cmd.Context(), req)
		if err != nil {
			return view{}, vaultHint(err, args[0])
		}
		return vaultView(st), nil
	})
}

func (a *app) vaultGetCommand() *cobra.Command {
	return a.sidecarView(&cobra.Command{
		Use:     "get <sandbox-id>",
		Short:   "Show the vault (metadata only)",
		Example: "  osb credential-vault get 3f2c9a1e-... -o yaml",
		Args:    exactArgs(1, "<sandbox-id>"),
	}, vaultHint, func(ctx context.Context, c *sandbox.Client, args []string) (view, error) {
		st, err := c.CredentialVault(args[0]).Get(ctx)
		if err != nil {
			return view{}, err
		}
		return vaultView(st), nil
	})
}

func (a *app) vaultDeleteCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:     "delete <sandbox-id>",
		Aliases: []string{"rm"},
		Short:   "Delete the vault; requests get no credentials afterwards",
		Example: "  osb credential-vault delete 3f2c9a1e-... [-o json]",
		Args:    exactArgs(1, "<sandbox-id>"),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		if err := c.CredentialVault(args[0]).Delete(cmd.Context()); err != nil {
			return view{}, vaultHint(err, args[0])
		}
		data := map[string]string{"sandboxId": args[0], "status": "deleted"}
		return view{data: data, table: func(t *tableWriter) {
			t.row("deleted the credential vault of " + args[0])
		}}, nil
	})
}

// vaultView prints a vault state: its revision, credentials and bindings.
func vaultView(st *sandbox.CredentialVaultState) view {
	return view{data: st, table: func(t *tableWriter) {
		t.row("REVISION", strconv.FormatInt(st.Revision, 10))
		if len(st.Credentials) == 0 {
			t.row("CREDENTIALS", "-")
		}
		for i, c := range st.Credentials {
			t.row(firstOnly(i, "CREDENTIALS"), fmt.Sprintf("%s (%s, revision %d)", c.Name, c.SourceType, c.Revision))
		}
		if len(st.Bindings) == 0 {
			t.row("BINDINGS", "-")
		}
		for i, b := range st.Bindings {
			t.row(firstOnly(i, "BINDINGS"), fmt.Sprintf("%s: %s -> %s (revision %d)", b.Name, bindingHosts(b), bindingAuth(b), b.Revision))
		}
	}}
}

func firstOnly(i int, key string) string {
	if i == 0 {
		return key
	}
	return ""
}

func bindingHosts(b sandbox.CredentialBindingMetadata) string {
	if b.Match == nil {
		return "-"
	}
	return dash(strings.Join(b.Match.Hosts, ","))
}

func bindingAuth(b sandbox.CredentialBindingMetadata) string {
	switch {
	case b.Auth == nil:
		return "-"
	case b.Auth.Name != "":
		return b.Auth.Type + " " + b.Auth.Name
	}
	return b.Auth.Type
}
