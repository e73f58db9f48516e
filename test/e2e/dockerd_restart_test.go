package e2e

import (
	"net/http"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// dockerdPidFile is where a dockerd started without --pidfile writes its
// pid; the test restarts that engine only.
const dockerdPidFile = "/var/run/docker.pid"

// TestDockerdRestart stops and starts the engine under a running server:
// while dockerd is down /health answers, /ready and engine-backed calls
// answer 503 RUNTIME_UNAVAILABLE; after it is back (live-restore, set up
// by make deps) the sandboxes are still Running and their execd answers
// through the server. It stops the machine's shared dockerd for a few
// seconds: run it alone (-run 'TestDockerdRestart$').
func TestDockerdRestart(t *testing.T) {
	s := startServer(t, serverOpts{})
	if h := os.Getenv("DOCKER_HOST"); h != "" && h != "unix:///var/run/docker.sock" {
		t.Fatalf("DOCKER_HOST=%s: this test restarts only the engine at /var/run/docker.sock", h)
	}
	if out, err := osexec.Command("docker", "info", "--format", "{{.LiveRestoreEnabled}}").Output(); err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Fatalf("the engine runs without live-restore (docker info: %q, %v): run `make deps`, which sets it in /etc/docker/daemon.json", out, err)
	}
	image := ensureBaseImage(t)
	plain := s.create(t, sandbox.CreateSandboxRequest{
		Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"sleep", "100000"}, Timeout: ptr[int64](600),
	})
	fenced := s.create(t, sandbox.CreateSandboxRequest{
		Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"sleep", "100000"}, Timeout: ptr[int64](600),
		NetworkPolicy: &sandbox.NetworkPolicy{DefaultAction: "deny"},
	})
	ids := []string{plain.ID, fenced.ID}
	echo := func(id string) {
		t.Helper()
		ex := s.execd(t, id, true).stream(t, "/command", sandbox.RunCommandRequest{Command: "echo alive-" + id[:8]})
		if joined(ex.stdout) != "alive-"+id[:8] {
			t.Fatalf("sandbox %s answered %q", id, ex.stdout)
		}
	}
	for _, id := range ids {
		echo(id)
	}

	argv, pid := runningDockerd(t)
	// Whatever happens below, leave an engine running.
	t.Cleanup(func() {
		if osexec.Command("docker", "info").Run() != nil {
			startDockerd(t, argv)
		}
	})
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stop dockerd %d: %v", pid, err)
	}
	pollUntil(t, "dockerd to exit", 60*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })

	// The engine is down.
	s.api(t, "GET", "/health", nil, http.StatusOK, nil)
	s.apiError(t, "GET", "/ready", nil, http.StatusServiceUnavailable, "RUNTIME_UNAVAILABLE")
	s.apiError(t, "GET", "/v1/sandboxes", nil, http.StatusServiceUnavailable, "RUNTIME_UNAVAILABLE")
	s.apiError(t, "GET", "/v1/sandboxes/"+plain.ID, nil, http.StatusServiceUnavailable, "RUNTIME_UNAVAILABLE")
	s.apiError(t, "POST", "/v1/sandboxes", sandbox.CreateSandboxRequest{
		Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"sleep", "100000"}, Timeout: ptr[int64](600),
	}, http.StatusServiceUnavailable, "RUNTIME_UNAVAILABLE")

	startDockerd(t, argv)
	pollUntil(t, "/ready to answer 200", 60*time.Second, func() bool {
		resp, err := http.Get(s.base + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	for _, id := range ids {
		if st := s.sandboxState(t, id); st != sandbox.StateRunning {
			t.Errorf("sandbox %s is %s after the engine restart; want Running", id, st)
		}
	}
	for _, id := range ids {
		echo(id)
	}
}

// runningDockerd returns the command line and pid of the engine at
// /var/run/docker.sock.
func runningDockerd(t *testing.T) ([]string, int) {
	t.Helper()
	b, err := os.ReadFile(dockerdPidFile)
	if err != nil {
		t.Fatalf("read %s: %v", dockerdPidFile, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", dockerdPidFile, err)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatalf("dockerd %d: %v", pid, err)
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(argv) == 0 || !strings.HasSuffix(argv[0], "dockerd") {
		t.Fatalf("pid %d of %s is %q, not dockerd", pid, dockerdPidFile, argv)
	}
	return argv, pid
}

// startDockerd starts dockerd with argv in a session of its own, so that
// it outlives the test, appending to the log make deps uses, and waits
// until it answers.
func startDockerd(t *testing.T, argv []string) {
	t.Helper()
	logf, err := os.OpenFile("/var/log/dockerd-opensandbox.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("dockerd log: %v", err)
	}
	defer logf.Close()
	cmd := osexec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dockerd: %v", err)
	}
	// dockerd is the machine's engine, not the test's child to wait for.
	if err := cmd.Process.Release(); err != nil {
		t.Fatalf("release dockerd: %v", err)
	}
	pollUntil(t, "dockerd to answer", 90*time.Second, func() bool {
		return osexec.Command("docker", "info", "--format", "{{.ServerVersion}}").Run() == nil
	})
}
