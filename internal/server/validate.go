package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// defaultEntrypoint keeps a sandbox restored from a snapshot alive when the
// request names no entrypoint.
var defaultEntrypoint = []string{"tail", "-f", "/dev/null"}

// extPoolRef is the extension that asks for a pooled sandbox.
const extPoolRef = "poolRef"

// checkCreate validates a create request and turns it into a runtime spec
// without ID, ExecdToken and ExpiresAt (set by the caller). The returned
// timeout is 0 for a sandbox without automatic expiry. Every failure is an
// *apierror.Error naming the offending field.
func (s *Server) checkCreate(req *sandbox.CreateSandboxRequest) (runtime.Spec, time.Duration, error) {
	var spec runtime.Spec
	if ref, ok := req.Extensions[extPoolRef]; ok {
		return s.checkPooledCreate(req, ref)
	}
	switch {
	case req.Image != nil && req.SnapshotID != "":
		return spec, 0, badRequest("give either image or snapshotId, not both")
	case req.Image == nil && req.SnapshotID == "":
		return spec, 0, badRequest("one of image or snapshotId is required")
	case req.Image != nil:
		uri := strings.TrimSpace(req.Image.URI)
		if uri == "" {
			return spec, 0, badRequest("image.uri is required")
		}
		if uri != req.Image.URI || strings.ContainsAny(uri, " \t\r\n\x00") {
			return spec, 0, badRequest("image.uri %q must not contain spaces or control characters", req.Image.URI)
		}
		spec.Image = uri
		if a := req.Image.Auth; a != nil {
			if a.Username == "" {
				return spec, 0, badRequest("image.auth.username is required when image.auth is given")
			}
			spec.ImageAuth = &runtime.RegistryAuth{Username: a.Username, Password: a.Password}
		}
	default:
		spec.SnapshotID = req.SnapshotID
	}

	switch {
	case req.Entrypoint == nil && req.Image != nil:
		return spec, 0, badRequest("entrypoint is required with image")
	case req.Entrypoint == nil:
		spec.Entrypoint = slices.Clone(defaultEntrypoint)
	case len(req.Entrypoint) == 0:
		return spec, 0, badRequest("entrypoint must have at least one element")
	default:
		for i, arg := range req.Entrypoint {
			if arg == "" {
				return spec, 0, badRequest("entrypoint[%d] is empty", i)
			}
			if strings.ContainsRune(arg, 0) {
				return spec, 0, badRequest("entrypoint[%d] contains a NUL byte", i)
			}
		}
		spec.Entrypoint = slices.Clone(req.Entrypoint)
	}

	timeout, err := s.checkTimeout(req.Timeout)
	if err != nil {
		return spec, 0, err
	}
	if spec.Resources, err = checkResources("resourceLimits", req.ResourceLimits); err != nil {
		return spec, 0, err
	}
	if _, ok := req.ResourceLimits[limitDisk]; !ok {
		spec.Resources.DiskBytes = s.cfg.DefaultDiskLimit
	}
	if spec.Requests, err = checkRequests(req.ResourceRequests, spec.Resources); err != nil {
		return spec, 0, err
	}
	if err := checkEnv(req.Env); err != nil {
		return spec, 0, err
	}
	spec.Env = maps.Clone(req.Env)
	if err := checkMetadata("metadata", req.Metadata); err != nil {
		return spec, 0, err
	}
	spec.Metadata = maps.Clone(req.Metadata)
	if spec.Platform, err = checkPlatform(req.Platform); err != nil {
		return spec, 0, err
	}
	if spec.Egress, err = checkEgress(req.NetworkPolicy, req.CredentialProxy); err != nil {
		return spec, 0, err
	}
	spec.Extensions = maps.Clone(req.Extensions)
	switch v, ok := req.Extensions[sandbox.ExtIsolatedExecution]; {
	case !ok, v == "false":
	case v == "true":
		spec.IsolatedExecution = true
	default:
		return spec, 0, badRequest("extensions.%s: %q, want \"true\" or \"false\"", sandbox.ExtIsolatedExecution, v)
	}
	if req.SecureAccess {
		return spec, 0, notSupported("secureAccess: secure endpoint access needs the ingress gateway, which this server does not run")
	}
	if spec.Volumes, err = s.checkVolumes(req.Volumes); err != nil {
		return spec, 0, err
	}
	return spec, timeout, nil
}

// checkPooledCreate validates a create with extensions.poolRef: the
// sandbox is a warm pod of a Pool, so the pool's template decides its
// image, entrypoint, resources and volumes. image, entrypoint and
// resourceLimits are accepted and not used (the SDKs send defaults for
// them); what would change the pod or its network is refused, rather than
// silently dropped. env reaches every process execd starts (the claim
// carries it); metadata labels the sandbox.
func (s *Server) checkPooledCreate(req *sandbox.CreateSandboxRequest, ref string) (runtime.Spec, time.Duration, error) {
	var spec runtime.Spec
	if _, ok := s.cfg.Runtime.(runtime.Pools); !ok {
		return spec, 0, notSupported("extensions.%s: sandbox pools are not available on this server's runtime", extPoolRef)
	}
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return spec, 0, badRequest("extensions.%s: empty; name a pool, or \"*\" for any pool made by this server", extPoolRef)
	}
	if ref != "*" {
		if err := grammar.CheckDNSSubdomain(ref); err != nil {
			return spec, 0, badRequest("extensions.%s: %v", extPoolRef, err)
		}
	}
	for field, given := range map[string]bool{
		"snapshotId":      req.SnapshotID != "",
		"volumes":         len(req.Volumes) > 0,
		"networkPolicy":   req.NetworkPolicy != nil,
		"credentialProxy": req.CredentialProxy != nil,
		"platform":        req.Platform != nil,
		"image.auth":      req.Image != nil && req.Image.Auth != nil,
		"secureAccess":    req.SecureAccess,
	} {
		if given {
			return spec, 0, badRequest("%s: not available for a sandbox from a pool (extensions.%s); the pool's template decides the pod", field, extPoolRef)
		}
	}
	if _, ok := req.Extensions[sandbox.ExtIsolatedExecution]; ok {
		return spec, 0, badRequest("extensions.%s: not available for a sandbox from a pool", sandbox.ExtIsolatedExecution)
	}
	timeout, err := s.checkTimeout(req.Timeout)
	if err != nil {
		return spec, 0, err
	}
	// Checked as for any create, so a bad value is still a clear error.
	if _, err := checkResources("resourceLimits", req.ResourceLimits); err != nil {
		return spec, 0, err
	}
	if _, err := checkResources("resourceRequests", req.ResourceRequests); err != nil {
		return spec, 0, err
	}
	if err := checkEnv(req.Env); err != nil {
		return spec, 0, err
	}
	if err := checkMetadata("metadata", req.Metadata); err != nil {
		return spec, 0, err
	}
	spec.PoolRef = ref
	if req.Image != nil {
		spec.Image = strings.TrimSpace(req.Image.URI)
	}
	spec.Env = maps.Clone(req.Env)
	spec.Metadata = maps.Clone(req.Metadata)
	return spec, timeout, nil
}

// checkTimeout validates the timeout in seconds; nil means manual cleanup
// and yields 0.
func (s *Server) checkTimeout(seconds *int64) (time.Duration, error) {
	if seconds == nil {
		return 0, nil
	}
	minSec := int64(math.Ceil(s.cfg.MinTimeout.Seconds()))
	if *seconds < minSec || *seconds <= 0 {
		return 0, badRequest("timeout must be at least %d seconds (got %d); leave it out for a sandbox without automatic expiry", minSec, *seconds)
	}
	maxSec := int64(math.MaxInt64 / int64(time.Second))
	if s.cfg.MaxTimeout > 0 {
		maxSec = int64(s.cfg.MaxTimeout / time.Second)
	}
	if *seconds > maxSec {
		return 0, badRequest("timeout must be at most %d seconds (got %d)", maxSec, *seconds)
	}
	return time.Duration(*seconds) * time.Second, nil
}

// limitDisk is the resourceLimits key of the disk limit, Kubernetes' name
// for a container's writable-layer (and log) storage.
const limitDisk = "ephemeral-storage"

// checkResources parses resourceLimits (or resourceRequests, the field
// named): cpu (Kubernetes CPU quantity), memory and ephemeral-storage
// (Kubernetes byte quantities) and gpu (a count or "all").
func checkResources(field string, limits map[string]string) (runtime.Resources, error) {
	var res runtime.Resources
	for _, k := range slices.Sorted(maps.Keys(limits)) {
		v := strings.TrimSpace(limits[k])
		switch k {
		case "cpu":
			n, err := grammar.ParseCPU(v)
			if err != nil || n <= 0 {
				return res, badRequest("%s.cpu %q is not a positive CPU quantity such as \"500m\" or \"2\"", field, limits[k])
			}
			res.NanoCPUs = n
		case "memory":
			n, err := grammar.ParseMemory(v)
			if err != nil {
				return res, badRequest("%s.memory %q is not a memory quantity such as \"512Mi\" or \"2Gi\"", field, limits[k])
			}
			res.MemoryBytes = n
		case limitDisk:
			// The smallest limit an engine accepts is the driver's to
			// check (ErrInvalid, also a 400).
			n, err := grammar.ParseMemory(v)
			if err != nil || n <= 0 {
				return res, badRequest("%s.%s %q is not a positive byte quantity such as \"512Mi\" or \"10Gi\"", field, k, limits[k])
			}
			res.DiskBytes = n
		case "gpu":
			if v == "all" {
				res.GPUs = -1
				break
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return res, badRequest("%s.gpu %q must be a non-negative integer or \"all\"", field, limits[k])
			}
			res.GPUs = n
		default:
			return res, badRequest("%s: unknown key %q (allowed: cpu, memory, %s, gpu)", field, k, limitDisk)
		}
	}
	return res, nil
}

// checkRequests parses resourceRequests, what a scheduler reserves for the
// sandbox: never more than the limit of the same resource, and no gpu (a
// GPU is reserved whole: its request is its limit).
func checkRequests(requests map[string]string, limits runtime.Resources) (runtime.Resources, error) {
	req, err := checkResources("resourceRequests", requests)
	if err != nil {
		return req, err
	}
	if _, ok := requests["gpu"]; ok {
		return req, badRequest("resourceRequests.gpu: a GPU is reserved whole; give gpu in resourceLimits only")
	}
	for _, c := range []struct {
		key        string
		req, limit int64
	}{{"cpu", req.NanoCPUs, limits.NanoCPUs}, {"memory", req.MemoryBytes, limits.MemoryBytes}, {limitDisk, req.DiskBytes, limits.DiskBytes}} {
		if c.limit > 0 && c.req > c.limit {
			return req, badRequest("resourceRequests.%s %q is more than resourceLimits.%s", c.key, requests[c.key], c.key)
		}
	}
	return req, nil
}

// checkEnv rejects variable names the process environment cannot hold.
func checkEnv(env map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		switch {
		case k == "":
			return badRequest("env: a variable name is empty")
		case strings.ContainsAny(k, "=\x00"):
			return badRequest("env: variable name %q must not contain '=' or NUL", k)
		case strings.ContainsRune(env[k], 0):
			return badRequest("env: the value of %q contains a NUL byte", k)
		}
	}
	return nil
}

// checkPlatform accepts linux on amd64 or arm64; whether the engine's
// host can run the architecture is the runtime's check.
func checkPlatform(p *sandbox.PlatformSpec) (*runtime.Platform, error) {
	if p == nil {
		return nil, nil
	}
	switch p.OS {
	case "linux":
	case "":
		return nil, badRequest("platform.os is required when platform is given")
	case "windows":
		return nil, notSupported("platform.os %q: only linux sandboxes are available", p.OS)
	default:
		return nil, badRequest("platform.os %q: want linux", p.OS)
	}
	switch p.Arch {
	case "amd64", "arm64":
	case "":
		return nil, badRequest("platform.arch is required when platform is given")
	default:
		return nil, badRequest("platform.arch %q: want amd64 or arm64", p.Arch)
	}
	return &runtime.Platform{OS: p.OS, Arch: p.Arch}, nil
}

// checkEgress validates the network policy (with the sidecar's own rules,
// so a policy the sidecar would refuse never reaches it) and returns the
// sidecar's configuration without its token, or nil without a policy.
func checkEgress(np *sandbox.NetworkPolicy, cp *sandbox.CredentialProxyConfig) (*runtime.Egress, error) {
	credentialProxy := cp != nil && cp.Enabled
	if np == nil {
		if credentialProxy {
			return nil, badRequest("credentialProxy: the credential proxy runs in the egress sidecar; give a networkPolicy too")
		}
		return nil, nil
	}
	p, err := policy.New(np, policy.Options{MaxRules: policy.DefaultMaxRules})
	if err != nil {
		return nil, badRequest("networkPolicy: %v", err)
	}
	b, err := json.Marshal(p.Wire())
	if err != nil {
		return nil, fmt.Errorf("encode network policy: %w", err)
	}
	return &runtime.Egress{Policy: b, CredentialProxy: credentialProxy}, nil
}
