package osbcli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
)

func (a *app) commandLogsCommand() *cobra.Command {
	var cursor int64
	cmd := &cobra.Command{
		Use:   "logs <sandbox-id> <command-id>",
		Short: "Print the output of a background command",
		Long: `Prints the output a background command has written so far, from --cursor on.
The cursor to continue from is printed to stderr (and is "cursor" in -o json).
-o raw (the default) and table print the output as it is.`,
		Example: `  osb command logs 3f2c9a1e-... 1a2b3c
  osb command logs 3f2c9a1e-... 1a2b3c --cursor 42`,
		Args: exactArgs(2, "<sandbox-id> <command-id>"),
	}
	cmd.Flags().Int64Var(&cursor, "cursor", 0, "start from this position (the cursor a previous call printed)")
	return a.result(cmd, formatRaw, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		text, next, err := sb.CommandLogs(ctx, args[1], cursor)
		if err != nil {
			return view{}, err
		}
		data := map[string]any{"sandboxId": args[0], "id": args[1], "content": text, "cursor": next}
		printText := func(w io.Writer) error {
			if _, err := io.WriteString(w, text); err != nil {
				return err
			}
			fmt.Fprintln(a.io.err, "cursor: "+strconv.FormatInt(next, 10))
			return nil
		}
		return textView(data, printText), nil
	})
}
