package docker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestUnknownSandbox(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	id := "nosuch" + randomHex(6)
	_, err := r.Get(ctx, id)
	wantClass(t, "Get", err, runtime.ErrNotFound)
	wantClass(t, "Delete", r.Delete(ctx, id), runtime.ErrNotFound)
	wantClass(t, "Pause", r.Pause(ctx, id), runtime.ErrNotFound)
	wantClass(t, "Resume", r.Resume(ctx, id), runtime.ErrNotFound)
	_, err = r.Address(ctx, id, 44772)
	wantClass(t, "Address", err, runtime.ErrNotFound)
	_, err = r.Logs(ctx, id, runtime.LogOptions{})
	wantClass(t, "Logs", err, runtime.ErrNotFound)
	_, err = r.Inspect(ctx, id)
	wantClass(t, "Inspect", err, runtime.ErrNotFound)
	_, err = r.Events(ctx, id, 10)
	wantClass(t, "Events", err, runtime.ErrNotFound)
	if err != nil && !strings.Contains(err.Error(), id) {
		t.Errorf("error %q does not name the sandbox", err)
	}
	wantClass(t, "DeleteSnapshot", r.DeleteSnapshot(ctx, "nosuch"+randomHex(4)), runtime.ErrNotFound)
	_, err = r.Get(ctx, "../../images/json")
	wantClass(t, "Get of an id with slashes", err, runtime.ErrNotFound)
}

func TestForeignContainerIsNotASandbox(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	id := newID(t)
	// A container with our name but without our labels is not ours.
	if out, err := dockerRun("run", "-d", "--label", testLabelKey+"="+testLabelVal, "--label", runLabelKey+"="+env.run,
		"--name", containerName(id), env.image, "sleep", "1000"); err != nil {
		t.Fatalf("docker run: %v %s", err, out)
	}
	_, err := r.Get(ctx, id)
	wantClass(t, "Get of a foreign container", err, runtime.ErrNotFound)
	wantClass(t, "Delete of a foreign container", r.Delete(ctx, id), runtime.ErrNotFound)
	if !containerExists(containerName(id)) {
		t.Errorf("Delete removed a container that is not a sandbox")
	}
}

func TestCreateConflict(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	_, err := r.Create(ctx, spec)
	wantClass(t, "Create of an existing id", err, runtime.ErrConflict)
	if sb, err := r.Get(ctx, spec.ID); err != nil || sb.State != sandbox.StateRunning {
		t.Errorf("first sandbox after a conflicting Create = %s, %v", sb.State, err)
	}
	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
}

func TestCreateFailuresLeaveNothing(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, func(o *Options) { o.StartTimeout = 10 * time.Second })
	ctx := testCtx(t)

	t.Run("validation", func(t *testing.T) {
		for name, mod := range map[string]func(*runtime.Spec){
			"empty id":         func(s *runtime.Spec) { s.ID = "" },
			"bad id":           func(s *runtime.Spec) { s.ID = "a/b" },
			"empty entrypoint": func(s *runtime.Spec) { s.Entrypoint = nil },
			"no image":         func(s *runtime.Spec) { s.Image = "" },
			"negative memory":  func(s *runtime.Spec) { s.Resources.MemoryBytes = -1 },
		} {
			spec := baseSpec(t)
			mod(&spec)
			_, err := r.Create(ctx, spec)
			wantClass(t, "Create with "+name, err, runtime.ErrInvalid)
		}
	})

	t.Run("pull", func(t *testing.T) {
		listed := "opensandbox/osbtest-runtime-" + env.run + ":listed"
		if out, err := exec.Command("docker", "tag", env.image, listed).CombinedOutput(); err != nil {
			t.Fatalf("docker tag: %v\n%s", err, out)
		}
		t.Cleanup(func() { exec.Command("docker", "rmi", listed).Run() }) // the tag only: env.image stays
		spec := baseSpec(t)
		spec.Image = "127.0.0.1:1/opensandbox-test/nope:latest" // nothing listens on port 1
		_, err := r.Create(ctx, spec)
		t.Logf("pull failure: %v", err)
		wantClass(t, "Create with an image that cannot be pulled", err, runtime.ErrImagePull)
		wantClass(t, "Create with an image that cannot be pulled", err, runtime.ErrInvalid)
		if err != nil && !strings.Contains(err.Error(), "image "+spec.Image+" is not present locally and could not be pulled (") {
			t.Errorf("pull error %q does not say that the image is neither here nor pullable", err)
		}
		// The local opensandbox images are named: here the test image,
		// under a tag in that repository for this run (its other tags
		// in brackets after its first).
		repo, tag, _ := strings.Cut(listed, ":")
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if err != nil && (!strings.Contains(msg, "local opensandbox images: ") || !strings.Contains(msg, repo+":") || !strings.Contains(msg, tag)) {
			t.Errorf("pull error %q does not list the local opensandbox images (%s among them)", err, listed)
		}
		if containerExists(containerName(spec.ID)) {
			t.Errorf("failed pull left a container")
		}
	})

	t.Run("entrypoint exits", func(t *testing.T) {
		// With a start timeout far beyond the test's context, Create can
		// only fail in time by noticing that the container exited (not by
		// waiting its start timeout out, which would end in ctx's error).
		r := newTestRuntime(t, func(o *Options) { o.StartTimeout = time.Hour })
		vol := "osbtest-fail-" + randomHex(6)
		spec := baseSpec(t)
		spec.Entrypoint = []string{"/no/such/program"}
		spec.Volumes = []runtime.Volume{{Name: "d", ClaimName: vol, MountPath: "/d", CreateIfNotExists: true, DeleteOnTermination: true}}
		start := time.Now()
		_, err := r.Create(ctx, spec)
		if err == nil {
			t.Fatal("Create with an entrypoint that does not exist succeeded")
		}
		t.Logf("entrypoint failure after %s: %v", time.Since(start).Round(time.Millisecond), err)
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			t.Errorf("Create did not notice the container exited; it waited until the test's deadline: %v", err)
		}
		if !strings.Contains(err.Error(), "code 127") {
			t.Errorf("error %q does not give the exit code", err)
		}
		if containerExists(containerName(spec.ID)) || volumeExists(vol) {
			t.Errorf("failed Create left the container (%v) or the volume (%v)", containerExists(containerName(spec.ID)), volumeExists(vol))
		}
	})
}

func TestNew(t *testing.T) {
	needEngine(t)
	t.Parallel()
	ctx := testCtx(t)
	base := Options{Client: env.cli, ExecdPath: env.execd}

	o := base
	o.Runtime = "no-such-oci-runtime"
	_, err := New(ctx, o)
	wantClass(t, "New with an unknown OCI runtime", err, runtime.ErrInvalid)
	if err != nil && !strings.Contains(err.Error(), "no-such-oci-runtime") {
		t.Errorf("error %q does not name the runtime", err)
	}
	o = base
	o.Runtime = "runc"
	if _, err := New(ctx, o); err != nil {
		t.Errorf("New with runtime runc: %v", err)
	}

	dir := t.TempDir()
	notExec := filepath.Join(dir, "execd")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o755)
	badProfile := filepath.Join(dir, "seccomp.json")
	os.WriteFile(badProfile, []byte("{not json"), 0o644)
	for name, mod := range map[string]func(*Options){
		"no execd":        func(o *Options) { o.ExecdPath = "" },
		"missing execd":   func(o *Options) { o.ExecdPath = filepath.Join(dir, "nope") },
		"script execd":    func(o *Options) { o.ExecdPath = notExec },
		"dynamic execd":   func(o *Options) { o.ExecdPath = dynamicBinary(t) },
		"network mode":    func(o *Options) { o.NetworkMode = "container:x" },
		"host ip":         func(o *Options) { o.HostIP = "localhost:1" },
		"seccomp profile": func(o *Options) { o.SeccompProfile = badProfile },
		"reserved label":  func(o *Options) { o.Labels = map[string]string{labelID: "x"} },
	} {
		o := base
		mod(&o)
		_, err := New(ctx, o)
		wantClass(t, "New with bad "+name, err, runtime.ErrInvalid)
	}

	down, err := client.NewClientWithOpts(client.WithHost("unix://"+filepath.Join(dir, "no.sock")), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	o = base
	o.Client = down
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = New(cctx, o)
	wantClass(t, "New with an engine that is down", err, runtime.ErrUnavailable)
}

// dynamicBinary returns a dynamically linked executable of this machine.
func dynamicBinary(t *testing.T) string {
	for _, p := range []string{"/usr/bin/env", "/bin/ls", "/usr/bin/docker"} {
		if checkStatic(p) != nil {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Skip("no dynamically linked binary found")
	return ""
}
