package taskexecutor

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestMain lets the test binary serve as the shim, as the executable does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(RunShim(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func open(t *testing.T, dir string) *Executor {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(Config{DataDir: dir, ShimCommand: []string{self, "shim"}, StopGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func shTask(name, script string) Task {
	return Task{Name: name, Process: &Process{Command: []string{"sh", "-c"}, Args: []string{script}}}
}

// waitFor polls e until cond holds for task name, or fails after 20 s.
func waitFor(t *testing.T, e *Executor, name string, what string, cond func(Task, error) bool) Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := e.Get(name)
		if cond(got, err) {
			return got
		}
		if time.Now().After(deadline) {
			js, _ := json.Marshal(got)
			t.Fatalf("task %s: not %s within 20s: %s (err %v)", name, what, js, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func terminated(t *testing.T, e *Executor, name string) *Terminated {
	t.Helper()
	got := waitFor(t, e, name, "terminated", func(t Task, err error) bool {
		return err == nil && t.ProcessStatus != nil && t.ProcessStatus.Terminated != nil
	})
	return got.ProcessStatus.Terminated
}

func TestRunAndExitCodes(t *testing.T) {
	e := open(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "out")
	ok := shTask("ok", `printf "$GREETING" > "$OUT"`)
	ok.Process.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hello"}, {Name: "OUT", Value: out}}
	if _, err := e.Create(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(shTask("fail", "exit 3")); err != nil {
		t.Fatal(err)
	}
	wd := t.TempDir()
	pwd := Task{Name: "pwd", Process: &Process{Command: []string{"/bin/sh", "-c", `pwd > pwd.txt`}, WorkingDir: wd}}
	if _, err := e.Create(pwd); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(Task{Name: "missing", Process: &Process{Command: []string{"no-such-command-xyz"}}}); err != nil {
		t.Fatal(err)
	}

	term := terminated(t, e, "ok")
	if term.ExitCode != 0 || term.Reason != ReasonCompleted || term.StartedAt.IsZero() || term.FinishedAt.Before(&term.StartedAt) {
		t.Errorf("ok: %+v, want exit 0 Completed with start <= finish", term)
	}
	if data, err := os.ReadFile(out); err != nil || string(data) != "hello" {
		t.Errorf("ok wrote %q (%v), want hello", data, err)
	}
	if term := terminated(t, e, "fail"); term.ExitCode != 3 || term.Reason != ReasonError {
		t.Errorf("fail: %+v, want exit 3 Error", term)
	}
	terminated(t, e, "pwd")
	if data, err := os.ReadFile(filepath.Join(wd, "pwd.txt")); err != nil || strings.TrimSpace(string(data)) != wd {
		t.Errorf("pwd wrote %q (%v), want %s", data, err, wd)
	}
	if term := terminated(t, e, "missing"); term.ExitCode != 127 || term.Reason != ReasonStartError || !strings.Contains(term.Message, "not found") {
		t.Errorf("missing: %+v, want 127 StartError not found", term)
	}
	for name, want := range map[string]State{"ok": StateSucceeded, "fail": StateFailed, "missing": StateFailed} {
		got, _ := e.Get(name)
		if s := StateOf(&got); s != want {
			t.Errorf("StateOf(%s) = %s, want %s", name, s, want)
		}
	}
	if got := e.List(); len(got) != 4 || got[0].Name != "fail" || got[3].Name != "pwd" {
		t.Errorf("List: %d tasks, want 4 sorted by name", len(got))
	}
}

// TestRestart: an executor opened again on the same data directory keeps
// finished tasks without running them again and watches a running one to
// its end.
func TestRestart(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	e := open(t, dir)
	count := filepath.Join(work, "count")
	gate := filepath.Join(work, "gate")
	if _, err := e.Create(shTask("once", "echo run >> "+count)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(shTask("slow", "while [ ! -e "+gate+" ]; do sleep 0.05; done; exit 5")); err != nil {
		t.Fatal(err)
	}
	terminated(t, e, "once")
	waitFor(t, e, "slow", "running", func(t Task, err error) bool {
		return err == nil && t.ProcessStatus.Running != nil
	})
	before, _ := e.Get("once")
	e.Close()

	e2 := open(t, dir)
	after, err := e2.Get("once")
	if err != nil || after.ProcessStatus.Terminated == nil ||
		!after.ProcessStatus.Terminated.FinishedAt.Equal(&before.ProcessStatus.Terminated.FinishedAt) {
		t.Fatalf("after restart once = %+v (%v), want the same terminated state", after.ProcessStatus, err)
	}
	slow, err := e2.Get("slow")
	if err != nil || slow.ProcessStatus.Running == nil {
		t.Fatalf("after restart slow = %+v (%v), want running", slow.ProcessStatus, err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if term := terminated(t, e2, "slow"); term.ExitCode != 5 {
		t.Errorf("slow after restart: %+v, want exit 5", term)
	}
	if data, _ := os.ReadFile(count); string(data) != "run\n" {
		t.Errorf("once ran %q, want exactly once", data)
	}
}

// TestStop: deleting a running task stops it (SIGTERM, then SIGKILL for one
// that ignores SIGTERM) and removes it.
func TestStop(t *testing.T) {
	e := open(t, t.TempDir())
	pidDir := t.TempDir()
	if _, err := e.Create(shTask("polite", "echo $$ > "+pidDir+"/polite; exec sleep 60")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create(shTask("stubborn", "trap '' TERM; echo $$ > "+pidDir+"/stubborn; while :; do sleep 0.05; done")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"polite", "stubborn"} {
		waitFor(t, e, n, "running with its pid written", func(t Task, err error) bool {
			_, ferr := os.Stat(filepath.Join(pidDir, n))
			return err == nil && ferr == nil
		})
	}
	for _, n := range []string{"polite", "stubborn"} {
		if err := e.Delete(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"polite", "stubborn"} {
		waitFor(t, e, n, "removed", func(_ Task, err error) bool { return err != nil })
		data, _ := os.ReadFile(filepath.Join(pidDir, n))
		if _, err := os.Stat("/proc/" + strings.TrimSpace(string(data))); err == nil {
			if procStart(atoi(t, strings.TrimSpace(string(data)))) != 0 {
				t.Errorf("%s: process %s still runs after the task was removed", n, data)
			}
		}
	}
	if err := e.Delete("polite"); err == nil {
		t.Error("deleting a removed task: no error")
	}
}

func atoi(t *testing.T, s string) int {
	var n int
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a pid: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func TestTimeout(t *testing.T) {
	e := open(t, t.TempDir())
	one := int64(1)
	task := shTask("slow", "sleep 30")
	task.Process.TimeoutSeconds = &one
	start := time.Now()
	if _, err := e.Create(task); err != nil {
		t.Fatal(err)
	}
	term := terminated(t, e, "slow")
	if term.Reason != ReasonTimeout || term.ExitCode == 0 {
		t.Errorf("timed out task: %+v, want reason Timeout and a non-zero exit code", term)
	}
	if d := time.Since(start); d < time.Second || d > 15*time.Second {
		t.Errorf("stopped after %v, want about 1 s", d)
	}
	got, _ := e.Get("slow")
	if StateOf(&got) != StateFailed {
		t.Errorf("timed-out task counts as %s, want Failed", StateOf(&got))
	}
}

// TestHTTP drives the API: setTasks replaces the list, getTasks and
// tasks/{id} read it, and bad input gets {code, message} errors.
func TestHTTP(t *testing.T) {
	e := open(t, t.TempDir())
	srv := httptest.NewServer(Handler(e, nil))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}
	ctx := context.Background()

	got, err := c.SetTasks(ctx, []Task{shTask("a", "exit 0"), shTask("b", "sleep 60")})
	if err != nil || len(got) != 2 {
		t.Fatalf("setTasks: %d tasks, %v", len(got), err)
	}
	terminated(t, e, "a")
	got, err = c.SetTasks(ctx, []Task{shTask("a", "exit 0")})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, e, "b", "removed", func(_ Task, err error) bool { return err != nil })
	list, err := c.GetTasks(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "a" || list[0].ProcessStatus.Terminated == nil {
		t.Fatalf("getTasks = %+v, %v; want a, terminated", list, err)
	}

	for _, tc := range []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"POST", "/tasks", `{"name":"x","process":{"command":[]}}`, 400, "process.command"},
		{"POST", "/tasks", `{"name":"x"}`, 400, "process is required"},
		{"POST", "/tasks", `{"name":"../x","process":{"command":["true"]}}`, 400, "name"},
		{"POST", "/tasks", `{"name":"x","process":{"command":["true"],"env":[{"name":"A","valueFrom":{"fieldRef":{"fieldPath":"x"}}}]}}`, 400, "valueFrom"},
		{"POST", "/tasks", `{"name":"x","process":{"command":["true"],"timeoutSeconds":0}}`, 400, "timeoutSeconds"},
		{"POST", "/tasks", `{"name":`, 400, "invalid request body"},
		{"POST", "/tasks", `{"name":"x","process":{"command":["true"]},"bogus":1}`, 400, "bogus"},
		{"POST", "/setTasks", `{}`, 400, "invalid request body"},
		{"POST", "/tasks", `{"name":"a","process":{"command":["false"]}}`, 409, "another process"},
		{"GET", "/tasks/nope", ``, 404, "not found"},
		{"DELETE", "/tasks/nope", ``, 404, "not found"},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, bytes.NewBufferString(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body Error
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || derr != nil || body.Code != http.StatusText(tc.status) || !strings.Contains(body.Message, tc.msg) {
			t.Errorf("%s %s %s: %d %+v (%v), want %d with a message about %q", tc.method, tc.path, tc.body, resp.StatusCode, body, derr, tc.status, tc.msg)
		}
	}
	// Creating the same task again is idempotent.
	resp, err := http.Post(srv.URL+"/tasks", "application/json", bytes.NewBufferString(`{"name":"a","process":{"command":["sh","-c"],"args":["exit 0"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("creating an existing identical task: %s, want 201", resp.Status)
	}
	req, _ := http.NewRequest("DELETE", srv.URL+"/tasks/a", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE /tasks/a: %s, want 204", resp.Status)
	}
	if _, err := e.Get("a"); err == nil {
		t.Error("a finished task is still listed after DELETE")
	}
}

// TestSidecarMode runs a task the way the sidecar does: in the root and
// with the environment of the process marked with MainContainerEnv (here
// a process of this machine, so the root is the same; what is tested is
// finding it, entering its root and taking its environment). Needs root
// for chroot.
func TestSidecarMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	marker := "sbx-" + strings.ReplaceAll(t.Name(), "/", "-")
	dir := t.TempDir()
	main := exec.Command("sleep", "60")
	main.Env = append(os.Environ(), MainContainerEnv+"="+marker, "FROM_MAIN=yes")
	if err := main.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = main.Process.Kill(); _ = main.Wait() })
	self, _ := os.Executable()
	e, err := Open(Config{DataDir: t.TempDir(), SidecarMode: true, MainContainerName: marker, ShimCommand: []string{self, "shim"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	task := shTask("side", `printf "$FROM_MAIN $OWN $(pwd)" > `+dir+`/out`)
	task.Process.Env = []corev1.EnvVar{{Name: "OWN", Value: "mine"}}
	if _, err := e.Create(task); err != nil {
		t.Fatal(err)
	}
	if term := terminated(t, e, "side"); term.ExitCode != 0 {
		t.Fatalf("task: %+v", term)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(data) != "yes mine /" {
		t.Errorf("task wrote %q (%v), want %q", data, err, "yes mine /")
	}

	// With no marked process the task waits, and starts once one appears.
	e2, err := Open(Config{DataDir: t.TempDir(), SidecarMode: true, MainContainerName: marker + "-later", ShimCommand: []string{self, "shim"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e2.Close)
	if _, err := e2.Create(shTask("later", "exit 4")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e2, "later", "waiting for the sandbox container", func(t Task, err error) bool {
		return err == nil && t.ProcessStatus.Waiting != nil && t.ProcessStatus.Waiting.Reason == ReasonMainContainerWait
	})
	later := exec.Command("sleep", "60")
	later.Env = append(os.Environ(), MainContainerEnv+"="+marker+"-later")
	if err := later.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = later.Process.Kill(); _ = later.Wait() })
	if term := terminated(t, e2, "later"); term.ExitCode != 4 {
		t.Errorf("later: %+v, want exit 4", term)
	}
}
