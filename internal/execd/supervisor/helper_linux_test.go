package supervisor

// The test binary doubles as every child the supervisor starts: TestMain
// looks at roleEnv and, when it is set, plays that role instead of running
// the tests. Children report through files in dirEnv, written atomically, so
// that tests wait on them by polling with a deadline.
//
// Supervisor tests run in the test process itself and reap with wait4(-1):
// none of them may call t.Parallel, and none may start other children while
// a supervisor runs.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	roleEnv   = "SUPERVISOR_TEST_ROLE"
	dirEnv    = "SUPERVISOR_TEST_DIR"
	codeEnv   = "SUPERVISOR_TEST_CODE"   // exit code for role "exit"
	signalEnv = "SUPERVISOR_TEST_SIGNAL" // signal number for roles that use one
	valueEnv  = "SUPERVISOR_TEST_VALUE"  // echoed by role "report"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(playRole(role))
	}
	os.Exit(m.Run())
}

// playRole runs one helper behaviour and returns the process's exit code.
func playRole(role string) int {
	dir := os.Getenv(dirEnv)
	switch role {
	case "serve": // the server: run until SIGTERM, then record whether the entrypoint stopped first
		return serve(dir)
	case "crash-once": // the server: exit 1 the first time, serve afterwards
		marker := filepath.Join(dir, "crashed")
		if _, err := os.Stat(marker); err != nil {
			writeFile(dir, "crashed", "")
			return 1
		}
		return serve(dir)
	case "serve-ignore-term": // the server: ignore SIGTERM, needs SIGKILL
		signal.Ignore(syscall.SIGTERM)
		writeFile(dir, "server-ready", strconv.Itoa(os.Getpid()))
		blockForever()
	case "exit":
		code, _ := strconv.Atoi(os.Getenv(codeEnv))
		return code
	case "kill-self": // die from a signal
		sig := envSignal()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		blockForever()
	case "wait-term": // the entrypoint: stop cleanly on SIGTERM or SIGINT
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		writeFile(dir, "entry-ready", strconv.Itoa(os.Getpid()))
		sig := <-c
		writeFile(dir, "entry-stopped", sig.String())
		return 0
	case "ignore-term": // the entrypoint: needs SIGKILL
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		writeFile(dir, "entry-ready", strconv.Itoa(os.Getpid()))
		blockForever()
	case "trap": // the entrypoint: trap a signal, and have a child in its group trap it too
		return trap(dir)
	case "trap-child":
		c := make(chan os.Signal, 1)
		signal.Notify(c, envSignal())
		writeFile(dir, "child-ready", "")
		<-c
		writeFile(dir, "child-got", "")
		return 0
	case "orphan-parent": // the entrypoint: leave an orphan grandchild, then wait for SIGTERM
		pid, err := spawnOrphan("sleep")
		if err != nil {
			fmt.Fprintln(os.Stderr, "orphan-parent:", err)
			return 50
		}
		writeFile(dir, "orphan-pid", strconv.Itoa(pid))
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		writeFile(dir, "entry-ready", strconv.Itoa(os.Getpid()))
		<-c
		return 0
	case "orphan-middle": // start a child of the role in codeEnv's place, print its pid, exit without waiting
		cmd := exec.Command(self(), "-test.run=^$")
		cmd.Env = append(os.Environ(), roleEnv+"="+os.Getenv("SUPERVISOR_TEST_GRANDCHILD"))
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "orphan-middle:", err)
			return 51
		}
		fmt.Println(cmd.Process.Pid)
		return 0
	case "sleep":
		blockForever()
	case "zombie-check": // the entrypoint as seen from inside a PID namespace
		return zombieCheck()
	case "report": // the entrypoint: report its working directory and environment
		wd, _ := os.Getwd()
		_, marker := os.LookupEnv(ServerMarkerEnv)
		writeFile(dir, "report", fmt.Sprintf("wd=%s value=%s marker=%t", wd, os.Getenv(valueEnv), marker))
		return 0
	case "pid1-supervisor":
		return pid1Supervisor(dir)
	case "tty-supervisor":
		return ttySupervisor(dir)
	case "tty-check":
		return ttyCheck()
	}
	fmt.Fprintf(os.Stderr, "unknown helper role %q\n", role)
	return 2
}

func serve(dir string) int {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	writeFile(dir, "server-ready", fmt.Sprintf("pid=%d supervised=%t", os.Getpid(), IsSupervisedServer()))
	<-c
	_, err := os.Stat(filepath.Join(dir, "entry-stopped"))
	writeFile(dir, "server-stopped", fmt.Sprintf("entry-stopped-first=%t", err == nil))
	return 0
}

func trap(dir string) int {
	sig := envSignal()
	c := make(chan os.Signal, 1)
	signal.Notify(c, sig)
	cmd := exec.Command(self(), "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=trap-child")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "trap:", err)
		return 50
	}
	if !poll(10*time.Second, func() bool { return exists(dir, "child-ready") }) {
		fmt.Fprintln(os.Stderr, "trap: child never got ready")
		return 51
	}
	writeFile(dir, "entry-ready", strconv.Itoa(os.Getpid()))
	<-c
	writeFile(dir, "entry-got", "")
	if err := cmd.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "trap: child:", err)
		return 52
	}
	return 0
}

// spawnOrphan starts an intermediate process that starts a grandchild with
// the given role and exits at once, orphaning it; it returns the grandchild's
// pid.
func spawnOrphan(role string) (int, error) {
	cmd := exec.Command(self(), "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=orphan-middle", "SUPERVISOR_TEST_GRANDCHILD="+role)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("orphan-middle: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("orphan-middle printed %q: %w", out, err)
	}
	return pid, nil
}

// zombieCheck leaves an orphan that exits at once and exits 7 when it has
// been reaped (by PID 1, its new parent) within the deadline, 99 otherwise.
func zombieCheck() int {
	pid, err := spawnOrphan("exit")
	if err != nil {
		fmt.Fprintln(os.Stderr, "zombie-check:", err)
		return 98
	}
	if !poll(10*time.Second, func() bool { return !procExists(pid) }) {
		st, _ := procStat(pid)
		fmt.Fprintf(os.Stderr, "zombie-check: orphan %d not reaped: state %q ppid %d\n", pid, st.state, st.ppid)
		return 99
	}
	return 7
}

// pid1Supervisor runs the supervisor as PID 1 of a fresh PID namespace with
// the default ServerPath, and fails if anything is left behind.
func pid1Supervisor(dir string) int {
	if os.Getpid() != 1 {
		fmt.Fprintf(os.Stderr, "pid1-supervisor: pid is %d, not 1\n", os.Getpid())
		return 90
	}
	code, err := Run(context.Background(), Config{
		Entrypoint: []string{self(), "-test.run=^$"},
		Env:        helperEnv(dir, "zombie-check"),
		ServerEnv:  helperEnv(dir, "serve"),
		StopGrace:  5 * time.Second,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pid1-supervisor:", err)
		return 91
	}
	if left := otherProcesses(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "pid1-supervisor: processes left: %v\n", left)
		return 92
	}
	return code
}

// otherProcesses lists the pids in /proc other than this process.
func otherProcesses() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

func envSignal() syscall.Signal {
	n, _ := strconv.Atoi(os.Getenv(signalEnv))
	return syscall.Signal(n)
}

func blockForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// self is the test binary.
func self() string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return exe
}

// helperEnv is os.Environ() with the helper role and report directory set.
// Under -race a binary lingers for a second at exit (GORACE atexit_sleep_ms)
// unless told otherwise.
func helperEnv(dir, role string, extra ...string) []string {
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	env := withoutVar(withoutVar(withoutVar(os.Environ(), roleEnv), dirEnv), "GORACE")
	env = append(env, roleEnv+"="+role, dirEnv+"="+dir, "GORACE="+gorace)
	return append(env, extra...)
}

// writeFile writes name in dir atomically, so readers never see it partial.
func writeFile(dir, name, content string) {
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		panic(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		panic(err)
	}
}

func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// poll calls cond every few milliseconds until it holds or timeout passes.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type stat struct {
	state string
	ppid  int
}

// procStat reads the state and parent of pid from /proc.
func procStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("malformed /proc/%d/stat %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return stat{}, fmt.Errorf("malformed /proc/%d/stat %q", pid, s)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return stat{}, fmt.Errorf("malformed /proc/%d/stat %q: %w", pid, s, err)
	}
	return stat{state: f[0], ppid: ppid}, nil
}

func procExists(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}
