package metrics

import (
	"bufio"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// onlineCPUs counts the per-CPU lines of procRoot/stat, falling back to
// runtime.NumCPU when the file is unreadable.
func onlineCPUs(procRoot string) int {
	data, ok, err := readFile(filepath.Join(procRoot, "stat"))
	if err != nil || !ok {
		return runtime.NumCPU()
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if len(line) > 3 && strings.HasPrefix(line, "cpu") && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	if n == 0 {
		return runtime.NumCPU()
	}
	return n
}

// hostCPU reads the aggregate "cpu" line of procRoot/stat and returns busy
// and total jiffies. guest time is already part of user time, so the guest
// columns are not added again.
func hostCPU(procRoot string) (busy, total uint64, err error) {
	p := filepath.Join(procRoot, "stat")
	data, ok, err := readFile(p)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("metrics: no cgroup cpu accounting and %s is missing", p)
	}
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 5 {
			return 0, 0, fmt.Errorf("metrics: parse %s: short cpu line", p)
		}
		var idle uint64
		for i, s := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("metrics: parse %s: %w", p, err)
			}
			total += v
			if i == 3 || i == 4 { // idle, iowait
				idle += v
			}
		}
		return total - idle, total, nil
	}
	return 0, 0, fmt.Errorf("metrics: parse %s: no aggregate cpu line", p)
}

// hostMemory reads MemTotal and MemAvailable (bytes) from procRoot/meminfo.
// A missing file yields zeros; MemAvailable falls back to MemFree on
// kernels that lack it.
func hostMemory(procRoot string) (total, avail uint64, err error) {
	p := filepath.Join(procRoot, "meminfo")
	data, ok, err := readFile(p)
	if err != nil || !ok {
		return 0, 0, err
	}
	var free uint64
	var haveAvail bool
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		key, rest, found := strings.Cut(sc.Text(), ":")
		if !found {
			continue
		}
		var dst *uint64
		switch key {
		case "MemTotal":
			dst = &total
		case "MemAvailable":
			dst, haveAvail = &avail, true
		case "MemFree":
			dst = &free
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, 0, fmt.Errorf("metrics: parse %s: empty %s", p, key)
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("metrics: parse %s: %s: %w", p, key, err)
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		*dst = v
	}
	if !haveAvail {
		avail = free
	}
	return total, avail, nil
}
