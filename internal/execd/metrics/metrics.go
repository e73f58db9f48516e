// Package metrics reports the resource usage of the sandbox execd runs in,
// for GET /metrics and GET /metrics/watch. Figures come from the cgroup of
// the execd process (v1 or v2, detected at start), so a container sees its
// own limits and usage rather than the host's; procfs is the fallback when a
// cgroup file is missing or reports no limit.
//
// CPU usage is a rate, so a Collector remembers earlier readings and
// compares each sample against one of them instead of sleeping between two
// reads. The package only reads files: it must not start processes or
// depend on other execd packages, so it can be tested against fixture trees.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Defaults for Options fields left empty.
const (
	DefaultCgroupRoot = "/sys/fs/cgroup"
	DefaultProcRoot   = "/proc"
	DefaultInterval   = time.Second
)

// minWindow is the youngest reading a sample is compared against once a
// suitable one exists, so back-to-back calls do not divide by microseconds.
const minWindow = 100 * time.Millisecond

const mib = 1 << 20

// Options configure a Collector. Every field is optional.
type Options struct {
	// CgroupRoot is where the cgroup hierarchy is mounted; default
	// /sys/fs/cgroup. For cgroup v1 it holds one directory per controller.
	CgroupRoot string
	// ProcRoot is where procfs is mounted; default /proc. It supplies the
	// process's cgroup membership and the host fallbacks (stat, meminfo).
	ProcRoot string
	// Interval is the period between Watch frames; default one second.
	Interval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives diagnostics; default slog.Default().
	Logger *slog.Logger
}

// Collector samples the sandbox's resource usage. It is safe for concurrent
// use; all samplers share the remembered CPU readings.
type Collector struct {
	cg       layout
	procRoot string
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger

	mu sync.Mutex
	// base is the reading samples are compared against; next is a younger
	// reading that replaces base once it is at least minWindow old.
	base, next *cpuReading
}

// New detects the cgroup layout of the current process and takes the first
// CPU reading, against which the first sample is computed.
func New(opts Options) (*Collector, error) {
	c := &Collector{
		procRoot: opts.ProcRoot,
		interval: opts.Interval,
		now:      opts.Now,
		log:      opts.Logger,
	}
	if c.procRoot == "" {
		c.procRoot = DefaultProcRoot
	}
	root := opts.CgroupRoot
	if root == "" {
		root = DefaultCgroupRoot
	}
	if c.interval <= 0 {
		c.interval = DefaultInterval
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	cg, err := detect(root, c.procRoot)
	if err != nil {
		return nil, err
	}
	c.cg = cg
	first, err := c.readCPU()
	if err != nil {
		return nil, fmt.Errorf("metrics: first cpu reading: %w", err)
	}
	c.base = &first
	c.log.Debug("metrics collector ready",
		slog.String("cgroup", cg.version.String()),
		slog.String("cpu", cg.cpu.dir), slog.String("cpuacct", cg.cpuacct.dir),
		slog.String("memory", cg.memory.dir), slog.Bool("host_cpu_accounting", first.host))
	return c, nil
}

// Sample returns the current usage. cpu_used_pct covers the time since a
// remembered reading, normally the previous sample.
func (c *Collector) Sample(ctx context.Context) (sandbox.Metrics, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.Metrics{}, err
	}
	cpus, err := c.cpuCount()
	if err != nil {
		return sandbox.Metrics{}, err
	}
	total, used, err := c.memory()
	if err != nil {
		return sandbox.Metrics{}, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	cur, err := c.readCPU()
	if err != nil {
		return sandbox.Metrics{}, err
	}
	if c.next != nil && cur.at.Sub(c.next.at) >= minWindow {
		c.base, c.next = c.next, nil
	}
	pct := percent(*c.base, cur, cpus)
	if c.next == nil {
		c.next = &cur
	}
	return sandbox.Metrics{
		CPUCount:    cpus,
		CPUUsedPct:  pct,
		MemTotalMiB: float64(total) / mib,
		MemUsedMiB:  float64(used) / mib,
		Timestamp:   cur.at.UnixMilli(),
	}, nil
}

// cpuReading is one observation of a cumulative CPU counter. With cgroup
// accounting usage is CPU time in nanoseconds; with the host fallback (host
// set) usage and total are busy and total jiffies from /proc/stat.
type cpuReading struct {
	at    time.Time
	host  bool
	usage uint64
	total uint64
}

func (c *Collector) readCPU() (cpuReading, error) {
	ns, ok, err := c.cg.cpuUsage()
	if err != nil {
		return cpuReading{}, err
	}
	if ok {
		return cpuReading{at: c.now(), usage: ns}, nil
	}
	busy, total, err := hostCPU(c.procRoot)
	if err != nil {
		return cpuReading{}, err
	}
	return cpuReading{at: c.now(), host: true, usage: busy, total: total}, nil
}

// percent is the share of the available CPU used between two readings,
// clamped to 0..100.
func percent(prev, cur cpuReading, cpus float64) float64 {
	if prev.host != cur.host || cur.usage < prev.usage {
		return 0
	}
	used := float64(cur.usage - prev.usage)
	var p float64
	if cur.host {
		if cur.total <= prev.total {
			return 0
		}
		p = used / float64(cur.total-prev.total) * 100
	} else {
		elapsed := cur.at.Sub(prev.at)
		if elapsed <= 0 || cpus <= 0 {
			return 0
		}
		p = used / (float64(elapsed.Nanoseconds()) * cpus) * 100
	}
	return min(max(p, 0), 100)
}

// cpuCount is the CPU limit in cores: the smallest of the online CPUs, the
// cpuset and the CFS quota.
func (c *Collector) cpuCount() (float64, error) {
	n := float64(onlineCPUs(c.procRoot))
	set, err := c.cg.cpusetSize()
	if err != nil {
		return 0, err
	}
	if set > 0 && float64(set) < n {
		n = float64(set)
	}
	quota, ok, err := c.cg.cpuQuota()
	if err != nil {
		return 0, err
	}
	if ok && quota < n {
		n = quota
	}
	return n, nil
}

// memory returns the limit and the working-set usage in bytes.
func (c *Collector) memory() (total, used uint64, err error) {
	hostTotal, hostAvail, err := hostMemory(c.procRoot)
	if err != nil {
		return 0, 0, err
	}
	total = hostTotal
	limit, ok, err := c.cg.memoryLimit()
	if err != nil {
		return 0, 0, err
	}
	if ok && (limit < total || total == 0) {
		total = limit
	}
	used, ok, err = c.cg.memoryUsage()
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		used = hostTotal - min(hostAvail, hostTotal)
	}
	return total, min(used, total), nil
}
