package osbcli

import (
	"errors"

	"github.com/spf13/cobra"
)

// errEgressUnavailable is what every egress and credential-vault command
// answers until the server runs the egress sidecar.
var errEgressUnavailable = withHint(errors.New("egress control is not available on this server yet"),
	"network policies and the credential vault arrive with the egress sidecar; see docs/cli.md")

func unavailable(use, short, example string, args cobra.PositionalArgs) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Short:   short + " (not available on this server yet)",
		Example: example,
		Args:    args,
		RunE:    func(*cobra.Command, []string) error { return errEgressUnavailable },
	}
}

func (a *app) egressCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "egress",
		Short: "Network egress policy of a sandbox (not available on this server yet)",
	}
	patch := unavailable("patch <sandbox-id>", "Add or override egress rules",
		"  osb egress patch 3f2c9a1e-... --rule allow=pypi.org --rule deny=*.example.com", exactArgs(1, "<sandbox-id>"))
	patch.Flags().StringArray("rule", nil, "ACTION=TARGET, action allow or deny (repeatable)")
	cmd.AddCommand(
		unavailable("get <sandbox-id>", "Show the egress policy", "  osb egress get 3f2c9a1e-...", exactArgs(1, "<sandbox-id>")),
		patch,
	)
	return cmd
}

func (a *app) credentialVaultCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "credential-vault",
		Short: "Credentials injected into outbound HTTPS (not available on this server yet)",
	}
	id := exactArgs(1, "<sandbox-id>")
	create := unavailable("create <sandbox-id>", "Create the vault from a JSON/YAML file", "  osb credential-vault create 3f2c9a1e-... --file vault.yaml", id)
	create.Flags().String("file", "", `vault file (JSON or YAML, "-" for stdin)`)
	patch := unavailable("patch <sandbox-id>", "Change credentials and bindings", "  osb credential-vault patch 3f2c9a1e-... --file patch.json", id)
	patch.Flags().String("file", "", `patch file (JSON or YAML, "-" for stdin)`)
	credential := &cobra.Command{Use: "credential", Short: "Credential metadata"}
	credential.AddCommand(
		unavailable("list <sandbox-id>", "List credentials", "  osb credential-vault credential list 3f2c9a1e-...", id),
		unavailable("get <sandbox-id> <name>", "Show a credential", "  osb credential-vault credential get 3f2c9a1e-... github", exactArgs(2, "<sandbox-id> <name>")),
	)
	binding := &cobra.Command{Use: "binding", Short: "Credential bindings"}
	binding.AddCommand(
		unavailable("list <sandbox-id>", "List bindings", "  osb credential-vault binding list 3f2c9a1e-...", id),
		unavailable("get <sandbox-id> <name>", "Show a binding", "  osb credential-vault binding get 3f2c9a1e-... github-api", exactArgs(2, "<sandbox-id> <name>")),
	)
	cmd.AddCommand(create, patch,
		unavailable("get <sandbox-id>", "Show the vault", "  osb credential-vault get 3f2c9a1e-...", id),
		unavailable("delete <sandbox-id>", "Delete the vault", "  osb credential-vault delete 3f2c9a1e-...", id),
		credential, binding)
	return cmd
}
