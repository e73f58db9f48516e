package osbcli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) devopsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devops",
		Short: "Legacy plain-text diagnostics of a sandbox",
	}
	var (
		tail, limit, eventLimit int
		since                   string
	)
	logs := a.devopsText("logs", "Last lines of the sandbox's main process output",
		"  osb devops logs 3f2c9a1e-... -n 200 -s 10m",
		func(c *sandbox.Client, cmd *cobra.Command, id string) (string, error) {
			return c.DiagnosticLogs(cmd.Context(), id, sandbox.DiagnosticsOptions{Tail: tail, Since: since})
		})
	logs.Flags().IntVarP(&tail, "tail", "n", 100, "number of last lines")
	logs.Flags().StringVarP(&since, "since", "s", "", "only lines newer than this (10m, 1h)")

	inspect := a.devopsText("inspect", "The engine's description of the sandbox container",
		"  osb devops inspect 3f2c9a1e-...",
		func(c *sandbox.Client, cmd *cobra.Command, id string) (string, error) {
			return c.DiagnosticInspect(cmd.Context(), id)
		})

	events := a.devopsText("events", "Recent runtime events of the sandbox",
		"  osb devops events 3f2c9a1e-... -l 20",
		func(c *sandbox.Client, cmd *cobra.Command, id string) (string, error) {
			return c.DiagnosticEvents(cmd.Context(), id, sandbox.DiagnosticsOptions{Limit: limit})
		})
	events.Flags().IntVarP(&limit, "limit", "l", 50, "number of most recent events")

	var summaryTail int
	summary := a.devopsText("summary", "State, recent events and last log lines in one report",
		"  osb devops summary 3f2c9a1e-... --tail 20 --event-limit 10",
		func(c *sandbox.Client, cmd *cobra.Command, id string) (string, error) {
			return c.DiagnosticSummary(cmd.Context(), id, sandbox.DiagnosticsOptions{Tail: summaryTail, EventLimit: eventLimit})
		})
	summary.Flags().IntVarP(&summaryTail, "tail", "n", 50, "number of last log lines")
	summary.Flags().IntVar(&eventLimit, "event-limit", 20, "number of most recent events")

	cmd.AddCommand(logs, inspect, events, summary)
	return cmd
}

// devopsText builds a subcommand that prints one plain-text report: as
// it is in table and raw, as {sandboxId, kind, content} in json and yaml.
func (a *app) devopsText(name, short, example string, get func(*sandbox.Client, *cobra.Command, string) (string, error)) *cobra.Command {
	return a.result(&cobra.Command{
		Use:     name + " <sandbox-id>",
		Short:   short,
		Example: example,
		Args:    exactArgs(1, "<sandbox-id>"),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		text, err := get(c, cmd, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		data := map[string]string{"sandboxId": args[0], "kind": name, "content": text}
		return textView(data, func(w io.Writer) error {
			if _, err := io.WriteString(w, text); err != nil {
				return err
			}
			if text != "" && !strings.HasSuffix(text, "\n") {
				_, err = fmt.Fprintln(w)
			}
			return err
		}), nil
	})
}
