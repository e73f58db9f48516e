package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The TestSDK* tests drive the Go SDK (pkg/sandbox) against the real
// server, execd and Docker, directly and through the server proxy.

// sdkClient returns an SDK client for the server, through its proxy when
// proxy is set.
func sdkClient(t *testing.T, s *serverProc, proxy bool) *sandbox.Client {
	t.Helper()
	c, err := sandbox.NewClient(sandbox.WithDomain(s.base), sandbox.WithAPIKey(testAPIKey), sandbox.WithServerProxy(proxy),
		sandbox.WithRetry(sandbox.RetryPolicy{MaxRetries: 2, Initial: 50 * time.Millisecond}))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// sdkCtx is a context for one test, bounded well inside the suite's budget.
func sdkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sdkCreate creates a sandbox from the base image and kills it at the end.
func sdkCreate(t *testing.T, c *sandbox.Client, opts sandbox.CreateOptions) *sandbox.Sandbox {
	t.Helper()
	if opts.Image == "" && opts.SnapshotID == "" {
		opts.Image = ensureBaseImage(t)
	}
	if opts.Resources == nil {
		opts.Resources = map[string]string{"cpu": "1", "memory": "512Mi"}
	}
	sb, err := c.Create(sdkCtx(t), opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sb.Kill(ctx); err != nil && !sandbox.IsNotFound(err) {
			t.Errorf("Kill %s: %v", sb.ID(), err)
		}
	})
	return sb
}

// pollUntil calls cond until it is true or the deadline passes.
func pollUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func TestSDKLifecycle(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	c := sdkClient(t, s, false)
	ctx := sdkCtx(t)
	if err := c.Health(ctx); err != nil {
		t.Fatalf("Health: %v", err)
	}
	run := runID(t)
	sb := sdkCreate(t, c, sandbox.CreateOptions{Metadata: map[string]string{"run": run, "team": "sdk"}, Env: map[string]string{"GREETING": "hi"}})
	id := sb.ID()

	info, err := sb.Info(ctx)
	if err != nil || info.Status.State != sandbox.StateRunning || info.Metadata["run"] != run || info.ExpiresAt == nil {
		t.Fatalf("Info = %+v, %v; want Running with metadata and an expiry", info, err)
	}
	if ex, err := sb.Run(ctx, "echo $GREETING", sandbox.RunOptions{}); err != nil || ex.Text() != "hi" {
		t.Errorf("Run with the sandbox env = %+v, %v", ex, err)
	}

	// List with filters, the All iterator and Get.
	page, err := c.List(ctx, sandbox.ListOptions{States: []string{"running"}, Metadata: map[string]string{"run": run, "team": "sdk"}})
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != id {
		t.Errorf("List(running, run=%s) = %+v, %v; want just %s", run, page, err, id)
	}
	if page, err := c.List(ctx, sandbox.ListOptions{States: []string{sandbox.StatePaused}, Metadata: map[string]string{"run": run}}); err != nil || len(page.Items) != 0 {
		t.Errorf("List(paused) = %+v, %v; want nothing", page, err)
	}
	found := 0
	for it, err := range c.All(ctx, sandbox.ListOptions{PageSize: 1, Metadata: map[string]string{"run": run}}) {
		if err != nil {
			t.Fatalf("All: %v", err)
		}
		if it.ID == id {
			found++
		}
	}
	if found != 1 {
		t.Errorf("All found the sandbox %d times, want 1", found)
	}
	if got, err := c.Get(ctx, id); err != nil || got.ID != id {
		t.Errorf("Get = %+v, %v", got, err)
	}

	// Metadata, renew, endpoints, diagnostics.
	info, err = sb.PatchMetadata(ctx, map[string]*string{"stage": ptr("two"), "team": nil})
	if err != nil || info.Metadata["stage"] != "two" || info.Metadata["team"] != "" || info.Metadata["run"] != run {
		t.Errorf("PatchMetadata = %v, %v; want stage=two, no team, run kept", info.Metadata, err)
	}
	exp, err := sb.Renew(ctx, 20*time.Minute)
	if err != nil || time.Until(exp) < 19*time.Minute {
		t.Errorf("Renew(20m) = %v, %v", exp, err)
	}
	ep, err := sb.Endpoint(ctx, sandbox.ExecdPort)
	if err != nil || ep.Headers[sandbox.AccessTokenHeader] == "" || strings.Contains(ep.Endpoint, "://") {
		t.Errorf("Endpoint direct = %+v, %v; want an address with the token header", ep, err)
	}
	ep, err = c.Endpoint(ctx, id, sandbox.ExecdPort, true)
	if err != nil || !strings.Contains(ep.Endpoint, "/sandboxes/"+id+"/proxy/44772") {
		t.Errorf("Endpoint through the proxy = %+v, %v", ep, err)
	}
	if _, err := c.DiagnosticLogs(ctx, id, sandbox.DiagnosticsOptions{Tail: 10}); err != nil {
		t.Errorf("DiagnosticLogs: %v", err)
	}
	for name, f := range map[string]func() (string, error){
		"events":  func() (string, error) { return c.DiagnosticEvents(ctx, id, sandbox.DiagnosticsOptions{Limit: 5}) },
		"inspect": func() (string, error) { return c.DiagnosticInspect(ctx, id) },
		"summary": func() (string, error) {
			return c.DiagnosticSummary(ctx, id, sandbox.DiagnosticsOptions{Tail: 5, EventLimit: 5})
		},
	} {
		if text, err := f(); err != nil || text == "" {
			t.Errorf("Diagnostic %s = %q, %v; want text", name, text, err)
		}
	}

	// Pause and resume through the handle, then through the client.
	if err := sb.Pause(ctx); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	pollUntil(t, "Paused", 15*time.Second, func() bool {
		info, err := sb.Info(ctx)
		return err == nil && info.Status.State == sandbox.StatePaused
	})
	if _, err := c.Connect(ctx, id, sandbox.ConnectOptions{}); !errors.Is(err, sandbox.ErrNotReady) {
		t.Errorf("Connect to a paused sandbox = %v, want ErrNotReady", err)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatalf("Sandbox.Resume: %v", err)
	}
	if !sb.Healthy(ctx) {
		t.Error("Healthy after Resume = false")
	}
	if err := c.Pause(ctx, id); err != nil {
		t.Fatalf("Client.Pause: %v", err)
	}
	pollUntil(t, "Paused", 15*time.Second, func() bool {
		info, err := c.Get(ctx, id)
		return err == nil && info.Status.State == sandbox.StatePaused
	})
	resumed, err := sdkClient(t, s, true).Resume(ctx, id, sandbox.ConnectOptions{})
	if err != nil {
		t.Fatalf("Client.Resume through the proxy: %v", err)
	}
	if ex, err := resumed.Run(ctx, "echo back", sandbox.RunOptions{}); err != nil || ex.Text() != "back" {
		t.Errorf("Run after Resume = %+v, %v", ex, err)
	}

	// Connect with a second client, direct and through the proxy.
	for _, proxy := range []bool{false, true} {
		other, err := sdkClient(t, s, proxy).Connect(ctx, id, sandbox.ConnectOptions{})
		if err != nil {
			t.Fatalf("Connect (proxy %v): %v", proxy, err)
		}
		if ex, err := other.Run(ctx, "echo connected", sandbox.RunOptions{}); err != nil || ex.Text() != "connected" {
			t.Errorf("Run after Connect (proxy %v) = %+v, %v", proxy, ex, err)
		}
	}

	if err := sb.Kill(ctx); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if _, err := c.Get(ctx, id); !sandbox.IsNotFound(err) {
		t.Errorf("Get after Kill = %v, want IsNotFound", err)
	}
	if err := c.Kill(ctx, id); !sandbox.IsNotFound(err) {
		t.Errorf("Kill twice = %v, want IsNotFound", err)
	}
	if sb.Healthy(ctx) {
		t.Error("Healthy after Kill = true")
	}
}

// TestSDKCreateFailure: an entrypoint that exits at once either makes
// Create fail (when the container stops before execd answers: 500
// SANDBOX_START_FAILED, nothing left behind) or, when execd answered
// first, leaves a sandbox that the engine reports as ended; both are
// legitimate orders of two concurrent starts, and both are checked.
func TestSDKCreateFailure(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	c := sdkClient(t, s, false)
	ctx := sdkCtx(t)
	run := runID(t)
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Image: ensureBaseImage(t), Entrypoint: []string{"sh", "-c", "exit 3"},
		Metadata: map[string]string{"run": run}, ReadyTimeout: 15 * time.Second,
	})
	var ae *sandbox.APIError
	if err == nil {
		t.Logf("execd answered before the entrypoint exited; checking the sandbox ends Failed")
		defer sb.Kill(ctx)
		poll(t, "the sandbox whose entrypoint exited to be reported Failed", func() bool {
			info, err := sb.Info(ctx)
			return err == nil && info.Status.State == sandbox.StateFailed && strings.Contains(info.Status.Message, "3")
		})
		return
	}
	t.Logf("Create with an exiting entrypoint: %v", err)
	switch {
	case errors.As(err, &ae):
		// The server saw the exit before execd answered.
		if ae.StatusCode != 500 || ae.Code != "SANDBOX_START_FAILED" || !strings.Contains(ae.Message, "code 3") {
			t.Errorf("Create error = %v, want a 500 SANDBOX_START_FAILED naming exit code 3", err)
		}
	case errors.Is(err, sandbox.ErrNotReady):
		// execd answered the server first, then the entrypoint exited
		// while the SDK waited for /ping: it must notice the Failed state.
		if !strings.Contains(err.Error(), sandbox.StateFailed) || !strings.Contains(err.Error(), "3") {
			t.Errorf("Create error = %v, want ErrNotReady naming state Failed and exit code 3", err)
		}
	default:
		t.Errorf("Create error = %v, want a 500 SANDBOX_START_FAILED or ErrNotReady with state Failed", err)
	}
	page, err := c.List(ctx, sandbox.ListOptions{Metadata: map[string]string{"run": run}})
	if err != nil || len(page.Items) != 0 {
		t.Errorf("List after the failed Create = %+v, %v; want no sandbox", page.Items, err)
	}
	if _, err := c.Create(ctx, sandbox.CreateOptions{Image: "opensandbox-test/does-not-exist:never"}); !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Code != "IMAGE_PULL_FAILED" {
		t.Errorf("Create from a missing image = %v, want 400 IMAGE_PULL_FAILED", err)
	}
}

func TestSDKCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	id := sdkCreate(t, sdkClient(t, s, false), sandbox.CreateOptions{}).ID()
	for _, proxy := range []bool{false, true} {
		t.Run(fmt.Sprintf("proxy=%v", proxy), func(t *testing.T) {
			ctx := sdkCtx(t)
			sb, err := sdkClient(t, s, proxy).Connect(ctx, id, sandbox.ConnectOptions{})
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			var calls []string
			h := &sandbox.Handlers{
				OnInit:     func(string) { calls = append(calls, "init") },
				OnStdout:   func(l sandbox.OutputLine) { calls = append(calls, "out:"+l.Text) },
				OnStderr:   func(l sandbox.OutputLine) { calls = append(calls, "err:"+l.Text) },
				OnComplete: func(time.Duration) { calls = append(calls, "complete") },
				OnError:    func(e sandbox.StreamError) { calls = append(calls, "error:"+e.Value) },
			}
			ex, err := sb.Run(ctx, "echo a; echo; echo c; echo b >&2", sandbox.RunOptions{Handlers: h})
			if err != nil || ex.ExitCode != 0 || ex.Text() != "a\n\nc" || len(ex.Stderr) != 1 || ex.Stderr[0].Text != "b" || ex.ID == "" {
				t.Errorf("Run = %+v, %v", ex, err)
			}
			if calls[0] != "init" || calls[len(calls)-1] != "complete" || strings.Join(filter(calls, "out:"), ",") != "out:a,out:,out:c" {
				t.Errorf("handler calls = %q", calls)
			}

			calls = nil
			ex, err = sb.Run(ctx, "exit 3", sandbox.RunOptions{Handlers: h})
			if err != nil || ex.ExitCode != 3 || ex.Error == nil || calls[len(calls)-1] != "error:3" {
				t.Errorf("Run(exit 3) = %+v, %v, calls %q", ex, err, calls)
			}
			ex, err = sb.Run(ctx, "echo $FOO; pwd", sandbox.RunOptions{Env: map[string]string{"FOO": "bar"}, Cwd: "/tmp"})
			if err != nil || ex.Text() != "bar\n/tmp" {
				t.Errorf("Run with env and cwd = %q, %v", ex.Text(), err)
			}
			start := time.Now()
			ex, err = sb.Run(ctx, "sleep 30", sandbox.RunOptions{Timeout: 300 * time.Millisecond})
			if err != nil || ex.ExitCode != 143 || ex.Error == nil || time.Since(start) > 10*time.Second {
				t.Errorf("Run with timeout = %+v, %v after %v; want exit 143", ex, err, time.Since(start))
			}
			ex, err = sb.Run(ctx, "cd /nonexistent-dir", sandbox.RunOptions{Cwd: "/nonexistent-dir"})
			if err != nil || ex.Error == nil || ex.ExitCode == 0 {
				t.Errorf("Run in a missing cwd = %+v, %v; want a failed execution", ex, err)
			}

			// Background: status, logs, interrupt.
			ex, err = sb.Run(ctx, "echo started; sleep 30", sandbox.RunOptions{Background: true})
			if err != nil || ex.ID == "" {
				t.Fatalf("Run(background) = %+v, %v", ex, err)
			}
			var logs string
			var cursor int64
			pollUntil(t, "background output", 10*time.Second, func() bool {
				text, next, err := sb.CommandLogs(ctx, ex.ID, cursor)
				if err != nil {
					t.Fatalf("CommandLogs: %v", err)
				}
				logs, cursor = logs+text, next
				return strings.Contains(logs, "started")
			})
			if st, err := sb.CommandStatus(ctx, ex.ID); err != nil || !st.Running {
				t.Errorf("CommandStatus while running = %+v, %v", st, err)
			}
			if err := sb.Interrupt(ctx, ex.ID); err != nil {
				t.Fatalf("Interrupt: %v", err)
			}
			pollUntil(t, "interrupted command", 10*time.Second, func() bool {
				st, err := sb.CommandStatus(ctx, ex.ID)
				return err == nil && !st.Running && st.ExitCode != nil && *st.ExitCode == 143
			})
			if _, err := sb.CommandStatus(ctx, "no-such-command"); !sandbox.IsNotFound(err) {
				t.Errorf("CommandStatus(unknown) = %v, want IsNotFound", err)
			}

			// Sessions keep state between runs.
			sid, err := sb.CreateSession(ctx, "/tmp")
			if err != nil {
				t.Fatalf("CreateSession: %v", err)
			}
			if ex, err := sb.RunInSession(ctx, sid, "cd /etc; export X=kept", sandbox.SessionRunOptions{}); err != nil || ex.ExitCode != 0 {
				t.Fatalf("RunInSession = %+v, %v", ex, err)
			}
			var seen []string
			ex, err = sb.RunInSession(ctx, sid, "pwd; echo $X", sandbox.SessionRunOptions{Handlers: &sandbox.Handlers{OnStdout: func(l sandbox.OutputLine) { seen = append(seen, l.Text) }}})
			if err != nil || ex.Text() != "/etc\nkept" || len(seen) != 2 || ex.ID != sid {
				t.Errorf("RunInSession state = %+v, %v (handler %q)", ex, err, seen)
			}
			if ex, err := sb.RunInSession(ctx, sid, "sleep 30", sandbox.SessionRunOptions{Timeout: 300 * time.Millisecond}); err != nil || ex.ExitCode == 0 {
				t.Errorf("RunInSession with timeout = %+v, %v; want a failure", ex, err)
			}
			if ex, err := sb.RunInSession(ctx, sid, "false", sandbox.SessionRunOptions{Cwd: "/"}); err != nil || ex.ExitCode != 1 {
				t.Errorf("RunInSession(false) = %+v, %v; want exit 1", ex, err)
			}
			if err := sb.DeleteSession(ctx, sid); err != nil {
				t.Fatalf("DeleteSession: %v", err)
			}
			if _, err := sb.RunInSession(ctx, sid, "true", sandbox.SessionRunOptions{}); !sandbox.IsNotFound(err) {
				t.Errorf("RunInSession after DeleteSession = %v, want IsNotFound", err)
			}
		})
	}
}

func filter(ss []string, prefix string) []string {
	var out []string
	for _, s := range ss {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func TestSDKFiles(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	id := sdkCreate(t, sdkClient(t, s, false), sandbox.CreateOptions{}).ID()
	for _, proxy := range []bool{false, true} {
		t.Run(fmt.Sprintf("proxy=%v", proxy), func(t *testing.T) {
			ctx := sdkCtx(t)
			sb, err := sdkClient(t, s, proxy).Connect(ctx, id, sandbox.ConnectOptions{})
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			dir := fmt.Sprintf("/tmp/sdk-proxy-%v", proxy)
			if err := sb.Mkdir(ctx, dir+"/sub", sandbox.Permission{}); err != nil {
				t.Fatalf("Mkdir: %v", err)
			}
			a := dir + "/a.txt"
			if err := sb.WriteFile(ctx, a, []byte("hello world hello"), sandbox.WriteOptions{Mode: 600}); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			st, err := sb.Stat(ctx, a, dir+"/sub")
			if err != nil || st[a].Mode != 600 || st[a].Size != 17 || st[a].Type != sandbox.FileTypeFile || st[dir+"/sub"].Mode != 755 || st[dir+"/sub"].Type != sandbox.FileTypeDirectory {
				t.Errorf("Stat = %+v, %v", st, err)
			}
			if data, err := sb.ReadFile(ctx, a); err != nil || string(data) != "hello world hello" {
				t.Errorf("ReadFile = %q, %v", data, err)
			}
			for _, tc := range []struct {
				o    sandbox.OpenOptions
				want string
			}{{sandbox.OpenOptions{Offset: 6, Length: 5}, "world"}, {sandbox.OpenOptions{Offset: 12}, "hello"}} {
				rc, err := sb.Open(ctx, a, tc.o)
				if err != nil {
					t.Fatalf("Open(%+v): %v", tc.o, err)
				}
				got, _ := io.ReadAll(rc)
				rc.Close()
				if string(got) != tc.want {
					t.Errorf("Open(%+v) = %q, want %q", tc.o, got, tc.want)
				}
			}
			if n, err := sb.Replace(ctx, a, "hello", "bye"); err != nil || n != 2 {
				t.Errorf("Replace = %d, %v; want 2", n, err)
			}
			if data, _ := sb.ReadFile(ctx, a); string(data) != "bye world bye" {
				t.Errorf("after Replace the file is %q", data)
			}
			if err := sb.Chmod(ctx, a, sandbox.Permission{Mode: 640}); err != nil {
				t.Errorf("Chmod: %v", err)
			}
			if st, err := sb.Stat(ctx, a); err != nil || st[a].Mode != 640 {
				t.Errorf("Stat after Chmod = %+v, %v; want mode 640", st[a], err)
			}

			// 20 MiB streamed up and down, checked byte for byte.
			const size = 20 << 20
			big := dir + "/sub/big.bin"
			src := func() io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{1}), size) }
			if err := sb.Upload(ctx, big, src(), sandbox.WriteOptions{}); err != nil {
				t.Fatalf("Upload 20 MiB: %v", err)
			}
			want, got := sha256.New(), sha256.New()
			io.Copy(want, src())
			if n, err := sb.Download(ctx, big, got); err != nil || n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
				t.Errorf("Download = %d bytes, %v, same content %v; want %d identical bytes", n, err, bytes.Equal(got.Sum(nil), want.Sum(nil)), size)
			}

			entries, err := sb.ListDir(ctx, dir, 2)
			if err != nil || strings.Join(paths(entries), ",") != strings.Join([]string{a, dir + "/sub", big}, ",") {
				t.Errorf("ListDir = %v, %v", paths(entries), err)
			}
			if found, err := sb.Search(ctx, dir, "*.bin"); err != nil || len(found) != 1 || found[0].Path != big || found[0].Size != size {
				t.Errorf("Search(*.bin) = %+v, %v", found, err)
			}
			b := dir + "/b.txt"
			if err := sb.Move(ctx, sandbox.RenameFileItem{Src: a, Dest: b}); err != nil {
				t.Fatalf("Move: %v", err)
			}
			if _, err := sb.Stat(ctx, a); !sandbox.IsNotFound(err) {
				t.Errorf("Stat of the moved source = %v, want IsNotFound", err)
			}
			if err := sb.Remove(ctx, b); err != nil {
				t.Errorf("Remove: %v", err)
			}
			if _, err := sb.Stat(ctx, b); !sandbox.IsNotFound(err) {
				t.Errorf("Stat after Remove = %v, want IsNotFound", err)
			}
			if err := sb.RemoveDirs(ctx, dir); err != nil {
				t.Errorf("RemoveDirs: %v", err)
			}
			if _, err := sb.Stat(ctx, dir); !sandbox.IsNotFound(err) {
				t.Errorf("Stat after RemoveDirs = %v, want IsNotFound", err)
			}
		})
	}
}

func paths(fs []sandbox.FileInfo) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Path
	}
	return out
}

func TestSDKMetrics(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	id := sdkCreate(t, sdkClient(t, s, false), sandbox.CreateOptions{}).ID()
	ctx := sdkCtx(t)
	for _, proxy := range []bool{false, true} {
		sb, err := sdkClient(t, s, proxy).Connect(ctx, id, sandbox.ConnectOptions{})
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		m, err := sb.Metrics(ctx)
		if err != nil || m.CPUCount <= 0 || m.MemTotalMiB < 500 || m.MemTotalMiB > 520 {
			t.Errorf("Metrics (proxy %v) = %+v, %v; want 512 MiB total", proxy, m, err)
		}
	}
	sb, _ := sdkClient(t, s, false).Connect(ctx, id, sandbox.ConnectOptions{SkipHealthCheck: true})
	stop := errors.New("two samples")
	var samples []sandbox.Metrics
	err := sb.WatchMetrics(ctx, func(m sandbox.Metrics) error {
		samples = append(samples, m)
		if len(samples) == 2 {
			return stop
		}
		return nil
	})
	if err != stop || len(samples) != 2 || samples[1].Timestamp <= samples[0].Timestamp {
		t.Errorf("WatchMetrics = %v with %+v, want 2 samples in time order", err, samples)
	}
}

func TestSDKSnapshots(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{})
	c := sdkClient(t, s, false)
	ctx := sdkCtx(t)
	sb := sdkCreate(t, c, sandbox.CreateOptions{})
	if err := sb.WriteFile(ctx, "/root/kept.txt", []byte("in the snapshot\n"), sandbox.WriteOptions{}); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	snap, err := c.CreateSnapshot(ctx, sb.ID(), "sdk-snap")
	if err != nil || snap.ID == "" || snap.Name != "sdk-snap" {
		t.Fatalf("CreateSnapshot = %+v, %v", snap, err)
	}
	t.Cleanup(func() { c.DeleteSnapshot(context.Background(), snap.ID) })
	if snap, err = c.WaitSnapshot(ctx, snap.ID); err != nil || snap.Status.State != sandbox.SnapshotReady {
		t.Fatalf("WaitSnapshot = %+v, %v", snap, err)
	}
	if got, err := c.GetSnapshot(ctx, snap.ID); err != nil || got.SandboxID != sb.ID() {
		t.Errorf("GetSnapshot = %+v, %v", got, err)
	}
	list, err := c.ListSnapshots(ctx, sandbox.SnapshotListOptions{SandboxID: sb.ID(), States: []string{sandbox.SnapshotReady}})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != snap.ID {
		t.Errorf("ListSnapshots = %+v, %v", list, err)
	}

	// Sandbox.Snapshot creates and waits in one call.
	snap2, err := sb.Snapshot(ctx, "")
	if err != nil || snap2.Status.State != sandbox.SnapshotReady {
		t.Errorf("Sandbox.Snapshot = %+v, %v", snap2, err)
	} else if err := c.DeleteSnapshot(ctx, snap2.ID); err != nil {
		t.Errorf("DeleteSnapshot(unused) = %v", err)
	}

	from := sdkCreate(t, c, sandbox.CreateOptions{SnapshotID: snap.ID})
	if data, err := from.ReadFile(ctx, "/root/kept.txt"); err != nil || string(data) != "in the snapshot\n" {
		t.Errorf("ReadFile in the sandbox from the snapshot = %q, %v", data, err)
	}
	if err := c.DeleteSnapshot(ctx, snap.ID); !sandbox.IsConflict(err) {
		t.Errorf("DeleteSnapshot while in use = %v, want IsConflict", err)
	}
	if err := from.Kill(ctx); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := c.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Errorf("DeleteSnapshot: %v", err)
	}
	if _, err := c.GetSnapshot(ctx, snap.ID); !sandbox.IsNotFound(err) {
		t.Errorf("GetSnapshot after delete = %v, want IsNotFound", err)
	}
}
