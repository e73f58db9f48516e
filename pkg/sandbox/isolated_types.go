package sandbox

import "time"

// Wire types of execd's Isolated Execution API (/v1/isolated/..., upstream
// OSEP-0013): sessions whose processes run in their own user, mount, pid,
// ipc, uts and (unless share_net) network namespaces inside one sandbox.

// IsolationBootstrapEnv is set to "1" by a runtime that starts execd with
// CAP_SYS_ADMIN so that it can offer isolated sessions; execd uses the
// capability once at start and drops it.
const IsolationBootstrapEnv = "OPENSANDBOX_ISOLATION"

// ExtIsolatedExecution is the create extension ("true") that asks for
// isolated execution in one sandbox, on a server whose Docker runtime
// allows it on request (docker.isolated_execution = "on-request").
const ExtIsolatedExecution = "opensandbox.io/isolated-execution"

// Workspace modes of an isolated session.
const (
	WorkspaceRW      = "rw"      // the session writes the directory itself
	WorkspaceOverlay = "overlay" // writes land in a private upper layer, gone with the session
	WorkspaceRO      = "ro"      // read-only
)

// Profiles of an isolated session.
const (
	IsolationStrict   = "strict"
	IsolationBalanced = "balanced"
)

// Identity modes of an isolated session.
const (
	UIDModeSetpriv = "setpriv"
	UIDModeUserns  = "userns"
)

// Isolated session statuses.
const (
	IsolatedActive    = "active"
	IsolatedDestroyed = "destroyed"
)

// IsolatedWorkspace is the directory a session works in, seen at the same
// path inside the session.
type IsolatedWorkspace struct {
	Path string `json:"path"`
	Mode string `json:"mode,omitempty"` // rw (default), overlay or ro
}

// IsolatedBind is an extra directory or file of the sandbox mounted into a
// session at Dest (default: Source).
type IsolatedBind struct {
	Source   string `json:"source"`
	Dest     string `json:"dest,omitempty"`
	ReadOnly bool   `json:"readonly"`
}

// EnvPassthrough selects which of execd's environment variables a session
// sees: "allow" passes only Keys, "deny" passes all but Keys.
type EnvPassthrough struct {
	Mode string   `json:"mode,omitempty"`
	Keys []string `json:"keys,omitempty"`
}

// CreateIsolatedSessionRequest is the body of POST /v1/isolated/session.
type CreateIsolatedSessionRequest struct {
	Workspace          IsolatedWorkspace `json:"workspace"`
	Profile            string            `json:"profile,omitempty"`
	ExtraWritable      []string          `json:"extra_writable,omitempty"`
	Binds              []IsolatedBind    `json:"binds,omitempty"`
	ShareNet           bool              `json:"share_net,omitempty"`
	EnvPassthrough     *EnvPassthrough   `json:"env_passthrough,omitempty"`
	UID                *uint32           `json:"uid,omitempty"`
	GID                *uint32           `json:"gid,omitempty"`
	UIDMode            string            `json:"uid_mode,omitempty"`
	IdleTimeoutSeconds int               `json:"idle_timeout_seconds,omitempty"`
}

// IsolatedSessionParams echoes the parameters a session was created with.
type IsolatedSessionParams struct {
	Profile            string             `json:"profile,omitempty"`
	Workspace          *IsolatedWorkspace `json:"workspace,omitempty"`
	ExtraWritable      []string           `json:"extra_writable,omitempty"`
	Binds              []IsolatedBind     `json:"binds,omitempty"`
	ShareNet           bool               `json:"share_net"`
	EnvPassthrough     *EnvPassthrough    `json:"env_passthrough,omitempty"`
	UID                *uint32            `json:"uid,omitempty"`
	GID                *uint32            `json:"gid,omitempty"`
	UIDMode            string             `json:"uid_mode,omitempty"`
	IdleTimeoutSeconds int                `json:"idle_timeout_seconds,omitempty"`
}

// IsolatedSessionInfo is the 201 body of POST /v1/isolated/session.
type IsolatedSessionInfo struct {
	SessionID string    `json:"session_id"`
	CreatedAt time.Time `json:"created_at"`
	IsolatedSessionParams
}

// IsolatedSessionState is the body of GET /v1/isolated/session/{id}.
// IdleRemainingSeconds is null for a session without an idle timeout.
type IsolatedSessionState struct {
	Status               string     `json:"status"`
	CreatedAt            time.Time  `json:"created_at"`
	LastRunAt            *time.Time `json:"last_run_at,omitempty"`
	IdleRemainingSeconds *int       `json:"idle_remaining_seconds"`
	IsolatedSessionParams
}

// IsolatedSessionSummary is one entry of GET /v1/isolated/sessions.
type IsolatedSessionSummary struct {
	SessionID            string     `json:"session_id"`
	Status               string     `json:"status"`
	CreatedAt            time.Time  `json:"created_at"`
	LastRunAt            *time.Time `json:"last_run_at,omitempty"`
	IdleRemainingSeconds *int       `json:"idle_remaining_seconds"`
}

// ListIsolatedSessionsResponse is the body of GET /v1/isolated/sessions.
type ListIsolatedSessionsResponse struct {
	Sessions []IsolatedSessionSummary `json:"sessions"`
}

// IsolatedRunRequest is the body of POST /v1/isolated/session/{id}/run.
type IsolatedRunRequest struct {
	Code           string            `json:"code"`
	Envs           map[string]string `json:"envs,omitempty"`
	TimeoutSeconds int64             `json:"timeout_seconds,omitempty"`
}

// IsolatedCapabilities is the body of GET /v1/isolated/capabilities: what
// works in this sandbox, as probed by execd.
type IsolatedCapabilities struct {
	Available        bool   `json:"available"`
	Isolator         string `json:"isolator,omitempty"`
	Version          string `json:"version,omitempty"`
	Message          string `json:"message,omitempty"`
	SetprivAvailable bool   `json:"setpriv_available"`
	UsernsAvailable  bool   `json:"userns_available"`
	CommitSupported  bool   `json:"commit_supported"`
	DiffSupported    bool   `json:"diff_supported"`
}
