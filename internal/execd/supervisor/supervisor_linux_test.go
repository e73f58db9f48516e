package supervisor

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitTimeout bounds every wait on a child; generous for -race on busy machines.
const waitTimeout = 20 * time.Second

type result struct {
	code int
	err  error
}

// harness is one supervisor running in the background of a test.
type harness struct {
	t      *testing.T
	dir    string
	sup    *Supervisor
	cancel context.CancelFunc
	done   chan result
	logs   *syncBuffer
}

// startSupervisor runs a supervisor whose server and entrypoint are this test
// binary playing the given roles. mod may adjust the config first.
func startSupervisor(t *testing.T, serverRole, entryRole string, mod func(*Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	logs := &syncBuffer{}
	cfg := Config{
		Entrypoint: []string{self(), "-test.run=^$"},
		Env:        helperEnv(dir, entryRole),
		ServerPath: self(),
		ServerArgs: []string{"-test.run=^$"},
		ServerEnv:  helperEnv(dir, serverRole),
		StopGrace:  5 * time.Second,
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, dir: dir, sup: New(cfg), cancel: cancel, done: make(chan result, 1), logs: logs}
	go func() {
		code, err := h.sup.Run(ctx)
		h.done <- result{code, err}
	}()
	t.Cleanup(func() {
		// Never leave a supervisor running into the next test. Logs are
		// shown on failure, or always with SUPERVISOR_TEST_LOG=1.
		cancel()
		select {
		case r := <-h.done:
			h.done <- r
		case <-time.After(waitTimeout):
			t.Errorf("supervisor still running at cleanup")
		}
		if t.Failed() || os.Getenv("SUPERVISOR_TEST_LOG") != "" {
			t.Logf("supervisor log:\n%s", logs.String())
		}
	})
	return h
}

// wait returns Run's result, failing the test if it does not come in time.
func (h *harness) wait() result {
	h.t.Helper()
	select {
	case r := <-h.done:
		h.done <- r // keep it for cleanup
		return r
	case <-time.After(waitTimeout):
		h.t.Fatalf("Run did not return within %v", waitTimeout)
		return result{}
	}
}

// waitFile waits until a child has written name and returns its content.
func (h *harness) waitFile(name string) string {
	h.t.Helper()
	var content []byte
	ok := poll(waitTimeout, func() bool {
		b, err := os.ReadFile(filepath.Join(h.dir, name))
		content = b
		return err == nil
	})
	if !ok {
		h.t.Fatalf("%s was not written within %v", name, waitTimeout)
	}
	return string(content)
}

// assertNoChildren fails if this process still has children: Run must reap
// everything it started before returning.
func assertNoChildren(t *testing.T) {
	t.Helper()
	for _, pid := range otherProcesses() {
		if st, err := procStat(pid); err == nil && st.ppid == os.Getpid() {
			t.Errorf("child %d (state %s) left behind after Run returned", pid, st.state)
		}
	}
}

func TestRunEmptyEntrypoint(t *testing.T) {
	code, err := Run(context.Background(), Config{})
	if !errors.Is(err, ErrNoEntrypoint) || code != exitSupervisorFailure {
		t.Fatalf("Run(empty entrypoint) = %d, %v; want %d, %v", code, err, exitSupervisorFailure, ErrNoEntrypoint)
	}
}

func TestExitCodePropagates(t *testing.T) {
	tests := []struct {
		name string
		role string
		env  []string
		want int
	}{
		{"exit 0", "exit", []string{codeEnv + "=0"}, 0},
		{"exit 3", "exit", []string{codeEnv + "=3"}, 3},
		{"SIGKILL", "kill-self", []string{signalEnv + "=" + strconv.Itoa(int(syscall.SIGKILL))}, 128 + 9},
		{"SIGTERM", "kill-self", []string{signalEnv + "=" + strconv.Itoa(int(syscall.SIGTERM))}, 128 + 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startSupervisor(t, "serve", tt.role, func(c *Config) { c.Env = append(c.Env, tt.env...) })
			r := h.wait()
			if r.err != nil || r.code != tt.want {
				t.Errorf("Run() = %d, %v; want %d, nil", r.code, r.err, tt.want)
			}
			assertNoChildren(t)
		})
	}
}

func TestShutdownStopsEntrypointThenServer(t *testing.T) {
	tests := []struct {
		name     string
		stop     func(h *harness)
		wantSig  string
		wantCode int
	}{
		{"context cancel", func(h *harness) { h.cancel() }, syscall.SIGTERM.String(), 0},
		{"SIGTERM", func(h *harness) { sendSelf(h.t, syscall.SIGTERM) }, syscall.SIGTERM.String(), 0},
		{"SIGINT", func(h *harness) { sendSelf(h.t, syscall.SIGINT) }, syscall.SIGINT.String(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startSupervisor(t, "serve", "wait-term", nil)
			if got := h.waitFile("server-ready"); !strings.Contains(got, "supervised=true") {
				t.Errorf("server saw IsSupervisedServer() false: %q", got)
			}
			h.waitFile("entry-ready")
			tt.stop(h)
			r := h.wait()
			if r.err != nil || r.code != tt.wantCode {
				t.Errorf("Run() = %d, %v; want %d, nil", r.code, r.err, tt.wantCode)
			}
			if got := h.waitFile("entry-stopped"); got != tt.wantSig {
				t.Errorf("entrypoint stopped by %q; want %q", got, tt.wantSig)
			}
			if got := h.waitFile("server-stopped"); got != "entry-stopped-first=true" {
				t.Errorf("server-stopped = %q; want the entrypoint stopped before the server", got)
			}
			assertNoChildren(t)
		})
	}
}

func TestShutdownEscalatesToSIGKILL(t *testing.T) {
	const grace = 300 * time.Millisecond
	h := startSupervisor(t, "serve-ignore-term", "ignore-term", func(c *Config) { c.StopGrace = grace })
	h.waitFile("server-ready")
	h.waitFile("entry-ready")
	start := time.Now()
	h.cancel()
	r := h.wait()
	if r.err != nil || r.code != 128+9 {
		t.Errorf("Run() = %d, %v; want %d, nil", r.code, r.err, 128+9)
	}
	// The entrypoint and then the server each used up their grace period.
	if el := time.Since(start); el < 2*grace {
		t.Errorf("Run returned %v after cancel; want at least 2×StopGrace = %v", el, 2*grace)
	}
	assertNoChildren(t)
}

func TestSignalsForwardedToEntrypointGroup(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGWINCH} {
		t.Run(sig.String(), func(t *testing.T) {
			h := startSupervisor(t, "serve", "trap", func(c *Config) {
				c.Env = append(c.Env, signalEnv+"="+strconv.Itoa(int(sig)))
			})
			h.waitFile("entry-ready")
			sendSelf(t, sig)
			r := h.wait()
			if r.err != nil || r.code != 0 {
				t.Errorf("Run() = %d, %v; want 0, nil", r.code, r.err)
			}
			if !exists(h.dir, "entry-got") {
				t.Errorf("entrypoint did not receive %v", sig)
			}
			if !exists(h.dir, "child-got") {
				t.Errorf("entrypoint's child did not receive %v", sig)
			}
			assertNoChildren(t)
		})
	}
}

func TestServerCrashIsRestarted(t *testing.T) {
	h := startSupervisor(t, "crash-once", "wait-term", nil)
	h.waitFile("entry-ready")
	// Only the second server incarnation writes server-ready.
	if got := h.waitFile("server-ready"); !strings.Contains(got, "supervised=true") {
		t.Errorf("restarted server saw IsSupervisedServer() false: %q", got)
	}
	if !poll(waitTimeout, func() bool { return h.sup.Restarts() == 1 }) {
		t.Fatalf("Restarts() = %d; want 1", h.sup.Restarts())
	}
	h.cancel()
	r := h.wait()
	if r.err != nil || r.code != 0 {
		t.Errorf("Run() = %d, %v; want 0, nil", r.code, r.err)
	}
	if got := h.sup.Restarts(); got != 1 {
		t.Errorf("Restarts() after Run = %d; want 1", got)
	}
	if !strings.Contains(h.logs.String(), "exited unexpectedly") {
		t.Errorf("server crash was not logged; log:\n%s", h.logs.String())
	}
	assertNoChildren(t)
}

func TestOrphanedGrandchildIsReaped(t *testing.T) {
	h := startSupervisor(t, "serve", "orphan-parent", nil)
	h.waitFile("entry-ready")
	pid, err := strconv.Atoi(h.waitFile("orphan-pid"))
	if err != nil {
		t.Fatalf("orphan-pid: %v", err)
	}
	// Its parent has exited: as a subreaper, this process adopts it.
	if !poll(waitTimeout, func() bool {
		st, err := procStat(pid)
		return err == nil && st.ppid == os.Getpid()
	}) {
		st, err := procStat(pid)
		t.Fatalf("orphan %d not reparented to the supervisor %d: %+v, %v", pid, os.Getpid(), st, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill orphan %d: %v", pid, err)
	}
	// Unreaped, it would stay a zombie (state Z) for ever.
	if !poll(waitTimeout, func() bool { return !procExists(pid) }) {
		st, _ := procStat(pid)
		t.Fatalf("orphan %d not reaped: state %q", pid, st.state)
	}
	h.cancel()
	if r := h.wait(); r.err != nil || r.code != 0 {
		t.Errorf("Run() = %d, %v; want 0, nil", r.code, r.err)
	}
	assertNoChildren(t)
}

func TestEntrypointCannotStart(t *testing.T) {
	tmp := t.TempDir()
	plain := filepath.Join(tmp, "plain")
	if err := os.WriteFile(plain, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "noexec"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		argv  []string
		dir   string
		want  int
		class error
	}{
		{"not in PATH", []string{"no-such-command-for-supervisor-test"}, "", 127, fs.ErrNotExist},
		{"missing path", []string{filepath.Join(tmp, "missing")}, "", 127, fs.ErrNotExist},
		{"not executable", []string{plain}, "", 126, fs.ErrPermission},
		{"directory", []string{tmp}, "", 126, fs.ErrPermission},
		{"in PATH, not executable", []string{"noexec"}, "", 126, fs.ErrPermission},
		{"missing working directory", []string{self()}, filepath.Join(tmp, "nowhere"), 126, fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startSupervisor(t, "serve", "exit", func(c *Config) {
				c.Entrypoint = tt.argv
				c.Dir = tt.dir
				c.Env = append(c.Env, "PATH="+bin)
			})
			r := h.wait()
			if r.code != tt.want || !errors.Is(r.err, tt.class) {
				t.Errorf("Run() = %d, %v; want %d and an error wrapping %v", r.code, r.err, tt.want, tt.class)
			}
			if !strings.Contains(h.logs.String(), "cannot start the entrypoint") {
				t.Errorf("start failure not logged; log:\n%s", h.logs.String())
			}
			assertNoChildren(t)
		})
	}
}

func TestEntrypointPathDirAndEnv(t *testing.T) {
	bin := t.TempDir()
	if err := os.Symlink(self(), filepath.Join(bin, "sv-entry")); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	h := startSupervisor(t, "serve", "report", func(c *Config) {
		c.Entrypoint = []string{"sv-entry", "-test.run=^$"}
		c.Dir = work
		c.Env = append(c.Env, "PATH="+bin, valueEnv+"=xyz", ServerMarkerEnv+"=1")
	})
	if r := h.wait(); r.err != nil || r.code != 0 {
		t.Fatalf("Run() = %d, %v; want 0, nil", r.code, r.err)
	}
	want := "wd=" + work + " value=xyz marker=false"
	if got := h.waitFile("report"); got != want {
		t.Errorf("entrypoint reported %q; want %q", got, want)
	}
	assertNoChildren(t)
}

func TestRunTwice(t *testing.T) {
	h := startSupervisor(t, "serve", "exit", nil)
	h.wait()
	if code, err := h.sup.Run(context.Background()); err == nil || code != exitSupervisorFailure {
		t.Errorf("second Run() = %d, %v; want %d and an error", code, err, exitSupervisorFailure)
	}
}

// sendSelf sends sig to this process, where the running supervisor receives it.
func sendSelf(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatalf("kill(self, %v): %v", sig, err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
