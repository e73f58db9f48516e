package docker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestHardeningOptions(t *testing.T) {
	t.Parallel()
	needEngine(t)
	profile := filepath.Join(t.TempDir(), "seccomp.json")
	if err := os.WriteFile(profile, []byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["swapon"],"action":"SCMP_ACT_ERRNO"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	no := false
	r := newTestRuntime(t, func(o *Options) {
		o.DropCapabilities = []string{"NET_RAW", "CHOWN"}
		o.NoNewPrivileges = &no
		o.PidsLimit = 100
		o.SeccompProfile = profile
		o.Runtime = "runc"
	})
	ctx := testCtx(t)
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	c, err := env.cli.ContainerInspect(ctx, containerName(spec.ID))
	if err != nil {
		t.Fatal(err)
	}
	hc := c.HostConfig
	if hc.PidsLimit == nil || *hc.PidsLimit != 100 || hc.Runtime != "runc" {
		t.Errorf("pids limit %v runtime %q", hc.PidsLimit, hc.Runtime)
	}
	caps := strings.Join(hc.CapDrop, ",")
	if !strings.Contains(caps, "NET_RAW") || !strings.Contains(caps, "CHOWN") || strings.Contains(caps, "SYS_ADMIN") {
		t.Errorf("CapDrop = %v, want exactly NET_RAW and CHOWN", hc.CapDrop)
	}
	if slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || !slices.ContainsFunc(hc.SecurityOpt, func(s string) bool {
		return strings.HasPrefix(s, "seccomp=") && strings.Contains(s, "swapon")
	}) {
		t.Errorf("SecurityOpt = %q, want the seccomp profile and no no-new-privileges", hc.SecurityOpt)
	}
	// The dropped capability is gone inside: chown of a file fails.
	res := run(t, r, spec.ID, spec.ExecdToken, "touch /f && chown 1 /f 2>/dev/null && echo chowned || echo denied")
	if !reflect.DeepEqual(res.stdout, []string{"denied"}) {
		t.Errorf("chown without CAP_CHOWN = %q", res.stdout)
	}
	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
}

// TestExecdNeverAnswers uses a static stand-in for execd that never
// listens: Create gives up after StartTimeout, names the container's last
// log lines, and leaves nothing behind.
func TestExecdNeverAnswers(t *testing.T) {
	t.Parallel()
	needEngine(t)
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"fmt\"\n\t\"time\"\n)\n\nfunc main() {\n\tfmt.Println(\"fake execd: not listening\")\n\ttime.Sleep(time.Hour)\n}\n"
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module fakeexecd\n\ngo 1.22\n"), 0o644)
	build := exec.Command("go", "build", "-o", "fake", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fake execd: %v\n%s", err, out)
	}
	r := newTestRuntime(t, func(o *Options) {
		o.ExecdPath = filepath.Join(dir, "fake")
		o.StartTimeout = time.Second
	})
	ctx := testCtx(t)
	vol := "osbtest-never-" + randomHex(6)
	spec := baseSpec(t)
	spec.Volumes = []runtime.Volume{{Name: "d", ClaimName: vol, MountPath: "/d", CreateIfNotExists: true}}
	start := time.Now()
	_, err := r.Create(ctx, spec)
	wantClass(t, "Create with an execd that never answers", err, runtime.ErrUnavailable)
	if err != nil && !strings.Contains(err.Error(), "fake execd: not listening") {
		t.Errorf("error %q does not quote the container's logs", err)
	}
	// The test's context allows 30 s: a Create that ignored its 1 s start
	// timeout would end with the context's error instead.
	t.Logf("Create gave up after %s (StartTimeout 1s)", time.Since(start).Round(time.Millisecond))
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Errorf("Create waited for the test's deadline instead of its StartTimeout: %v", err)
	}
	if containerExists(containerName(spec.ID)) || volumeExists(vol) {
		t.Errorf("timed-out Create left the container or the volume")
	}

	// The caller giving up ends the wait the same way.
	spec = baseSpec(t)
	spec.Volumes = []runtime.Volume{{Name: "d", ClaimName: vol, MountPath: "/d", CreateIfNotExists: true}}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = r.Create(cctx, spec)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Create with an expiring context: %v, want context.DeadlineExceeded", err)
	}
	if containerExists(containerName(spec.ID)) || volumeExists(vol) {
		t.Errorf("cancelled Create left the container or the volume")
	}
}

// TestGPURequest asks for a GPU: on a machine without the NVIDIA runtime
// Create fails and leaves nothing; with it the request reaches the engine.
func TestGPURequest(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	spec := baseSpec(t)
	spec.Resources.GPUs = 1
	_, err := r.Create(ctx, spec)
	if err != nil {
		t.Logf("Create with a GPU: %v", err)
		if containerExists(containerName(spec.ID)) {
			t.Errorf("failed GPU Create left its container")
		}
		return
	}
	c, err := env.cli.ContainerInspect(ctx, containerName(spec.ID))
	if err != nil {
		t.Fatal(err)
	}
	if dr := c.HostConfig.DeviceRequests; len(dr) != 1 || dr[0].Count != 1 || !reflect.DeepEqual(dr[0].Capabilities, [][]string{{"gpu"}}) {
		t.Errorf("DeviceRequests = %+v", dr)
	}
	r.Delete(ctx, spec.ID)
}

// TestIsolatedExecutionOption: a sandbox that gets isolated execution
// (always, or on request with the create extension) starts with
// CAP_SYS_ADMIN and the isolation bootstrap variable, execd drops it before
// anything else runs — no process inside holds it, not even in its bounding
// set — and execd's isolated sessions are available. Other sandboxes keep
// the capability dropped and get no sessions; asking for them where the
// server does not allow it fails the create.
func TestIsolatedExecutionOption(t *testing.T) {
	t.Parallel()
	needEngine(t)
	const sysAdminBit = 1 << 21
	for _, tc := range []struct {
		name, mode string
		request    bool
		on         bool
	}{
		{"always", IsolationAlways, false, true},
		{"on request, asked", IsolationOnRequest, true, true},
		{"on request, not asked", IsolationOnRequest, false, false},
		{"off", IsolationOff, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			on := tc.on
			r := newTestRuntime(t, func(o *Options) { o.IsolatedExecution = tc.mode })
			ctx := testCtx(t)
			spec := baseSpec(t)
			spec.IsolatedExecution = tc.request
			mustCreate(t, r, spec)
			t.Cleanup(func() { r.Delete(context.Background(), spec.ID) })
			c, err := env.cli.ContainerInspect(ctx, containerName(spec.ID))
			if err != nil {
				t.Fatal(err)
			}
			hc := c.HostConfig
			added := slices.ContainsFunc(hc.CapAdd, func(s string) bool { return capName(s) == "SYS_ADMIN" })
			dropped := slices.ContainsFunc(hc.CapDrop, func(s string) bool { return capName(s) == "SYS_ADMIN" })
			hasEnv := slices.Contains(c.Config.Env, "OPENSANDBOX_ISOLATION=1")
			if added != on || dropped == on || hasEnv != on {
				t.Errorf("CapAdd %v CapDrop %v env has bootstrap %v; want SYS_ADMIN added and not dropped, and the variable, exactly when on=%v", hc.CapAdd, hc.CapDrop, hasEnv, on)
			}
			res := run(t, r, spec.ID, spec.ExecdToken, "for p in 1 self; do sed -n 's/^CapBnd:\t//p;s/^CapEff:\t//p' /proc/$p/status; done")
			if len(res.stdout) != 4 {
				t.Fatalf("capability lines = %q", res.stdout)
			}
			for _, hex := range res.stdout {
				v, err := strconv.ParseUint(hex, 16, 64)
				if err != nil || v&sysAdminBit != 0 {
					t.Errorf("a process in the sandbox holds CAP_SYS_ADMIN (mask %s, %v): %q", hex, err, res.stdout)
				}
			}
			a, err := r.Address(ctx, spec.ID, 44772)
			if err != nil {
				t.Fatal(err)
			}
			code, body, err := get(a, "/v1/isolated/capabilities", spec.ExecdToken, 20*time.Second)
			if err != nil || code != 200 {
				t.Fatalf("GET /v1/isolated/capabilities: %d %s %v", code, body, err)
			}
			if got := strings.Contains(body, `"available":true`); got != on {
				t.Errorf("capabilities = %s; want available=%v", body, on)
			}
		})
	}
	t.Run("asked where off", func(t *testing.T) {
		t.Parallel()
		r := newTestRuntime(t, nil)
		spec := baseSpec(t)
		spec.IsolatedExecution = true
		_, err := r.Create(testCtx(t), spec)
		wantClass(t, "Create with isolated execution off", err, runtime.ErrInvalid)
		if containerExists(containerName(spec.ID)) {
			t.Errorf("a refused create left its container")
		}
	})
}
