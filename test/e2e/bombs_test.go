package e2e

import (
	"fmt"
	"net/http"
	osexec "os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// healthProbe polls the host server's /health while a bomb goes off in a
// sandbox and keeps the worst latency: the isolation must keep the host
// answering within a second.
type healthProbe struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	worst time.Duration
	n     int
	fails []string
}

// healthBound is the correctness bound of the isolation, not a benchmark:
// a host that takes longer than this to answer a trivial request is not
// protected from its sandboxes.
const healthBound = time.Second

func startHealthProbe(base string) *healthProbe {
	p := &healthProbe{stop: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			start := time.Now()
			resp, err := client.Get(base + "/health")
			took := time.Since(start)
			p.mu.Lock()
			p.n++
			if took > p.worst {
				p.worst = took
			}
			switch {
			case err != nil:
				p.fails = append(p.fails, err.Error())
			case resp.StatusCode != http.StatusOK:
				p.fails = append(p.fails, "status "+strconv.Itoa(resp.StatusCode))
			case took > healthBound:
				p.fails = append(p.fails, "took "+took.String())
			}
			p.mu.Unlock()
			if resp != nil {
				resp.Body.Close()
			}
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// finish stops the probe, logs the worst latency and fails the test if a
// probe failed or took longer than healthBound.
func (p *healthProbe) finish(t *testing.T, what string) {
	t.Helper()
	close(p.stop)
	p.wg.Wait()
	t.Logf("%s: host /health worst latency %v over %d probes", what, p.worst, p.n)
	if len(p.fails) > 0 {
		t.Errorf("%s: %d of %d /health probes failed or took over %v: %v", what, len(p.fails), p.n, healthBound, p.fails)
	}
}

// sandboxProcesses counts the live processes in the sandbox, as seen by
// a command run through execd (the count includes that command's shell
// and ps).
func sandboxProcesses(t *testing.T, e *execdProc) int {
	t.Helper()
	n, why := countProcesses(t, e)
	if why != "" {
		t.Fatal(why)
	}
	return n
}

// countProcesses counts the sandbox's live processes; why says what went
// wrong when the count could not be taken (while a bomb holds the pids
// limit, the counting command itself cannot start).
func countProcesses(t *testing.T, e *execdProc) (n int, why string) {
	t.Helper()
	ex := e.stream(t, "/command", sandbox.RunCommandRequest{Command: "ps -e -o stat= | grep -vc '^Z'"})
	if ex.exit != 0 || len(ex.stdout) != 1 {
		return 0, fmt.Sprintf("counting processes: %q %q exit %d", ex.stdout, ex.stderr, ex.exit)
	}
	n, err := strconv.Atoi(strings.TrimSpace(ex.stdout[0]))
	if err != nil {
		return 0, fmt.Sprintf("process count %q: %v", ex.stdout[0], err)
	}
	return n, ""
}

// waitProcessesBelow polls until the sandbox has fewer than n processes.
// A count that cannot be taken (the bomb still fills the pids limit, so
// no command starts) means "not yet".
func waitProcessesBelow(t *testing.T, e *execdProc, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, why := countProcesses(t, e)
		if why == "" && got < n {
			return
		}
		if time.Now().After(deadline) {
			if why != "" {
				t.Fatalf("no process count within 60s: %s", why)
			}
			t.Fatalf("sandbox still has %d processes, want fewer than %d", got, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A background command started before a bomb is still known afterwards:
// the execd that answers is the one that was running, not a restarted one.
func sameExecd(t *testing.T, e *execdProc, keeperID string) {
	t.Helper()
	var st sandbox.CommandStatus
	e.call(t, "GET", "/command/status/"+keeperID, nil, 200, &st)
	if !st.Running {
		t.Errorf("the keeper command ended: %+v", st)
	}
	ex := e.stream(t, "/command", sandbox.RunCommandRequest{Command: "echo alive"})
	if joined(ex.stdout) != "alive" || ex.exit != 0 {
		t.Errorf("command after the bomb: %q %q exit %d", ex.stdout, ex.stderr, ex.exit)
	}
}

func TestResourceBombs(t *testing.T) {
	s := startServer(t, serverOpts{})
	image := ensureBaseImage(t)
	created := s.create(t, sandbox.CreateSandboxRequest{
		Image:          &sandbox.ImageSpec{URI: image},
		Entrypoint:     []string{"tail", "-f", "/dev/null"},
		Timeout:        ptr[int64](900),
		ResourceLimits: map[string]string{"cpu": "1", "memory": "256Mi"},
	})
	// On failure, what execd and its supervisor said last (a crash's
	// message), read before the sandbox is deleted.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, c := range containersWithLabel(t, "opensandbox.io/id="+created.ID) {
			out, _ := osexec.Command("docker", "logs", "--tail", "80", c).CombinedOutput()
			t.Logf("sandbox container logs (tail):\n%s", out)
		}
	})
	e := s.execd(t, created.ID, false)
	keeper := e.stream(t, "/command", sandbox.RunCommandRequest{Command: "sleep 100000", Background: true})
	keeperID := keeper.events[0].Text
	baseline := sandboxProcesses(t, e)

	t.Run("fork", func(t *testing.T) {
		probe := startHealthProbe(s.base)
		// The repro: the bomb backgrounds itself, so the shell
		// exits at once and the stream ends; the command's timeout then
		// kills what it left behind.
		start := time.Now()
		ex := e.streamWithin(t, "/command", sandbox.RunCommandRequest{
			Command: "timeout 20 bash -c ':(){ :|:& };:'", Timeout: 5000,
		}, 60*time.Second)
		t.Logf("self-backgrounding bomb: stream ended after %v with exit %d", time.Since(start), ex.exit)
		waitProcessesBelow(t, e, baseline+3)
		sameExecd(t, e, keeperID)

		// A bomb the shell waits for holds the stream until the timeout.
		start = time.Now()
		ex = e.streamWithin(t, "/command", sandbox.RunCommandRequest{
			Command: "bash -c ':(){ :|: ; };:'", Timeout: 5000,
		}, 60*time.Second)
		last := ex.events[len(ex.events)-1]
		t.Logf("foreground bomb: stream ended after %v with %s", time.Since(start), last.Type)
		if last.Type != sandbox.EventError || !strings.Contains(strings.Join(last.Error.Traceback, " "), "timed out") {
			t.Errorf("last event = %+v, want the timeout's error", last)
		}
		waitProcessesBelow(t, e, baseline+3)
		sameExecd(t, e, keeperID)
		probe.finish(t, "fork bomb")
	})

	t.Run("memory", func(t *testing.T) {
		probe := startHealthProbe(s.base)
		ex := e.streamWithin(t, "/command", sandbox.RunCommandRequest{
			Command: "python3 -c 'a = []\nwhile True: a.append(bytearray(16 << 20))'", Timeout: 60000,
		}, 90*time.Second)
		if ex.exit != 137 {
			t.Errorf("memory bomb exit = %d (stderr %q), want 137: the OOM killer's SIGKILL", ex.exit, ex.stderr)
		}
		sameExecd(t, e, keeperID)
		probe.finish(t, "memory bomb")
	})

	t.Run("cpu", func(t *testing.T) {
		probe := startHealthProbe(s.base)
		ex := e.streamWithin(t, "/command", sandbox.RunCommandRequest{
			Command: "for i in 1 2 3 4 5 6 7 8; do (while :; do :; done) & done; wait", Timeout: 8000,
		}, 60*time.Second)
		last := ex.events[len(ex.events)-1]
		if last.Type != sandbox.EventError || !strings.Contains(strings.Join(last.Error.Traceback, " "), "timed out") {
			t.Errorf("last event = %+v, want the timeout's error", last)
		}
		waitProcessesBelow(t, e, baseline+3)
		sameExecd(t, e, keeperID)
		probe.finish(t, "cpu bomb")
	})
}
