package sandbox

import "time"

// Header names of the lifecycle API.
const (
	APIKeyHeader    = "OPEN-SANDBOX-API-KEY"
	RequestIDHeader = "X-Request-ID"
	// EgressAuthHeader carries the egress sidecar's token on port 18080.
	EgressAuthHeader = "OPENSANDBOX-EGRESS-AUTH"
)

// Well-known ports inside a sandbox.
const (
	ExecdPort  = 44772
	HTTPPort   = 8080 // the "user HTTP" port the Docker runtime maps directly
	EgressPort = 18080
)

// Sandbox states. Clients must tolerate states not listed here.
const (
	StatePending    = "Pending"
	StateRunning    = "Running"
	StatePausing    = "Pausing"
	StatePaused     = "Paused"
	StateResuming   = "Resuming"
	StateStopping   = "Stopping"
	StateTerminated = "Terminated"
	StateFailed     = "Failed"
)

// Snapshot states.
const (
	SnapshotCreating = "Creating"
	SnapshotReady    = "Ready"
	SnapshotFailed   = "Failed"
	SnapshotDeleting = "Deleting"
)

// ImageSpec names the image a sandbox starts from.
type ImageSpec struct {
	URI  string     `json:"uri"`
	Auth *ImageAuth `json:"auth,omitempty"`
}

// ImageAuth is registry credentials for pulling an image.
type ImageAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// PlatformSpec selects the operating system and architecture.
type PlatformSpec struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// NetworkPolicy is the egress policy of a sandbox.
type NetworkPolicy struct {
	DefaultAction string        `json:"defaultAction,omitempty"`
	Egress        []NetworkRule `json:"egress,omitempty"`
}

// NetworkRule allows or denies one egress target (FQDN, *.domain, IP or CIDR).
type NetworkRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// CredentialProxyConfig turns on credential injection for the sandbox.
type CredentialProxyConfig struct {
	Enabled bool `json:"enabled"`
}

// Volume mounts storage into a sandbox. Exactly one backend is set.
type Volume struct {
	Name      string    `json:"name"`
	Host      *HostVol  `json:"host,omitempty"`
	PVC       *PVCVol   `json:"pvc,omitempty"`
	OSSFS     *OSSFSVol `json:"ossfs,omitempty"`
	MountPath string    `json:"mountPath"`
	ReadOnly  bool      `json:"readOnly,omitempty"`
	SubPath   string    `json:"subPath,omitempty"`
}

// HostVol is a bind mount of a host path.
type HostVol struct {
	Path string `json:"path"`
}

// PVCVol is a persistent volume claim (a named volume on Docker).
type PVCVol struct {
	ClaimName                  string   `json:"claimName"`
	CreateIfNotExists          *bool    `json:"createIfNotExists,omitempty"`
	DeleteOnSandboxTermination bool     `json:"deleteOnSandboxTermination,omitempty"`
	StorageClass               string   `json:"storageClass,omitempty"`
	Storage                    string   `json:"storage,omitempty"`
	AccessModes                []string `json:"accessModes,omitempty"`
}

// OSSFSVol is an object-storage bucket mount.
type OSSFSVol struct {
	Bucket          string   `json:"bucket"`
	Endpoint        string   `json:"endpoint"`
	Version         string   `json:"version,omitempty"`
	Options         []string `json:"options,omitempty"`
	AccessKeyID     string   `json:"accessKeyId"`
	AccessKeySecret string   `json:"accessKeySecret"`
}

// CreateSandboxRequest is the body of POST /sandboxes.
type CreateSandboxRequest struct {
	Image          *ImageSpec        `json:"image,omitempty"`
	SnapshotID     string            `json:"snapshotId,omitempty"`
	Platform       *PlatformSpec     `json:"platform,omitempty"`
	Timeout        *int64            `json:"timeout,omitempty"` // seconds; nil = manual cleanup
	ResourceLimits map[string]string `json:"resourceLimits,omitempty"`
	// ResourceRequests is what a scheduler reserves for the sandbox (same
	// keys as ResourceLimits but gpu, each at most its limit); Kubernetes
	// only. Absent: the limits are reserved.
	ResourceRequests map[string]string      `json:"resourceRequests,omitempty"`
	Env              map[string]string      `json:"env,omitempty"`
	Metadata         map[string]string      `json:"metadata,omitempty"`
	Entrypoint       []string               `json:"entrypoint,omitempty"`
	NetworkPolicy    *NetworkPolicy         `json:"networkPolicy,omitempty"`
	CredentialProxy  *CredentialProxyConfig `json:"credentialProxy,omitempty"`
	SecureAccess     bool                   `json:"secureAccess,omitempty"`
	Volumes          []Volume               `json:"volumes,omitempty"`
	Extensions       map[string]string      `json:"extensions,omitempty"`
}

// SandboxStatus is the state of a sandbox and why it is in it.
type SandboxStatus struct {
	State            string     `json:"state"`
	Reason           string     `json:"reason,omitempty"`
	Message          string     `json:"message,omitempty"`
	LastTransitionAt *time.Time `json:"lastTransitionAt,omitempty"`
}

// SandboxInfo is the lifecycle API's description of one sandbox (the
// "Sandbox" schema of the contract; the SDK's Sandbox is a live handle).
type SandboxInfo struct {
	ID         string            `json:"id"`
	Image      *ImageSpec        `json:"image,omitempty"` // never carries auth on the way out
	SnapshotID string            `json:"snapshotId,omitempty"`
	Platform   *PlatformSpec     `json:"platform,omitempty"`
	Status     SandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"` // absent for manual cleanup
	CreatedAt  time.Time         `json:"createdAt"`
}

// CreateSandboxResponse is the 202 body of POST /sandboxes.
type CreateSandboxResponse struct {
	ID         string            `json:"id"`
	Status     SandboxStatus     `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Platform   *PlatformSpec     `json:"platform,omitempty"`
	ExpiresAt  *time.Time        `json:"expiresAt,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	Entrypoint []string          `json:"entrypoint"`
}

// PaginationInfo describes one page of a list.
type PaginationInfo struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"pageSize"`
	TotalItems  int  `json:"totalItems"`
	TotalPages  int  `json:"totalPages"`
	HasNextPage bool `json:"hasNextPage"`
}

// ListSandboxesResponse is the body of GET /sandboxes.
type ListSandboxesResponse struct {
	Items      []SandboxInfo  `json:"items"`
	Pagination PaginationInfo `json:"pagination"`
}

// RenewSandboxExpirationRequest is the body of POST /sandboxes/{id}/renew-expiration.
type RenewSandboxExpirationRequest struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// RenewSandboxExpirationResponse is its reply.
type RenewSandboxExpirationResponse struct {
	ExpiresAt time.Time `json:"expiresAt"`
}

// Endpoint tells a client how to reach a port of a sandbox: endpoint is
// host[:port][/path] without a scheme; headers must be sent with every
// request to it.
type Endpoint struct {
	Endpoint string            `json:"endpoint"`
	Headers  map[string]string `json:"headers,omitempty"`
}

// CreateSnapshotRequest is the optional body of POST /sandboxes/{id}/snapshots.
type CreateSnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// SnapshotStatus is the state of a snapshot.
type SnapshotStatus struct {
	State            string     `json:"state"`
	Reason           string     `json:"reason,omitempty"`
	Message          string     `json:"message,omitempty"`
	LastTransitionAt *time.Time `json:"lastTransitionAt,omitempty"`
}

// Snapshot is a saved copy of a sandbox's filesystem that new sandboxes
// can start from.
type Snapshot struct {
	ID        string         `json:"id"`
	SandboxID string         `json:"sandboxId"`
	Name      string         `json:"name,omitempty"`
	Status    SnapshotStatus `json:"status"`
	CreatedAt time.Time      `json:"createdAt"`
}

// ListSnapshotsResponse is the body of GET /snapshots.
type ListSnapshotsResponse struct {
	Items      []Snapshot     `json:"items"`
	Pagination PaginationInfo `json:"pagination"`
}
