package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

var egressBin struct {
	once sync.Once
	path string
	err  error
}

// egressBinary builds cmd/egress once for the tests that need a sidecar.
func egressBinary(t *testing.T) string {
	t.Helper()
	egressBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "osb-egress-bin-")
		if err != nil {
			egressBin.err = err
			return
		}
		egressBin.path = filepath.Join(dir, "egress")
		build := exec.Command("go", "build", "-o", egressBin.path, "github.com/opensandbox-go/opensandbox/cmd/egress")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			egressBin.err = err
			egressBin.path = string(out)
		}
	})
	if egressBin.err != nil {
		t.Fatalf("build egress: %v\n%s", egressBin.err, egressBin.path)
	}
	return egressBin.path
}

// TestEgressSidecar creates a sandbox behind a sidecar and checks what the
// driver promises: the sandbox joins the sidecar's namespace without
// NET_ADMIN, is reached through the sidecar's ports, reports Failed once
// the sidecar is gone, and Delete removes both.
func TestEgressSidecar(t *testing.T) {
	// An operator drop list without NET_RAW must not leave it to the sandbox.
	r := newTestRuntime(t, func(o *Options) { o.EgressPath = egressBinary(t); o.DropCapabilities = []string{"SYS_ADMIN"} })
	spec := baseSpec(t)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", sidecarName(spec.ID)).Run() })
	spec.Egress = &runtime.Egress{Policy: []byte(`{"defaultAction":"deny"}`), Token: "egress-tok"}
	sb := mustCreate(t, r, spec)
	if sb.EgressToken != "egress-tok" || sb.State != sandbox.StateRunning {
		t.Fatalf("created sandbox = %+v", sb)
	}
	ctx := testCtx(t)
	c, err := env.cli.ContainerInspect(ctx, containerName(spec.ID))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := env.cli.ContainerInspect(ctx, sidecarName(spec.ID))
	if err != nil {
		t.Fatal(err)
	}
	if string(c.HostConfig.NetworkMode) != "container:"+sc.ID {
		t.Errorf("sandbox network mode = %s; want container:%s", c.HostConfig.NetworkMode, sc.ID)
	}
	caps := func(cs []string) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = capName(c)
		}
		return out
	}
	for _, must := range []string{"NET_ADMIN", "NET_RAW"} {
		if !slices.Contains(caps(c.HostConfig.CapDrop), must) || slices.Contains(caps(c.HostConfig.CapAdd), must) {
			t.Errorf("sandbox caps: drop %v add %v; %s must be dropped", c.HostConfig.CapDrop, c.HostConfig.CapAdd, must)
		}
	}
	if !slices.Equal(caps(sc.HostConfig.CapAdd), []string{"NET_ADMIN"}) || !slices.Contains(caps(sc.HostConfig.CapDrop), "ALL") {
		t.Errorf("sidecar caps: drop %v add %v; want ALL dropped and only NET_ADMIN", sc.HostConfig.CapDrop, sc.HostConfig.CapAdd)
	}
	// Commands run through the sidecar's published execd port.
	if res := run(t, r, spec.ID, spec.ExecdToken, "echo hi"); res.exit != "0" || !slices.Equal(res.stdout, []string{"hi"}) {
		t.Fatalf("command behind the sidecar = %+v", res)
	}
	// The sidecar's API is its own published port, never execd's /proxy.
	a, err := r.Address(ctx, spec.ID, sandbox.EgressPort)
	if err != nil || a.PathPrefix != "" || a.Port == 0 {
		t.Fatalf("Address(18080) = %+v, %v", a, err)
	}
	resp, err := testHTTP.Get(urlOf(a, "/healthz"))
	if err != nil {
		t.Fatalf("sidecar /healthz through its published port: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("sidecar /healthz = %d", resp.StatusCode)
	}
	// The sidecar is not a sandbox.
	all, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range all {
		if s.ID == spec.ID {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("List has the sandbox %d times", n)
	}

	// A restarted sidecar has a new namespace; the sandbox stays in the
	// old one, with loopback only. The second start refuses to run, so
	// the sidecar stops and List sees it down too.
	if err := env.cli.ContainerRestart(ctx, sc.ID, container.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	waitC, waitErr := env.cli.ContainerWait(ctx, sc.ID, container.WaitConditionNotRunning)
	select {
	case res := <-waitC:
		if res.StatusCode == 0 {
			t.Errorf("restarted sidecar exited with status 0; want a refusal")
		}
	case err := <-waitErr:
		t.Fatalf("wait for the restarted sidecar to stop: %v", err)
	}
	if logs, _ := exec.Command("docker", "logs", sc.ID).CombinedOutput(); !strings.Contains(string(logs), "restarted") {
		t.Errorf("restarted sidecar's log does not say why it stopped:\n%s", logs)
	}
	all, _ = r.List(ctx)
	for _, s := range all {
		if s.ID == spec.ID && s.State != sandbox.StateFailed {
			t.Fatalf("List after a sidecar restart reports %s; want Failed", s.State)
		}
	}
	got, err := r.Get(ctx, spec.ID)
	if err != nil || got.State != sandbox.StateFailed || got.Reason != "EGRESS_SIDECAR_DOWN" {
		t.Fatalf("Get after the sidecar died = %+v, %v", got, err)
	}
	if _, err := r.Address(ctx, spec.ID, sandbox.ExecdPort); err == nil {
		t.Fatal("Address works without the sidecar")
	}
	all, _ = r.List(ctx)
	for _, s := range all {
		if s.ID == spec.ID && s.State != sandbox.StateFailed {
			t.Fatalf("List reports %s for a sandbox without its sidecar", s.State)
		}
	}
	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if out := dockerOut("ps", "-aq", "--filter", "name="+sidecarName(spec.ID)); out != "" {
		t.Fatalf("sidecar left after Delete: %s", out)
	}
}

// TestEgressNeedsBinaryAndBridge checks the refusals before anything runs.
func TestEgressNeedsBinaryAndBridge(t *testing.T) {
	r := newTestRuntime(t, nil) // no egress binary
	spec := baseSpec(t)
	spec.Egress = &runtime.Egress{Policy: []byte(`{}`), Token: "t"}
	if _, err := r.Create(testCtx(t), spec); err == nil || !strings.Contains(err.Error(), "egress") {
		t.Fatalf("Create without an egress binary: %v", err)
	}
	if !kernelNetworking("runc") || kernelNetworking("runsc") || kernelNetworking("kata-runtime") {
		t.Fatal("kernelNetworking misclassifies runtimes")
	}
	h := newTestRuntime(t, func(o *Options) { o.NetworkMode = networkHost; o.EgressPath = egressBinary(t) })
	spec = baseSpec(t)
	spec.Egress = &runtime.Egress{Policy: []byte(`{}`), Token: "t"}
	if _, err := h.Create(testCtx(t), spec); err == nil || !strings.Contains(err.Error(), "bridge") {
		t.Fatalf("Create in host network mode: %v", err)
	}
}

// TestOrphanSidecarsRemoved checks that New removes a sidecar whose
// sandbox container is gone.
func TestOrphanSidecarsRemoved(t *testing.T) {
	needEngine(t)
	ctx := testCtx(t)
	id := "orphan" + randomHex(4)
	created, err := env.cli.ContainerCreate(ctx, &container.Config{
		Image: env.image, Cmd: []string{"sleep", "1000"},
		Labels: map[string]string{labelEgressOf: id, testLabelKey: testLabelVal, runLabelKey: env.run},
	}, nil, nil, nil, sidecarName(id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
	})
	// A young one may be a create in progress on another server.
	newTestRuntime(t, nil)
	if _, err := env.cli.ContainerInspect(ctx, created.ID); err != nil {
		t.Fatalf("a sidecar created just now was removed as an orphan: %v", err)
	}
	r := newTestRuntime(t, func(o *Options) { o.OrphanGrace = time.Nanosecond })
	if _, err := env.cli.ContainerInspect(ctx, created.ID); classOf(err) != runtime.ErrNotFound {
		t.Fatalf("orphan sidecar still there: %v", err)
	}

	// Whatever its age, the sidecar of a create this runtime has in
	// progress is not an orphan.
	id2 := "orphan" + randomHex(4)
	created2, err := env.cli.ContainerCreate(ctx, &container.Config{
		Image: env.image, Cmd: []string{"sleep", "1000"},
		Labels: map[string]string{labelEgressOf: id2, testLabelKey: testLabelVal, runLabelKey: env.run},
	}, nil, nil, nil, sidecarName(id2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.cli.ContainerRemove(context.Background(), created2.ID, container.RemoveOptions{Force: true})
	})
	r.creating.Store(id2, struct{}{})
	r.Sweep(ctx)
	if _, err := env.cli.ContainerInspect(ctx, created2.ID); err != nil {
		t.Fatalf("the sidecar of a create in progress was removed as an orphan: %v", err)
	}
	r.creating.Delete(id2)
	r.Sweep(ctx)
	if _, err := env.cli.ContainerInspect(ctx, created2.ID); classOf(err) != runtime.ErrNotFound {
		t.Fatalf("orphan sidecar still there after its create ended: %v", err)
	}
}
