package osbcli

import "github.com/spf13/cobra"

func (a *app) egressPatchCommand() *cobra.Command {
	var rules []string
	cmd := &cobra.Command{
		Use:   "patch <sandbox-id>",
		Short: "Add or override egress rules",
		Long: `Merge rules into the policy: they go before the existing rules and replace
rules with the same target. The default action is kept.`,
		Example: "  osb egress patch 3f2c9a1e-... --rule allow=pypi.org --rule deny=*.example.com",
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().StringArrayVar(&rules, "rule", nil, "ACTION=TARGET, action allow or deny (repeatable, at least one)")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		if len(rules) == 0 {
			return view{}, usagef("no rules: give --rule ACTION=TARGET at least once")
		}
		parsed, err := parseRules(rules)
		if err != nil {
			return view{}, err
		}
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		st, err := c.Egress(args[0]).PatchPolicy(cmd.Context(), parsed)
		if err != nil {
			return view{}, egressHint(err, args[0])
		}
		return policyView(st), nil
	})
}
