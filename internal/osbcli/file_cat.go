package osbcli

import (
	"encoding/base64"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// maxCatDocument bounds what file cat reads into memory for -o json and
// yaml; raw output streams any size.
const maxCatDocument = 64 << 20

// fileContent is file cat's json and yaml output. Content is the text
// when the bytes are UTF-8, else their base64 (encoding says which).
type fileContent struct {
	SandboxID string `json:"sandboxId"`
	Path      string `json:"path"`
	Size      int    `json:"size"`
	Encoding  string `json:"encoding"`
	Content   string `json:"content"`
}

func (a *app) fileCatCommand() *cobra.Command {
	var offset, length int64
	cmd := &cobra.Command{
		Use:   "cat <sandbox-id> <path>",
		Short: "Print a file (streamed, bytes as they are)",
		Long: `Prints a file. With -o raw (the default) or table the bytes are streamed
as they are; -o json and yaml print {sandboxId, path, size, encoding, content}
with the content as text when it is UTF-8, else base64 (up to 64 MiB).`,
		Example: `  osb file cat 3f2c9a1e-... /etc/os-release
  osb file cat 3f2c9a1e-... /var/log/app.log --offset 1024 --length 512
  osb file cat 3f2c9a1e-... /etc/hostname -o json | jq -r .content`,
		Args: exactArgs(2, "<sandbox-id> <path>"),
	}
	cmd.Flags().Int64Var(&offset, "offset", 0, "start at this byte")
	cmd.Flags().Int64Var(&length, "length", 0, "print at most this many bytes (0 = to the end)")
	return a.streams(cmd, formatRaw, func(cmd *cobra.Command, args []string, format string) error {
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
		if !structured(format) {
			if _, err := io.Copy(a.io.out, rc); err != nil {
				return fmt.Errorf("read %s: %w", args[1], err)
			}
			return nil
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxCatDocument+1))
		if err != nil {
			return fmt.Errorf("read %s: %w", args[1], err)
		}
		if len(b) > maxCatDocument {
			return withHint(fmt.Errorf("%s is larger than %d MiB, too large for -o %s", args[1], maxCatDocument>>20, format),
				"stream it with -o raw, or: osb file download")
		}
		return render(a.io.out, format, view{data: newFileContent(args[0], args[1], b)})
	})
}

func newFileContent(sandboxID, path string, b []byte) fileContent {
	fc := fileContent{SandboxID: sandboxID, Path: path, Size: len(b), Encoding: "utf-8", Content: string(b)}
	if !utf8.Valid(b) {
		fc.Encoding, fc.Content = "base64", base64.StdEncoding.EncodeToString(b)
	}
	return fc
}
