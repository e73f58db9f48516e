package osbcli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) fileCatCommand() *cobra.Command {
	var offset, length int64
	cmd := &cobra.Command{
		Use:   "cat <sandbox-id> <path>",
		Short: "Print a file (streamed, bytes as they are)",
		Example: `  osb file cat 3f2c9a1e-... /etc/os-release
  osb file cat 3f2c9a1e-... /var/log/app.log --offset 1024 --length 512`,
		Args: exactArgs(2, "<sandbox-id> <path>"),
	}
	cmd.Flags().Int64Var(&offset, "offset", 0, "start at this byte")
	cmd.Flags().Int64Var(&length, "length", 0, "print at most this many bytes (0 = to the end)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		rc, err := sb.Open(ctx, args[1], sandbox.OpenOptions{Offset: offset, Length: length})
		if err != nil {
			return err
		}
		defer rc.Close()
		if _, err := io.Copy(a.io.out, rc); err != nil {
			return fmt.Errorf("read %s: %w", args[1], err)
		}
		return nil
	}
	return cmd
}
