package osbcli

import (
	"bytes"
	"encoding/json"
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

// outputFlag adds -o/--output to cmd, limited to the formats given (the
// first is the default), and returns where the choice is stored.
func outputFlag(cmd *cobra.Command, formats ...string) *string {
	var v string
	cmd.Flags().StringVarP(&v, "output", "o", formats[0], "output format: "+strings.Join(formats, "|"))
	cmd.PreRunE = chainPreRun(cmd.PreRunE, func(*cobra.Command, []string) error {
		if !slices.Contains(formats, v) {
			return usagef("--output %q: this command supports %s", v, strings.Join(formats, ", "))
		}
		return nil
	})
	return &v
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

// view is something a command prints in one of the output formats.
type view struct {
	data  any                   // what json and yaml print
	raw   []byte                // what raw prints; compact JSON of data when nil
	table func(*tableWriter)    // rows for table; json when nil
	text  func(io.Writer) error // free-form text for table, instead of rows
}

// render writes v in format to w.
func render(w io.Writer, format string, v view) error {
	switch format {
	case formatJSON:
		return writeJSON(w, v.data)
	case formatYAML:
		return writeYAML(w, v.data)
	case formatRaw:
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
