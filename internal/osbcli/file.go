package osbcli

import (
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) fileCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "file",
		Aliases: []string{"fs"},
		Short:   "Read, write and manage files in a sandbox",
	}
	cmd.AddCommand(
		a.fileCatCommand(),
		a.fileWriteCommand(),
		a.fileUploadCommand(),
		a.fileDownloadCommand(),
		a.fileRmCommand(),
		a.fileMvCommand(),
		a.fileMkdirCommand(),
		a.fileRmdirCommand(),
		a.fileSearchCommand(),
		a.fileInfoCommand(),
		a.fileChmodCommand(),
		a.fileReplaceCommand(),
	)
	return cmd
}

// ownerFlags adds --mode, --owner and --group.
type ownerFlags struct{ mode, owner, group string }

func (o *ownerFlags) add(cmd *cobra.Command, modeHelp string) {
	cmd.Flags().StringVar(&o.mode, "mode", "", modeHelp)
	cmd.Flags().StringVar(&o.owner, "owner", "", "owner (user name)")
	cmd.Flags().StringVar(&o.group, "group", "", "group name")
}

func (o *ownerFlags) permission() (sandbox.Permission, error) {
	m, err := octalMode(o.mode)
	return sandbox.Permission{Mode: m, Owner: o.owner, Group: o.group}, err
}

// filesView prints file infos as a table.
func filesView(files []sandbox.FileInfo) view {
	if files == nil {
		files = []sandbox.FileInfo{}
	}
	return view{data: files, table: func(t *tableWriter) {
		t.row("PATH", "TYPE", "SIZE", "MODE", "OWNER", "GROUP", "MODIFIED")
		for _, f := range files {
			t.row(f.Path, f.Type, strconv.FormatInt(f.Size, 10), strconv.Itoa(f.Mode), dash(f.Owner), dash(f.Group), fmtTime(timePtr(f.ModifiedAt)))
		}
	}}
}

func timePtr(t time.Time) *time.Time { return &t }
