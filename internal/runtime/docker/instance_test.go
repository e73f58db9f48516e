package docker

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// TestInstanceScoping checks that runtimes with different instance ids on
// one engine do not see, address or delete each other's sandboxes, and
// that a runtime without one reports the other's sandbox as unscoped.
func TestInstanceScoping(t *testing.T) {
	t.Parallel()
	a := newTestRuntime(t, func(o *Options) { o.InstanceID = "a" + env.run })
	b := newTestRuntime(t, func(o *Options) { o.InstanceID = "b" + env.run })
	ctx := testCtx(t)
	spec := baseSpec(t)
	mustCreate(t, a, spec)

	if got := dockerOut("inspect", "-f", `{{index .Config.Labels "opensandbox.io/instance"}}`, containerName(spec.ID)); got != "a"+env.run {
		t.Errorf("instance label = %q, want %q", got, "a"+env.run)
	}
	_, err := b.Get(ctx, spec.ID)
	wantClass(t, "Get from another instance", err, runtime.ErrNotFound)
	_, err = b.Address(ctx, spec.ID, 44772)
	wantClass(t, "Address from another instance", err, runtime.ErrNotFound)
	wantClass(t, "Pause from another instance", b.Pause(ctx, spec.ID), runtime.ErrNotFound)
	wantClass(t, "Delete from another instance", b.Delete(ctx, spec.ID), runtime.ErrNotFound)
	if !containerExists(containerName(spec.ID)) {
		t.Fatal("another instance's Delete removed the container")
	}
	listB, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(listB, func(s runtime.Sandbox) bool { return s.ID == spec.ID }) {
		t.Errorf("another instance lists %s", spec.ID)
	}
	listA, err := a.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(listA, func(s runtime.Sandbox) bool { return s.ID == spec.ID }) {
		t.Errorf("the owning instance does not list %s", spec.ID)
	}

	// A sandbox of a runtime without an instance id is nobody's.
	legacy := newTestRuntime(t, nil)
	old := baseSpec(t)
	mustCreate(t, legacy, old)
	ctx = testCtx(t)
	unscoped, err := a.Unscoped(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(unscoped, old.ID) || slices.Contains(unscoped, spec.ID) {
		t.Errorf("Unscoped = %v, want it to hold %s and not %s", unscoped, old.ID, spec.ID)
	}
	_, err = a.Get(ctx, old.ID)
	wantClass(t, "Get of an unscoped sandbox", err, runtime.ErrNotFound)

	if err := a.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("Delete by the owner: %v", err)
	}
	if containerExists(containerName(spec.ID)) {
		t.Error("the owner's Delete left the container")
	}
}

// TestDeleteSparesOtherInstancesSidecar checks that Delete of an id with
// no sandbox container of this instance leaves a sidecar of that name
// alone unless it carries this instance's labels.
func TestDeleteSparesOtherInstancesSidecar(t *testing.T) {
	t.Parallel()
	a := newTestRuntime(t, func(o *Options) { o.InstanceID = "a" + env.run })
	b := newTestRuntime(t, func(o *Options) { o.InstanceID = "b" + env.run })
	ctx := testCtx(t)
	id := newID(t)
	name := sidecarName(id)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	args := []string{"run", "-d", "--network", "none", "--name", name}
	for k, v := range a.opts.Labels {
		args = append(args, "--label", k+"="+v)
	}
	args = append(args, "--label", labelEgressOf+"="+id, env.image, "sleep", "600")
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	wantClass(t, "Delete from another instance", b.Delete(ctx, id), runtime.ErrNotFound)
	if !containerExists(name) {
		t.Fatal("another instance's Delete removed the sidecar")
	}
	wantClass(t, "Delete by the owner of a sandbox without container", a.Delete(ctx, id), runtime.ErrNotFound)
	if containerExists(name) {
		t.Error("the owner's Delete left its orphan sidecar")
	}
}

// TestClaimInstance checks that an instance id is claimed by the first
// owner and refused to another one with a message saying how to proceed.
func TestClaimInstance(t *testing.T) {
	t.Parallel()
	inst := "claim" + env.run
	t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", claimVolumeName(inst)).Run() })
	r1 := newTestRuntime(t, func(o *Options) { o.InstanceID = inst })
	r2 := newTestRuntime(t, func(o *Options) { o.InstanceID = inst })
	ctx := testCtx(t)
	if err := r1.ClaimInstance(ctx, "store-one"); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if err := r2.ClaimInstance(ctx, "store-one"); err != nil {
		t.Fatalf("claim again by the same owner: %v", err)
	}
	err := r2.ClaimInstance(ctx, "store-two")
	wantClass(t, "claim by another owner", err, runtime.ErrConflict)
	if err != nil && (!strings.Contains(err.Error(), "store-one") || !strings.Contains(err.Error(), "docker volume rm "+claimVolumeName(inst))) {
		t.Errorf("claim error %q does not name the owner and how to release the id", err)
	}
	unscopedRT := newTestRuntime(t, nil)
	wantClass(t, "claim without an instance id", unscopedRT.ClaimInstance(ctx, "x"), runtime.ErrInvalid)
	_, err = New(ctx, Options{Client: env.cli, ExecdPath: env.execd, InstanceID: "Not_Valid"})
	wantClass(t, "New with a bad instance id", err, runtime.ErrInvalid)
}

// TestHostChecks checks the rules that depend on the engine's host: a
// platform of another architecture and a memory limit below the minimum
// are refused as invalid before anything is created.
func TestHostChecks(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	other := "arm64"
	if r.arch == "arm64" {
		other = "amd64"
	}
	spec := baseSpec(t)
	spec.Platform = &runtime.Platform{OS: "linux", Arch: other}
	_, err := r.Create(ctx, spec)
	wantClass(t, "Create for a foreign architecture", err, runtime.ErrInvalid)
	if err != nil && !strings.Contains(err.Error(), "cannot be satisfied") {
		t.Errorf("foreign architecture error %q does not say it cannot be satisfied", err)
	}
	spec = baseSpec(t)
	spec.Resources.MemoryBytes = 1 << 20
	_, err = r.Create(ctx, spec)
	wantClass(t, "Create with 1Mi of memory", err, runtime.ErrInvalid)
	if err != nil && !strings.Contains(err.Error(), "minimum of 6Mi") {
		t.Errorf("tiny memory error %q does not name the minimum", err)
	}
	if containerExists(containerName(spec.ID)) {
		t.Error("a refused create left a container")
	}
}
