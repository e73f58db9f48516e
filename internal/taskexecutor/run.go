package taskexecutor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shimSpec is what the shim reads from DataDir/<name>/spec.json.
type shimSpec struct {
	Process Process `json:"process"`
	// RootPID, when set, is a process of the sandbox container: the task
	// runs chrooted into its root with its environment underneath the
	// task's.
	RootPID int `json:"rootPID,omitempty"`
}

// shimExit is what the shim writes to DataDir/<name>/exit.json when the
// process ends (or cannot start).
type shimExit struct {
	ExitCode   int32       `json:"exitCode"`
	Signal     int32       `json:"signal,omitempty"`
	Reason     string      `json:"reason,omitempty"`
	Message    string      `json:"message,omitempty"`
	FinishedAt metav1.Time `json:"finishedAt"`
}

const mainRetry = time.Second

// start starts en's shim. e.mu is held.
func (e *Executor) start(en *entry) {
	if e.closed {
		return
	}
	name := en.rec.Task.Name
	spec := shimSpec{Process: *en.rec.Task.Process}
	if e.cfg.SidecarMode {
		pid := findMain(e.cfg.MainContainerName)
		if pid == 0 {
			msg := fmt.Sprintf("no process with %s=%s in the pod's process namespace yet", MainContainerEnv, e.cfg.MainContainerName)
			if w := en.rec.Task.ProcessStatus.Waiting; w == nil || w.Reason != ReasonMainContainerWait {
				e.log.Info("task waits for the sandbox container", "task", name)
			}
			en.rec.Task.ProcessStatus = &ProcessStatus{Waiting: &Waiting{Reason: ReasonMainContainerWait, Message: msg}}
			en.retry = time.AfterFunc(mainRetry, func() {
				e.mu.Lock()
				defer e.mu.Unlock()
				if e.tasks[name] == en && !en.running && en.rec.Task.DeletionTimestamp == nil {
					e.start(en)
				}
			})
			return
		}
		spec.RootPID = pid
	}
	fail := func(err error) {
		e.log.Error("starting task", "task", name, "error", err)
		now := metav1.Now()
		en.rec.Task.ProcessStatus = &ProcessStatus{Terminated: &Terminated{
			ExitCode: 128, Reason: ReasonStartError, Message: err.Error(), StartedAt: now, FinishedAt: now,
		}}
		if err := e.save(en); err != nil {
			e.log.Error("saving task", "task", name, "error", err)
		}
	}
	dir := e.dir(name)
	data, err := json.Marshal(spec)
	if err != nil {
		fail(fmt.Errorf("encoding shim spec: %w", err))
		return
	}
	if err := writeAtomic(filepath.Join(dir, "spec.json"), data); err != nil {
		fail(err)
		return
	}
	_ = os.Remove(filepath.Join(dir, "exit.json"))
	stdout, err := os.OpenFile(filepath.Join(dir, "stdout.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fail(fmt.Errorf("opening output file: %w", err))
		return
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(filepath.Join(dir, "stderr.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		fail(fmt.Errorf("opening output file: %w", err))
		return
	}
	defer stderr.Close()
	args := append(append([]string(nil), e.cfg.ShimCommand[1:]...), dir)
	cmd := exec.Command(e.cfg.ShimCommand[0], args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own session: the shim and the task form a process group that a
	// stop signals as one, and that outlives the executor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fail(fmt.Errorf("starting shim: %w", err))
		return
	}
	en.running = true
	en.rec.PID = cmd.Process.Pid
	en.rec.PIDStart = procStart(cmd.Process.Pid)
	en.rec.Task.ProcessStatus = &ProcessStatus{Running: &Running{StartedAt: metav1.Now()}}
	if err := e.save(en); err != nil {
		e.log.Error("saving task", "task", name, "error", err)
	}
	e.log.Info("task started", "task", name, "pid", en.rec.PID, "sandboxRootPID", spec.RootPID)
	go func() {
		_ = cmd.Wait()
		e.mu.Lock()
		defer e.mu.Unlock()
		if !e.closed && e.tasks[name] == en {
			e.finish(en)
		}
	}()
	e.armTimeout(en)
}

// armTimeout schedules the stop of en at its timeout. e.mu is held.
func (e *Executor) armTimeout(en *entry) {
	p := en.rec.Task.Process
	run := en.rec.Task.ProcessStatus.Running
	if p.TimeoutSeconds == nil || run == nil {
		return
	}
	left := time.Until(run.StartedAt.Add(time.Duration(*p.TimeoutSeconds) * time.Second))
	en.timeout = time.AfterFunc(max(left, 0), func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if !e.closed && e.tasks[en.rec.Task.Name] == en && en.running {
			e.log.Info("task timed out", "task", en.rec.Task.Name, "timeoutSeconds", *p.TimeoutSeconds)
			e.stop(en, ReasonTimeout)
		}
	})
}

// stop sends SIGTERM to en's process group and SIGKILL after the grace.
// e.mu is held.
func (e *Executor) stop(en *entry, reason string) {
	if en.rec.StopReason == "" {
		en.rec.StopReason = reason
		if err := e.save(en); err != nil {
			e.log.Error("saving task", "task", en.rec.Task.Name, "error", err)
		}
	}
	if en.terminate {
		return
	}
	en.terminate = true
	signalGroup(en, syscall.SIGTERM)
	en.kill = time.AfterFunc(e.cfg.StopGrace, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if !e.closed && en.running {
			e.log.Info("task outlived its grace; killing it", "task", en.rec.Task.Name)
			signalGroup(en, syscall.SIGKILL)
		}
	})
}

// poll watches a shim this executor did not start (found running by Open)
// until it is gone.
func (e *Executor) poll(en *entry) {
	for {
		time.Sleep(100 * time.Millisecond)
		e.mu.Lock()
		if e.closed || e.tasks[en.rec.Task.Name] != en {
			e.mu.Unlock()
			return
		}
		if procStart(en.rec.PID) != en.rec.PIDStart {
			e.finish(en)
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
	}
}

// finish records the end of en's shim from the exit status it left.
// e.mu is held.
func (e *Executor) finish(en *entry) {
	en.running = false
	for _, t := range []*time.Timer{en.timeout, en.kill} {
		if t != nil {
			t.Stop()
		}
	}
	var started metav1.Time
	if s := en.rec.Task.ProcessStatus; s != nil && s.Running != nil {
		started = s.Running.StartedAt
	}
	term := &Terminated{StartedAt: started, FinishedAt: metav1.Now()}
	var ex shimExit
	data, err := os.ReadFile(filepath.Join(e.dir(en.rec.Task.Name), "exit.json"))
	if err == nil {
		err = json.Unmarshal(data, &ex)
	}
	switch {
	case err == nil:
		term.ExitCode, term.Signal, term.Reason, term.Message = ex.ExitCode, ex.Signal, ex.Reason, ex.Message
		if !ex.FinishedAt.IsZero() {
			term.FinishedAt = ex.FinishedAt
		}
		if en.rec.StopReason != "" && ex.Reason != ReasonStartError {
			term.Reason = en.rec.StopReason
		}
	case en.rec.StopReason != "":
		term.ExitCode, term.Signal, term.Reason = 128+int32(syscall.SIGKILL), int32(syscall.SIGKILL), en.rec.StopReason
		term.Message = "killed after the stop grace"
	default:
		term.ExitCode, term.Reason = 255, ReasonLost
		term.Message = "the process ended while no executor watched it and left no exit status"
	}
	if term.Reason == ReasonTimeout && term.ExitCode == 0 {
		// Stopped at its timeout: a failure whatever the process said.
		term.ExitCode = 128 + int32(syscall.SIGKILL)
	}
	en.rec.Task.ProcessStatus = &ProcessStatus{Terminated: term}
	e.log.Info("task ended", "task", en.rec.Task.Name, "exitCode", term.ExitCode, "reason", term.Reason)
	if en.rec.Task.DeletionTimestamp != nil {
		e.remove(en)
		return
	}
	if err := e.save(en); err != nil {
		e.log.Error("saving task", "task", en.rec.Task.Name, "error", err)
	}
}

// findMain returns the lowest pid in the process namespace whose
// environment has MainContainerEnv (with value name unless name is ""), or
// 0 when there is none.
func findMain(name string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	best := 0
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self || (best != 0 && pid > best) {
			continue
		}
		env, err := os.ReadFile("/proc/" + d.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			k, v, ok := bytes.Cut(kv, []byte{'='})
			if ok && string(k) == MainContainerEnv && (name == "" || string(v) == name) {
				best = pid
				break
			}
		}
	}
	return best
}

var errNotExecutable = errors.New("not an executable file")
