package osbcli

import "github.com/spf13/cobra"

func (a *app) egressDeleteCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "delete <sandbox-id> <target>...",
		Aliases: []string{"rm"},
		Short:   "Remove egress rules by target",
		Long:    "Remove the rules whose targets are listed; unknown targets are ignored and the default action is kept.",
		Example: "  osb egress delete 3f2c9a1e-... pypi.org '*.example.com'",
		Args:    minArgs(2, "<sandbox-id> <target>..."),
	}
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		st, err := c.Egress(args[0]).DeletePolicyRules(cmd.Context(), args[1:])
		if err != nil {
			return view{}, egressHint(err, args[0])
		}
		return policyView(st), nil
	})
}
