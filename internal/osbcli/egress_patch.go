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
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(rules) == 0 {
			return usagef("no rules: give --rule ACTION=TARGET at least once")
		}
		parsed, err := parseRules(rules)
		if err != nil {
			return err
		}
		c, err := a.sdk()
		if err != nil {
			return err
		}
		st, err := c.Egress(args[0]).PatchPolicy(cmd.Context(), parsed)
		if err != nil {
			return egressHint(err, args[0])
		}
		return render(a.io.out, *out, policyView(st))
	}
	return cmd
}
