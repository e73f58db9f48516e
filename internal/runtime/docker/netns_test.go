package docker

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// runBackground runs r.Run until the test ends and waits for it to return.
func runBackground(t *testing.T, r *Runtime) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// idleHolders returns the pool's idle holder ids.
func idleHolders(r *Runtime) []string {
	r.netns.mu.Lock()
	defer r.netns.mu.Unlock()
	var ids []string
	for _, h := range r.netns.idle {
		ids = append(ids, h.id)
	}
	return ids
}

// waitWarm waits until r has n idle holders.
func waitWarm(t *testing.T, r *Runtime, n int) []string {
	t.Helper()
	poll(t, "the warm network holders to start", 60*time.Second, func() bool { return len(idleHolders(r)) >= n })
	return idleHolders(r)
}

// runHolders lists this test run's holders on the engine (names).
func runHolders(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label="+labelNetnsHolder+"=true",
		"--filter", "label="+runLabelKey+"="+env.run, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

func inspectContainer(t *testing.T, ref string) container.InspectResponse {
	t.Helper()
	c, err := env.cli.ContainerInspect(testCtx(t), ref)
	if err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	return c
}

func warmRuntime(t *testing.T, n int) *Runtime {
	r := newTestRuntime(t, func(o *Options) { o.WarmNetworks = n })
	if r.netns == nil {
		t.Fatal("WarmNetworks set, but the runtime keeps no network holders")
	}
	return r
}

// TestWarmNetworks: a create takes a ready holder, the sandbox lives in
// its namespace and is reached through its published ports, the pool
// replaces it, Delete removes it, and stopping Run removes the idle ones.
func TestWarmNetworks(t *testing.T) {
	r := warmRuntime(t, 1)
	stop := runBackground(t, r)
	ready := waitWarm(t, r, 1)[0]
	spec := baseSpec(t)
	sb := mustCreate(t, r, spec)
	if sb.State != sandbox.StateRunning {
		t.Fatalf("created sandbox is %s", sb.State)
	}
	c := inspectContainer(t, containerName(spec.ID))
	if got := string(c.HostConfig.NetworkMode); got != "container:"+ready {
		t.Fatalf("sandbox network mode %q; want the ready holder's namespace container:%s", got, ready)
	}
	h := inspectContainer(t, ready)
	if h.Name != "/"+holderName(spec.ID) {
		t.Errorf("taken holder is named %q; want %q", h.Name, "/"+holderName(spec.ID))
	}
	if strings.Contains(h.Name, spec.ID) {
		t.Errorf("holder name %q carries the sandbox id", h.Name)
	}
	if res := run(t, r, spec.ID, spec.ExecdToken, "echo warm"); res.exit != "0" || strings.Join(res.stdout, "") != "warm" {
		t.Fatalf("command through the holder's published port: %+v", res)
	}
	// Without a network policy there is no sidecar: the egress API port
	// is a port like any other, reached through execd (the holder's
	// namespace is not a sidecar's).
	if a, err := r.Address(testCtx(t), spec.ID, sandbox.EgressPort); err != nil || a.PathPrefix != "/proxy/18080" {
		t.Errorf("Address(%d) of a sandbox in a holder's namespace = %+v, %v; want execd's /proxy/18080", sandbox.EgressPort, a, err)
	}
	// The pool replaces what was taken.
	if next := waitWarm(t, r, 1)[0]; next == ready {
		t.Fatalf("the pool still lists the taken holder %s as idle", ready)
	}
	// Get and List see the sandbox running.
	if got, err := r.Get(testCtx(t), spec.ID); err != nil || got.State != sandbox.StateRunning {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	if err := r.Delete(testCtx(t), spec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if containerExists(ready) {
		t.Errorf("Delete left the sandbox's network holder %s", holderName(spec.ID))
	}
	stop()
	if left := runHolders(t); len(left) != 0 {
		t.Errorf("holders left after Run returned: %v", left)
	}
}

// TestWarmNetworkHolderDown: a sandbox whose holder is gone has no
// network; Get and List report it failed, Address refuses it, and Delete
// still removes it.
func TestWarmNetworkHolderDown(t *testing.T) {
	r := warmRuntime(t, 1)
	runBackground(t, r)
	ready := waitWarm(t, r, 1)[0]
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	if out, err := exec.Command("docker", "rm", "-f", ready).CombinedOutput(); err != nil {
		t.Fatalf("docker rm holder: %v %s", err, out)
	}
	sb, err := r.Get(testCtx(t), spec.ID)
	if err != nil || sb.State != sandbox.StateFailed || sb.Reason != "NETWORK_HOLDER_DOWN" {
		t.Errorf("Get after the holder went: %+v, %v; want Failed NETWORK_HOLDER_DOWN", sb, err)
	}
	all, err := r.List(testCtx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, s := range all {
		if s.ID == spec.ID && (s.State != sandbox.StateFailed || s.Reason != "NETWORK_HOLDER_DOWN") {
			t.Errorf("List reports %s %s; want Failed NETWORK_HOLDER_DOWN", s.State, s.Reason)
		}
	}
	_, err = r.Address(testCtx(t), spec.ID, sandbox.ExecdPort)
	wantClass(t, "Address", err, runtime.ErrConflict)
	if err := r.Delete(testCtx(t), spec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if containerExists(containerName(spec.ID)) {
		t.Errorf("Delete left the sandbox container")
	}
}

// TestWarmNetworkFailedCreate: a create that fails after it took a holder
// removes it with the container.
func TestWarmNetworkFailedCreate(t *testing.T) {
	r := warmRuntime(t, 1)
	runBackground(t, r)
	ready := waitWarm(t, r, 1)[0]
	spec := baseSpec(t)
	spec.Entrypoint = []string{"/no/such/program"}
	if _, err := r.Create(testCtx(t), spec); err == nil {
		t.Fatal("Create with an entrypoint that does not exist succeeded")
	}
	if containerExists(ready) || containerExists(holderName(spec.ID)) {
		t.Errorf("failed create left its network holder")
	}
}

// TestWarmNetworkOrphanSweep: a holder taken by a create that never made
// its container (a server killed in between) is removed at the second
// sweep that finds it unused; holders sandboxes use are kept.
func TestWarmNetworkOrphanSweep(t *testing.T) {
	r := warmRuntime(t, 2)
	runBackground(t, r)
	waitWarm(t, r, 2)
	used := baseSpec(t)
	mustCreate(t, r, used)
	usedHolder := holderOf(inspectContainer(t, containerName(used.ID)))
	nw, err := r.checkNetwork(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	lost := newID(t)
	waitWarm(t, r, 1) // the pool refills after each take
	hid, ok := r.netns.take(testCtx(t), lost, nw)
	if !ok {
		t.Fatal("take found no idle holder")
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", hid).Run() })
	r.Sweep(testCtx(t)) // still handed over: never an orphan
	if !containerExists(hid) {
		t.Fatal("the sweep removed a holder a create still holds")
	}
	r.netns.done(hid) // the "create" died here
	r.Sweep(testCtx(t))
	if !containerExists(hid) {
		t.Fatal("the first sweep that found the holder unused removed it")
	}
	r.Sweep(testCtx(t))
	if containerExists(hid) {
		t.Error("the second sweep kept the orphan holder")
	}
	if !containerExists(usedHolder) {
		t.Error("the sweeps removed the holder of a live sandbox")
	}
	// Delete of a sandbox whose create was cut after the take (the
	// create journal's way) removes its holder too.
	lost2 := newID(t)
	waitWarm(t, r, 1)
	hid2, ok := r.netns.take(testCtx(t), lost2, nw)
	if !ok {
		t.Fatal("take found no idle holder")
	}
	r.netns.done(hid2)
	err = r.Delete(testCtx(t), lost2)
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Delete of a cut create: %v", err)
	}
	if containerExists(hid2) {
		t.Error("Delete of a cut create left its holder")
	}
}

// TestWarmNetworkAdopt: idle holders a previous process left (it did not
// stop cleanly) are used, not replaced.
func TestWarmNetworkAdopt(t *testing.T) {
	crashed := warmRuntime(t, 1)
	if err := crashed.netns.add(testCtx(t)); err != nil {
		t.Fatalf("add: %v", err)
	}
	left := idleHolders(crashed)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", left[0]).Run() })
	r := warmRuntime(t, 1)
	runBackground(t, r)
	if got := waitWarm(t, r, 1); got[0] != left[0] {
		t.Errorf("idle holders %v; want the one left behind, %s", got, left[0])
	}
	idle := 0
	for _, n := range runHolders(t) {
		if strings.HasPrefix(n, holderIdlePrefix) {
			idle++
		}
	}
	if idle != 1 {
		t.Errorf("%d idle holders on the engine; want the adopted one only", idle)
	}
}

// TestWarmNetworksOff: with WarmNetworks < 0 a sandbox has its own
// namespace and published ports.
func TestWarmNetworksOff(t *testing.T) {
	r := newTestRuntime(t, func(o *Options) { o.WarmNetworks = -1 })
	if r.netns != nil {
		t.Fatal("WarmNetworks < 0 still keeps holders")
	}
	runBackground(t, r)
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	if nm := inspectContainer(t, containerName(spec.ID)).HostConfig.NetworkMode; nm.IsContainer() {
		t.Errorf("network mode %q; want a namespace of its own", nm)
	}
	if res := run(t, r, spec.ID, spec.ExecdToken, "echo own"); res.exit != "0" {
		t.Fatalf("command: %+v", res)
	}
}
