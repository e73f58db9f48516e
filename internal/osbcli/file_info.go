package osbcli

import (
	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) fileInfoCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "info <sandbox-id> <path>...",
		Short:   "Show type, size, mode and owner of files",
		Example: `  osb file info 3f2c9a1e-... /etc/passwd /tmp -o json`,
		Args:    minArgs(2, "<sandbox-id> <path>..."),
	}
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		infos, err := sb.Stat(ctx, args[1:]...)
		if err != nil {
			return view{}, err
		}
		if outputFormat(cmd) != formatTable {
			return view{data: infos}, nil
		}
		list := make([]sandbox.FileInfo, 0, len(infos))
		for _, p := range args[1:] {
			if fi, ok := infos[p]; ok {
				if fi.Path == "" {
					fi.Path = p
				}
				list = append(list, fi)
			}
		}
		return filesView(list), nil
	})
}
