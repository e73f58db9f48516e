package osbcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// Output formats.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatRaw   = "raw"
)

// formats are the -o values every command takes, upstream's set.
var formats = []string{formatTable, formatJSON, formatYAML, formatRaw}

// outputDefault is the annotation holding a command's default format; it
// is set by result and streams, the only ways a command prints.
const outputDefault = "osb/output-default"

// result makes cmd print the view run returns, in the -o format (def by
// default). A view returned with an error is printed before the error
// is reported: what succeeded of a partly failed command.
func (a *app) result(cmd *cobra.Command, def string, run func(cmd *cobra.Command, args []string) (view, error)) *cobra.Command {
	setOutputDefault(cmd, def)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		v, err := run(c, args)
		if !v.empty() {
			if rerr := render(a.io.out, outputFormat(c), v); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return err
	}
	return cmd
}

// streams is result for commands whose output is a stream (file bytes,
// command output, a terminal): run writes it itself in format.
func (a *app) streams(cmd *cobra.Command, def string, run func(cmd *cobra.Command, args []string, format string) error) *cobra.Command {
	setOutputDefault(cmd, def)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		return run(c, args, outputFormat(c))
	}
	return cmd
}

func setOutputDefault(cmd *cobra.Command, def string) {
	if !slices.Contains(formats, def) {
		panic("osb: command " + cmd.Name() + ": unknown default format " + def)
	}
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[outputDefault] = def
}

// outputFormat is the -o value of a command.
func outputFormat(cmd *cobra.Command) string {
	f, _ := cmd.Flags().GetString("output")
	return f
}

// structured reports whether format prints a document (json, yaml)
// rather than text.
func structured(format string) bool { return format == formatJSON || format == formatYAML }

// addOutputFlags gives every command of the tree that does something
// (every leaf) -o/--output with its default, and checks the value before
// the command runs. A leaf built without result or streams would ignore
// -o, so it stops osb at start: no command can forget its output.
func addOutputFlags(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		addOutputFlags(c)
	}
	if cmd.HasSubCommands() || !cmd.HasParent() {
		return
	}
	def, ok := cmd.Annotations[outputDefault]
	if !ok {
		panic("osb: command " + cmd.CommandPath() + " does not print through app.result or app.streams")
	}
	cmd.Flags().StringP("output", "o", def, "output format: "+strings.Join(formats, "|"))
	cmd.PreRunE = chainPreRun(cmd.PreRunE, func(c *cobra.Command, _ []string) error {
		if v := outputFormat(c); !slices.Contains(formats, v) {
			return usagef("--output %q: want one of %s", v, strings.Join(formats, ", "))
		}
		return nil
	})
}

// view is something a command prints in one of the output formats.
type view struct {
	data  any                   // what json and yaml print
	raw   []byte                // what raw prints; compact JSON of data when nil
	table func(*tableWriter)    // rows for table; json when nil
	text  func(io.Writer) error // free-form text for table, instead of rows
	// textRaw makes raw print text too: for text that is the thing
	// itself (logs, reports), not a rendering of data.
	textRaw bool
}

// textView is a view of text that table and raw print as it is; json and
// yaml print data, which holds the text with what it belongs to.
func textView(data any, text func(io.Writer) error) view {
	return view{data: data, text: text, textRaw: true}
}

func chainPreRun(prev, next func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		if prev != nil {
			if err := prev(c, args); err != nil {
				return err
			}
		}
		return next(c, args)
	}
}

func (v view) empty() bool { return v.data == nil && v.raw == nil && v.table == nil && v.text == nil }

// render writes v in format to w.
func render(w io.Writer, format string, v view) error {
	switch format {
	case formatJSON:
		return writeJSON(w, v.data)
	case formatYAML:
		return writeYAML(w, v.data)
	case formatRaw:
		if v.textRaw && v.text != nil {
			return v.text(w)
		}
		if v.raw != nil {
			_, err := w.Write(v.raw)
			return err
		}
		b, err := json.Marshal(v.data)
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if v.text != nil {
		return v.text(w)
	}
	if v.table == nil {
		return writeJSON(w, v.data)
	}
	tw := newTableWriter(w)
	v.table(tw)
	return tw.flush()
}

func writeJSON(w io.Writer, data any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(data); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return nil
}

// writeYAML prints data as YAML with the same field names and order as
// its JSON form (the wire names), by going through JSON.
func writeYAML(w io.Writer, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	blockStyle(&doc)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return enc.Close()
}

// blockStyle drops the flow and quoting styles JSON input leaves on the
// nodes, so the output reads as ordinary YAML (strings that would change
// type are still quoted by the encoder).
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// tableWriter aligns columns with text/tabwriter.
type tableWriter struct {
	tw *tabwriter.Writer
}

func newTableWriter(w io.Writer) *tableWriter {
	return &tableWriter{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

// row writes one line; cells must not hold tabs or newlines.
func (t *tableWriter) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *tableWriter) flush() error { return t.tw.Flush() }

// Formatting helpers for table cells.

func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

func fmtMap(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(k + "=" + m[k])
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// colorState paints a state with an ANSI colour when on. Every cell of
// the column, header included (see colorPad), carries escapes of the same
// length, so tabwriter still aligns the columns.
func colorState(on bool, state string) string {
	if !on {
		return state
	}
	code := "39" // default colour
	switch state {
	case "Running", "Ready":
		code = "32" // green
	case "Paused", "Pausing", "Resuming", "Pending", "Creating":
		code = "33" // yellow
	case "Failed", "Terminated", "Stopping":
		code = "31" // red
	}
	return "\x1b[" + code + "m" + state + "\x1b[0m"
}

// colorPad wraps a header cell in invisible escapes as long as
// colorState's.
func colorPad(on bool, s string) string {
	if !on {
		return s
	}
	return "\x1b[39m" + s + "\x1b[0m"
}
