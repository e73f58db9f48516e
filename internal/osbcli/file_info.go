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
	out := outputFlag(cmd, formatTable, formatJSON, formatYAML, formatRaw)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		infos, err := sb.Stat(ctx, args[1:]...)
		if err != nil {
			return err
		}
		if *out == formatJSON || *out == formatYAML || *out == formatRaw {
			return render(a.io.out, *out, view{data: infos})
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
		return render(a.io.out, *out, filesView(list))
	}
	return cmd
}
