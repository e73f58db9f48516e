package proc

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// threads reads this process's thread count from /proc.
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// The threads exist when ReserveThreads returns, and stay: the runtime
// keeps them idle rather than ending them.
func TestReserveThreads(t *testing.T) {
	before := threads(t)
	const n = 40
	ReserveThreads(n)
	after := threads(t)
	if after < n {
		t.Fatalf("threads after ReserveThreads(%d) = %d (before %d), want at least %d", n, after, before, n)
	}
	// Work that needs threads reuses the reserved ones instead of making
	// more: a second reservation of the same size adds (almost) none.
	ReserveThreads(n)
	if again := threads(t); again > after+2 {
		t.Errorf("threads after a second ReserveThreads(%d) = %d, want about %d (the idle ones reused)", n, again, after)
	}
}

// The reserve stays within an eighth of what a pids limit leaves free: a
// container limited to 100 pids once lost execd to its own reserve.
func TestThreadBudget(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		limit, cur string
		want       int
	}{
		{"100", "10", 11},
		{"1024", "10", ReservedThreads},
		{"20", "19", 0},
		{"10", "30", 0},
		{"max", "10", ReservedThreads},
	} {
		files := [][2]string{{write("max", tc.limit), write("cur", tc.cur)}}
		if got := threadBudget(files); got != tc.want {
			t.Errorf("limit %s, current %s: budget %d, want %d", tc.limit, tc.cur, got, tc.want)
		}
	}
	if got := threadBudget([][2]string{{dir + "/none", dir + "/none"}}); got != ReservedThreads {
		t.Errorf("no pids files: budget %d, want %d", got, ReservedThreads)
	}
}
