package taskexecutor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunShim is the shim: `task-executor shim DIR`. It runs the process of
// DIR/spec.json (chrooted into the sandbox container's root when the spec
// names one of its processes), waits for it, and writes its exit status to
// DIR/exit.json. Being its own process, it outlives an executor restart, so
// the exit status of a task is never lost with the executor. SIGTERM sent
// to its process group reaches the task; the shim itself waits on.
func RunShim(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: task-executor shim DIR")
		return 2
	}
	dir, err := os.OpenRoot(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "task-executor shim:", err)
		return 1
	}
	// Ignored signals are inherited through exec; caught ones are not, so
	// the task gets SIGTERM with its default action while the shim lives.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	ex := runTask(dir)
	ex.FinishedAt = metav1.Now()
	data, _ := json.Marshal(ex)
	if err := writeRootAtomic(dir, "exit.json", data); err != nil {
		fmt.Fprintln(os.Stderr, "task-executor shim:", err)
		return 1
	}
	return 0
}

func runTask(dir *os.Root) shimExit {
	startErr := func(code int32, err error) shimExit {
		fmt.Fprintln(os.Stderr, "task-executor:", err)
		return shimExit{ExitCode: code, Reason: ReasonStartError, Message: err.Error()}
	}
	data, err := dir.ReadFile("spec.json")
	if err != nil {
		return startErr(128, fmt.Errorf("reading spec: %w", err))
	}
	var spec shimSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return startErr(128, fmt.Errorf("decoding spec: %w", err))
	}
	p := spec.Process
	env := os.Environ()
	wd := p.WorkingDir
	if spec.RootPID > 0 {
		proc := "/proc/" + strconv.Itoa(spec.RootPID)
		raw, err := os.ReadFile(proc + "/environ")
		if err != nil {
			return startErr(128, fmt.Errorf("reading the sandbox container's environment: %w", err))
		}
		env = nil
		for _, kv := range strings.Split(string(raw), "\x00") {
			if kv != "" {
				env = append(env, kv)
			}
		}
		// chroot applies to every thread of this process (they share
		// their filesystem context), which is what the task needs.
		if err := syscall.Chroot(proc + "/root"); err != nil {
			return startErr(128, fmt.Errorf("entering the sandbox container's root: %w", err))
		}
		if wd == "" {
			wd = "/"
		}
	}
	for _, v := range p.Env {
		env = setEnv(env, v.Name, v.Value)
	}
	if wd != "" {
		if err := os.Chdir(wd); err != nil {
			return startErr(128, fmt.Errorf("working directory: %w", err))
		}
	}
	path, err := lookPath(p.Command[0], env)
	if err != nil {
		code := int32(127)
		if errors.Is(err, errNotExecutable) {
			code = 126
		}
		return startErr(code, err)
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   append(append([]string(nil), p.Command...), p.Args...),
		Env:    env,
		Stdin:  nil,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	}
	if err := cmd.Start(); err != nil {
		return startErr(128, fmt.Errorf("starting %s: %w", path, err))
	}
	_ = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		return shimExit{ExitCode: 128 + int32(ws.Signal()), Signal: int32(ws.Signal()), Reason: ReasonError,
			Message: "killed by signal " + ws.Signal().String()}
	case ws.ExitStatus() == 0:
		return shimExit{Reason: ReasonCompleted}
	default:
		return shimExit{ExitCode: int32(ws.ExitStatus()), Reason: ReasonError,
			Message: "exit status " + strconv.Itoa(ws.ExitStatus())}
	}
}

func setEnv(env []string, k, v string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, k+"=") {
			out = append(out, kv)
		}
	}
	return append(out, k+"="+v)
}

// lookPath finds name like a shell would with the PATH of env (exec's
// LookPath would use the shim's own PATH).
func lookPath(name string, env []string) (string, error) {
	check := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s: %w", p, errNotExecutable)
		}
		return nil
	}
	if strings.Contains(name, "/") {
		if err := check(name); err != nil {
			return "", fmt.Errorf("command %s: %w", name, err)
		}
		return name, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	var firstErr error
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		err := check(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && errors.Is(err, errNotExecutable) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", fmt.Errorf("command %q not found in PATH %s: %w", name, path, fs.ErrNotExist)
}

// writeRootAtomic replaces name in dir with data through a synced temporary
// file and a rename (see writeAtomic); a failed write removes the temporary.
func writeRootAtomic(dir *os.Root, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := dir.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = dir.Rename(tmp, name)
	}
	if err != nil {
		_ = dir.Remove(tmp)
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
