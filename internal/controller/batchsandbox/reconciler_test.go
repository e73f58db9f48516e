package batchsandbox

// These tests run the reconciler on a real kube-apiserver and etcd
// (internal/kubetest). There is no kubelet, scheduler or garbage collector:
// pods are created but never run, so where a test needs a running pod it
// writes the pod's status itself (phase, IP, Ready condition), standing in
// for the kubelet. Unscheduled pods are deleted at once by the apiserver
// (no grace period without a node), which is what the scale-down test sees.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// waitTimeout bounds every wait for the controller to converge; generous
// for a loaded two-core machine.
const waitTimeout = 60 * time.Second

// startManager runs a manager with the reconciler, watching namespace ns
// only, until the returned stop is called (or the test ends).
func startManager(t *testing.T, env *kubetest.Env, ns string) (stop func()) {
	t.Helper()
	return kubetest.StartManager(t, env, ns, (&Reconciler{}).SetupWithManager)
}

// eventually polls cond every 100 ms until it returns "" (done) or the
// deadline passes, then fails with the last reason.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, waitTimeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newBatch(ns, name string, replicas int32) *sandboxv1alpha1.BatchSandbox {
	return &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sandboxv1alpha1.BatchSandboxSpec{
			Replicas: ptr.To(replicas),
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "sandbox", Image: "opensandbox/base:latest",
					Env: []corev1.EnvVar{{Name: "ROLE", Value: "default"}},
				}}},
			},
		},
	}
}

// watchClient is a direct client for interceptor.NewClient, which wants a
// client.WithWatch.
func watchClient(t *testing.T, env *kubetest.Env) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// pods lists the pods of batch name by index (all pods of that label).
func pods(t *testing.T, c client.Client, ns, name string) map[string]corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := c.List(ctxT(t), &list, client.InNamespace(ns), client.MatchingLabels{sandboxv1alpha1.LabelBatchSandboxName: name}); err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

func podNames(m map[string]corev1.Pod) []string {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// runPod stands in for the kubelet: it marks pod ns/name scheduled,
// running and ready with ip.
func runPod(t *testing.T, c client.Client, ns, name, ip string) {
	t.Helper()
	var p corev1.Pod
	if err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatalf("getting pod %s: %v", name, err)
	}
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}
	if err := c.Status().Update(ctxT(t), &p); err != nil {
		t.Fatalf("setting status of pod %s: %v", name, err)
	}
}

// failPod stands in for the kubelet reporting that pod ns/name failed.
func failPod(t *testing.T, c client.Client, ns, name, reason string) {
	t.Helper()
	var p corev1.Pod
	if err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatalf("getting pod %s: %v", name, err)
	}
	p.Status.Phase = corev1.PodFailed
	p.Status.Reason = reason
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctxT(t), &p); err != nil {
		t.Fatalf("setting status of pod %s: %v", name, err)
	}
}

func getBatch(t *testing.T, c client.Client, ns, name string) *sandboxv1alpha1.BatchSandbox {
	t.Helper()
	var b sandboxv1alpha1.BatchSandbox
	if err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: name}, &b); err != nil {
		t.Fatalf("getting BatchSandbox %s: %v", name, err)
	}
	return &b
}

// condition returns "type=status reason: message" of b's condition typ.
func condition(b *sandboxv1alpha1.BatchSandbox, typ string) string {
	c := meta.FindStatusCondition(b.Status.Conditions, typ)
	if c == nil {
		return typ + " missing"
	}
	return fmt.Sprintf("%s=%s %s: %s", typ, c.Status, c.Reason, c.Message)
}

// scale sets spec.replicas of ns/name, retrying on write conflicts with
// the controller (a client's ordinary read-modify-write).
func scale(t *testing.T, c client.Client, ns, name string, replicas int32) {
	t.Helper()
	for {
		b := getBatch(t, c, ns, name)
		b.Spec.Replicas = ptr.To(replicas)
		err := c.Update(ctxT(t), b)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("scaling to %d: %v", replicas, err)
		}
	}
}

func TestReconciler(t *testing.T) {
	env := kubetest.Start(t)
	t.Run("PodsEndpointsStatus", func(t *testing.T) { testPodsEndpointsStatus(t, env) })
	t.Run("Scale", func(t *testing.T) { testScale(t, env) })
	t.Run("ScaleBackWhileTerminating", func(t *testing.T) { testScaleBackWhileTerminating(t, env) })
	t.Run("PodDeletedOrFailed", func(t *testing.T) { testPodDeletedOrFailed(t, env) })
	t.Run("Expiry", func(t *testing.T) { testExpiry(t, env) })
	t.Run("RestartMidway", func(t *testing.T) { testRestartMidway(t, env) })
	t.Run("Conflict", func(t *testing.T) { testConflict(t, env) })
	t.Run("PoolModeSkipped", func(t *testing.T) { testPoolModeSkipped(t, env) })
}

func testPodsEndpointsStatus(t *testing.T, env *kubetest.Env) {
	c := env.Client
	ns := env.Namespace(t)
	startManager(t, env, ns)
	b := newBatch(ns, "web", 3)
	b.Spec.ShardPatches = []runtime.RawExtension{
		{Raw: []byte(`{}`)},
		{Raw: []byte(`{"metadata":{"labels":{"shard":"one"}},"spec":{"containers":[{"name":"sandbox","env":[{"name":"ROLE","value":"leader"}]}]}}`)},
	}
	if err := c.Create(ctxT(t), b); err != nil {
		t.Fatal(err)
	}

	eventually(t, "3 pods and a Pending status", func() string {
		got := pods(t, c, ns, "web")
		if names := podNames(got); !slices.Equal(names, []string{"web-0", "web-1", "web-2"}) {
			return fmt.Sprintf("pods %v", names)
		}
		cur := getBatch(t, c, ns, "web")
		if cur.Status.Phase != sandboxv1alpha1.BatchSandboxPhasePending || cur.Status.Replicas != 3 || cur.Status.Ready != 0 {
			return fmt.Sprintf("status %+v", cur.Status)
		}
		if !meta.IsStatusConditionTrue(cur.Status.Conditions, "Progressing") {
			return condition(cur, "Progressing")
		}
		return ""
	})
	got := pods(t, c, ns, "web")
	cur := getBatch(t, c, ns, "web")
	for i, name := range []string{"web-0", "web-1", "web-2"} {
		p := got[name]
		if p.Labels[sandboxv1alpha1.LabelBatchSandboxPodIndex] != fmt.Sprint(i) || p.Labels[sandboxv1alpha1.LabelBatchSandboxName] != "web" || p.Labels["app"] != "sandbox" {
			t.Errorf("pod %s labels %v", name, p.Labels)
		}
		if !metav1.IsControlledBy(&p, cur) {
			t.Errorf("pod %s owner references %+v", name, p.OwnerReferences)
		}
		role := p.Spec.Containers[0].Env[0].Value
		if want := map[int]string{0: "default", 1: "leader", 2: "default"}[i]; role != want {
			t.Errorf("pod %s ROLE=%s, want %s (shard patch)", name, role, want)
		}
		if _, ok := p.Labels["shard"]; ok != (i == 1) {
			t.Errorf("pod %s labels %v: shard label only on web-1", name, p.Labels)
		}
	}

	// The kubelet stand-in brings the pods up out of order; the endpoints
	// stay in index order.
	runPod(t, c, ns, "web-2", "10.1.0.12")
	eventually(t, "one endpoint", func() string {
		ips, err := sandboxv1alpha1.Endpoints(getBatch(t, c, ns, "web"))
		if err != nil || !slices.Equal(ips, []string{"10.1.0.12"}) {
			return fmt.Sprintf("endpoints %v, %v", ips, err)
		}
		return ""
	})
	runPod(t, c, ns, "web-0", "10.1.0.10")
	runPod(t, c, ns, "web-1", "10.1.0.11")
	eventually(t, "all ready", func() string {
		cur := getBatch(t, c, ns, "web")
		ips, err := sandboxv1alpha1.Endpoints(cur)
		if err != nil || !slices.Equal(ips, []string{"10.1.0.10", "10.1.0.11", "10.1.0.12"}) {
			return fmt.Sprintf("endpoints %v, %v", ips, err)
		}
		st := cur.Status
		if st.Phase != sandboxv1alpha1.BatchSandboxPhaseSucceed || st.Ready != 3 || st.Allocated != 3 || st.ObservedGeneration != cur.Generation {
			return fmt.Sprintf("status %+v", st)
		}
		if !meta.IsStatusConditionTrue(st.Conditions, "Ready") || meta.IsStatusConditionTrue(st.Conditions, "Progressing") ||
			!meta.IsStatusConditionFalse(st.Conditions, "PodFailed") {
			return fmt.Sprintf("%s; %s; %s", condition(cur, "Ready"), condition(cur, "Progressing"), condition(cur, "PodFailed"))
		}
		a, err := sandboxv1alpha1.GetAllocation(cur, sandboxv1alpha1.AnnotationAllocStatus)
		if err != nil || !slices.Equal(a.Pods, []string{"web-0", "web-1", "web-2"}) {
			return fmt.Sprintf("alloc-status %v, %v", a.Pods, err)
		}
		return ""
	})
}

func testScale(t *testing.T, env *kubetest.Env) {
	c := env.Client
	ns := env.Namespace(t)
	startManager(t, env, ns)
	if err := c.Create(ctxT(t), newBatch(ns, "s", 2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 pods", func() string {
		if names := podNames(pods(t, c, ns, "s")); len(names) != 2 {
			return fmt.Sprintf("pods %v", names)
		}
		return ""
	})
	runPod(t, c, ns, "s-0", "10.2.0.10")
	runPod(t, c, ns, "s-1", "10.2.0.11")
	uid0 := pods(t, c, ns, "s")["s-0"].UID

	scale(t, c, ns, "s", 4)
	eventually(t, "scaled up to 4", func() string {
		if names := podNames(pods(t, c, ns, "s")); !slices.Equal(names, []string{"s-0", "s-1", "s-2", "s-3"}) {
			return fmt.Sprintf("pods %v", names)
		}
		cur := getBatch(t, c, ns, "s")
		if cur.Status.Replicas != 4 || cur.Status.Ready != 2 || cur.Status.Phase != sandboxv1alpha1.BatchSandboxPhasePending || cur.Status.ObservedGeneration != cur.Generation {
			return fmt.Sprintf("status %+v", cur.Status)
		}
		return ""
	})
	runPod(t, c, ns, "s-3", "10.2.0.13")

	scale(t, c, ns, "s", 1)
	eventually(t, "scaled down to 1, the highest indexes removed", func() string {
		if names := podNames(pods(t, c, ns, "s")); !slices.Equal(names, []string{"s-0"}) {
			return fmt.Sprintf("pods %v", names)
		}
		cur := getBatch(t, c, ns, "s")
		ips, _ := sandboxv1alpha1.Endpoints(cur)
		a, _ := sandboxv1alpha1.GetAllocation(cur, sandboxv1alpha1.AnnotationAllocStatus)
		if !slices.Equal(ips, []string{"10.2.0.10"}) || !slices.Equal(a.Pods, []string{"s-0"}) {
			return fmt.Sprintf("endpoints %v alloc-status %v", ips, a.Pods)
		}
		if cur.Status.Replicas != 1 || cur.Status.Ready != 1 || cur.Status.Phase != sandboxv1alpha1.BatchSandboxPhaseSucceed {
			return fmt.Sprintf("status %+v", cur.Status)
		}
		// Removed replicas are not failures.
		if !meta.IsStatusConditionFalse(cur.Status.Conditions, "PodFailed") {
			return condition(cur, "PodFailed")
		}
		return ""
	})
	if got := pods(t, c, ns, "s")["s-0"].UID; got != uid0 {
		t.Errorf("s-0 was replaced (uid %s, was %s)", got, uid0)
	}

	// Scaling to zero is allowed and leaves a ready (empty) batch.
	scale(t, c, ns, "s", 0)
	eventually(t, "scaled to 0", func() string {
		if names := podNames(pods(t, c, ns, "s")); len(names) != 0 {
			return fmt.Sprintf("pods %v", names)
		}
		if cur := getBatch(t, c, ns, "s"); cur.Status.Replicas != 0 || cur.Status.Phase != sandboxv1alpha1.BatchSandboxPhaseSucceed {
			return fmt.Sprintf("status %+v", cur.Status)
		}
		return ""
	})
}

func testPodDeletedOrFailed(t *testing.T, env *kubetest.Env) {
	c := env.Client
	ns := env.Namespace(t)
	startManager(t, env, ns)
	if err := c.Create(ctxT(t), newBatch(ns, "f", 3)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 pods", func() string {
		if names := podNames(pods(t, c, ns, "f")); len(names) != 3 {
			return fmt.Sprintf("pods %v", names)
		}
		return ""
	})
	for i := range 3 {
		runPod(t, c, ns, fmt.Sprintf("f-%d", i), fmt.Sprintf("10.3.0.%d", 10+i))
	}
	eventually(t, "ready", func() string {
		if cur := getBatch(t, c, ns, "f"); cur.Status.Phase != sandboxv1alpha1.BatchSandboxPhaseSucceed {
			return fmt.Sprintf("status %+v", cur.Status)
		}
		return ""
	})

	// Someone deletes a pod: it is reported, and not recreated.
	victim := pods(t, c, ns, "f")["f-1"]
	if err := c.Delete(ctxT(t), &victim); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PodFailed for the deleted pod", func() string {
		cur := getBatch(t, c, ns, "f")
		c := meta.FindStatusCondition(cur.Status.Conditions, "PodFailed")
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "pod f-1 was deleted") {
			return condition(cur, "PodFailed")
		}
		if cur.Status.Phase != sandboxv1alpha1.BatchSandboxPhaseFailed || cur.Status.Replicas != 2 || cur.Status.Ready != 2 {
			return fmt.Sprintf("status %+v", cur.Status)
		}
		if meta.IsStatusConditionTrue(cur.Status.Conditions, "Ready") {
			return condition(cur, "Ready")
		}
		ips, _ := sandboxv1alpha1.Endpoints(cur)
		if !slices.Equal(ips, []string{"10.3.0.10", "10.3.0.12"}) {
			return fmt.Sprintf("endpoints %v", ips)
		}
		return ""
	})
	// The reconcile that wrote the condition is the one that chose not to
	// recreate the pod.
	if p, ok := pods(t, c, ns, "f")["f-1"]; ok {
		t.Fatalf("deleted pod f-1 was recreated (uid %s, was %s)", p.UID, victim.UID)
	}

	// The kubelet stand-in reports another pod failed.
	failPod(t, c, ns, "f-2", "OOMKilled")
	eventually(t, "PodFailed for both", func() string {
		cur := getBatch(t, c, ns, "f")
		c := meta.FindStatusCondition(cur.Status.Conditions, "PodFailed")
		if c == nil || !strings.Contains(c.Message, "pod f-1 was deleted") || !strings.Contains(c.Message, "pod f-2 failed: OOMKilled") {
			return condition(cur, "PodFailed")
		}
		if cur.Status.Ready != 1 || cur.Status.Replicas != 2 || cur.Status.Phase != sandboxv1alpha1.BatchSandboxPhaseFailed {
			return fmt.Sprintf("status %+v", cur.Status)
		}
		// A failed pod's IP is no endpoint.
		if ips, _ := sandboxv1alpha1.Endpoints(cur); !slices.Equal(ips, []string{"10.3.0.10"}) {
			return fmt.Sprintf("endpoints %v", ips)
		}
		return ""
	})
	if names := podNames(pods(t, c, ns, "f")); !slices.Equal(names, []string{"f-0", "f-2"}) {
		t.Errorf("pods %v, want the failed one kept and the deleted one not recreated", names)
	}
}

func testExpiry(t *testing.T, env *kubetest.Env) {
	c := env.Client
	ns := env.Namespace(t)
	startManager(t, env, ns)

	// expireTime is serialised to the second; 3 s from now, rounded up.
	exp := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	b := newBatch(ns, "e", 1)
	b.Spec.ExpireTime = &metav1.Time{Time: exp}
	if err := c.Create(ctxT(t), b); err != nil {
		t.Fatal(err)
	}
	past := newBatch(ns, "past", 1)
	past.Spec.ExpireTime = &metav1.Time{Time: time.Now().Add(-time.Hour)}
	if err := c.Create(ctxT(t), past); err != nil {
		t.Fatal(err)
	}
	gone := func(name string) func() string {
		return func() string {
			var cur sandboxv1alpha1.BatchSandbox
			err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: name}, &cur)
			if apierrors.IsNotFound(err) {
				return ""
			}
			return fmt.Sprintf("still there (err %v)", err)
		}
	}
	eventually(t, "past expireTime deleted", gone("past"))
	eventually(t, "expired BatchSandbox deleted", gone("e"))
	if now := time.Now(); now.Before(exp) {
		t.Errorf("deleted at %s, before its expireTime %s", now.Format(time.RFC3339Nano), exp.Format(time.RFC3339))
	}
}

// testRestartMidway kills the controller between creating pods and
// recording them (the annotation write fails), then starts a manager on
// the same apiserver: it must adopt the pods, not create them again.
func testRestartMidway(t *testing.T, env *kubetest.Env) {
	c := env.Client
	ns := env.Namespace(t)
	if err := c.Create(ctxT(t), newBatch(ns, "r", 4)); err != nil {
		t.Fatal(err)
	}
	var creates atomic.Int32
	crashed := interceptor.NewClient(watchClient(t, env), interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates.Add(1)
			return cl.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return fmt.Errorf("controller killed before recording its pods")
		},
	})
	r := &Reconciler{Client: crashed, APIReader: env.Client}
	if _, err := r.Reconcile(ctxT(t), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "r"}}); err == nil {
		t.Fatal("reconcile with a failing annotation write succeeded")
	}
	if creates.Load() != 4 {
		t.Fatalf("first controller created %d pods, want 4", creates.Load())
	}
	before := pods(t, c, ns, "r")
	if a, _ := sandboxv1alpha1.GetAllocation(getBatch(t, c, ns, "r"), sandboxv1alpha1.AnnotationAllocStatus); len(a.Pods) != 0 {
		t.Fatalf("alloc-status written despite the crash: %v", a.Pods)
	}

	// A first real manager runs, records the pods, and is stopped.
	stop := startManager(t, env, ns)
	eventually(t, "pods recorded", func() string {
		a, err := sandboxv1alpha1.GetAllocation(getBatch(t, c, ns, "r"), sandboxv1alpha1.AnnotationAllocStatus)
		if err != nil || len(a.Pods) != 4 {
			return fmt.Sprintf("alloc-status %v, %v", a.Pods, err)
		}
		return ""
	})
	stop()
	runPod(t, c, ns, "r-0", "10.4.0.10")

	// A second manager on the same apiserver picks up where it stopped.
	startManager(t, env, ns)
	eventually(t, "second manager reconciled", func() string {
		ips, err := sandboxv1alpha1.Endpoints(getBatch(t, c, ns, "r"))
		if err != nil || !slices.Equal(ips, []string{"10.4.0.10"}) {
			return fmt.Sprintf("endpoints %v, %v", ips, err)
		}
		return ""
	})
	after := pods(t, c, ns, "r")
	if len(after) != 4 {
		t.Fatalf("pods after restart %v, want 4", podNames(after))
	}
	for name, p := range before {
		if after[name].UID != p.UID {
			t.Errorf("pod %s was recreated (uid %s, was %s)", name, after[name].UID, p.UID)
		}
	}
}

// testConflict makes the reconciler's annotation write lose a race: just
// before it, another client updates the BatchSandbox. The write, guarded
// by the resourceVersion the reconciler read, must fail with a conflict
// and the reconcile ask to run again rather than overwrite.
func testConflict(t *testing.T, env *kubetest.Env) {
	c := env.Client
	ns := env.Namespace(t)
	if err := c.Create(ctxT(t), newBatch(ns, "k", 1)); err != nil {
		t.Fatal(err)
	}
	var raced, conflicted atomic.Bool
	racing := interceptor.NewClient(watchClient(t, env), interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*sandboxv1alpha1.BatchSandbox); ok && raced.CompareAndSwap(false, true) {
				other := &sandboxv1alpha1.BatchSandbox{}
				if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil {
					return err
				}
				other.Labels = map[string]string{"touched": "by-someone-else"}
				if err := cl.Update(ctx, other); err != nil {
					return fmt.Errorf("racing update: %w", err)
				}
			}
			err := cl.Patch(ctx, obj, patch, opts...)
			if apierrors.IsConflict(err) {
				conflicted.Store(true)
			}
			return err
		},
	})
	r := &Reconciler{Client: racing, APIReader: env.Client}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "k"}}
	res, err := r.Reconcile(ctxT(t), req)
	if err != nil {
		t.Fatalf("reconcile that lost a race returned %v, want a requeue", err)
	}
	if !conflicted.Load() || res.RequeueAfter <= 0 {
		t.Fatalf("conflict %v, result %+v: want a conflict and a requeue", conflicted.Load(), res)
	}
	if cur := getBatch(t, c, ns, "k"); cur.Annotations[sandboxv1alpha1.AnnotationAllocStatus] != "" {
		t.Fatalf("stale write went through: %v", cur.Annotations)
	}
	// The requeued reconcile reads afresh and succeeds, keeping the other
	// writer's change.
	if _, err := r.Reconcile(ctxT(t), req); err != nil {
		t.Fatalf("requeued reconcile: %v", err)
	}
	cur := getBatch(t, c, ns, "k")
	a, _ := sandboxv1alpha1.GetAllocation(cur, sandboxv1alpha1.AnnotationAllocStatus)
	if !slices.Equal(a.Pods, []string{"k-0"}) || cur.Labels["touched"] != "by-someone-else" {
		t.Fatalf("after requeue: alloc-status %v labels %v", a.Pods, cur.Labels)
	}
	if cur.Status.Replicas != 1 || cur.Status.ObservedGeneration != cur.Generation {
		t.Fatalf("status %+v", cur.Status)
	}
	if n := len(pods(t, c, ns, "k")); n != 1 {
		t.Fatalf("%d pods, want 1", n)
	}
}

func testPoolModeSkipped(t *testing.T, env *kubetest.Env) {
	c := env.Client
	ns := env.Namespace(t)
	b := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr.To(int32(2)), PoolRef: "warm"},
	}
	if err := c.Create(ctxT(t), b); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, APIReader: c}
	res, err := r.Reconcile(ctxT(t), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "p"}})
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("reconcile: %+v, %v", res, err)
	}
	cur := getBatch(t, c, ns, "p")
	if len(pods(t, c, ns, "p")) != 0 || len(cur.Annotations) != 0 || cur.Status.Phase != "" {
		raw, _ := json.Marshal(cur)
		t.Fatalf("pool-mode BatchSandbox was touched: %s", raw)
	}
}

// testScaleBackWhileTerminating scales a replica away and back while its
// old pod is still terminating (a finalizer stands in for the kubelet's
// grace period): the terminating pod is not taken for the replica, the
// batch is not failed, and once it is gone a new pod takes its place.
func testScaleBackWhileTerminating(t *testing.T, env *kubetest.Env) {
	c := env.Client
	ns := env.Namespace(t)
	startManager(t, env, ns)
	if err := c.Create(ctxT(t), newBatch(ns, "t", 2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 pods", func() string {
		if names := podNames(pods(t, c, ns, "t")); len(names) != 2 {
			return fmt.Sprintf("pods %v", names)
		}
		return ""
	})
	runPod(t, c, ns, "t-0", "10.3.0.10")
	runPod(t, c, ns, "t-1", "10.3.0.11")
	const hold = "test.opensandbox.io/hold"
	old := pods(t, c, ns, "t")["t-1"]
	old.Finalizers = append(old.Finalizers, hold)
	if err := c.Update(ctxT(t), &old); err != nil {
		t.Fatal(err)
	}

	scale(t, c, ns, "t", 1)
	eventually(t, "t-1 terminating", func() string {
		if p, ok := pods(t, c, ns, "t")["t-1"]; !ok || p.DeletionTimestamp == nil {
			return "t-1 not being deleted"
		}
		return ""
	})
	scale(t, c, ns, "t", 2)
	eventually(t, "replica 1 waiting for its old pod, not failed", func() string {
		cur := getBatch(t, c, ns, "t")
		if cur.Status.ObservedGeneration != cur.Generation {
			return "generation not observed"
		}
		if cur.Status.Phase != sandboxv1alpha1.BatchSandboxPhasePending || !meta.IsStatusConditionFalse(cur.Status.Conditions, "PodFailed") {
			return fmt.Sprintf("phase %s, %s", cur.Status.Phase, condition(cur, "PodFailed"))
		}
		if a, _ := sandboxv1alpha1.GetAllocation(cur, sandboxv1alpha1.AnnotationAllocStatus); slices.Contains(a.Pods, "t-1") {
			return fmt.Sprintf("the terminating t-1 is recorded: %v", a.Pods)
		}
		return ""
	})

	// The old pod goes; a new one is made for replica 1.
	old = pods(t, c, ns, "t")["t-1"]
	old.Finalizers = slices.DeleteFunc(old.Finalizers, func(f string) bool { return f == hold })
	if err := c.Update(ctxT(t), &old); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new t-1", func() string {
		p, ok := pods(t, c, ns, "t")["t-1"]
		if !ok || p.UID == old.UID || p.DeletionTimestamp != nil {
			return "no new t-1 yet"
		}
		return ""
	})
	runPod(t, c, ns, "t-1", "10.3.0.12")
	eventually(t, "both ready", func() string {
		cur := getBatch(t, c, ns, "t")
		ips, _ := sandboxv1alpha1.Endpoints(cur)
		if cur.Status.Phase != sandboxv1alpha1.BatchSandboxPhaseSucceed || !slices.Equal(ips, []string{"10.3.0.10", "10.3.0.12"}) {
			return fmt.Sprintf("phase %s endpoints %v %s", cur.Status.Phase, ips, condition(cur, "PodFailed"))
		}
		return ""
	})
}
