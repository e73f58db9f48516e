package server

import (
	"fmt"
	"net/http"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/kubepool"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestCreateValidationRejects(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MaxTimeout = 2 * time.Hour
	})
	const (
		bad     = http.StatusBadRequest
		invalid = apierror.CodeInvalidRequest
		unsup   = apierror.CodeAPINotSupported
	)
	vol := func(v map[string]any) map[string]any {
		base := map[string]any{"name": "data", "mountPath": "/data", "host": map[string]any{"path": "/srv/data"}}
		for k, x := range v {
			if x == nil {
				delete(base, k)
			} else {
				base[k] = x
			}
		}
		return base
	}
	tests := []struct {
		name   string
		edit   func(b map[string]any)
		status int
		code   string
		want   string // fragment of the message
	}{
		{"both image and snapshot", func(b map[string]any) { b["snapshotId"] = "s1" }, bad, invalid, "not both"},
		{"neither image nor snapshot", func(b map[string]any) { delete(b, "image") }, bad, invalid, "one of image or snapshotId"},
		{"empty image uri", func(b map[string]any) { b["image"] = map[string]any{"uri": ""} }, bad, invalid, "image.uri is required"},
		{"image uri with space", func(b map[string]any) { b["image"] = map[string]any{"uri": "a b"} }, bad, invalid, "image.uri"},
		{"auth without username", func(b map[string]any) {
			b["image"] = map[string]any{"uri": "x", "auth": map[string]any{"password": "p"}}
		}, bad, invalid, "image.auth.username"},
		{"no entrypoint with image", func(b map[string]any) { delete(b, "entrypoint") }, bad, invalid, "entrypoint is required"},
		{"empty entrypoint", func(b map[string]any) { b["entrypoint"] = []string{} }, bad, invalid, "at least one"},
		{"empty entrypoint element", func(b map[string]any) { b["entrypoint"] = []string{"sh", ""} }, bad, invalid, "entrypoint[1] is empty"},
		{"timeout too small", func(b map[string]any) { b["timeout"] = 59 }, bad, invalid, "at least 60 seconds"},
		{"timeout zero", func(b map[string]any) { b["timeout"] = 0 }, bad, invalid, "at least 60"},
		{"timeout negative", func(b map[string]any) { b["timeout"] = -5 }, bad, invalid, "at least 60"},
		{"timeout above max", func(b map[string]any) { b["timeout"] = 7201 }, bad, invalid, "at most 7200"},
		{"timeout fractional", func(b map[string]any) { b["timeout"] = 60.5 }, bad, invalid, "timeout"},
		{"timeout string", func(b map[string]any) { b["timeout"] = "60" }, bad, invalid, "timeout"},
		{"unknown resource", func(b map[string]any) { b["resourceLimits"] = map[string]string{"disk": "1Gi"} }, bad, invalid, `unknown key "disk"`},
		{"bad cpu", func(b map[string]any) { b["resourceLimits"] = map[string]string{"cpu": "lots"} }, bad, invalid, "resourceLimits.cpu"},
		{"zero cpu", func(b map[string]any) { b["resourceLimits"] = map[string]string{"cpu": "0"} }, bad, invalid, "resourceLimits.cpu"},
		{"bad memory", func(b map[string]any) { b["resourceLimits"] = map[string]string{"memory": "2GB"} }, bad, invalid, "resourceLimits.memory"},
		{"bad gpu", func(b map[string]any) { b["resourceLimits"] = map[string]string{"gpu": "-1"} }, bad, invalid, "resourceLimits.gpu"},
		{"bad disk", func(b map[string]any) { b["resourceLimits"] = map[string]string{"ephemeral-storage": "10GB"} }, bad, invalid, "resourceLimits.ephemeral-storage"},
		{"negative disk", func(b map[string]any) { b["resourceLimits"] = map[string]string{"ephemeral-storage": "-1Gi"} }, bad, invalid, "resourceLimits.ephemeral-storage"},
		// The smallest limit an engine takes is the driver's check
		// (TestCreateDiskLimit in internal/runtime/docker).
		{"zero disk", func(b map[string]any) { b["resourceLimits"] = map[string]string{"ephemeral-storage": "0"} }, bad, invalid, "not a positive byte quantity"},
		{"gpu word", func(b map[string]any) { b["resourceLimits"] = map[string]string{"gpu": "some"} }, bad, invalid, "resourceLimits.gpu"},
		{"request above limit", func(b map[string]any) {
			b["resourceLimits"] = map[string]string{"cpu": "1", "memory": "1Gi"}
			b["resourceRequests"] = map[string]string{"cpu": "2"}
		}, bad, invalid, "resourceRequests.cpu \"2\" is more than resourceLimits.cpu"},
		{"gpu request", func(b map[string]any) { b["resourceRequests"] = map[string]string{"gpu": "1"} }, bad, invalid, "resourceRequests.gpu"},
		{"bad request", func(b map[string]any) { b["resourceRequests"] = map[string]string{"memory": "lots"} }, bad, invalid, "resourceRequests.memory"},
		{"reserved metadata", func(b map[string]any) { b["metadata"] = map[string]string{"opensandbox.io/id": "x"} }, bad, invalid, "reserved"},
		{"reserved metadata subdomain", func(b map[string]any) { b["metadata"] = map[string]string{"x.opensandbox.io/id": "x"} }, bad, invalid, "reserved"},
		{"metadata bad key", func(b map[string]any) { b["metadata"] = map[string]string{"bad key": "x"} }, bad, invalid, "metadata"},
		{"metadata long value", func(b map[string]any) { b["metadata"] = map[string]string{"k": strings.Repeat("a", 64)} }, bad, invalid, "no more than 63"},
		{"env empty name", func(b map[string]any) { b["env"] = map[string]string{"": "x"} }, bad, invalid, "env"},
		{"env name with =", func(b map[string]any) { b["env"] = map[string]string{"A=B": "x"} }, bad, invalid, `"A=B"`},
		{"env value NUL", func(b map[string]any) { b["env"] = map[string]string{"A": "x\x00y"} }, bad, invalid, "NUL"},
		{"windows", func(b map[string]any) { b["platform"] = map[string]string{"os": "windows", "arch": goruntime.GOARCH} }, bad, unsup, "linux"},
		{"unknown os", func(b map[string]any) { b["platform"] = map[string]string{"os": "plan9", "arch": goruntime.GOARCH} }, bad, invalid, "platform.os"},
		{"missing arch", func(b map[string]any) { b["platform"] = map[string]string{"os": "linux"} }, bad, invalid, "platform.arch is required"},
		{"unknown arch", func(b map[string]any) { b["platform"] = map[string]string{"os": "linux", "arch": "riscv64"} }, bad, invalid, "amd64 or arm64"},
		{"network policy bad action", func(b map[string]any) { b["networkPolicy"] = map[string]any{"defaultAction": "maybe"} }, bad, invalid, "networkPolicy"},
		{"network policy empty target", func(b map[string]any) {
			b["networkPolicy"] = map[string]any{"egress": []any{map[string]any{"action": "allow", "target": ""}}}
		}, bad, invalid, "networkPolicy"},
		{"credential proxy without policy", func(b map[string]any) { b["credentialProxy"] = map[string]any{"enabled": true} }, bad, invalid, "give a networkPolicy"},
		{"secure access", func(b map[string]any) { b["secureAccess"] = true }, bad, unsup, "secureAccess"},
		{"pool ref", func(b map[string]any) { b["extensions"] = map[string]string{"poolRef": "p"} }, bad, unsup, "poolRef"},
		{"isolated execution not a bool", func(b map[string]any) {
			b["extensions"] = map[string]string{"opensandbox.io/isolated-execution": "yes"}
		}, bad, invalid, "isolated-execution"},
		{"volume bad name", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"name": "Data"})} }, bad, invalid, "volumes[0].name"},
		{"volume no name", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"name": nil})} }, bad, invalid, "volumes[0].name is required"},
		{"volume long name", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"name": strings.Repeat("a", 64)})} }, bad, invalid, "no more than 63"},
		{"volume duplicate name", func(b map[string]any) {
			b["volumes"] = []any{vol(nil), vol(map[string]any{"mountPath": "/other"})}
		}, bad, invalid, "volumes[1].name"},
		{"volume duplicate mount", func(b map[string]any) {
			b["volumes"] = []any{vol(nil), vol(map[string]any{"name": "other"})}
		}, bad, invalid, "volumes[1].mountPath"},
		{"volume relative mount", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"mountPath": "data"})} }, bad, invalid, "absolute"},
		{"volume unclean mount", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"mountPath": "/a/../b"})} }, bad, invalid, "not clean"},
		{"volume root mount", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"mountPath": "/"})} }, bad, invalid, "must not be /"},
		{"volume over execd", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"mountPath": "/opt/opensandbox/bin"})} }, bad, invalid, "/opt/opensandbox"},
		{"volume covering execd", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"mountPath": "/opt"})} }, bad, invalid, "/opt/opensandbox"},
		{"volume no backend", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"host": nil})} }, bad, invalid, "exactly one"},
		{"volume two backends", func(b map[string]any) {
			b["volumes"] = []any{vol(map[string]any{"pvc": map[string]any{"claimName": "c"}})}
		}, bad, invalid, "exactly one"},
		{"volume absolute subPath", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"subPath": "/x"})} }, bad, invalid, "relative"},
		{"volume dotdot subPath", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"subPath": "../x"})} }, bad, invalid, ".."},
		{"volume unclean subPath", func(b map[string]any) { b["volumes"] = []any{vol(map[string]any{"subPath": "a//b"})} }, bad, invalid, "not clean"},
		{"host path relative", func(b map[string]any) {
			b["volumes"] = []any{vol(map[string]any{"host": map[string]any{"path": "rel"}})}
		}, bad, invalid, "absolute"},
		{"host path missing", func(b map[string]any) {
			b["volumes"] = []any{vol(map[string]any{"host": map[string]any{}})}
		}, bad, invalid, "volumes[0].host.path is required"},
		{"pvc bad claim", func(b map[string]any) {
			b["volumes"] = []any{vol(map[string]any{"host": nil, "pvc": map[string]any{"claimName": "Bad_Name"}})}
		}, bad, invalid, "claimName"},
		{"ossfs", func(b map[string]any) {
			b["volumes"] = []any{vol(map[string]any{"host": nil, "ossfs": map[string]any{"bucket": "b", "endpoint": "e"}})}
		}, bad, unsup, "ossfs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := createBody()
			tc.edit(b)
			r := e.do("POST", "/v1/sandboxes", b)
			wantError(t, "POST /v1/sandboxes", r, tc.status, tc.code, tc.want)
		})
	}
	if n := len(e.rt.specs); n != 0 {
		t.Errorf("runtime Create called %d times for invalid requests, want 0", n)
	}
}

func TestCreateBodyProblems(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{"empty", "", http.StatusBadRequest, apierror.CodeInvalidRequest},
		{"not json", "{", http.StatusBadRequest, apierror.CodeInvalidRequest},
		{"array", "[]", http.StatusBadRequest, apierror.CodeInvalidRequest},
		{"trailing", `{"snapshotId":"x"} {}`, http.StatusBadRequest, apierror.CodeInvalidRequest},
		{"too large", `{"env":{"A":"` + strings.Repeat("x", 1<<20) + `"}}`, http.StatusRequestEntityTooLarge, apierror.CodeRequestTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, "POST /sandboxes", e.do("POST", "/sandboxes", tc.body), tc.status, tc.code)
		})
	}
}

func TestCreateValidationAccepts(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MinTimeout = time.Second
	})
	no := false
	b := createBody()
	b["image"] = map[string]any{"uri": "registry.example/app:1", "auth": map[string]string{"username": "u", "password": "p"}}
	b["timeout"] = 90
	b["resourceLimits"] = map[string]string{"cpu": "500m", "memory": "512Mi", "gpu": "all"}
	b["resourceRequests"] = map[string]string{"cpu": "100m", "memory": "512Mi"}
	b["env"] = map[string]string{"A": "1", "EMPTY": ""}
	b["metadata"] = map[string]string{"team": "ai", "example.com/owner": "bob", "empty": ""}
	b["platform"] = map[string]string{"os": "linux", "arch": goruntime.GOARCH}
	b["credentialProxy"] = map[string]any{"enabled": false}
	b["extensions"] = map[string]string{"something": "opaque"}
	b["volumes"] = []any{
		map[string]any{"name": "host", "mountPath": "/mnt/host", "readOnly": true, "subPath": "sub", "host": map[string]any{"path": "/srv/data/"}},
		map[string]any{"name": "cache", "mountPath": "/cache", "pvc": map[string]any{"claimName": "cache.v1", "createIfNotExists": no, "deleteOnSandboxTermination": true}},
		map[string]any{"name": "work", "mountPath": "/work", "pvc": map[string]any{"claimName": "work"}},
	}
	before := time.Now()
	id := e.createSandbox(b)
	spec := e.rt.lastSpec()

	if spec.ID != id || len(id) != 36 || id[14] != '4' {
		t.Errorf("spec.ID = %q (reply id %q), want the same canonical uuid4", spec.ID, id)
	}
	if len(spec.ExecdToken) != 64 {
		t.Errorf("spec.ExecdToken = %q, want 64 hex digits", spec.ExecdToken)
	}
	if spec.Image != "registry.example/app:1" || spec.ImageAuth == nil || spec.ImageAuth.Username != "u" || spec.ImageAuth.Password != "p" {
		t.Errorf("spec image = %q auth %+v, want the request's", spec.Image, spec.ImageAuth)
	}
	if spec.ExpiresAt == nil || spec.ExpiresAt.Before(before.Add(89*time.Second)) || spec.ExpiresAt.After(time.Now().Add(91*time.Second)) {
		t.Errorf("spec.ExpiresAt = %v, want about now+90s", spec.ExpiresAt)
	}
	wantRes := runtime.Resources{NanoCPUs: 500_000_000, MemoryBytes: 512 << 20, GPUs: -1}
	if spec.Extensions["something"] != "opaque" {
		t.Errorf("spec.Extensions = %v, want the request's passed on", spec.Extensions)
	}
	if want := (runtime.Resources{NanoCPUs: 100_000_000, MemoryBytes: 512 << 20}); spec.Requests != want {
		t.Errorf("spec.Requests = %+v, want %+v", spec.Requests, want)
	}
	if spec.Resources != wantRes {
		t.Errorf("spec.Resources = %+v, want %+v", spec.Resources, wantRes)
	}
	if spec.Platform == nil || spec.Platform.OS != "linux" || spec.Platform.Arch != goruntime.GOARCH {
		t.Errorf("spec.Platform = %+v", spec.Platform)
	}
	if spec.Metadata["example.com/owner"] != "bob" || spec.Env["A"] != "1" {
		t.Errorf("spec metadata %v env %v, want the request's", spec.Metadata, spec.Env)
	}
	// Host paths go to the runtime as given: resolving them and the
	// allow-list are the driver's (see the docker package's tests).
	wantVols := []runtime.Volume{
		{Name: "host", MountPath: "/mnt/host", ReadOnly: true, SubPath: "sub", HostPath: "/srv/data/"},
		{Name: "cache", MountPath: "/cache", ClaimName: "cache.v1", CreateIfNotExists: false, DeleteOnTermination: true},
		{Name: "work", MountPath: "/work", ClaimName: "work", CreateIfNotExists: true},
	}
	if len(spec.Volumes) != len(wantVols) {
		t.Fatalf("spec.Volumes = %+v, want %+v", spec.Volumes, wantVols)
	}
	for i := range wantVols {
		if spec.Volumes[i] != wantVols[i] {
			t.Errorf("spec.Volumes[%d] = %+v, want %+v", i, spec.Volumes[i], wantVols[i])
		}
	}
}

func TestCreateManualCleanupAndGPUCount(t *testing.T) {
	e := newEnv(t)
	b := createBody()
	delete(b, "timeout")
	b["resourceLimits"] = map[string]string{"gpu": "2"}
	r := e.do("POST", "/v1/sandboxes", b)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /v1/sandboxes = %s, want 202", r)
	}
	if strings.Contains(string(r.body), "expiresAt") {
		t.Errorf("reply %s has expiresAt; a sandbox without timeout must not", r.body)
	}
	if r.header.Get("Location") != "" {
		t.Errorf("reply has Location %q; upstream sends none", r.header.Get("Location"))
	}
	spec := e.rt.lastSpec()
	if spec.ExpiresAt != nil || spec.Resources.GPUs != 2 {
		t.Errorf("spec ExpiresAt %v GPUs %d, want nil and 2", spec.ExpiresAt, spec.Resources.GPUs)
	}
	if _, armed := e.srv.lc.Deadline(spec.ID); armed {
		t.Errorf("manual-cleanup sandbox %s has an expiry deadline", spec.ID)
	}
}

// TestCreateDiskLimit checks that resourceLimits.ephemeral-storage reaches
// the runtime in bytes, in the grammar of memory, and that the configured
// default applies only when the request names no disk limit.
func TestCreateDiskLimit(t *testing.T) {
	const def = 3 << 30
	tests := []struct {
		name   string
		def    int64
		limits map[string]string
		want   int64
	}{
		{"binary suffix", 0, map[string]string{"ephemeral-storage": "1.5Gi"}, 3 << 29},
		{"decimal suffix", 0, map[string]string{"ephemeral-storage": "20M"}, 20_000_000},
		{"plain bytes", 0, map[string]string{"ephemeral-storage": "16777216"}, 16 << 20},
		{"none, no default", 0, map[string]string{"cpu": "1"}, 0},
		{"none, default", def, map[string]string{"cpu": "1"}, def},
		{"no resourceLimits, default", def, nil, def},
		{"request beats default", def, map[string]string{"ephemeral-storage": "64Mi"}, 64 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.DefaultDiskLimit = tc.def })
			b := createBody()
			if tc.limits == nil {
				delete(b, "resourceLimits")
			} else {
				b["resourceLimits"] = tc.limits
			}
			e.createSandbox(b)
			if got := e.rt.lastSpec().Resources.DiskBytes; got != tc.want {
				t.Errorf("spec.Resources.DiskBytes = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestHostPathJudgedByRuntime: the server does not judge where a host
// volume points (the engine's host is the driver's business); a refusal
// by the runtime is 400 HOST_PATH_NOT_ALLOWED with the driver's reason.
func TestHostPathJudgedByRuntime(t *testing.T) {
	e := newEnv(t)
	e.rt.createErr = fmt.Errorf("docker: sandbox x: volume \"h\": host path \"/etc\" is not under a host path this server allows: %w",
		runtime.ErrHostPathNotAllowed)
	b := createBody()
	b["volumes"] = []any{map[string]any{"name": "h", "mountPath": "/h", "host": map[string]any{"path": "/etc/../etc"}}}
	wantError(t, "POST /v1/sandboxes", e.do("POST", "/v1/sandboxes", b), http.StatusBadRequest, apierror.CodeHostPathNotAllowed, `host path "/etc" is not under`)
	e.rt.mu.Lock()
	calls := len(e.rt.specs)
	e.rt.mu.Unlock()
	if calls != 1 {
		t.Fatalf("runtime Create called %d times, want once: the runtime judges host paths", calls)
	}
	if spec := e.rt.lastSpec(); len(spec.Volumes) != 1 || spec.Volumes[0].HostPath != "/etc/../etc" {
		t.Errorf("runtime got volumes %+v, want the host path as the request gave it", e.rt.lastSpec().Volumes)
	}
}

// A create with extensions.poolRef on a runtime with pools: what the
// pool's template decides is refused when it would change the pod, and
// accepted but unused when the SDKs send it anyway (image, entrypoint,
// resourceLimits); env and metadata reach the runtime.
func TestPooledCreate(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Runtime = &withPools{stubRuntime: c.Runtime.(*stubRuntime), Pools: kubepool.New(nil, "unused")}
	})
	pooled := func(edit func(b map[string]any)) map[string]any {
		b := map[string]any{"timeout": 3600, "extensions": map[string]string{"poolRef": "warm"}}
		if edit != nil {
			edit(b)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		edit func(b map[string]any)
		want string
	}{
		{"empty poolRef", func(b map[string]any) { b["extensions"] = map[string]string{"poolRef": " "} }, "extensions.poolRef: empty"},
		{"bad poolRef", func(b map[string]any) { b["extensions"] = map[string]string{"poolRef": "Not_A_Name"} }, "extensions.poolRef"},
		{"snapshot", func(b map[string]any) { b["snapshotId"] = "s1" }, "snapshotId: not available"},
		{"volumes", func(b map[string]any) {
			b["volumes"] = []any{map[string]any{"name": "d", "mountPath": "/d", "pvc": map[string]any{"claimName": "c"}}}
		}, "volumes: not available"},
		{"network policy", func(b map[string]any) { b["networkPolicy"] = map[string]any{"defaultAction": "deny"} }, "networkPolicy: not available"},
		{"platform", func(b map[string]any) { b["platform"] = map[string]string{"os": "linux", "arch": "amd64"} }, "platform: not available"},
		{"image auth", func(b map[string]any) {
			b["image"] = map[string]any{"uri": "x", "auth": map[string]any{"username": "u", "password": "p"}}
		}, "image.auth: not available"},
		{"isolated", func(b map[string]any) {
			b["extensions"] = map[string]string{"poolRef": "warm", "opensandbox.io/isolated-execution": "true"}
		}, "not available for a sandbox from a pool"},
		{"bad env", func(b map[string]any) { b["env"] = map[string]string{"A=B": "x"} }, "env"},
		{"bad resources", func(b map[string]any) { b["resourceLimits"] = map[string]string{"cpu": "lots"} }, "resourceLimits.cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("POST", "/v1/sandboxes", pooled(tc.edit))
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), tc.want) {
				t.Errorf("= %s, want 400 mentioning %q", r, tc.want)
			}
		})
	}
	if n := len(e.rt.specs); n != 0 {
		t.Fatalf("refused creates reached the runtime: %d specs", n)
	}

	// What the JS SDK sends for a pooled create.
	id := e.createSandbox(pooled(func(b map[string]any) {
		b["image"] = map[string]any{"uri": "ignored:latest"}
		b["entrypoint"] = []string{"tail", "-f", "/dev/null"}
		b["resourceLimits"] = map[string]string{"cpu": "1", "memory": "2Gi"}
		b["env"] = map[string]string{"POOLED": "yes"}
		b["metadata"] = map[string]string{"team": "a"}
	}))
	var spec runtime.Spec
	waitFor(t, "the runtime's create", 5*time.Second, func() bool {
		e.rt.mu.Lock()
		defer e.rt.mu.Unlock()
		for _, s := range e.rt.specs {
			if s.ID == id {
				spec = s
				return true
			}
		}
		return false
	})
	if spec.PoolRef != "warm" || spec.Env["POOLED"] != "yes" || spec.Metadata["team"] != "a" || len(spec.Entrypoint) != 0 || spec.Resources != (runtime.Resources{}) || spec.ExecdToken == "" {
		t.Errorf("spec of a pooled create = %+v", spec)
	}
}
