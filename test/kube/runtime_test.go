package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/runtime/kubernetes"
	"github.com/opensandbox-go/opensandbox/internal/runtime/runtimetest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// TestKubernetesRuntimeConformance runs the runtime conformance suite
// against the kubernetes driver on the test cluster: one namespace and one
// operator (with the snapshot registry, for pause and snapshots) for the
// whole suite, a driver per subtest group.
func TestKubernetesRuntimeConformance(t *testing.T) {
	runConformance(t, false)
}

// TestKubernetesRuntimeConformanceNoInformer runs the suite with
// informer_enabled = false: every read goes to the API server.
func TestKubernetesRuntimeConformanceNoInformer(t *testing.T) {
	runConformance(t, true)
}

func runConformance(t *testing.T, noInformer bool) {
	c := connect(t)
	ns := c.namespace(t)
	c.startSnapshotOperator(t, ns)
	cl := c.sandboxClient(t)

	runtimetest.Run(t, runtimetest.Harness{
		New: func(t *testing.T) runtime.Runtime {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rt, err := kubernetes.New(ctx, kubernetes.Options{
				RESTConfig:      c.config,
				Namespace:       ns,
				ExecdImage:      pauseExecdImage,
				CreateTimeout:   podTimeout,
				DisableInformer: noInformer,
				Logger:          slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
			})
			if err != nil {
				t.Fatalf("kubernetes.New: %v", err)
			}
			t.Cleanup(rt.Close)
			return rt
		},
		Image: baseImage,
		NewID: func(t *testing.T) string {
			id := "rt-" + token(t)
			t.Cleanup(func() { removeSandbox(t, cl, ns, id) })
			return id
		},
		Leftovers: func(t *testing.T, id string) []string { return leftovers(t, c, cl, ns, id) },
		Timeout:   snapshotTimeout,
	})
}

// testWriter sends the driver's log to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// removeSandbox deletes whatever a subtest left under id (the namespace's
// deletion would too, but only once the whole suite ends).
func removeSandbox(t *testing.T, cl client.Client, ns, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, obj := range []client.Object{
		&sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id}},
		&sandboxv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id + "-pull"}},
	} {
		if err := client.IgnoreNotFound(cl.Delete(ctx, obj)); err != nil {
			t.Logf("cleanup of %s: %v", id, err)
		}
	}
}

// leftovers lists what the cluster holds of sandbox id: its BatchSandbox,
// pods, Secrets and PVCs (by name or our label) and SandboxSnapshots of it
// that it owns (the pause snapshots; those CommitSnapshot made outlive it).
func leftovers(t *testing.T, c *cluster, cl client.Client, ns, id string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	sel := client.MatchingLabels{"opensandbox.io/id": id}
	var bs sandboxv1alpha1.BatchSandboxList
	if err := cl.List(ctx, &bs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs.Items {
		if b.Name == id || b.Labels["opensandbox.io/id"] == id {
			out = append(out, "batchsandbox/"+b.Name)
		}
	}
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Labels["opensandbox.io/id"] == id || p.Labels[sandboxv1alpha1.LabelBatchSandboxName] == id {
			out = append(out, "pod/"+p.Name)
		}
	}
	var secrets corev1.SecretList
	if err := cl.List(ctx, &secrets, client.InNamespace(ns), sel); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out = append(out, "secret/"+s.Name)
	}
	for _, name := range []string{id, id + "-pull"} {
		if _, err := c.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			out = append(out, "secret/"+name)
		}
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := cl.List(ctx, &pvcs, client.InNamespace(ns), sel); err != nil {
		t.Fatal(err)
	}
	for _, p := range pvcs.Items {
		out = append(out, "pvc/"+p.Name)
	}
	var snaps sandboxv1alpha1.SandboxSnapshotList
	if err := cl.List(ctx, &snaps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps.Items {
		for _, ref := range s.OwnerReferences {
			if ref.Kind == "BatchSandbox" && ref.Name == id {
				out = append(out, fmt.Sprintf("sandboxsnapshot/%s", s.Name))
			}
		}
	}
	return out
}

// TestKubernetesRuntimeFailedCreate: a create whose image cannot be pulled
// fails with ErrImagePull carrying the kubelet's message, and leaves
// nothing behind; metadata that is no label is refused before anything is
// made.
func TestKubernetesRuntimeFailedCreate(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*podTimeout)
	defer cancel()
	rt, err := kubernetes.New(ctx, kubernetes.Options{RESTConfig: c.config, Namespace: ns, ExecdImage: pauseExecdImage, CreateTimeout: podTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	id := "rt-" + token(t)
	t.Cleanup(func() { removeSandbox(t, cl, ns, id) })
	spec := runtime.Spec{
		ID: id, Image: c.registry + "/opensandbox/no-such-image:" + token(t), Entrypoint: []string{"sleep", "infinity"},
		ExecdToken: "tok", Metadata: map[string]string{"k": "v"},
	}
	start := time.Now()
	_, err = rt.Create(ctx, spec)
	if !errors.Is(err, runtime.ErrImagePull) || !strings.Contains(err.Error(), "no-such-image") {
		t.Fatalf("Create of a missing image: %v, want ErrImagePull naming the image", err)
	}
	t.Logf("failed in %s: %v", time.Since(start).Round(time.Millisecond), err)
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("the failed create left %v", left)
	}
	if _, err := rt.Get(ctx, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Get after the failed create: %v, want ErrNotFound", err)
	}

	spec.Metadata = map[string]string{"not a key": "v"}
	if _, err := rt.Create(ctx, spec); !errors.Is(err, runtime.ErrInvalid) || !strings.Contains(err.Error(), "not a key") {
		t.Errorf("Create with a bad metadata key: %v, want ErrInvalid naming the key", err)
	}
	spec.Metadata = map[string]string{"opensandbox.io/id": "x"}
	if _, err := rt.Create(ctx, spec); !errors.Is(err, runtime.ErrInvalid) {
		t.Errorf("Create with a reserved metadata key: %v, want ErrInvalid", err)
	}
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("the refused creates left %v", left)
	}
}
