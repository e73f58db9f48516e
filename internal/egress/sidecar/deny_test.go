package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestDenyReporter(t *testing.T) {
	var (
		mu     sync.Mutex
		events []DenyEvent
		got    = make(chan struct{}, 16)
		fails  = 1 // the first POST answers 503 and must be retried
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var ev DenyEvent
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook body: %v", err)
		}
		events = append(events, ev)
		got <- struct{}{}
	}))
	defer hook.Close()

	dir := t.TempDir()
	skip := filepath.Join(dir, "log_skip.always")
	writeFile(t, skip, "# noisy telemetry\n*.telemetry.test\n")
	d := newDenyReporter("sb-1", hook.URL, hook.Client(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	d.now = func() time.Time { return now }
	if err := d.loadSkip(skip); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.run(ctx)

	d.denied("evil.test")
	d.denied("evil.test")        // within the quiet period: not again
	d.denied("a.telemetry.test") // skipped by pattern
	now = now.Add(denyQuiet)     // the quiet period is over
	d.denied("evil.test")
	for range 2 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("webhook not called")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 {
		t.Fatalf("events = %+v; want 2", events)
	}
	if e := events[0]; e.Hostname != "evil.test" || e.SandboxID != "sb-1" || e.Source != "dns" || e.Timestamp != "2026-11-30T01:02:03Z" {
		t.Fatalf("event = %+v", e)
	}
}

func TestDenyReporterNeverBlocks(t *testing.T) {
	// No worker drains the queue: the hook must still return at once.
	d := newDenyReporter("sb", "http://127.0.0.1:1/", http.DefaultClient, slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan struct{})
	go func() {
		for i := range denyQueueLen * 2 {
			d.denied("h" + string(rune('a'+i%26)) + time.Duration(i).String())
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("denied blocked on a full queue")
	}
	if d.dropped.Load() == 0 {
		t.Fatal("no event counted as dropped")
	}
}

func TestDenyReporterBoundsDistinctNames(t *testing.T) {
	d := newDenyReporter("sb", "", http.DefaultClient, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := range denySeenCapacity + 100 {
		d.denied(fmt.Sprintf("n%d.test", i))
	}
	if len(d.seen) > denySeenCapacity || d.suppressed.Load() != 100 {
		t.Fatalf("seen %d names, suppressed %d; want at most %d and 100", len(d.seen), d.suppressed.Load(), denySeenCapacity)
	}
}

func TestDenyWebhookConfig(t *testing.T) {
	env := map[string]string{"OPENSANDBOX_EGRESS_DENY_WEBHOOK": "ftp://x"}
	if _, err := FromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("ftp webhook accepted")
	}
	env["OPENSANDBOX_EGRESS_DENY_WEBHOOK"] = "https://hooks.example/deny"
	c, err := FromEnv(func(k string) string { return env[k] })
	if err != nil || c.DenyWebhook != "https://hooks.example/deny" || filepath.Base(c.LogSkip) != "log_skip.always" {
		t.Fatalf("config = %+v, %v", c, err)
	}
}

func TestDoHConfig(t *testing.T) {
	env := map[string]string{"OPENSANDBOX_EGRESS_BLOCK_DOH_443": "true", "OPENSANDBOX_EGRESS_DOH_BLOCKLIST": "1.1.1.1, 8.8.8.0/24,2606:4700::1111"}
	c, err := FromEnv(func(k string) string { return env[k] })
	if err != nil || !c.BlockDoH || len(c.DoHBlocklist) != 3 || c.DoHBlocklist[0].Bits() != 32 {
		t.Fatalf("config = %+v, %v", c, err)
	}
	env["OPENSANDBOX_EGRESS_DOH_BLOCKLIST"] = "dns.google"
	if _, err := FromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("a host name in the DoH blocklist was accepted")
	}
}
