package docker

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestVolumes(t *testing.T) {
	t.Parallel()
	host := t.TempDir()
	r := newTestRuntime(t, func(o *Options) { o.AllowedHostPaths = []string{host} })
	ctx := testCtx(t)
	if err := os.MkdirAll(filepath.Join(host, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "sub", "in.txt"), []byte("from-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vol := "osbtest-" + randomHex(6)
	t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", vol).Run() })

	spec := baseSpec(t)
	spec.Volumes = []runtime.Volume{
		{Name: "data", ClaimName: vol, MountPath: "/data", CreateIfNotExists: true, DeleteOnTermination: true},
		{Name: "part", ClaimName: vol, MountPath: "/part", SubPath: "a/b", ReadOnly: true},
		{Name: "host", HostPath: host, MountPath: "/host", SubPath: "sub"},
		{Name: "hostro", HostPath: host, MountPath: "/hostro", ReadOnly: true},
	}
	mustCreate(t, r, spec)
	c, err := env.cli.ContainerInspect(ctx, containerName(spec.ID))
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Labels[labelManagedVolumes] != vol {
		t.Errorf("managed-volumes label = %q, want %q", c.Config.Labels[labelManagedVolumes], vol)
	}
	v, err := env.cli.VolumeInspect(ctx, vol)
	if err != nil || v.Labels[labelManagedBy] != spec.ID || v.Labels[testLabelKey] != testLabelVal {
		t.Errorf("created volume labels = %v, %v", v.Labels, err)
	}

	res := run(t, r, spec.ID, spec.ExecdToken, strings.Join([]string{
		"echo in-volume > /data/a/b/f && cat /part/f",
		"touch /part/x 2>/dev/null && echo part-writable || echo part-read-only",
		"cat /host/in.txt && echo from-sandbox > /host/out.txt",
		"touch /hostro/x 2>/dev/null && echo hostro-writable || echo hostro-read-only",
		"ls /hostro/sub",
	}, "; "))
	want := []string{"in-volume", "part-read-only", "from-host", "hostro-read-only", "in.txt", "out.txt"}
	if !reflect.DeepEqual(res.stdout, want) {
		t.Errorf("volume checks = %q (stderr %q), want %q", res.stdout, res.stderr, want)
	}
	if b, err := os.ReadFile(filepath.Join(host, "sub", "out.txt")); err != nil || string(b) != "from-sandbox\n" {
		t.Errorf("file written through the host bind = %q, %v", b, err)
	}

	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if volumeExists(vol) {
		t.Errorf("managed volume %s survived Delete", vol)
	}
}

func TestVolumeErrors(t *testing.T) {
	t.Parallel()
	host := t.TempDir()
	r := newTestRuntime(t, func(o *Options) { o.AllowedHostPaths = []string{host} })
	ctx := testCtx(t)
	if err := os.Symlink("/etc", filepath.Join(host, "escape")); err != nil {
		t.Fatal(err)
	}
	missing := "osbtest-missing-" + randomHex(6)
	kept := "osbtest-kept-" + randomHex(6)
	t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", kept).Run() })
	cases := []struct {
		name string
		vol  runtime.Volume
		want error
	}{
		{"missing claim", runtime.Volume{Name: "v", ClaimName: missing, MountPath: "/v"}, runtime.ErrNotFound},
		{"subPath leaves", runtime.Volume{Name: "v", HostPath: host, MountPath: "/v", SubPath: "../x"}, runtime.ErrInvalid},
		{"absolute subPath", runtime.Volume{Name: "v", HostPath: host, MountPath: "/v", SubPath: "/etc"}, runtime.ErrInvalid},
		{"symlink subPath", runtime.Volume{Name: "v", HostPath: host, MountPath: "/v", SubPath: "escape"}, runtime.ErrHostPathNotAllowed},
		{"host path outside the allow-list", runtime.Volume{Name: "v", HostPath: "/etc", MountPath: "/v"}, runtime.ErrHostPathNotAllowed},
		{"host path through a link", runtime.Volume{Name: "v", HostPath: filepath.Join(host, "escape"), MountPath: "/v"}, runtime.ErrHostPathNotAllowed},
		{"relative mount path", runtime.Volume{Name: "v", HostPath: host, MountPath: "v"}, runtime.ErrInvalid},
		{"no backend", runtime.Volume{Name: "v", MountPath: "/v"}, runtime.ErrNotSupported},
	}
	for _, tc := range cases {
		spec := baseSpec(t)
		// A volume this Create makes must be gone again after it fails.
		spec.Volumes = []runtime.Volume{{Name: "k", ClaimName: kept, MountPath: "/k", CreateIfNotExists: true}, tc.vol}
		_, err := r.Create(ctx, spec)
		wantClass(t, "Create with "+tc.name, err, tc.want)
		if containerExists(containerName(spec.ID)) {
			t.Errorf("%s: failed Create left container %s", tc.name, containerName(spec.ID))
		}
		if volumeExists(kept) {
			t.Errorf("%s: failed Create left the volume it created", tc.name)
		}
	}
	if volumeExists(missing) {
		t.Errorf("volume %s was created without createIfNotExists", missing)
	}
}

// TestDeleteCompletesHalfDelete removes the container behind the
// runtime's back and checks that Delete still removes the volumes.
func TestDeleteCompletesHalfDelete(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	vol := "osbtest-half-" + randomHex(6)
	t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", vol).Run() })
	spec := baseSpec(t)
	spec.Volumes = []runtime.Volume{{Name: "d", ClaimName: vol, MountPath: "/d", CreateIfNotExists: true, DeleteOnTermination: true}}
	mustCreate(t, r, spec)
	if out, err := exec.Command("docker", "rm", "-f", containerName(spec.ID)).CombinedOutput(); err != nil {
		t.Fatalf("docker rm: %v %s", err, out)
	}
	if !volumeExists(vol) {
		t.Fatalf("volume %s gone with the container", vol)
	}
	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("Delete of a half-deleted sandbox: %v", err)
	}
	if volumeExists(vol) {
		t.Errorf("volume %s survived", vol)
	}
	wantClass(t, "Delete of a deleted sandbox", r.Delete(ctx, spec.ID), runtime.ErrNotFound)
}
