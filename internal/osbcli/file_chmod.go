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
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		p, err := own.permission()
		if err != nil {
			return view{}, err
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		if err := sb.Chmod(ctx, args[1], p); err != nil {
			return view{}, err
		}
		r := fileAction{SandboxID: args[0], Path: args[1], Mode: p.Mode, Owner: p.Owner, Group: p.Group, Status: "changed"}
		return fileActionView(r, "changed "+args[1]), nil
	})
}
