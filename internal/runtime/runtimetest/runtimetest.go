// Package runtimetest is the conformance suite every runtime driver must
// pass: the behaviour the lifecycle core relies on, stated once and run
// against each engine (Docker today, Kubernetes next).
//
// A driver's tests call Run with a Harness that knows how to make that
// driver and what the engine keeps of a sandbox:
//
//	func TestConformance(t *testing.T) {
//		runtimetest.Run(t, runtimetest.Harness{New: ..., Image: ..., Leftovers: ...})
//	}
//
// The suite talks to execd inside the sandboxes over the addresses the
// driver reports, so it checks the whole path the server uses, not only
// the driver's bookkeeping. It is a test helper: import it only from
// _test.go files.
package runtimetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Harness adapts the suite to one driver.
type Harness struct {
	// New returns the runtime under test; the suite calls it once per
	// subtest group.
	New func(t *testing.T) runtime.Runtime
	// Image is an image every sandbox of the suite starts from. It needs
	// a POSIX shell with echo, cat, mkdir and sleep (no /tmp is assumed).
	Image string
	// NewID returns a fresh sandbox id and arranges for whatever the
	// engine holds under it to be removed when the test ends, whatever
	// happened.
	NewID func(t *testing.T) string
	// Leftovers lists what the engine still holds for sandbox id
	// (containers, pods, volumes, networks...); Delete must leave none.
	Leftovers func(t *testing.T, id string) []string
	// Timeout bounds each create and each wait of the suite; default 60s.
	Timeout time.Duration
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	if h.Timeout == 0 {
		h.Timeout = 60 * time.Second
	}
	s := &suite{h: h}
	t.Run("CreateGetList", s.createGetList)
	t.Run("ExecdThroughAddress", s.execdThroughAddress)
	t.Run("MissingIsNotFound", s.missingIsNotFound)
	t.Run("DuplicateIDConflicts", s.duplicateID)
	t.Run("PauseResume", s.pauseResume)
	t.Run("DeleteLeavesNothing", s.deleteLeavesNothing)
	t.Run("ConcurrentCreates", s.concurrentCreates)
	t.Run("Diagnostics", s.diagnostics)
	t.Run("Snapshots", s.snapshots)
}

type suite struct {
	h Harness
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.h.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// spec is a sandbox that prints a line and sleeps.
func (s *suite) spec(t *testing.T) runtime.Spec {
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	return runtime.Spec{
		ID:         s.h.NewID(t),
		Image:      s.h.Image,
		Entrypoint: []string{"sh", "-c", "echo conformance-started; exec sleep 100000"},
		Env:        map[string]string{"CONFORMANCE_VAR": "value with spaces"},
		Metadata:   map[string]string{"suite": "conformance", "owner": "t"},
		ExpiresAt:  &exp,
		ExecdToken: "tok-" + strconv.FormatInt(time.Now().UnixNano(), 36),
	}
}

func (s *suite) create(t *testing.T, rt runtime.Runtime, spec runtime.Spec) runtime.Sandbox {
	t.Helper()
	sb, err := rt.Create(s.ctx(t), spec)
	if err != nil {
		t.Fatalf("Create(%s): %v", spec.ID, err)
	}
	return sb
}

// checkSandbox compares what a driver reports with what was asked for.
func checkSandbox(t *testing.T, call string, got runtime.Sandbox, spec runtime.Spec, state string) {
	t.Helper()
	if got.ID != spec.ID {
		t.Errorf("%s: ID %q, want %q", call, got.ID, spec.ID)
	}
	if got.State != state {
		t.Errorf("%s: State %q (reason %q, message %q), want %q", call, got.State, got.Reason, got.Message, state)
	}
	if !slices.Equal(got.Entrypoint, spec.Entrypoint) {
		t.Errorf("%s: Entrypoint %q, want the user's %q unchanged", call, got.Entrypoint, spec.Entrypoint)
	}
	for k, v := range spec.Metadata {
		if got.Metadata[k] != v {
			t.Errorf("%s: Metadata[%q] = %q, want %q (all: %v)", call, k, got.Metadata[k], v, got.Metadata)
		}
	}
	if len(got.Metadata) != len(spec.Metadata) {
		t.Errorf("%s: Metadata %v, want exactly %v", call, got.Metadata, spec.Metadata)
	}
	if spec.ExpiresAt != nil && (got.ExpiresAt == nil || !got.ExpiresAt.Equal(*spec.ExpiresAt)) {
		t.Errorf("%s: ExpiresAt %v, want %v", call, got.ExpiresAt, spec.ExpiresAt)
	}
	if got.CreatedAt.IsZero() || time.Since(got.CreatedAt) > time.Hour || time.Until(got.CreatedAt) > time.Minute {
		t.Errorf("%s: CreatedAt %v is not the time of creation", call, got.CreatedAt)
	}
	if got.ExecdToken != spec.ExecdToken {
		t.Errorf("%s: ExecdToken not the one created with", call)
	}
}

func (s *suite) createGetList(t *testing.T) {
	rt := s.h.New(t)
	spec := s.spec(t)
	sb := s.create(t, rt, spec)
	checkSandbox(t, "Create", sb, spec, sandbox.StateRunning)

	got, err := rt.Get(s.ctx(t), spec.ID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	checkSandbox(t, "Get", got, spec, sandbox.StateRunning)

	all, err := rt.List(s.ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	i := slices.IndexFunc(all, func(x runtime.Sandbox) bool { return x.ID == spec.ID })
	if i < 0 {
		t.Fatalf("List: %d sandboxes, none is %s", len(all), spec.ID)
	}
	checkSandbox(t, "List", all[i], spec, sandbox.StateRunning)
}

func (s *suite) execdThroughAddress(t *testing.T) {
	rt := s.h.New(t)
	spec := s.spec(t)
	s.create(t, rt, spec)

	a, err := rt.Address(s.ctx(t), spec.ID, 44772)
	if err != nil {
		t.Fatalf("Address(44772): %v", err)
	}
	if code := status(t, a, "/ping", spec.ExecdToken); code != http.StatusOK {
		t.Errorf("execd /ping with its token: %d, want 200", code)
	}
	if code := status(t, a, "/ping", "wrong-token"); code != http.StatusUnauthorized {
		t.Errorf("execd /ping with a wrong token: %d, want 401", code)
	}
	// The user's environment reaches the commands; the working state is
	// the sandbox's own.
	out := command(t, a, spec.ExecdToken, `echo "$CONFORMANCE_VAR"; mkdir -p /conformance && echo data > /conformance/f && cat /conformance/f`)
	if want := []string{"value with spaces", "data"}; !slices.Equal(out, want) {
		t.Errorf("command output %q, want %q", out, want)
	}
}

func (s *suite) missingIsNotFound(t *testing.T) {
	rt := s.h.New(t)
	id := s.h.NewID(t)
	ctx := s.ctx(t)
	_, err := rt.Get(ctx, id)
	wantClass(t, "Get", err, runtime.ErrNotFound)
	wantClass(t, "Delete", rt.Delete(ctx, id), runtime.ErrNotFound)
	wantClass(t, "Pause", rt.Pause(ctx, id), runtime.ErrNotFound)
	wantClass(t, "Resume", rt.Resume(ctx, id), runtime.ErrNotFound)
	_, err = rt.Address(ctx, id, 44772)
	wantClass(t, "Address", err, runtime.ErrNotFound)
	_, err = rt.Logs(ctx, id, runtime.LogOptions{})
	wantClass(t, "Logs", err, runtime.ErrNotFound)
	_, err = rt.Inspect(ctx, id)
	wantClass(t, "Inspect", err, runtime.ErrNotFound)
	_, err = rt.Events(ctx, id, 10)
	wantClass(t, "Events", err, runtime.ErrNotFound)
	wantClass(t, "CommitSnapshot", rt.CommitSnapshot(ctx, id, s.h.NewID(t)), runtime.ErrNotFound)
	wantClass(t, "DeleteSnapshot", rt.DeleteSnapshot(ctx, s.h.NewID(t)), runtime.ErrNotFound)
}

func (s *suite) duplicateID(t *testing.T) {
	rt := s.h.New(t)
	spec := s.spec(t)
	s.create(t, rt, spec)
	_, err := rt.Create(s.ctx(t), spec)
	wantClass(t, "second Create with the same id", err, runtime.ErrConflict)
	// The first sandbox is untouched by the refused create.
	got, err := rt.Get(s.ctx(t), spec.ID)
	if err != nil {
		t.Fatalf("Get after the refused create: %v", err)
	}
	checkSandbox(t, "Get after the refused create", got, spec, sandbox.StateRunning)
}

func (s *suite) pauseResume(t *testing.T) {
	rt := s.h.New(t)
	spec := s.spec(t)
	s.create(t, rt, spec)
	ctx := s.ctx(t)
	a, err := rt.Address(ctx, spec.ID, 44772)
	if err != nil {
		t.Fatalf("Address: %v", err)
	}
	command(t, a, spec.ExecdToken, "mkdir -p /conformance && echo before > /conformance/state")

	if err := rt.Pause(ctx, spec.ID); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	s.waitState(t, rt, spec.ID, sandbox.StatePaused)
	wantClass(t, "Pause of a paused sandbox", rt.Pause(ctx, spec.ID), runtime.ErrConflict)

	if err := rt.Resume(ctx, spec.ID); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	s.waitState(t, rt, spec.ID, sandbox.StateRunning)
	wantClass(t, "Resume of a running sandbox", rt.Resume(ctx, spec.ID), runtime.ErrConflict)

	// Processes and files survived; execd may be reached elsewhere now.
	if a, err = rt.Address(ctx, spec.ID, 44772); err != nil {
		t.Fatalf("Address after Resume: %v", err)
	}
	if out := command(t, a, spec.ExecdToken, "cat /conformance/state"); !slices.Equal(out, []string{"before"}) {
		t.Errorf("after Resume: %q, want the file written before Pause", out)
	}
}

func (s *suite) deleteLeavesNothing(t *testing.T) {
	rt := s.h.New(t)
	spec := s.spec(t)
	s.create(t, rt, spec)
	ctx := s.ctx(t)
	if err := rt.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := rt.Get(ctx, spec.ID)
	wantClass(t, "Get after Delete", err, runtime.ErrNotFound)
	all, err := rt.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if slices.ContainsFunc(all, func(x runtime.Sandbox) bool { return x.ID == spec.ID }) {
		t.Errorf("List still has %s after Delete", spec.ID)
	}
	wantClass(t, "second Delete", rt.Delete(ctx, spec.ID), runtime.ErrNotFound)
	if left := s.h.Leftovers(t, spec.ID); len(left) > 0 {
		t.Errorf("Delete left %v behind", left)
	}
}

func (s *suite) concurrentCreates(t *testing.T) {
	rt := s.h.New(t)
	const n = 3
	specs := make([]runtime.Spec, n)
	for i := range specs {
		specs[i] = s.spec(t)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range specs {
		wg.Go(func() { _, errs[i] = rt.Create(s.ctx(t), specs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Create %d of %d at once: %v", i, n, err)
		}
	}
	all, err := rt.List(s.ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, spec := range specs {
		if !slices.ContainsFunc(all, func(x runtime.Sandbox) bool { return x.ID == spec.ID && x.State == sandbox.StateRunning }) {
			t.Errorf("List lacks running %s", spec.ID)
		}
	}
	// Concurrent deletes of all of them leave nothing.
	for i := range specs {
		wg.Go(func() { errs[i] = rt.Delete(s.ctx(t), specs[i].ID) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Delete %d: %v", i, err)
		}
		if left := s.h.Leftovers(t, specs[i].ID); len(left) > 0 {
			t.Errorf("concurrent Delete of %s left %v", specs[i].ID, left)
		}
	}
}

func (s *suite) diagnostics(t *testing.T) {
	rt := s.h.New(t)
	spec := s.spec(t)
	s.create(t, rt, spec)
	ctx := s.ctx(t)
	// The entrypoint's output is in the logs once it has run.
	s.poll(t, "entrypoint output in Logs", func() bool {
		logs, err := rt.Logs(ctx, spec.ID, runtime.LogOptions{})
		return err == nil && bytes.Contains(logs, []byte("conformance-started"))
	})
	js, err := rt.Inspect(ctx, spec.ID)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if !json.Valid(js) {
		t.Errorf("Inspect: not JSON: %.200s", js)
	}
	if _, err := rt.Events(ctx, spec.ID, 10); err != nil {
		t.Errorf("Events: %v", err)
	}
}

func (s *suite) snapshots(t *testing.T) {
	rt := s.h.New(t)
	spec := s.spec(t)
	s.create(t, rt, spec)
	ctx := s.ctx(t)
	a, err := rt.Address(ctx, spec.ID, 44772)
	if err != nil {
		t.Fatalf("Address: %v", err)
	}
	command(t, a, spec.ExecdToken, "mkdir -p /data && echo kept > /data/file")

	snapID := s.h.NewID(t)
	if err := rt.CommitSnapshot(ctx, spec.ID, snapID); err != nil {
		t.Fatalf("CommitSnapshot: %v", err)
	}
	t.Cleanup(func() { rt.DeleteSnapshot(context.WithoutCancel(ctx), snapID) })

	from := s.spec(t)
	from.Image, from.SnapshotID = "", snapID
	sb := s.create(t, rt, from)
	if sb.SnapshotID != snapID {
		t.Errorf("sandbox from a snapshot: SnapshotID %q, want %q", sb.SnapshotID, snapID)
	}
	b, err := rt.Address(ctx, from.ID, 44772)
	if err != nil {
		t.Fatalf("Address of the sandbox from the snapshot: %v", err)
	}
	if out := command(t, b, from.ExecdToken, "cat /data/file"); !slices.Equal(out, []string{"kept"}) {
		t.Errorf("sandbox from the snapshot reads %q, want the file written before the commit", out)
	}
	if err := rt.Delete(ctx, from.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := rt.DeleteSnapshot(ctx, snapID); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	wantClass(t, "second DeleteSnapshot", rt.DeleteSnapshot(ctx, snapID), runtime.ErrNotFound)
}

// waitState polls Get until the sandbox is in state.
func (s *suite) waitState(t *testing.T, rt runtime.Runtime, id, state string) {
	t.Helper()
	var last runtime.Sandbox
	var lastErr error
	if !s.wait(func() bool {
		last, lastErr = rt.Get(context.Background(), id)
		return lastErr == nil && last.State == state
	}) {
		t.Fatalf("sandbox %s: not %s within %v (last %q, %v)", id, state, s.h.Timeout, last.State, lastErr)
	}
}

func (s *suite) poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !s.wait(cond) {
		t.Fatalf("%s: not true within %v", what, s.h.Timeout)
	}
}

// wait calls cond with a growing delay until it holds or the suite's
// timeout passes.
func (s *suite) wait(cond func() bool) bool {
	deadline := time.Now().Add(s.h.Timeout)
	for delay := 5 * time.Millisecond; !cond(); delay = min(2*delay, 250*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
	}
	return true
}

func wantClass(t *testing.T, call string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want class %q", call, err, want)
	}
}

var client = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}

func url(a runtime.Address, path string) string {
	return "http://" + net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) + a.PathPrefix + path
}

// status makes one GET to execd and returns the status.
func status(t *testing.T, a runtime.Address, path, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url(a, path), nil)
	if token != "" {
		req.Header.Set(sandbox.AccessTokenHeader, token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// command runs a shell command through execd and returns its stdout
// lines; it fails the test unless the command completes with status 0.
func command(t *testing.T, a runtime.Address, token, cmd string) []string {
	t.Helper()
	body, _ := json.Marshal(sandbox.RunCommandRequest{Command: cmd})
	req, _ := http.NewRequest(http.MethodPost, url(a, "/command"), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(sandbox.AccessTokenHeader, token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST /command %q: %v", cmd, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /command %q: %s %s", cmd, resp.Status, b)
	}
	var out []string
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var ev sandbox.StreamEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("POST /command %q: bad event %q: %v", cmd, line, err)
		}
		switch ev.Type {
		case sandbox.EventStdout:
			out = append(out, ev.Text)
		case sandbox.EventError:
			t.Fatalf("POST /command %q failed: %s", cmd, describe(ev))
		case sandbox.EventExecutionComplete:
			done = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("POST /command %q: read stream: %v", cmd, err)
	}
	if !done {
		t.Fatalf("POST /command %q: stream ended without execution_complete", cmd)
	}
	return out
}

func describe(ev sandbox.StreamEvent) string {
	b, _ := json.Marshal(ev)
	return string(b)
}
