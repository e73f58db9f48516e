package osbcli

import (
	"github.com/spf13/cobra"
)

func (a *app) fileMkdirCommand() *cobra.Command {
	var own ownerFlags
	cmd := &cobra.Command{
		Use:     "mkdir <sandbox-id> <path>...",
		Short:   "Create directories, with their parents",
		Example: `  osb file mkdir 3f2c9a1e-... /work/a/b /work/c --mode 700`,
		Args:    minArgs(2, "<sandbox-id> <path>..."),
	}
	own.add(cmd, "permission bits in octal (default 755)")
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
		for _, dir := range args[1:] {
			if err := sb.Mkdir(ctx, dir, p); err != nil {
				return err
			}
		}
		return nil
	}
	return cmd
}
