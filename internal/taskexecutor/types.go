// Package taskexecutor is the task executor of BatchSandbox tasks: a small
// HTTP server in every sandbox pod that runs the processes the controller
// hands it, keeps their state under a data directory so that a restart of
// the executor neither loses nor re-runs a task, and reports each task's
// state (waiting, running, or terminated with exit code and times).
//
// The wire format (types.go) and the routes (server.go) are those of the
// upstream operator's task-executor, so either side can talk to the other:
//
//	POST   /setTasks    body: [Task]; makes the task list exactly that (new
//	                    tasks start, missing ones are stopped and removed);
//	                    answers the current list
//	GET    /getTasks    the current list
//	POST   /tasks       body: Task; creates one task (201)
//	GET    /tasks/{id}  one task
//	DELETE /tasks/{id}  stops and removes one task (204)
//	GET    /health      {"status":"healthy"}
//
// Errors are {"code": <HTTP status text>, "message": "..."}.
package taskexecutor

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultPort is the executor's TCP port in a pod.
const DefaultPort = 5758

// Task is one task as it crosses the wire: its name, what to run, and its
// state. A task is identified by its name; its process does not change once
// created.
type Task struct {
	// Name identifies the task (a DNS-label-like name: letters, digits,
	// '-', '_' and '.', at most 253 characters).
	Name string `json:"name"`
	// DeletionTimestamp is set once the task is asked to go; it is removed
	// when its process has ended.
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp,omitempty"`
	// Process is what the task runs.
	Process *Process `json:"process,omitempty"`
	// ProcessStatus is the task's state, set by the executor.
	ProcessStatus *ProcessStatus `json:"processStatus,omitempty"`
}

// Process is a process to run.
type Process struct {
	// Command is the executable (looked up in PATH when it has no '/') and
	// its leading arguments. Required.
	Command []string `json:"command"`
	// Args are appended to Command.
	Args []string `json:"args,omitempty"`
	// Env are added to the environment the process inherits (the sandbox
	// container's, in sidecar mode). Only literal values are supported.
	Env []corev1.EnvVar `json:"env,omitempty"`
	// WorkingDir is the process's working directory; default "/".
	WorkingDir string `json:"workingDir,omitempty"`
	// TimeoutSeconds stops the process after that long; it then counts as
	// terminated with exit code 137 and reason Timeout.
	TimeoutSeconds *int64 `json:"timeoutSeconds,omitempty"`
}

// ProcessStatus is a task's state: exactly one member is set.
type ProcessStatus struct {
	Waiting    *Waiting    `json:"waiting,omitempty"`
	Running    *Running    `json:"running,omitempty"`
	Terminated *Terminated `json:"terminated,omitempty"`
}

// Waiting: the process has not started yet.
type Waiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Running: the process runs.
type Running struct {
	StartedAt metav1.Time `json:"startedAt"`
}

// Terminated: the process has ended (or could not start).
type Terminated struct {
	// ExitCode is the process's exit status; 128+n when signal n killed it.
	ExitCode int32 `json:"exitCode"`
	// Signal is the signal that killed it, if one did.
	Signal int32 `json:"signal,omitempty"`
	// Reason is one word: Completed, Error, Timeout, Stopped, StartError,
	// Lost.
	Reason     string      `json:"reason,omitempty"`
	Message    string      `json:"message,omitempty"`
	StartedAt  metav1.Time `json:"startedAt,omitempty"`
	FinishedAt metav1.Time `json:"finishedAt,omitempty"`
}

// Terminated reasons.
const (
	ReasonCompleted  = "Completed"  // exit code 0
	ReasonError      = "Error"      // non-zero exit or killed by a signal
	ReasonTimeout    = "Timeout"    // stopped after timeoutSeconds
	ReasonStopped    = "Stopped"    // stopped because the task was removed
	ReasonStartError = "StartError" // the process could not be started
	ReasonLost       = "Lost"       // ended while no executor watched it, with no exit status left
)

// Waiting reasons.
const (
	ReasonStarting          = "Starting"
	ReasonMainContainerWait = "MainContainerNotFound"
)

// State is the coarse state of a task, as the controller counts it.
type State string

const (
	StatePending   State = "Pending"
	StateRunning   State = "Running"
	StateSucceeded State = "Succeeded"
	StateFailed    State = "Failed"
)

// StateOf reduces t's status to a State.
func StateOf(t *Task) State {
	s := t.ProcessStatus
	switch {
	case s == nil || s.Waiting != nil:
		return StatePending
	case s.Terminated != nil && s.Terminated.ExitCode == 0 && s.Terminated.Reason != ReasonTimeout:
		return StateSucceeded
	case s.Terminated != nil:
		return StateFailed
	default:
		return StateRunning
	}
}
