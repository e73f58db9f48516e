package sandbox

import "time"

// ErrorResponse is the body of every execd and lifecycle error reply.
type ErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Event types of an execution stream (POST /command, /session/{id}/run, /code).
const (
	EventInit              = "init"
	EventStatus            = "status"
	EventStdout            = "stdout"
	EventStderr            = "stderr"
	EventResult            = "result"
	EventExecutionCount    = "execution_count"
	EventExecutionComplete = "execution_complete"
	EventError             = "error"
	EventPing              = "ping"
)

// ErrNameCommandExec is the ename of the error event that reports a
// non-zero exit; its evalue is the exit code in decimal.
const ErrNameCommandExec = "CommandExecError"

// StreamEvent is one frame of an execution stream. On the wire each frame is
// the JSON object followed by a blank line. Empty fields are omitted.
type StreamEvent struct {
	Type           string         `json:"type"`
	Text           string         `json:"text,omitempty"`
	ExecutionCount int            `json:"execution_count,omitempty"`
	ExecutionTime  int64          `json:"execution_time,omitempty"` // milliseconds
	Timestamp      int64          `json:"timestamp"`                // unix milliseconds
	Results        map[string]any `json:"results,omitempty"`
	Error          *StreamError   `json:"error,omitempty"`
}

// StreamError describes a failed execution inside a StreamEvent.
type StreamError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// RunCommandRequest is the body of POST /command.
type RunCommandRequest struct {
	Command    string            `json:"command"`
	Cwd        string            `json:"cwd,omitempty"`
	Background bool              `json:"background,omitempty"`
	Timeout    int64             `json:"timeout,omitempty"` // milliseconds; 0 means none
	UID        *uint32           `json:"uid,omitempty"`
	GID        *uint32           `json:"gid,omitempty"`
	Envs       map[string]string `json:"envs,omitempty"`
}

// CommandStatus is the body of GET /command/status/{id}.
type CommandStatus struct {
	ID         string     `json:"id"`
	Content    string     `json:"content,omitempty"`
	Running    bool       `json:"running"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// CommandLogsCursorHeader carries the tail cursor of GET /command/{id}/logs.
const CommandLogsCursorHeader = "EXECD-COMMANDS-TAIL-CURSOR"

// AccessTokenHeader authenticates requests to execd when it has a token.
const AccessTokenHeader = "X-EXECD-ACCESS-TOKEN"

// CreateSessionRequest is the optional body of POST /session.
type CreateSessionRequest struct {
	Cwd string `json:"cwd,omitempty"`
}

// CreateSessionResponse is the body returned by POST /session.
type CreateSessionResponse struct {
	SessionID string `json:"session_id"`
}

// RunInSessionRequest is the body of POST /session/{id}/run.
type RunInSessionRequest struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd,omitempty"`
	Timeout int64  `json:"timeout,omitempty"` // milliseconds; 0 means none
}

// CodeContext identifies a code interpreter context.
type CodeContext struct {
	ID       string `json:"id,omitempty"`
	Language string `json:"language"`
	Cwd      string `json:"cwd,omitempty"`
}

// RunCodeRequest is the body of POST /code.
type RunCodeRequest struct {
	Context *CodeContext `json:"context,omitempty"`
	Code    string       `json:"code"`
}

// File types reported in FileInfo.Type.
const (
	FileTypeFile      = "file"
	FileTypeDirectory = "directory"
	FileTypeSymlink   = "symlink"
	FileTypeOther     = "other"
)

// FileInfo describes one filesystem entry. Mode holds the permission bits
// written as octal digits read as a decimal number: 0o755 is 755.
type FileInfo struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
	CreatedAt  time.Time `json:"created_at"`
	Owner      string    `json:"owner"`
	Group      string    `json:"group"`
	Mode       int       `json:"mode"`
}

// Permission sets the owner, group and mode of a path. Mode uses the same
// octal-as-decimal form as FileInfo.Mode; zero means "leave unchanged" where
// the endpoint allows it.
type Permission struct {
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	Mode  int    `json:"mode"`
}

// FileMetadata is the JSON content of the "metadata" part of an upload.
type FileMetadata struct {
	Path  string `json:"path"`
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
	Mode  int    `json:"mode,omitempty"`
}

// RenameFileItem is one move of POST /files/mv.
type RenameFileItem struct {
	Src  string `json:"src"`
	Dest string `json:"dest"`
}

// ReplaceFileContentItem is one replacement of POST /files/replace.
type ReplaceFileContentItem struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// ReplaceFileContentResult reports how many occurrences were replaced.
type ReplaceFileContentResult struct {
	ReplacedCount int `json:"replacedCount"`
}

// Metrics is a resource usage sample of the sandbox (its cgroup, not the host).
type Metrics struct {
	CPUCount    float64 `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotalMiB float64 `json:"mem_total_mib"`
	MemUsedMiB  float64 `json:"mem_used_mib"`
	Timestamp   int64   `json:"timestamp"` // unix milliseconds
}

// PTY session shapes (POST /pty, GET /pty/{id}).
type (
	CreatePTYRequest struct {
		Cwd     string `json:"cwd,omitempty"`
		Command string `json:"command,omitempty"`
	}
	CreatePTYResponse struct {
		SessionID string `json:"session_id"`
	}
	PTYStatus struct {
		SessionID    string `json:"session_id"`
		Running      bool   `json:"running"`
		OutputOffset int64  `json:"output_offset"`
	}
)
