package osbcli

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) fileUploadCommand() *cobra.Command {
	var own ownerFlags
	cmd := &cobra.Command{
		Use:     "upload <sandbox-id> <local-path> <remote-path>",
		Short:   "Copy a local file into a sandbox (streamed)",
		Example: `  osb file upload 3f2c9a1e-... ./model.bin /data/model.bin`,
		Args:    exactArgs(3, "<sandbox-id> <local-path> <remote-path>"),
	}
	own.add(cmd, "permission bits in octal (default: the local file's)")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		p, err := own.permission()
		if err != nil {
			return view{}, err
		}
		f, err := os.Open(args[1])
		if err != nil {
			return view{}, fmt.Errorf("upload: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return view{}, fmt.Errorf("upload: %w", err)
		}
		if st.IsDir() {
			return view{}, usagef("upload: %s is a directory; upload files one by one (or a tar archive)", args[1])
		}
		if p.Mode == 0 {
			p.Mode, _ = strconv.Atoi(strconv.FormatUint(uint64(st.Mode().Perm()), 8))
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		sp := a.spin("uploading " + args[1])
		err = sb.Upload(ctx, args[2], f, sandbox.WriteOptions{Mode: p.Mode, Owner: p.Owner, Group: p.Group})
		sp.Stop()
		if err != nil {
			return view{}, err
		}
		size := st.Size()
		r := fileAction{SandboxID: args[0], LocalPath: args[1], Path: args[2], Size: &size, Mode: p.Mode, Owner: p.Owner, Group: p.Group, Status: "uploaded"}
		return fileActionView(r, fmt.Sprintf("uploaded %d bytes to %s", size, args[2])), nil
	})
}
