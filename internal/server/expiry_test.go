package server

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestExpiryDeletesSandbox(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MinTimeout = time.Second })
	e.run()
	b := createBody()
	b["timeout"] = 1
	short := e.createSandbox(b)
	delete(b, "timeout")
	manual := e.createSandbox(b)
	b["timeout"] = 3600
	long := e.createSandbox(b)
	e.do("PATCH", "/v1/sandboxes/"+short+"/metadata", map[string]string{"k": "v"})

	// Expiry removes the sandbox, then its overrides: wait for both (a
	// check right after the first would race the second).
	waitFor(t, "expiry of "+short+" and of its overrides", 10*time.Second, func() bool {
		o, _ := e.store.GetOverrides(t.Context(), short)
		return !e.rt.has(short) && o.Metadata == nil
	})
	if !e.rt.has(manual) || !e.rt.has(long) {
		t.Errorf("expiry deleted manual=%v long=%v, want both kept", !e.rt.has(manual), !e.rt.has(long))
	}
	waitFor(t, "expiry log line", 5*time.Second, func() bool {
		return containsAll(e.logs.String(), "sandbox deleted", "reason=ttl_expiry", "sandbox="+short)
	})
}

func TestRenewPostponesExpiry(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MinTimeout = time.Second })
	e.run()
	b := createBody()
	b["timeout"] = 1
	id := e.createSandbox(b)
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if r := e.do("POST", "/v1/sandboxes/"+id+"/renew-expiration", map[string]string{"expiresAt": later}); r.status != http.StatusOK {
		t.Fatalf("renew = %s", r)
	}
	// A sandbox created after it with a 1 s timeout expires; ours must not.
	other := e.createSandbox(b)
	waitFor(t, "expiry of "+other, 10*time.Second, func() bool { return !e.rt.has(other) })
	if !e.rt.has(id) {
		t.Errorf("renewed sandbox %s was deleted at its original expiry", id)
	}
}

func TestExpiryRechecksBeforeDeleting(t *testing.T) {
	// A stale deadline (say, armed before a renew another path stored)
	// must not delete a sandbox whose effective expiry is later.
	e := newEnv(t)
	future := time.Now().Add(time.Hour)
	sb := fakeSandbox("sb1")
	past := time.Now().Add(-time.Minute)
	sb.ExpiresAt = &past
	e.rt.add(sb)
	e.store.PutOverrides(t.Context(), "sb1", Overrides{ExpiresAt: &future})
	e.srv.lc.Schedule("sb1", past)
	e.run()
	waitFor(t, "re-armed deadline", 5*time.Second, func() bool {
		d, ok := e.srv.lc.Deadline("sb1")
		return ok && d.Equal(future)
	})
	if !e.rt.has("sb1") {
		t.Errorf("sandbox with a later overridden expiry was deleted")
	}
}

func TestRunRebuildsExpiry(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	expired, renewed, future := now.Add(-time.Hour), now.Add(2*time.Hour), now.Add(time.Hour)
	for id, exp := range map[string]*time.Time{"gone": &expired, "later": &future, "renewed": &expired, "manual": nil} {
		sb := fakeSandbox(id)
		sb.ExpiresAt = exp
		e.rt.add(sb)
	}
	// "renewed" expired by its label but was renewed before the restart.
	e.store.PutOverrides(t.Context(), "renewed", Overrides{ExpiresAt: &renewed})
	e.run()
	waitFor(t, "deletion of the sandbox that expired while down", 5*time.Second, func() bool { return !e.rt.has("gone") })
	waitFor(t, "rebuilt deadlines", 5*time.Second, func() bool {
		_, a := e.srv.lc.Deadline("later")
		_, b := e.srv.lc.Deadline("renewed")
		return a && b
	})
	if d, _ := e.srv.lc.Deadline("renewed"); !d.Equal(renewed) {
		t.Errorf("deadline of renewed = %v, want the override %v", d, renewed)
	}
	if _, ok := e.srv.lc.Deadline("manual"); ok {
		t.Errorf("manual-cleanup sandbox got a deadline")
	}
	for _, id := range []string{"later", "renewed", "manual"} {
		if !e.rt.has(id) {
			t.Errorf("sandbox %s was deleted at start, want kept", id)
		}
	}
	if got := decode[sandbox.SandboxInfo](t, e.do("GET", "/v1/sandboxes/renewed", nil)).ExpiresAt; got == nil || !got.Equal(renewed) {
		t.Errorf("GET renewed expiresAt = %v, want %v", got, renewed)
	}
}

func TestExpiredSandboxIsGoneBeforeTheTimerFires(t *testing.T) {
	// Without Run, no timer fires; GET and List must still never show a
	// sandbox past its expiry. GET deletes it on the spot.
	e := newEnv(t)
	past := time.Now().Add(-time.Second)
	for _, id := range []string{"a", "b"} {
		sb := fakeSandbox(id)
		sb.ExpiresAt = &past
		e.rt.add(sb)
	}
	e.rt.add(fakeSandbox("manual"))
	list := decode[sandbox.ListSandboxesResponse](t, e.do("GET", "/v1/sandboxes", nil))
	if len(list.Items) != 1 || list.Items[0].ID != "manual" {
		t.Errorf("list = %+v, want only the manual-cleanup sandbox", list.Items)
	}
	if _, armed := e.srv.lc.Deadline("b"); !armed {
		t.Errorf("listing an expired sandbox did not arm its deletion")
	}
	wantError(t, "GET expired", e.do("GET", "/v1/sandboxes/a", nil), 404, "SANDBOX_NOT_FOUND")
	if e.rt.has("a") {
		t.Errorf("GET of an expired sandbox left it in the runtime")
	}
	if !containsAll(e.logs.String(), "reason=ttl_expiry", "sandbox=a") {
		t.Errorf("no ttl_expiry log line for a:\n%s", e.logs.String())
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// sweepRuntime counts the sweeps Run asks for.
type sweepRuntime struct {
	runtime.Runtime
	sweeps atomic.Int32
}

func (r *sweepRuntime) Sweep(context.Context) { r.sweeps.Add(1) }

func TestRunSweepsPeriodically(t *testing.T) {
	var sw *sweepRuntime
	e := newEnv(t, func(c *Config) {
		sw = &sweepRuntime{Runtime: c.Runtime}
		c.Runtime = sw
		c.SweepInterval = 5 * time.Millisecond
	})
	e.run()
	deadline := time.Now().Add(10 * time.Second)
	for sw.sweeps.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sweeps in 10 s at a 5 ms interval; want at least 3", sw.sweeps.Load())
		}
		time.Sleep(time.Millisecond) // polling the count
	}
}
