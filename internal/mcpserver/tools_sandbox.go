package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// SandboxInfo is how the tools describe a sandbox.
type SandboxInfo struct {
	ID         string            `json:"id" jsonschema:"sandbox id"`
	State      string            `json:"state" jsonschema:"Pending, Running, Pausing, Paused, Resuming, Stopping, Terminated or Failed"`
	Reason     string            `json:"reason,omitempty" jsonschema:"machine-readable reason for the state"`
	Message    string            `json:"message,omitempty" jsonschema:"human-readable detail of the state"`
	Image      string            `json:"image,omitempty" jsonschema:"image the sandbox started from"`
	SnapshotID string            `json:"snapshot_id,omitempty" jsonschema:"snapshot the sandbox started from"`
	Entrypoint []string          `json:"entrypoint" jsonschema:"the sandbox's main process"`
	Metadata   map[string]string `json:"metadata,omitempty" jsonschema:"user metadata"`
	CreatedAt  time.Time         `json:"created_at" jsonschema:"creation time (RFC 3339)"`
	ExpiresAt  *time.Time        `json:"expires_at,omitempty" jsonschema:"when the sandbox is deleted unless renewed; absent for manual cleanup"`
	Connected  bool              `json:"connected" jsonschema:"whether this MCP server holds a connection to it (command and file tools need one)"`
}

func (t *tools) view(info sandbox.SandboxInfo) SandboxInfo {
	v := SandboxInfo{
		ID:         info.ID,
		State:      info.Status.State,
		Reason:     info.Status.Reason,
		Message:    info.Status.Message,
		SnapshotID: info.SnapshotID,
		Entrypoint: info.Entrypoint,
		Metadata:   info.Metadata,
		CreatedAt:  info.CreatedAt,
		ExpiresAt:  info.ExpiresAt,
		Connected:  t.reg.has(info.ID),
	}
	if info.Image != nil {
		v.Image = info.Image.URI
	}
	return v
}

// SandboxOut is the reply of sandbox_create, sandbox_connect and
// sandbox_get_info.
type SandboxOut struct {
	SandboxID string      `json:"sandbox_id" jsonschema:"the sandbox id to pass to other tools"`
	Info      SandboxInfo `json:"info" jsonschema:"the sandbox's description"`
}

// NetworkPolicyIn is the egress policy argument of sandbox_create.
type NetworkPolicyIn struct {
	DefaultAction string         `json:"default_action,omitempty" jsonschema:"allow or deny: what happens to egress no rule matches"`
	Egress        []EgressRuleIn `json:"egress,omitempty" jsonschema:"rules, first match wins"`
}

// EgressRuleIn is one egress rule.
type EgressRuleIn struct {
	Action string `json:"action" jsonschema:"allow or deny"`
	Target string `json:"target" jsonschema:"FQDN, *.domain, IP address or CIDR"`
}

// CreateIn is the input of sandbox_create.
type CreateIn struct {
	Image                        string            `json:"image" jsonschema:"container image, e.g. python:3.12-slim"`
	AuthUsername                 string            `json:"auth_username,omitempty" jsonschema:"registry user name for a private image"`
	AuthPassword                 string            `json:"auth_password,omitempty" jsonschema:"registry password or token for a private image"`
	TimeoutSeconds               int               `json:"timeout_seconds,omitempty" jsonschema:"seconds until the sandbox is deleted automatically (renew with sandbox_renew)"`
	ReadyTimeoutSeconds          int               `json:"ready_timeout_seconds,omitempty" jsonschema:"seconds to wait for the sandbox to run and its execd to answer"`
	HealthCheckPollingIntervalMS int               `json:"health_check_polling_interval_ms,omitempty" jsonschema:"accepted for compatibility; readiness is polled with the SDK's own backoff"`
	SkipHealthCheck              bool              `json:"skip_health_check,omitempty" jsonschema:"return once the sandbox is Running without waiting for execd"`
	Env                          map[string]string `json:"env,omitempty" jsonschema:"environment variables of the sandbox"`
	Metadata                     map[string]string `json:"metadata,omitempty" jsonschema:"labels to find the sandbox by in sandbox_list"`
	Resource                     map[string]string `json:"resource,omitempty" jsonschema:"resource limits, e.g. {\"cpu\": \"1\", \"memory\": \"2Gi\", \"ephemeral-storage\": \"10Gi\"}"`
	NetworkPolicy                *NetworkPolicyIn  `json:"network_policy,omitempty" jsonschema:"egress policy; gives the sandbox an egress sidecar, which egress_get_policy and egress_patch_policy talk to"`
	CredentialProxy              bool              `json:"credential_proxy,omitempty" jsonschema:"turn on the credential proxy, which injects credentials the host writes into the vault (outside MCP) into outbound HTTPS; needs network_policy"`
	Extensions                   map[string]string `json:"extensions,omitempty" jsonschema:"server-specific extensions"`
	Entrypoint                   []string          `json:"entrypoint,omitempty" jsonschema:"main process, e.g. [\"sleep\", \"infinity\"]; default tail -f /dev/null"`
}

var createDefaults = map[string]any{
	"timeout_seconds": 600, "ready_timeout_seconds": 30, "health_check_polling_interval_ms": 200, "skip_health_check": false,
}

func (in *CreateIn) validate() error {
	if in.Image == "" {
		return errMissing("image")
	}
	if in.TimeoutSeconds == 0 {
		in.TimeoutSeconds = 600
	}
	if in.ReadyTimeoutSeconds == 0 {
		in.ReadyTimeoutSeconds = 30
	}
	if in.TimeoutSeconds < 0 || in.ReadyTimeoutSeconds < 0 || in.HealthCheckPollingIntervalMS < 0 {
		return fmt.Errorf("timeout_seconds, ready_timeout_seconds and health_check_polling_interval_ms must not be negative")
	}
	if (in.AuthUsername == "") != (in.AuthPassword == "") {
		return fmt.Errorf("auth_username and auth_password go together")
	}
	if in.CredentialProxy && in.NetworkPolicy == nil {
		return fmt.Errorf("credential_proxy needs network_policy: the proxy runs in the egress sidecar")
	}
	if p := in.NetworkPolicy; p != nil {
		if p.DefaultAction != "" && p.DefaultAction != "allow" && p.DefaultAction != "deny" {
			return fmt.Errorf("network_policy.default_action must be allow or deny, not %q", p.DefaultAction)
		}
		for i, r := range p.Egress {
			if r.Action != "allow" && r.Action != "deny" {
				return fmt.Errorf("network_policy.egress[%d].action must be allow or deny, not %q", i, r.Action)
			}
			if r.Target == "" {
				return fmt.Errorf("network_policy.egress[%d].target is required", i)
			}
		}
	}
	return nil
}

func (in *CreateIn) options() sandbox.CreateOptions {
	o := sandbox.CreateOptions{
		Image:           in.Image,
		Entrypoint:      in.Entrypoint,
		Timeout:         seconds(in.TimeoutSeconds),
		Resources:       in.Resource,
		Env:             in.Env,
		Metadata:        in.Metadata,
		Extensions:      in.Extensions,
		ReadyTimeout:    seconds(in.ReadyTimeoutSeconds),
		SkipHealthCheck: in.SkipHealthCheck,
		CredentialProxy: in.CredentialProxy,
	}
	if in.AuthUsername != "" {
		o.ImageAuth = &sandbox.ImageAuth{Username: in.AuthUsername, Password: in.AuthPassword}
	}
	if p := in.NetworkPolicy; p != nil {
		np := &sandbox.NetworkPolicy{DefaultAction: p.DefaultAction}
		for _, r := range p.Egress {
			np.Egress = append(np.Egress, sandbox.NetworkRule{Action: r.Action, Target: r.Target})
		}
		o.NetworkPolicy = np
	}
	return o
}

func (t *tools) sandboxCreate(ctx context.Context, in CreateIn) (SandboxOut, error) {
	if err := in.validate(); err != nil {
		return SandboxOut{}, err
	}
	sb, err := t.cfg.Client.Create(ctx, in.options())
	if err != nil {
		return SandboxOut{}, fmt.Errorf("image %s: %w", in.Image, err)
	}
	t.reg.put(sb)
	return t.describe(ctx, sb.ID())
}

// describe is the SandboxOut of id, read from the lifecycle API.
func (t *tools) describe(ctx context.Context, id string) (SandboxOut, error) {
	info, err := t.cfg.Client.Get(ctx, id)
	if err != nil {
		return SandboxOut{}, err // the SDK names the call and the id
	}
	return SandboxOut{SandboxID: id, Info: t.view(info)}, nil
}

// ConnectIn is the input of sandbox_connect.
type ConnectIn struct {
	SandboxID                    string `json:"sandbox_id" jsonschema:"id of an existing sandbox"`
	ConnectTimeoutSeconds        int    `json:"connect_timeout_seconds,omitempty" jsonschema:"seconds to wait for the sandbox's execd to answer"`
	HealthCheckPollingIntervalMS int    `json:"health_check_polling_interval_ms,omitempty" jsonschema:"accepted for compatibility; readiness is polled with the SDK's own backoff"`
	SkipHealthCheck              bool   `json:"skip_health_check,omitempty" jsonschema:"do not wait for execd to answer"`
}

var connectDefaults = map[string]any{"connect_timeout_seconds": 30, "health_check_polling_interval_ms": 200, "skip_health_check": false}

func (t *tools) sandboxConnect(ctx context.Context, in ConnectIn) (SandboxOut, error) {
	if in.SandboxID == "" {
		return SandboxOut{}, errMissing("sandbox_id")
	}
	if in.ConnectTimeoutSeconds < 0 || in.HealthCheckPollingIntervalMS < 0 {
		return SandboxOut{}, fmt.Errorf("connect_timeout_seconds and health_check_polling_interval_ms must not be negative")
	}
	if in.ConnectTimeoutSeconds == 0 {
		in.ConnectTimeoutSeconds = 30
	}
	sb, err := t.cfg.Client.Connect(ctx, in.SandboxID, sandbox.ConnectOptions{
		ReadyTimeout:    seconds(in.ConnectTimeoutSeconds),
		SkipHealthCheck: in.SkipHealthCheck,
	})
	if err != nil {
		return SandboxOut{}, err // the SDK names the call and the id
	}
	t.reg.put(sb)
	return t.describe(ctx, in.SandboxID)
}

// IDIn is the input of tools that take only a sandbox id.
type IDIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"sandbox id"`
}

// LifecycleIDIn is the input of lifecycle tools that work on any id.
type LifecycleIDIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility; this tool works on any sandbox id without connecting"`
}

// ConnectedIDIn is the input of tools that need a connected sandbox.
type ConnectedIDIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"connect to the sandbox first when this server is not connected to it yet"`
}

// KillOut is the reply of sandbox_kill.
type KillOut struct {
	SandboxID string `json:"sandbox_id" jsonschema:"sandbox id"`
	Killed    bool   `json:"killed" jsonschema:"true: the sandbox is being deleted"`
}

func (t *tools) sandboxKill(ctx context.Context, in IDIn) (KillOut, error) {
	if in.SandboxID == "" {
		return KillOut{}, errMissing("sandbox_id")
	}
	if err := t.cfg.Client.Kill(ctx, in.SandboxID); err != nil {
		return KillOut{}, err // the SDK names the call and the id
	}
	t.reg.remove(in.SandboxID)
	return KillOut{SandboxID: in.SandboxID, Killed: true}, nil
}

func (t *tools) sandboxGetInfo(ctx context.Context, in LifecycleIDIn) (SandboxOut, error) {
	if in.SandboxID == "" {
		return SandboxOut{}, errMissing("sandbox_id")
	}
	return t.describe(ctx, in.SandboxID)
}

// ListFilter narrows sandbox_list.
type ListFilter struct {
	States   []string          `json:"states,omitempty" jsonschema:"only sandboxes in one of these states (e.g. Running, Paused)"`
	Metadata map[string]string `json:"metadata,omitempty" jsonschema:"only sandboxes carrying all these metadata pairs"`
	Page     int               `json:"page,omitempty" jsonschema:"page number, from 1"`
	PageSize int               `json:"page_size,omitempty" jsonschema:"sandboxes per page"`
}

// ListIn is the input of sandbox_list.
type ListIn struct {
	Filter *ListFilter `json:"filter,omitempty" jsonschema:"optional filter and paging"`
}

// ListOut is the reply of sandbox_list.
type ListOut struct {
	Sandboxes   []SandboxInfo `json:"sandboxes" jsonschema:"the sandboxes on this page"`
	Page        int           `json:"page" jsonschema:"page number"`
	PageSize    int           `json:"page_size" jsonschema:"sandboxes per page"`
	TotalItems  int           `json:"total_items" jsonschema:"sandboxes matching the filter"`
	TotalPages  int           `json:"total_pages" jsonschema:"pages"`
	HasNextPage bool          `json:"has_next_page" jsonschema:"whether a later page exists"`
}

func (t *tools) sandboxList(ctx context.Context, in ListIn) (ListOut, error) {
	var o sandbox.ListOptions
	if f := in.Filter; f != nil {
		if f.Page < 0 || f.PageSize < 0 {
			return ListOut{}, fmt.Errorf("filter.page and filter.page_size must not be negative")
		}
		o = sandbox.ListOptions{States: f.States, Metadata: f.Metadata, Page: f.Page, PageSize: f.PageSize}
	}
	resp, err := t.cfg.Client.List(ctx, o)
	if err != nil {
		return ListOut{}, err // the SDK names the call
	}
	out := ListOut{
		Sandboxes:   make([]SandboxInfo, 0, len(resp.Items)),
		Page:        resp.Pagination.Page,
		PageSize:    resp.Pagination.PageSize,
		TotalItems:  resp.Pagination.TotalItems,
		TotalPages:  resp.Pagination.TotalPages,
		HasNextPage: resp.Pagination.HasNextPage,
	}
	for _, info := range resp.Items {
		out.Sandboxes = append(out.Sandboxes, t.view(info))
	}
	return out, nil
}

// RenewIn is the input of sandbox_renew.
type RenewIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	TimeoutSeconds   int    `json:"timeout_seconds" jsonschema:"the sandbox now expires this many seconds from now"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility; this tool works on any sandbox id without connecting"`
}

// RenewOut is the reply of sandbox_renew.
type RenewOut struct {
	SandboxID string    `json:"sandbox_id" jsonschema:"sandbox id"`
	ExpiresAt time.Time `json:"expires_at" jsonschema:"new expiry time (RFC 3339)"`
}

func (t *tools) sandboxRenew(ctx context.Context, in RenewIn) (RenewOut, error) {
	if in.SandboxID == "" {
		return RenewOut{}, errMissing("sandbox_id")
	}
	if in.TimeoutSeconds <= 0 {
		return RenewOut{}, fmt.Errorf("timeout_seconds must be positive, got %d", in.TimeoutSeconds)
	}
	at, err := t.cfg.Client.Renew(ctx, in.SandboxID, time.Now().Add(seconds(in.TimeoutSeconds)))
	if err != nil {
		return RenewOut{}, err // the SDK names the call and the id
	}
	return RenewOut{SandboxID: in.SandboxID, ExpiresAt: at}, nil
}

// MetricsOut is the reply of sandbox_get_metrics.
type MetricsOut struct {
	SandboxID         string  `json:"sandbox_id" jsonschema:"sandbox id"`
	CPUCount          float64 `json:"cpu_count" jsonschema:"CPUs available to the sandbox"`
	CPUUsedPercentage float64 `json:"cpu_used_percentage" jsonschema:"CPU use in percent"`
	MemoryTotalInMiB  float64 `json:"memory_total_in_mib" jsonschema:"memory limit in MiB"`
	MemoryUsedInMiB   float64 `json:"memory_used_in_mib" jsonschema:"memory in use in MiB"`
	Timestamp         int64   `json:"timestamp" jsonschema:"when measured, unix milliseconds"`
}

func (t *tools) sandboxGetMetrics(ctx context.Context, in ConnectedIDIn) (MetricsOut, error) {
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return MetricsOut{}, err
	}
	m, err := sb.Metrics(ctx)
	if err != nil {
		return MetricsOut{}, fmt.Errorf("metrics of sandbox %s: %w", in.SandboxID, err)
	}
	return MetricsOut{
		SandboxID:         in.SandboxID,
		CPUCount:          m.CPUCount,
		CPUUsedPercentage: m.CPUUsedPct,
		MemoryTotalInMiB:  m.MemTotalMiB,
		MemoryUsedInMiB:   m.MemUsedMiB,
		Timestamp:         m.Timestamp,
	}, nil
}

// HealthOut is the reply of sandbox_healthcheck.
type HealthOut struct {
	SandboxID string `json:"sandbox_id" jsonschema:"sandbox id"`
	Healthy   bool   `json:"healthy" jsonschema:"whether the sandbox's execd answered"`
}

func (t *tools) sandboxHealthcheck(ctx context.Context, in ConnectedIDIn) (HealthOut, error) {
	sb, err := t.reg.get(ctx, in.SandboxID, in.ConnectIfMissing)
	if err != nil {
		return HealthOut{}, err
	}
	return HealthOut{SandboxID: in.SandboxID, Healthy: sb.Healthy(ctx)}, nil
}

// EndpointIn is the input of sandbox_get_endpoint.
type EndpointIn struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"sandbox id"`
	Port             int    `json:"port" jsonschema:"port inside the sandbox"`
	ConnectIfMissing bool   `json:"connect_if_missing,omitempty" jsonschema:"accepted for compatibility; this tool works on any sandbox id without connecting"`
}

// EndpointOut is the reply of sandbox_get_endpoint.
type EndpointOut struct {
	SandboxID string            `json:"sandbox_id" jsonschema:"sandbox id"`
	Port      int               `json:"port" jsonschema:"port inside the sandbox"`
	Endpoint  string            `json:"endpoint" jsonschema:"host:port[/path] to reach the port, without scheme"`
	Headers   map[string]string `json:"headers,omitempty" jsonschema:"headers to send with every request to the endpoint"`
}

func (t *tools) sandboxGetEndpoint(ctx context.Context, in EndpointIn) (EndpointOut, error) {
	if in.SandboxID == "" {
		return EndpointOut{}, errMissing("sandbox_id")
	}
	if in.Port < 1 || in.Port > 65535 {
		return EndpointOut{}, fmt.Errorf("port must be between 1 and 65535, got %d", in.Port)
	}
	ep, err := t.cfg.Client.Endpoint(ctx, in.SandboxID, in.Port, t.cfg.UseServerProxy)
	if err != nil {
		return EndpointOut{}, err // the SDK names the call, the id and the port
	}
	return EndpointOut{SandboxID: in.SandboxID, Port: in.Port, Endpoint: ep.Endpoint, Headers: ep.Headers}, nil
}
