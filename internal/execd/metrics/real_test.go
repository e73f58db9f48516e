package metrics

import (
	"context"
	"crypto/sha256"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestRealMachine samples the cgroup this test runs in.
func TestRealMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cgroups are Linux only")
	}
	if _, err := os.Stat(DefaultCgroupRoot); err != nil {
		t.Skipf("no %s: %v", DefaultCgroupRoot, err)
	}
	c, err := New(Options{})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	t.Logf("cgroup %v, cpu %q, cpuacct %q, memory %q", c.cg.version, c.cg.cpu.dir, c.cg.cpuacct.dir, c.cg.memory.dir)

	// Burn CPU for a bounded time in another goroutine, then sample once:
	// the sample covers the time since New.
	done := make(chan uint64)
	go func() {
		var sum [32]byte
		var n uint64
		for start := time.Now(); time.Since(start) < 300*time.Millisecond; n++ {
			sum = sha256.Sum256(sum[:])
		}
		done <- n + uint64(sum[0])
	}()
	<-done

	m, err := c.Sample(context.Background())
	if err != nil {
		t.Fatalf("Sample() error = %v", err)
	}
	t.Logf("Sample() = %+v", m)
	if m.CPUCount <= 0 {
		t.Errorf("Sample().CPUCount = %v, want > 0", m.CPUCount)
	}
	if m.CPUUsedPct <= 0 || m.CPUUsedPct > 100 {
		t.Errorf("Sample().CPUUsedPct after burning CPU = %v, want in (0, 100]", m.CPUUsedPct)
	}
	if m.MemTotalMiB <= 0 {
		t.Errorf("Sample().MemTotalMiB = %v, want > 0", m.MemTotalMiB)
	}
	if m.MemUsedMiB < 0 || m.MemUsedMiB > m.MemTotalMiB {
		t.Errorf("Sample().MemUsedMiB = %v, want in [0, %v]", m.MemUsedMiB, m.MemTotalMiB)
	}
	if d := time.Since(time.UnixMilli(m.Timestamp)); d < 0 || d > time.Minute {
		t.Errorf("Sample().Timestamp = %d, %v from now, want about now", m.Timestamp, d)
	}
}
