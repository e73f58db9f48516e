package metrics

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	gib = 1 << 30

	// Host fixture: 8 CPUs, 16 GiB of which 12 GiB available.
	hostStat    = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\ncpu1 1 0 1 1 0 0 0 0 0 0\ncpu2 1 0 1 1 0 0 0 0 0 0\ncpu3 1 0 1 1 0 0 0 0 0 0\ncpu4 1 0 1 1 0 0 0 0 0 0\ncpu5 1 0 1 1 0 0 0 0 0 0\ncpu6 1 0 1 1 0 0 0 0 0 0\ncpu7 1 0 1 1 0 0 0 0 0 0\nintr 1 2 3\nctxt 42\n"
	hostMeminfo = "MemTotal:       16777216 kB\nMemFree:         1048576 kB\nMemAvailable:   12582912 kB\nBuffers:          1024 kB\n"

	v1Membership = "12:pids:/\n5:memory:/\n4:cpuset:/\n3:cpuacct:/\n2:cpu:/\n1:name=systemd:/\n0::/\n"
	hugeV1Limit  = "9223372036854771712\n"
)

// fixture is a fake cgroup mount and procfs under a temporary directory.
type fixture struct {
	t          *testing.T
	cgroup     string
	proc       string
	now        time.Time
	collector  *Collector
	collectErr error
}

func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{
		t:      t,
		cgroup: filepath.Join(dir, "cgroup"),
		proc:   filepath.Join(dir, "proc"),
		now:    time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
	for _, d := range []string{f.cgroup, filepath.Join(f.proc, "self")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defaults := map[string]string{"proc/stat": hostStat, "proc/meminfo": hostMeminfo}
	for name, content := range defaults {
		if _, ok := files[name]; !ok {
			f.write(name, content)
		}
	}
	f.writeAll(files)
	return f
}

// write creates dir/name; names start with "cgroup/" or "proc/".
func (f *fixture) write(name, content string) {
	f.t.Helper()
	p := filepath.Join(filepath.Dir(f.cgroup), filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) writeAll(files map[string]string) {
	for name, content := range files {
		f.write(name, content)
	}
}

func (f *fixture) new() *Collector {
	f.t.Helper()
	c, err := New(Options{CgroupRoot: f.cgroup, ProcRoot: f.proc, Now: func() time.Time { return f.now }})
	if err != nil {
		f.t.Fatalf("New() error = %v", err)
	}
	return c
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestSampleFixtures(t *testing.T) {
	tests := []struct {
		name        string
		files       map[string]string // written before New
		after       map[string]string // written before Sample, one second later
		wantCPUs    float64
		wantPct     float64
		wantTotal   float64 // MiB
		wantUsed    float64 // MiB
		wantVersion cgroupVersion
	}{
		{
			name: "v2 limited",
			files: map[string]string{
				"proc/self/cgroup":             "0::/\n",
				"cgroup/cgroup.controllers":    "cpuset cpu io memory pids\n",
				"cgroup/cpu.max":               "150000 100000\n",
				"cgroup/cpuset.cpus.effective": "0-3\n",
				"cgroup/cpu.stat":              "usage_usec 1000000\nuser_usec 800000\nsystem_usec 200000\n",
				"cgroup/memory.max":            "536870912\n",
				"cgroup/memory.current":        "314572800\n",
				"cgroup/memory.stat":           "anon 100\nfile 200\nactive_file 5\ninactive_file 46137344\n",
			},
			after:    map[string]string{"cgroup/cpu.stat": "usage_usec 1600000\n"},
			wantCPUs: 1.5, wantPct: 40, wantTotal: 512, wantUsed: 256, wantVersion: cgroupV2,
		},
		{
			name: "v2 unlimited uses host",
			files: map[string]string{
				"proc/self/cgroup":          "0::/\n",
				"cgroup/cgroup.controllers": "cpu memory\n",
				"cgroup/cpu.max":            "max 100000\n",
				"cgroup/cpu.stat":           "usage_usec 0\n",
				"cgroup/memory.max":         "max\n",
				"cgroup/memory.current":     "1073741824\n",
				"cgroup/memory.stat":        "inactive_file 0\n",
			},
			after:    map[string]string{"cgroup/cpu.stat": "usage_usec 2000000\n"},
			wantCPUs: 8, wantPct: 25, wantTotal: 16384, wantUsed: 1024, wantVersion: cgroupV2,
		},
		{
			name: "v2 cpuset smaller than quota",
			files: map[string]string{
				"proc/self/cgroup":             "0::/\n",
				"cgroup/cgroup.controllers":    "cpuset cpu memory\n",
				"cgroup/cpu.max":               "400000 100000\n",
				"cgroup/cpuset.cpus.effective": "0-1,4\n",
				"cgroup/cpu.stat":              "usage_usec 0\n",
				"cgroup/memory.max":            "1073741824\n",
				"cgroup/memory.current":        "0\n",
			},
			after:    map[string]string{"cgroup/cpu.stat": "usage_usec 1500000\n"},
			wantCPUs: 3, wantPct: 50, wantTotal: 1024, wantUsed: 0, wantVersion: cgroupV2,
		},
		{
			name: "v2 usage above capacity is clamped and limit above host is capped",
			files: map[string]string{
				"proc/self/cgroup":          "0::/\n",
				"cgroup/cgroup.controllers": "cpu memory\n",
				"cgroup/cpu.max":            "100000 100000\n",
				"cgroup/cpu.stat":           "usage_usec 0\n",
				"cgroup/memory.max":         "68719476736\n", // 64 GiB on a 16 GiB host
				"cgroup/memory.current":     "2147483648\n",
				"cgroup/memory.stat":        "inactive_file 1073741824\n",
			},
			after:    map[string]string{"cgroup/cpu.stat": "usage_usec 3000000\n"},
			wantCPUs: 1, wantPct: 100, wantTotal: 16384, wantUsed: 1024, wantVersion: cgroupV2,
		},
		{
			name: "v2 nested cgroup inherits ancestor limits",
			files: map[string]string{
				"proc/self/cgroup":                   "0::/sandbox/init\n",
				"cgroup/cgroup.controllers":          "cpu memory\n",
				"cgroup/cpu.max":                     "max 100000\n",
				"cgroup/memory.max":                  "max\n",
				"cgroup/sandbox/cpu.max":             "50000 100000\n",
				"cgroup/sandbox/memory.max":          "2147483648\n",
				"cgroup/sandbox/init/cpu.max":        "max 100000\n",
				"cgroup/sandbox/init/memory.max":     "max\n",
				"cgroup/sandbox/init/cpu.stat":       "usage_usec 0\n",
				"cgroup/sandbox/init/memory.current": "104857600\n",
				"cgroup/sandbox/init/memory.stat":    "inactive_file 0\n",
			},
			after:    map[string]string{"cgroup/sandbox/init/cpu.stat": "usage_usec 250000\n"},
			wantCPUs: 0.5, wantPct: 50, wantTotal: 2048, wantUsed: 100, wantVersion: cgroupV2,
		},
		{
			name: "v2 membership path outside the namespace falls back to root",
			files: map[string]string{
				"proc/self/cgroup":          "0::/system.slice/docker-abc.scope\n",
				"cgroup/cgroup.controllers": "cpu memory\n",
				"cgroup/cpu.max":            "200000 100000\n",
				"cgroup/cpu.stat":           "usage_usec 0\n",
				"cgroup/memory.max":         "268435456\n",
				"cgroup/memory.current":     "134217728\n",
			},
			after:    map[string]string{"cgroup/cpu.stat": "usage_usec 500000\n"},
			wantCPUs: 2, wantPct: 25, wantTotal: 256, wantUsed: 128, wantVersion: cgroupV2,
		},
		{
			name: "v2 root without memory files uses host memory",
			files: map[string]string{
				"proc/self/cgroup":          "0::/\n",
				"cgroup/cgroup.controllers": "cpu memory\n",
				"cgroup/cpu.stat":           "usage_usec 0\n",
			},
			after:    map[string]string{"cgroup/cpu.stat": "usage_usec 800000\n"},
			wantCPUs: 8, wantPct: 10, wantTotal: 16384, wantUsed: 4096, wantVersion: cgroupV2,
		},
		{
			name: "v1 limited",
			files: map[string]string{
				"proc/self/cgroup":                    v1Membership,
				"cgroup/cpu/cpu.cfs_quota_us":         "200000\n",
				"cgroup/cpu/cpu.cfs_period_us":        "100000\n",
				"cgroup/cpuacct/cpuacct.usage":        "5000000000\n",
				"cgroup/cpuset/cpuset.effective_cpus": "0-7\n",
				"cgroup/memory/memory.limit_in_bytes": "1073741824\n",
				"cgroup/memory/memory.usage_in_bytes": "629145600\n",
				"cgroup/memory/memory.stat":           "cache 1\ninactive_file 1\nhierarchical_memory_limit 9223372036854771712\ntotal_inactive_file 92274688\n",
			},
			after:    map[string]string{"cgroup/cpuacct/cpuacct.usage": "6500000000\n"},
			wantCPUs: 2, wantPct: 75, wantTotal: 1024, wantUsed: 512, wantVersion: cgroupV1,
		},
		{
			name: "v1 unlimited uses host",
			files: map[string]string{
				"proc/self/cgroup":                    v1Membership,
				"cgroup/cpu/cpu.cfs_quota_us":         "-1\n",
				"cgroup/cpu/cpu.cfs_period_us":        "100000\n",
				"cgroup/cpuacct/cpuacct.usage":        "0\n",
				"cgroup/memory/memory.limit_in_bytes": hugeV1Limit,
				"cgroup/memory/memory.usage_in_bytes": "2147483648\n",
				"cgroup/memory/memory.stat":           "total_inactive_file 0\n",
			},
			after:    map[string]string{"cgroup/cpuacct/cpuacct.usage": "4000000000\n"},
			wantCPUs: 8, wantPct: 50, wantTotal: 16384, wantUsed: 2048, wantVersion: cgroupV1,
		},
		{
			name: "v1 co-mounted cpu,cpuacct and nested path",
			files: map[string]string{
				"proc/self/cgroup":                               "3:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n1:cpuset:/docker/abc\n",
				"cgroup/cpu,cpuacct/cpu.cfs_quota_us":            "-1\n",
				"cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us":     "50000\n",
				"cgroup/cpu,cpuacct/docker/cpu.cfs_period_us":    "100000\n",
				"cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1\n",
				"cgroup/cpu,cpuacct/docker/abc/cpuacct.usage":    "0\n",
				"cgroup/cpuset/docker/abc/cpuset.cpus":           "2\n",
				"cgroup/memory/docker/abc/memory.limit_in_bytes": hugeV1Limit,
				"cgroup/memory/docker/abc/memory.usage_in_bytes": "104857600\n",
				"cgroup/memory/docker/abc/memory.stat":           "hierarchical_memory_limit 268435456\ntotal_inactive_file 52428800\n",
			},
			after:    map[string]string{"cgroup/cpu,cpuacct/docker/abc/cpuacct.usage": "100000000\n"},
			wantCPUs: 0.5, wantPct: 20, wantTotal: 256, wantUsed: 50, wantVersion: cgroupV1,
		},
		{
			name: "no cgroup uses host stat and meminfo",
			files: map[string]string{
				"proc/self/cgroup": "0::/\n",
			},
			// busy 200->600, total 1000->1900: 400/900 of the host.
			after:    map[string]string{"proc/stat": strings.Replace(hostStat, "cpu  100 0 100 800 0", "cpu  400 0 200 1200 100", 1)},
			wantCPUs: 8, wantPct: 400.0 / 900 * 100, wantTotal: 16384, wantUsed: 4096, wantVersion: cgroupNone,
		},
		{
			name: "v1 without cpuacct falls back to host cpu",
			files: map[string]string{
				"proc/self/cgroup":                    v1Membership,
				"cgroup/memory/memory.limit_in_bytes": "536870912\n",
				"cgroup/memory/memory.usage_in_bytes": "1073741824\n", // above the limit: reported as the limit
			},
			after:    map[string]string{"proc/stat": strings.Replace(hostStat, "cpu  100 0 100 800 0", "cpu  100 0 100 1800 0", 1)},
			wantCPUs: 8, wantPct: 0, wantTotal: 512, wantUsed: 512, wantVersion: cgroupV1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.files)
			c := f.new()
			if c.cg.version != tt.wantVersion {
				t.Errorf("New() cgroup version = %v, want %v", c.cg.version, tt.wantVersion)
			}
			f.writeAll(tt.after)
			f.now = f.now.Add(time.Second)
			got, err := c.Sample(context.Background())
			if err != nil {
				t.Fatalf("Sample() error = %v", err)
			}
			if !approx(got.CPUCount, tt.wantCPUs) {
				t.Errorf("Sample().CPUCount = %v, want %v", got.CPUCount, tt.wantCPUs)
			}
			if !approx(got.CPUUsedPct, tt.wantPct) {
				t.Errorf("Sample().CPUUsedPct = %v, want %v", got.CPUUsedPct, tt.wantPct)
			}
			if !approx(got.MemTotalMiB, tt.wantTotal) {
				t.Errorf("Sample().MemTotalMiB = %v, want %v", got.MemTotalMiB, tt.wantTotal)
			}
			if !approx(got.MemUsedMiB, tt.wantUsed) {
				t.Errorf("Sample().MemUsedMiB = %v, want %v", got.MemUsedMiB, tt.wantUsed)
			}
			if want := f.now.UnixMilli(); got.Timestamp != want {
				t.Errorf("Sample().Timestamp = %d, want %d", got.Timestamp, want)
			}
		})
	}
}

// TestSampleWindow checks which earlier reading a sample is compared
// against: quick successive calls reuse a reading at least minWindow old.
func TestSampleWindow(t *testing.T) {
	f := newFixture(t, map[string]string{
		"proc/self/cgroup":          "0::/\n",
		"cgroup/cgroup.controllers": "cpu\n",
		"cgroup/cpu.max":            "200000 100000\n",
		"cgroup/cpu.stat":           "usage_usec 0\n",
	})
	c := f.new()
	t0 := f.now
	steps := []struct {
		after   time.Duration // since New
		usageUS string
		wantPct float64
	}{
		{after: time.Second, usageUS: "1000000", wantPct: 50},                                 // against New's reading
		{after: time.Second + 10*time.Millisecond, usageUS: "1020000", wantPct: 102.0 / 2.02}, // previous is 10ms old: still against New's
		{after: time.Second + 150*time.Millisecond, usageUS: "1300000", wantPct: 100},         // 150ms window: 0.3s over 0.15s*2
		{after: time.Second + 200*time.Millisecond, usageUS: "1350000", wantPct: 87.5},        // 1.15s reading is 50ms old: against the 1s one, 0.35s over 0.2s*2
	}
	for i, s := range steps {
		f.write("cgroup/cpu.stat", "usage_usec "+s.usageUS+"\n")
		f.now = t0.Add(s.after)
		got, err := c.Sample(context.Background())
		if err != nil {
			t.Fatalf("step %d: Sample() error = %v", i, err)
		}
		if !approx(got.CPUUsedPct, s.wantPct) {
			t.Errorf("step %d (+%v): Sample().CPUUsedPct = %v, want %v", i, s.after, got.CPUUsedPct, s.wantPct)
		}
	}
}

func TestSampleParseErrorsNameTheFile(t *testing.T) {
	base := map[string]string{
		"proc/self/cgroup":          "0::/\n",
		"cgroup/cgroup.controllers": "cpu memory\n",
		"cgroup/cpu.stat":           "usage_usec 0\n",
		"cgroup/memory.current":     "0\n",
	}
	tests := []struct {
		name, file, content string
	}{
		{"cpu.max", "cgroup/cpu.max", "lots 100000\n"},
		{"memory.max", "cgroup/memory.max", "12k\n"},
		{"memory.current", "cgroup/memory.current", "-5\n"},
		{"memory.stat", "cgroup/memory.stat", "inactive_file x\n"},
		{"cpuset", "cgroup/cpuset.cpus.effective", "0-a\n"},
		{"meminfo", "proc/meminfo", "MemTotal: many kB\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, base)
			c := f.new()
			f.write(tt.file, tt.content)
			_, err := c.Sample(context.Background())
			if err == nil || !strings.Contains(err.Error(), filepath.Base(tt.file)) {
				t.Errorf("Sample() with %s = %q: error = %v, want one naming %s", tt.file, tt.content, err, filepath.Base(tt.file))
			}
		})
	}
	t.Run("cpu.stat at New", func(t *testing.T) {
		f := newFixture(t, base)
		f.write("cgroup/cpu.stat", "usage_usec many\n")
		_, err := New(Options{CgroupRoot: f.cgroup, ProcRoot: f.proc})
		if err == nil || !strings.Contains(err.Error(), "cpu.stat") {
			t.Errorf("New() error = %v, want one naming cpu.stat", err)
		}
	})
}

func TestSampleCanceledContext(t *testing.T) {
	f := newFixture(t, map[string]string{"proc/self/cgroup": "0::/\n"})
	c := f.new()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Sample(ctx); err != context.Canceled {
		t.Errorf("Sample(canceled ctx) error = %v, want %v", err, context.Canceled)
	}
}

func TestCPUListSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", 0, false},
		{"0\n", 1, false},
		{"0-3", 4, false},
		{"0-1,4,6-7", 5, false},
		{"3-1", 0, true},
		{"a", 0, true},
		{"0-", 0, true},
	}
	for _, tt := range tests {
		got, err := cpuListSize(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("cpuListSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
