package taskexecutor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config configures an Executor.
type Config struct {
	// DataDir holds one directory per task (its record, its exit status
	// and its output). Required.
	DataDir string
	// SidecarMode runs tasks inside the sandbox container of the pod (found
	// through the shared process namespace by the MainContainerEnv marker
	// in its environment) instead of in the executor's own container.
	SidecarMode bool
	// MainContainerName is the marker's value to look for; "" accepts any.
	MainContainerName string
	// StopGrace is how long a stopped task has between SIGTERM and
	// SIGKILL. Default 10 s.
	StopGrace time.Duration
	// ShimCommand starts the shim that runs one task (RunShim), with the
	// task's directory appended. Default: this executable with "shim".
	ShimCommand []string
	// Logger logs; default slog.Default().
	Logger *slog.Logger
}

// MainContainerEnv is the environment variable that marks the sandbox
// container of a pod for an executor in sidecar mode: the controller sets
// it to the container's name.
const MainContainerEnv = "OPENSANDBOX_MAIN_CONTAINER"

// Errors of the executor, converted to HTTP statuses by the server.
var (
	ErrInvalid  = errors.New("invalid task")
	ErrNotFound = errors.New("task not found")
	ErrConflict = errors.New("task exists with another process")
)

// record is a task as kept in DataDir/<name>/task.json.
type record struct {
	Task Task `json:"task"`
	// PID is the shim's process id (its process group) once started, and
	// PIDStart its start time in clock ticks since boot, which tells the
	// shim from a later process that got the same id.
	PID      int    `json:"pid,omitempty"`
	PIDStart uint64 `json:"pidStart,omitempty"`
	// StopReason is set when the executor stopped the process (Timeout or
	// Stopped).
	StopReason string `json:"stopReason,omitempty"`
}

type entry struct {
	rec       record
	running   bool // a shim runs and a monitor watches it
	timeout   *time.Timer
	kill      *time.Timer
	retry     *time.Timer
	terminate bool // SIGTERM sent
}

// Executor runs tasks and keeps their state.
type Executor struct {
	cfg    Config
	log    *slog.Logger
	mu     sync.Mutex
	tasks  map[string]*entry
	closed bool
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?$`)

// Open loads the tasks kept in cfg.DataDir and resumes watching them: a
// finished task keeps its result, a task whose shim still runs is watched
// again, and one whose shim ended while no executor watched gets the exit
// status the shim left (or Lost). Tasks are never run twice.
func Open(cfg Config) (*Executor, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("taskexecutor: DataDir is required")
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if len(cfg.ShimCommand) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("taskexecutor: finding own executable for the shim: %w", err)
		}
		cfg.ShimCommand = []string{self, "shim"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("taskexecutor: creating data dir: %w", err)
	}
	e := &Executor{cfg: cfg, log: cfg.Logger, tasks: map[string]*entry{}}
	dirs, err := os.ReadDir(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("taskexecutor: reading data dir: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range dirs {
		if !d.IsDir() || !nameRE.MatchString(d.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(cfg.DataDir, d.Name(), "task.json"))
		if errors.Is(err, fs.ErrNotExist) {
			// Created but never recorded: nothing ran.
			_ = os.RemoveAll(filepath.Join(cfg.DataDir, d.Name()))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("taskexecutor: reading task %s: %w", d.Name(), err)
		}
		var rec record
		if err := json.Unmarshal(data, &rec); err != nil || rec.Task.Name != d.Name() {
			e.log.Warn("ignoring unreadable task record", "task", d.Name(), "error", err)
			continue
		}
		en := &entry{rec: rec}
		e.tasks[rec.Task.Name] = en
		e.resume(en)
	}
	return e, nil
}

// resume picks up en after Open. e.mu is held.
func (e *Executor) resume(en *entry) {
	st := en.rec.Task.ProcessStatus
	switch {
	case st != nil && st.Terminated != nil:
		if en.rec.Task.DeletionTimestamp != nil {
			e.remove(en)
		}
	case en.rec.PID != 0:
		if procStart(en.rec.PID) == en.rec.PIDStart {
			en.running = true
			e.log.Info("watching task again", "task", en.rec.Task.Name, "pid", en.rec.PID)
			go e.poll(en)
			e.armTimeout(en)
			if en.rec.Task.DeletionTimestamp != nil || en.rec.StopReason != "" {
				e.stop(en, en.rec.StopReason)
			}
		} else {
			e.finish(en)
		}
	case en.rec.Task.DeletionTimestamp != nil:
		e.remove(en)
	default:
		e.start(en)
	}
}

// Close stops the executor's timers; the tasks' processes keep running and
// a later Open watches them again.
func (e *Executor) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for _, en := range e.tasks {
		for _, t := range []*time.Timer{en.timeout, en.kill, en.retry} {
			if t != nil {
				t.Stop()
			}
		}
	}
}

// validate checks t as a new task.
func validate(t *Task) error {
	if !nameRE.MatchString(t.Name) {
		return fmt.Errorf("%w: name %q must be 1-253 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", ErrInvalid, t.Name)
	}
	p := t.Process
	if p == nil {
		return fmt.Errorf("%w: task %s: process is required", ErrInvalid, t.Name)
	}
	if len(p.Command) == 0 || p.Command[0] == "" {
		return fmt.Errorf("%w: task %s: process.command must name an executable", ErrInvalid, t.Name)
	}
	for i, v := range p.Env {
		if v.Name == "" || strings.Contains(v.Name, "=") {
			return fmt.Errorf("%w: task %s: process.env[%d].name %q is not a variable name", ErrInvalid, t.Name, i, v.Name)
		}
		if v.ValueFrom != nil {
			return fmt.Errorf("%w: task %s: process.env[%d] (%s): valueFrom is not supported, give a value", ErrInvalid, t.Name, i, v.Name)
		}
	}
	if p.TimeoutSeconds != nil && *p.TimeoutSeconds <= 0 {
		return fmt.Errorf("%w: task %s: process.timeoutSeconds must be at least 1", ErrInvalid, t.Name)
	}
	if p.WorkingDir != "" && !filepath.IsAbs(p.WorkingDir) {
		return fmt.Errorf("%w: task %s: process.workingDir %q must be an absolute path", ErrInvalid, t.Name, p.WorkingDir)
	}
	return nil
}

// Create adds task t and starts it. Creating a task that exists with the
// same process returns it unchanged; with another process it is
// ErrConflict.
func (e *Executor) Create(t Task) (Task, error) {
	if err := validate(&t); err != nil {
		return Task{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.create(t)
}

func (e *Executor) create(t Task) (Task, error) {
	if en, ok := e.tasks[t.Name]; ok {
		if !equality.Semantic.DeepEqual(en.rec.Task.Process, t.Process) {
			return Task{}, fmt.Errorf("%w: %s", ErrConflict, t.Name)
		}
		return copyTask(&en.rec.Task), nil
	}
	en := &entry{rec: record{Task: Task{
		Name:          t.Name,
		Process:       t.Process,
		ProcessStatus: &ProcessStatus{Waiting: &Waiting{Reason: ReasonStarting}},
	}}}
	if err := os.MkdirAll(e.dir(t.Name), 0o700); err != nil {
		return Task{}, fmt.Errorf("creating directory of task %s: %w", t.Name, err)
	}
	if err := e.save(en); err != nil {
		_ = os.RemoveAll(e.dir(t.Name))
		return Task{}, err
	}
	e.tasks[t.Name] = en
	e.log.Info("task created", "task", t.Name, "command", t.Process.Command)
	e.start(en)
	return copyTask(&en.rec.Task), nil
}

// Sync makes the task list desired: tasks not yet known are created, known
// tasks missing from desired are stopped and removed. It returns the list
// afterwards. Every desired task is validated before anything changes.
func (e *Executor) Sync(desired []Task) ([]Task, error) {
	want := make(map[string]bool, len(desired))
	for i := range desired {
		if err := validate(&desired[i]); err != nil {
			return nil, err
		}
		if want[desired[i].Name] {
			return nil, fmt.Errorf("%w: task %s is listed twice", ErrInvalid, desired[i].Name)
		}
		want[desired[i].Name] = true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, en := range e.tasks {
		if !want[name] {
			e.delete(en)
		}
	}
	var errs []error
	for _, t := range desired {
		if _, err := e.create(t); err != nil {
			errs = append(errs, err)
		}
	}
	return e.list(), errors.Join(errs...)
}

// Get returns the task named name.
func (e *Executor) Get(name string) (Task, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	en, ok := e.tasks[name]
	if !ok {
		return Task{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return copyTask(&en.rec.Task), nil
}

// List returns the tasks by name.
func (e *Executor) List() []Task {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.list()
}

func (e *Executor) list() []Task {
	out := make([]Task, 0, len(e.tasks))
	for _, en := range e.tasks {
		out = append(out, copyTask(&en.rec.Task))
	}
	slices.SortFunc(out, func(a, b Task) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Delete stops the task named name (SIGTERM, SIGKILL after the grace) and
// removes it once its process has ended; it shows a deletionTimestamp
// until then.
func (e *Executor) Delete(name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	en, ok := e.tasks[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	e.delete(en)
	return nil
}

func (e *Executor) delete(en *entry) {
	if en.rec.Task.DeletionTimestamp == nil {
		now := metav1.Now()
		en.rec.Task.DeletionTimestamp = &now
		e.log.Info("task deleted", "task", en.rec.Task.Name)
	}
	if en.retry != nil {
		en.retry.Stop()
	}
	if !en.running {
		e.remove(en)
		return
	}
	if err := e.save(en); err != nil {
		e.log.Error("saving task", "task", en.rec.Task.Name, "error", err)
	}
	e.stop(en, ReasonStopped)
}

// remove forgets en and deletes its directory. e.mu is held.
func (e *Executor) remove(en *entry) {
	if en.timeout != nil {
		en.timeout.Stop()
	}
	delete(e.tasks, en.rec.Task.Name)
	if err := os.RemoveAll(e.dir(en.rec.Task.Name)); err != nil {
		e.log.Error("removing task directory", "task", en.rec.Task.Name, "error", err)
	}
}

func (e *Executor) dir(name string) string { return filepath.Join(e.cfg.DataDir, name) }

// save writes en's record atomically. e.mu is held.
func (e *Executor) save(en *entry) error {
	data, err := json.Marshal(en.rec)
	if err != nil {
		return fmt.Errorf("encoding task %s: %w", en.rec.Task.Name, err)
	}
	return writeAtomic(filepath.Join(e.dir(en.rec.Task.Name), "task.json"), data)
}

// writeAtomic replaces path with data through a synced temporary file and
// a rename, so a crash leaves the old or the new content, never a part.
func writeAtomic(path string, data []byte) error {
	dir, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer dir.Close()
	return writeRootAtomic(dir, filepath.Base(path), data)
}

func copyTask(t *Task) Task {
	data, _ := json.Marshal(t)
	var out Task
	_ = json.Unmarshal(data, &out)
	return out
}

// procStart returns the start time of process pid (field 22 of
// /proc/pid/stat), or 0 when there is no such process.
func procStart(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after it follow
	// the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 || f[0] == "Z" {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// signalGroup sends sig to en's shim's process group if it is still the
// same process.
func signalGroup(en *entry, sig syscall.Signal) {
	if en.rec.PID > 0 && procStart(en.rec.PID) == en.rec.PIDStart {
		_ = syscall.Kill(-en.rec.PID, sig)
	}
}
