package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/bench/internal/benchkit"
)

// breakdown is where the time of one round went: named parts in the order
// they happened, each a duration and/or a count.
type breakdown []part

type part struct {
	name     string
	dur      time.Duration
	hasDur   bool
	count    int
	hasCount bool
}

func (b *breakdown) add(name string, d time.Duration) {
	*b = append(*b, part{name: name, dur: d, hasDur: true})
}

// addServerTiming adds the server's steps from a Server-Timing header:
// "name;dur=<ms>;desc=\"<n> engine\"" per step, "name;desc=<n>" per
// counter (see runtime.Phases.ServerTiming).
func (b *breakdown) addServerTiming(h string) error {
	if h == "" {
		return fmt.Errorf("the create response has no Server-Timing header (is the server older than the benchmark?)")
	}
	for _, metric := range strings.Split(h, ",") {
		fields := strings.Split(strings.TrimSpace(metric), ";")
		p := part{name: "  server " + fields[0]}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "dur":
				ms, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("Server-Timing %q: %w", metric, err)
				}
				p.dur, p.hasDur = time.Duration(ms*float64(time.Millisecond)), true
			case "desc":
				n, _, _ := strings.Cut(strings.Trim(v, `"`), " ")
				c, err := strconv.Atoi(n)
				if err != nil {
					return fmt.Errorf("Server-Timing %q: %w", metric, err)
				}
				p.count, p.hasCount = c, true
			}
		}
		*b = append(*b, p)
	}
	return nil
}

// printBreakdown prints, per part, the p50 and p95 of its duration over
// the rounds and the median of its count. Percentiles of parts do not add
// up to the percentile of the whole.
func printBreakdown(side string, rounds []breakdown) {
	var names []string
	durs := map[string][]time.Duration{}
	counts := map[string][]int{}
	for _, r := range rounds {
		for _, p := range r {
			if !slices.Contains(names, p.name) {
				names = append(names, p.name)
			}
			if p.hasDur {
				durs[p.name] = append(durs[p.name], p.dur)
			}
			if p.hasCount {
				counts[p.name] = append(counts[p.name], p.count)
			}
		}
	}
	fmt.Printf("%s: where the time goes (n=%d; per part p50 / p95; engine = engine requests, median)\n", side, len(rounds))
	for _, name := range names {
		line := fmt.Sprintf("  %-34s", name)
		if d := durs[name]; len(d) > 0 {
			line += fmt.Sprintf(" %8s / %8s", ms(benchkit.Percentile(d, 50)), ms(benchkit.Percentile(d, 95)))
		} else {
			line += fmt.Sprintf(" %19s", "")
		}
		if c := counts[name]; len(c) > 0 {
			slices.Sort(c)
			line += fmt.Sprintf("  %d", c[(len(c)-1)/2])
			if len(durs[name]) > 0 {
				line += " engine"
			}
		}
		fmt.Println(line)
	}
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
}
