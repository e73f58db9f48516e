package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Deny reporting: each name the DNS proxy refuses is logged and, when a
// webhook is configured, POSTed to it, unless it matches log_skip.always.
// The same name is reported at most once per denyQuiet, so a client that
// retries in a loop cannot flood the log or the webhook.
const (
	denyQuiet        = 30 * time.Second
	denyQueueLen     = 256
	webhookTimeout   = 5 * time.Second
	webhookAttempts  = 3
	denySeenCapacity = 4096
)

// DenyEvent is the webhook's JSON body (upstream's field names).
type DenyEvent struct {
	Hostname  string `json:"hostname"`
	Timestamp string `json:"timestamp"`
	Source    string `json:"source"`
	SandboxID string `json:"sandboxId"`
}

type denyReporter struct {
	sandboxID string
	webhook   string
	client    *http.Client
	log       *slog.Logger
	now       func() time.Time

	skip       atomic.Pointer[policy.Policy] // names not reported; nil = none
	mu         sync.Mutex
	seen       map[string]time.Time
	queue      chan DenyEvent
	dropped    atomic.Int64 // events the full queue refused
	suppressed atomic.Int64 // denials not reported over the name limit
}

func newDenyReporter(sandboxID, webhook string, client *http.Client, log *slog.Logger) *denyReporter {
	return &denyReporter{
		sandboxID: sandboxID, webhook: webhook, client: client, log: log, now: time.Now,
		seen: map[string]time.Time{}, queue: make(chan DenyEvent, denyQueueLen),
	}
}

// denied is the DNS proxy's OnDenied hook; it never blocks.
func (d *denyReporter) denied(host string) {
	if p := d.skip.Load(); p != nil && p.Decide(host) == policy.Allow {
		return
	}
	now := d.now()
	d.mu.Lock()
	if last, ok := d.seen[host]; ok && now.Sub(last) < denyQuiet {
		d.mu.Unlock()
		return
	}
	if len(d.seen) >= denySeenCapacity {
		for h, t := range d.seen {
			if now.Sub(t) >= denyQuiet {
				delete(d.seen, h)
			}
		}
		if len(d.seen) >= denySeenCapacity {
			// A flood of distinct names: report none of the excess rather
			// than let memory, the log or the webhook grow without bound.
			d.mu.Unlock()
			if d.suppressed.Add(1) == 1 {
				d.log.Warn("too many distinct denied names; not reporting more for a while", "limit", denySeenCapacity)
			}
			return
		}
	}
	d.seen[host] = now
	d.mu.Unlock()
	d.log.Info("egress denied", "host", host, "source", "dns")
	if d.webhook == "" {
		return
	}
	ev := DenyEvent{Hostname: host, Timestamp: now.UTC().Format(time.RFC3339Nano), Source: "dns", SandboxID: d.sandboxID}
	select {
	case d.queue <- ev:
	default:
		if d.dropped.Add(1) == 1 {
			d.log.Warn("deny webhook queue full; dropping events", "webhook", d.webhook)
		}
	}
}

// run posts queued events until ctx ends.
func (d *denyReporter) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-d.queue:
			if err := d.post(ctx, ev); err != nil && ctx.Err() == nil {
				d.log.Warn("deny webhook failed", "host", ev.Hostname, "err", err)
			}
		}
	}
}

// post delivers one event, retrying network errors and 5xx answers.
func (d *denyReporter) post(ctx context.Context, ev DenyEvent) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	var last error
	for attempt := range webhookAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
		rctx, cancel := context.WithTimeout(ctx, webhookTimeout)
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.webhook, bytes.NewReader(body))
		if err != nil {
			cancel()
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := d.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode < 500 {
				cancel()
				if resp.StatusCode >= 300 {
					return fmt.Errorf("webhook answered %s", resp.Status)
				}
				return nil
			}
			err = fmt.Errorf("webhook answered %s", resp.Status)
		}
		cancel()
		last = err
	}
	return last
}

// loadSkip reads the log_skip.always patterns (same forms as rule
// targets). A missing file means none.
func (d *denyReporter) loadSkip(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		d.skip.Store(nil)
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var rules []sandbox.NetworkRule
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line != "" {
			rules = append(rules, sandbox.NetworkRule{Action: string(policy.Allow), Target: line})
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	p, err := policy.New(&sandbox.NetworkPolicy{DefaultAction: string(policy.Deny), Egress: rules}, policy.Options{})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	d.skip.Store(p)
	return nil
}
