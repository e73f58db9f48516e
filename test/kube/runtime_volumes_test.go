package kube

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/runtime/kubernetes"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestKubernetesRuntimeVolumes mounts claims into a sandbox: one the
// driver makes and keeps (mounted twice: read-write, and a subPath
// read-only), one it makes and deletes with the sandbox. The cluster has
// no provisioner, so the test offers two hostPath PersistentVolumes of a
// storage class of its own for the claims to bind to.
func TestKubernetesRuntimeVolumes(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*podTimeout)
	defer cancel()
	class := ns + "-local"
	for i := range 2 {
		dir := filepath.Join(t.TempDir(), "pv")
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o777); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: class + "-" + strconv.Itoa(i), Labels: map[string]string{testLabel: "kube-e2e"}},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:              class,
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
			},
		}
		if _, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
		})
	}
	rt, err := kubernetes.New(ctx, kubernetes.Options{RESTConfig: c.config, Namespace: ns, ExecdImage: pauseExecdImage, CreateTimeout: podTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	id := "rt-" + token(t)
	t.Cleanup(func() { removeSandbox(t, cl, ns, id) })
	keep, scratch := "keep-"+token(t), "scratch-"+token(t)
	spec := runtime.Spec{
		ID: id, Image: baseImage, Entrypoint: []string{"sleep", "infinity"}, ExecdToken: "tok-" + token(t),
		Volumes: []runtime.Volume{
			{Name: "data", ClaimName: keep, MountPath: "/data", CreateIfNotExists: true, StorageClass: class, Storage: "1Mi", AccessModes: "ReadWriteOnce"},
			{Name: "ro", ClaimName: keep, MountPath: "/ro", SubPath: "sub", ReadOnly: true, CreateIfNotExists: true, StorageClass: class, Storage: "1Mi"},
			{Name: "scratch", ClaimName: scratch, MountPath: "/scratch", CreateIfNotExists: true, DeleteOnTermination: true, StorageClass: class, Storage: "1Mi"},
		},
	}
	if _, err := rt.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	a, err := rt.Address(ctx, id, sandbox.ExecdPort)
	if err != nil {
		t.Fatal(err)
	}
	if out, ok := execdRun(ctx, t, a, spec.ExecdToken, "mkdir -p /data/sub && echo shared > /data/sub/f && cat /ro/f && echo s > /scratch/f && cat /scratch/f"); !ok || out != "shared\ns\n" {
		t.Errorf("read-write and subPath mounts: %q (ok %v)", out, ok)
	}
	if out, ok := execdRun(ctx, t, a, spec.ExecdToken, "echo x > /ro/g"); ok {
		t.Errorf("writing to the read-only mount succeeded: %q", out)
	}

	if err := rt.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, keep, metav1.GetOptions{}); err != nil {
		t.Errorf("the claim without deleteOnSandboxTermination: %v, want it kept", err)
	}
	if _, err := c.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, scratch, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the deleteOnSandboxTermination claim after Delete: %v, want it gone", err)
	}
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("Delete left %v", left)
	}

	// A missing claim that may not be made is not found; nothing is left.
	spec.Volumes = []runtime.Volume{{Name: "x", ClaimName: "missing-" + token(t), MountPath: "/x"}}
	if _, err := rt.Create(ctx, spec); !isClass(err, runtime.ErrNotFound) {
		t.Errorf("Create with a missing claim: %v, want ErrNotFound", err)
	}
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("the refused create left %v", left)
	}
}

func isClass(err, class error) bool {
	for e := err; e != nil; {
		if e == class {
			return true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			e = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				if isClass(x, class) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// execdRun runs a shell command through execd at a and returns its
// stdout and whether it completed without an error.
func execdRun(ctx context.Context, t *testing.T, a runtime.Address, token, cmd string) (string, bool) {
	t.Helper()
	return runCommand(ctx, t, http.DefaultClient, "http://"+net.JoinHostPort(a.Host, strconv.Itoa(a.Port)),
		map[string]string{sandbox.AccessTokenHeader: token}, cmd)
}
