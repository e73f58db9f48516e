package osbcli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) fileWriteCommand() *cobra.Command {
	var (
		content string
		own     ownerFlags
	)
	cmd := &cobra.Command{
		Use:   "write <sandbox-id> <path>",
		Short: "Write a file from --content or from stdin",
		Example: `  osb file write 3f2c9a1e-... /tmp/hello.txt -c 'hello'
  tar c src | osb file write 3f2c9a1e-... /tmp/src.tar --mode 600`,
		Args: exactArgs(2, "<sandbox-id> <path>"),
	}
	cmd.Flags().StringVarP(&content, "content", "c", "", "file content (default: read stdin)")
	own.add(cmd, "permission bits in octal, e.g. 644 (default 644)")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		p, err := own.permission()
		if err != nil {
			return view{}, err
		}
		cr := &countingReader{r: a.io.in}
		if cmd.Flags().Changed("content") {
			cr.r = strings.NewReader(content)
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		if err := sb.Upload(ctx, args[1], cr, sandbox.WriteOptions{Mode: p.Mode, Owner: p.Owner, Group: p.Group}); err != nil {
			return view{}, err
		}
		r := fileAction{SandboxID: args[0], Path: args[1], Size: &cr.n, Mode: p.Mode, Owner: p.Owner, Group: p.Group, Status: "written"}
		return fileActionView(r, fmt.Sprintf("wrote %d bytes to %s", cr.n, args[1])), nil
	})
}
