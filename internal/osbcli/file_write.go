package osbcli

import (
	"io"
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
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		p, err := own.permission()
		if err != nil {
			return err
		}
		var r io.Reader = a.io.in
		if cmd.Flags().Changed("content") {
			r = strings.NewReader(content)
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		if err := sb.Upload(ctx, args[1], r, sandbox.WriteOptions{Mode: p.Mode, Owner: p.Owner, Group: p.Group}); err != nil {
			return err
		}
		return nil
	}
	return cmd
}
