package osbcli

import (
	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) egressSetCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "set <sandbox-id> --file <policy>",
		Short: "Replace the whole egress policy",
		Long: `Replace the policy with the one in a JSON or YAML file ("-" for stdin), in
the same format as sandbox create --network-policy-file:
  {"defaultAction": "deny", "egress": [{"action": "allow", "target": "pypi.org"}]}
An empty policy ({}) denies everything.`,
		Example: "  osb egress set 3f2c9a1e-... --file policy.yaml\n  echo '{\"defaultAction\":\"allow\"}' | osb egress set 3f2c9a1e-... --file -",
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", `policy file (JSON or YAML, "-" for stdin; required)`)
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		if file == "" {
			return view{}, usagef("no policy: give --file <path> (or - for stdin)")
		}
		var p sandbox.NetworkPolicy
		if err := a.readStructured(file, &p); err != nil {
			return view{}, err
		}
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		st, err := c.Egress(args[0]).SetPolicy(cmd.Context(), &p)
		if err != nil {
			return view{}, egressHint(err, args[0])
		}
		return policyView(st), nil
	})
}
