package kubernetes

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// fakeRuntime is a Runtime on controller-runtime's fake client (no
// informers, no operator): for the decisions made before any wait.
func fakeRuntime(t *testing.T, objs ...client.Object) *Runtime {
	t.Helper()
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return &Runtime{opts: Options{}.withDefaults(), ns: "ns", cached: cl, api: cl, direct: cl, log: slog.New(slog.DiscardHandler)}
}

func pausedBatch(id string) *sandboxv1alpha1.BatchSandbox {
	b := &sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: "ns", Labels: map[string]string{labelID: id},
		Annotations: map[string]string{annEntrypoint: `["sleep","1"]`}}}
	b.Spec.Pause = ptr.To(true)
	b.Status.Phase = sandboxv1alpha1.BatchSandboxPhasePaused
	return b
}

func TestDecisionsOnState(t *testing.T) {
	ctx := context.Background()
	r := fakeRuntime(t, pausedBatch("p"),
		&sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: "ns"}})
	if err := r.CommitSnapshot(ctx, "p", "snap"); !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("CommitSnapshot of a paused sandbox: %v, want ErrConflict", err)
	}
	if err := r.Pause(ctx, "p"); !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("Pause of a paused sandbox: %v, want ErrConflict", err)
	}
	if _, err := r.Address(ctx, "p", 44772); !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("Address of a paused sandbox: %v, want ErrConflict", err)
	}
	// A BatchSandbox without our label is not a sandbox of this runtime.
	if _, err := r.Get(ctx, "foreign"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Get of a foreign BatchSandbox: %v, want ErrNotFound", err)
	}
	if err := r.Delete(ctx, "foreign"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Delete of a foreign BatchSandbox: %v, want ErrNotFound", err)
	}
	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "p" {
		t.Errorf("List: %+v %v, want only p", list, err)
	}
}

// TestCreateTimeout: a create that times out on a pod the scheduler cannot
// place is a start failure naming the scheduler's reason (the server's
// 500 SANDBOX_START_FAILED with that message), not ErrUnavailable (503,
// "the engine is unavailable"), which only a BatchSandbox that never shows
// up is.
func TestCreateTimeout(t *testing.T) {
	b := &sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "uid-s", Labels: map[string]string{labelID: "s"}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName("s"), Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: sandboxv1alpha1.GroupVersion.String(), Kind: "BatchSandbox", Name: "s", UID: "uid-s", Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}}},
	}
	r := fakeRuntime(t, b, pod)
	r.opts.CreateTimeout, r.opts.CreatePollInterval = 200*time.Millisecond, 20*time.Millisecond
	err := r.waitRunning(context.Background(), runtime.Spec{ID: "s", ExecdToken: "tok"})
	if err == nil || errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), "Unschedulable") || !strings.Contains(err.Error(), "Insufficient memory") {
		t.Errorf("timeout on an unschedulable pod: %v, want a start failure naming the scheduler's reason", err)
	}
	if err := r.waitRunning(context.Background(), runtime.Spec{ID: "missing", ExecdToken: "tok"}); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("timeout without the BatchSandbox: %v, want ErrUnavailable", err)
	}
}

// poolRef "*" takes the pool made for sandboxes (claimable execd) that
// runs the image asked for, with the most available pods.
func TestResolvePoolRef(t *testing.T) {
	pool := func(name, image string, claimable bool, available int32) *sandboxv1alpha1.Pool {
		p := &sandboxv1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		p.Spec.Template.Spec.Containers = []corev1.Container{{Name: "side", Image: "side:1"}, {Name: mainContainer, Image: image}}
		if claimable {
			p.Spec.Template.Labels = map[string]string{labelExecd: execdClaim}
		}
		p.Status.Available = available
		return p
	}
	r := fakeRuntime(t, pool("a", "base:1", true, 1), pool("b", "base:1", true, 3), pool("c", "other:1", true, 9), pool("kubectl-made", "base:1", false, 20))
	ctx := context.Background()
	for _, tc := range []struct{ image, want string }{{"base:1", "b"}, {"other:1", "c"}, {"", "c"}} {
		got, err := r.resolvePoolRef(ctx, runtime.Spec{ID: "s", PoolRef: "*", Image: tc.image})
		if err != nil || got != tc.want {
			t.Errorf("image %q: pool %q, %v; want %q", tc.image, got, err, tc.want)
		}
	}
	if _, err := r.resolvePoolRef(ctx, runtime.Spec{ID: "s", PoolRef: "*", Image: "missing:1"}); !errors.Is(err, runtime.ErrInvalid) || !strings.Contains(err.Error(), "missing:1") {
		t.Errorf("an image no pool runs: %v, want ErrInvalid naming it", err)
	}
}
