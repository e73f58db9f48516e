package osbcli

import (
	"github.com/spf13/cobra"
)

func (a *app) fileChmodCommand() *cobra.Command {
	var own ownerFlags
	cmd := &cobra.Command{
		Use:     "chmod <sandbox-id> <path>",
		Short:   "Change permission bits (and owner, group) of a file",
		Example: `  osb file chmod 3f2c9a1e-... /work/run.sh --mode 755`,
		Args:    exactArgs(2, "<sandbox-id> <path>"),
	}
	own.add(cmd, "permission bits in octal, e.g. 755 (required)")
	_ = cmd.MarkFlagRequired("mode")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		p, err := own.permission()
		if err != nil {
			return err
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		if err := sb.Chmod(ctx, args[1], p); err != nil {
			return err
		}
		return nil
	}
	return cmd
}
