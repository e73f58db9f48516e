package osbcli

import (
	"strings"

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
		for _, dir := range args[1:] {
			if err := sb.Mkdir(ctx, dir, p); err != nil {
				return view{}, err
			}
		}
		r := fileAction{SandboxID: args[0], Paths: args[1:], Mode: p.Mode, Owner: p.Owner, Group: p.Group, Status: "created"}
		return fileActionView(r, "created "+strings.Join(args[1:], " ")), nil
	})
}
