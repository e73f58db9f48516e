package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestPoolWarmAcquire drives the SDK's sandbox pool against the real
// server and Docker: the pool fills to Size with Running sandboxes,
// Acquire hands them out at once (each runs a command straight away), the
// pool refills behind them, and Close kills only the idle ones.
func TestPoolWarmAcquire(t *testing.T) {
	s := startServer(t, serverOpts{})
	image := minimalImage(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	c, err := sandbox.NewClient(sandbox.WithDomain(s.base), sandbox.WithAPIKey(testAPIKey))
	if err != nil {
		t.Fatal(err)
	}
	// Every sandbox of this test carries this tag, so List finds them all.
	tag := map[string]string{"e2e-pool": fmt.Sprintf("run-%d", time.Now().UnixNano())}
	listIDs := func() []string {
		t.Helper()
		var ids []string
		for info, err := range c.All(ctx, sandbox.ListOptions{Metadata: tag}) {
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			ids = append(ids, info.ID)
		}
		slices.Sort(ids)
		return ids
	}
	t.Cleanup(func() { // whatever a failure left behind
		for info, err := range c.All(context.Background(), sandbox.ListOptions{Metadata: tag}) {
			if err == nil {
				c.Kill(context.Background(), info.ID)
			}
		}
	})

	p, err := c.NewPool(ctx, sandbox.PoolOptions{
		Size: 2,
		Create: sandbox.CreateOptions{
			Image:      image,
			Entrypoint: []string{"sleep", "100000"},
			Resources:  map[string]string{"cpu": "500m", "memory": "128Mi"},
			Metadata:   tag,
			Timeout:    5 * time.Minute,
		},
	})
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v (stats %+v)", err, p.Stats())
	}
	warm := listIDs()
	if len(warm) != 2 {
		t.Fatalf("sandboxes after WaitReady = %v, want 2", warm)
	}

	var acquired []*sandbox.Sandbox
	for i := range 2 {
		t0 := time.Now()
		sb, err := p.Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		t.Logf("Acquire %d took %v", i, time.Since(t0))
		acquired = append(acquired, sb)
	}
	for _, sb := range acquired {
		if !slices.Contains(warm, sb.ID()) {
			t.Errorf("Acquire() = %s, not one of the warm sandboxes %v", sb.ID(), warm)
		}
		info, err := sb.Info(ctx)
		if err != nil || info.Status.State != sandbox.StateRunning {
			t.Errorf("acquired %s: state %q, err %v; want Running", sb.ID(), info.Status.State, err)
		}
		ex, err := sb.Run(ctx, "echo hi", sandbox.RunOptions{})
		if err != nil || ex.ExitCode != 0 || ex.Text() != "hi" {
			t.Errorf("Run(echo hi) in %s = %+v, %v; want exit 0 and \"hi\"", sb.ID(), ex, err)
		}
	}
	if acquired[0].ID() == acquired[1].ID() {
		t.Fatalf("both Acquire calls returned %s", acquired[0].ID())
	}

	// The pool refills behind the acquired ones.
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady after Acquire: %v (stats %+v)", err, p.Stats())
	}
	if st := p.Stats(); st.Idle != 2 || st.Acquired != 2 || st.Failures != 0 {
		t.Errorf("Stats() after refill = %+v, want 2 idle, 2 acquired, 0 failures", st)
	}
	if got := listIDs(); len(got) != 4 {
		t.Errorf("sandboxes after refill = %v, want 4", got)
	}

	// Close kills the idle ones; the acquired ones are the caller's.
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	want := []string{acquired[0].ID(), acquired[1].ID()}
	slices.Sort(want)
	if got := listIDs(); !slices.Equal(got, want) {
		t.Errorf("sandboxes after Close = %v, want only the acquired %v", got, want)
	}
	if _, err := p.Acquire(ctx); !errors.Is(err, sandbox.ErrPoolClosed) {
		t.Errorf("Acquire after Close = %v, want ErrPoolClosed", err)
	}
	for _, sb := range acquired {
		if err := sb.Kill(ctx); err != nil {
			t.Errorf("Kill %s: %v", sb.ID(), err)
		}
	}
	if got := listIDs(); len(got) != 0 {
		t.Errorf("sandboxes after killing the acquired = %v, want none", got)
	}
}
