package osbcli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

func (a *app) fileDownloadCommand() *cobra.Command {
	return a.streams(&cobra.Command{
		Use:   "download <sandbox-id> <remote-path> <local-path>",
		Short: `Copy a file out of a sandbox (streamed; local path "-" is stdout)`,
		Long: `Copies a file out of a sandbox into a local file (a directory keeps the
remote name), or to stdout with "-" (the bytes as they are; -o json and yaml
need a local path).`,
		Example: `  osb file download 3f2c9a1e-... /tmp/report.pdf ./report.pdf [-o json]
  osb file download 3f2c9a1e-... /tmp/out.tar - | tar x`,
		Args: exactArgs(3, "<sandbox-id> <remote-path> <local-path>"),
	}, formatTable, func(cmd *cobra.Command, args []string, format string) (err error) {
		ctx := cmd.Context()
		if args[2] == "-" && structured(format) {
			return usagef("-o %s needs a local path: with \"-\" the file's bytes are the output", format)
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		if args[2] == "-" {
			if _, err := sb.Download(ctx, args[1], a.io.out); err != nil {
				return err
			}
			return nil
		}
		local := args[2]
		if st, err := os.Stat(local); err == nil && st.IsDir() {
			local = filepath.Join(local, filepath.Base(args[1]))
		}
		// Write next to the target and rename at the end, so a failed
		// download leaves no half file behind.
		tmp, err := os.CreateTemp(filepath.Dir(local), ".osb-download-*")
		if err != nil {
			return fmt.Errorf("download: %w", err)
		}
		defer func() {
			if err != nil {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		sp := a.spin("downloading " + args[1])
		size, err := sb.Download(ctx, args[1], tmp)
		sp.Stop()
		if err != nil {
			return err
		}
		if err := errors.Join(tmp.Chmod(0o644), tmp.Close()); err != nil {
			return fmt.Errorf("download: %w", err)
		}
		if err := os.Rename(tmp.Name(), local); err != nil {
			return fmt.Errorf("download: %w", err)
		}
		r := fileAction{SandboxID: args[0], Path: args[1], LocalPath: local, Size: &size, Status: "downloaded"}
		return render(a.io.out, format, fileActionView(r, fmt.Sprintf("downloaded %d bytes to %s", size, local)))
	})
}
