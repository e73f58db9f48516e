package sidecar

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
)

// TestPersisterFlushesOnStop: a policy handed over just before the stop
// (the API accepted it, then SIGTERM came) is written, not dropped with
// the stopping goroutine. run's select sees the stop and the pending
// policy at once and may pick either; each round gives it that choice,
// and the old run, which returned without writing, lost about half.
func TestPersisterFlushesOnStop(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 40 {
		path := filepath.Join(dir, "policy.json")
		_ = os.Remove(path)
		w := newPersister(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
		p := mustParse(t, `{"defaultAction":"deny","egress":[{"action":"allow","target":"round`+string(rune('a'+i%26))+`.test"}]}`)
		w.save(p)
		w.run(ctx)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("round %d: the policy saved before the stop was not written: %v", i, err)
		}
		got, err := policy.Parse(b, policy.Options{})
		if err != nil || got.Rules()[0].Target != p.Rules()[0].Target {
			t.Fatalf("round %d: file holds %s (%v); want the policy saved last", i, b, err)
		}
	}
}

// TestPersisterFinish: after run returned, finish writes the current
// policy when it is not the one written last, and nothing otherwise.
func TestPersisterFinish(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.json")
	w := newPersister(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	first := mustParse(t, `{"defaultAction":"allow"}`)
	w.write(first)
	later := mustParse(t, `{"defaultAction":"deny"}`)
	w.finish(later)
	var wire map[string]any
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &wire); err != nil || wire["defaultAction"] != "deny" {
		t.Fatalf("after finish the file holds %s; want the current policy", b)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	w.finish(later)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("finish wrote the policy written last again (stat: %v)", err)
	}
}

func mustParse(t *testing.T, s string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(s), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
