package osbcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) sandboxMetricsCommand() *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "metrics <sandbox-id>",
		Short: "Show CPU and memory use of a sandbox",
		Example: `  osb sandbox metrics 3f2c9a1e-...
  osb sandbox metrics 3f2c9a1e-... --watch -o json   # one JSON object per line, until Ctrl-C`,
		Args: exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "keep printing updates until interrupted")
	return a.streams(cmd, formatTable, func(cmd *cobra.Command, args []string, format string) error {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		if !watch {
			m, err := sb.Metrics(ctx)
			if err != nil {
				return err
			}
			return render(a.io.out, format, metricsView(m, true))
		}
		first := true
		err = sb.WatchMetrics(ctx, func(m sandbox.Metrics) error {
			v := metricsView(m, first)
			defer func() { first = false }()
			switch {
			case format == formatJSON:
				return render(a.io.out, formatRaw, v) // one object per line
			case format == formatYAML && !first:
				// A stream of YAML documents needs separators.
				if _, err := io.WriteString(a.io.out, "---\n"); err != nil {
					return err
				}
			}
			return render(a.io.out, format, v)
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	})
}

// metricsView prints metrics as fixed-width columns, so the lines of
// --watch line up without buffering them.
func metricsView(m sandbox.Metrics, header bool) view {
	return view{data: m, text: func(w io.Writer) error {
		const row = "%-8s  %5s  %6s  %12s  %13s\n"
		if header {
			if _, err := fmt.Fprintf(w, row, "TIME", "CPUS", "CPU%", "MEM USED MiB", "MEM TOTAL MiB"); err != nil {
				return err
			}
		}
		ts := time.UnixMilli(m.Timestamp)
		_, err := fmt.Fprintf(w, row, ts.Local().Format(time.TimeOnly), fmt.Sprintf("%g", m.CPUCount),
			fmt.Sprintf("%.1f", m.CPUUsedPct), fmt.Sprintf("%.1f", m.MemUsedMiB), fmt.Sprintf("%.1f", m.MemTotalMiB))
		return err
	}}
}
