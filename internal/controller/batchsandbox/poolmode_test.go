package batchsandbox

// Pool-mode tests on a real kube-apiserver and etcd, with the Pool
// controller and the pool-mode controller in one manager. There is no
// kubelet: kubelet (below) marks the pools' pods Running and Ready with an
// IP, as a node would once their containers start.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/opensandbox-go/opensandbox/internal/controller/pool"
	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// writeCounter counts the writes the pool-mode controller sends for
// BatchSandboxes (create, update, patch, delete; status included).
type writeCounter struct {
	n   atomic.Int64
	mu  sync.Mutex
	ops []string
}

func (w *writeCounter) wrap(c client.WithWatch) client.WithWatch {
	count := func(obj client.Object, op string) {
		if _, ok := obj.(*sandboxv1alpha1.BatchSandbox); ok {
			w.n.Add(1)
			w.mu.Lock()
			w.ops = append(w.ops, op)
			w.mu.Unlock()
		}
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count(obj, "update")
			return cl.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			count(obj, "patch")
			return cl.Patch(ctx, obj, p, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			count(obj, sub+" update")
			return cl.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			count(obj, sub+" patch")
			return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
}

// noWatch makes a manager's client a client.WithWatch for interceptor.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("watch not supported")
}

// startPoolManager runs the Pool controller and the pool-mode controller
// on ns; direct and cached, if not nil, wrap the pool-mode controller's
// uncached client and its manager client.
func startPoolManager(t *testing.T, env *kubetest.Env, ns string, direct, cached func(client.WithWatch) client.WithWatch) (stop func()) {
	t.Helper()
	return kubetest.StartManager(t, env, ns, func(mgr ctrl.Manager) error {
		if err := pool.SetupWithManager(mgr); err != nil {
			return err
		}
		r := &PoolReconciler{}
		if direct != nil {
			r.Direct = direct(watchClient(t, env))
		}
		if cached != nil {
			r.Client = cached(noWatch{mgr.GetClient()})
		}
		return r.SetupWithManager(mgr)
	})
}

var ipSeq atomic.Int64

// markPoolPodsReady does the kubelet's part once: every pool pod of ns not
// yet ready becomes Running and Ready with a fresh IP. It returns how
// many it marked.
func markPoolPodsReady(t *testing.T, c client.Client, ns string) int {
	t.Helper()
	var list corev1.PodList
	if err := c.List(context.Background(), &list, client.InNamespace(ns), client.HasLabels{sandboxv1alpha1.LabelPoolName}); err != nil {
		t.Errorf("listing pool pods: %v", err)
		return 0
	}
	n := 0
	for i := range list.Items {
		p := &list.Items[i]
		if podReady(p) || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
			continue
		}
		k := ipSeq.Add(1)
		ip := fmt.Sprintf("10.77.%d.%d", k/250, k%250+1)
		now := metav1.Now()
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		err := c.Status().Update(context.Background(), p)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Errorf("marking pod %s ready: %v", p.Name, err)
			continue
		}
		n++
	}
	return n
}

// kubelet marks the pool pods of ns ready as they appear until the test
// ends.
func kubelet(t *testing.T, c client.Client, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				markPoolPodsReady(t, c, ns)
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func warmPool(ns, name string, c sandboxv1alpha1.CapacitySpec, recycle sandboxv1alpha1.RecycleStrategyType, image string) *sandboxv1alpha1.Pool {
	all := intstr.FromString("100%")
	return &sandboxv1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sandboxv1alpha1.PoolSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "sandbox", Image: image,
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				}}},
			},
			CapacitySpec:    c,
			ScaleStrategy:   &sandboxv1alpha1.ScaleStrategy{MaxUnavailable: &all},
			RecycleStrategy: &sandboxv1alpha1.RecycleStrategy{Type: recycle},
		},
	}
}

func pooledBatch(ns, name, poolRef string, replicas int32) *sandboxv1alpha1.BatchSandbox {
	return &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr.To(replicas), PoolRef: poolRef},
	}
}

func mustCreate(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(ctxT(t), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func allocOf(b *sandboxv1alpha1.BatchSandbox) []string {
	a, _ := sandboxv1alpha1.GetAllocation(b, sandboxv1alpha1.AnnotationAllocStatus)
	return a.Pods
}

// poolPodsByName lists the pods of pool name in ns.
func poolPodsByName(t *testing.T, c client.Client, ns, name string) map[string]corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := c.List(ctxT(t), &list, client.InNamespace(ns), client.MatchingLabels{sandboxv1alpha1.LabelPoolName: name}); err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// waitServed waits until batch ns/name holds want pods, all ready, its
// endpoints are their IPs in alloc-status order and its phase is Succeed;
// it returns the batch.
func waitServed(t *testing.T, c client.Client, ns, name, poolName string, want int) *sandboxv1alpha1.BatchSandbox {
	t.Helper()
	var b *sandboxv1alpha1.BatchSandbox
	eventually(t, fmt.Sprintf("batch %s served with %d pool pods", name, want), func() string {
		b = getBatch(t, c, ns, name)
		held := allocOf(b)
		if len(held) != want {
			return fmt.Sprintf("alloc-status %v", held)
		}
		pods := poolPodsByName(t, c, ns, poolName)
		var ips []string
		for _, n := range held {
			p, ok := pods[n]
			if !ok {
				return fmt.Sprintf("allocated pod %s is not a pod of pool %s", n, poolName)
			}
			ips = append(ips, p.Status.PodIP)
		}
		eps, err := sandboxv1alpha1.Endpoints(b)
		if err != nil || !slices.Equal(eps, ips) {
			return fmt.Sprintf("endpoints %v (%v), want %v", eps, err, ips)
		}
		if b.Status.Ready != int32(want) || b.Status.Allocated != int32(want) || b.Status.Phase != sandboxv1alpha1.BatchSandboxPhaseSucceed {
			return fmt.Sprintf("status ready=%d allocated=%d phase=%s; %s", b.Status.Ready, b.Status.Allocated, b.Status.Phase,
				condition(b, sandboxv1alpha1.BatchSandboxConditionProgressing))
		}
		return ""
	})
	return b
}

func TestPoolMode(t *testing.T) {
	env := kubetest.Start(t)
	t.Run("AllocateO1Writes", func(t *testing.T) { testPoolAllocate(t, env) })
	t.Run("PartialThenComplete", func(t *testing.T) { testPoolPartial(t, env) })
	t.Run("AnyPoolMatchesTemplate", func(t *testing.T) { testPoolAny(t, env) })
	t.Run("DeleteReleasesDelete", func(t *testing.T) { testPoolRelease(t, env, sandboxv1alpha1.RecycleDelete) })
	t.Run("DeleteReleasesNoop", func(t *testing.T) { testPoolRelease(t, env, sandboxv1alpha1.RecycleNoop) })
	t.Run("ScaleDownReleases", func(t *testing.T) { testPoolScaleDown(t, env) })
	t.Run("Expiry", func(t *testing.T) { testPoolExpiry(t, env) })
	t.Run("PodFailedNotReplaced", func(t *testing.T) { testPoolPodFailed(t, env) })
	t.Run("RestartNoDoubleAllocation", func(t *testing.T) { testPoolRestart(t, env) })
	t.Run("Conflict", func(t *testing.T) { testPoolConflict(t, env) })
}

func testPoolAllocate(t *testing.T, env *kubetest.Env) {
	c, ns := env.Client, env.Namespace(t)
	var writes writeCounter
	startPoolManager(t, env, ns, writes.wrap, writes.wrap)
	kubelet(t, c, ns)
	mustCreate(t, c, warmPool(ns, "warm", sandboxv1alpha1.CapacitySpec{BufferMin: 10, BufferMax: 10, PoolMax: 30}, sandboxv1alpha1.RecycleDelete, "opensandbox/base:latest"))
	eventually(t, "10 ready idle pods", func() string {
		var p sandboxv1alpha1.Pool
		if err := c.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "warm"}, &p); err != nil {
			return err.Error()
		}
		if p.Status.Available != 10 {
			return fmt.Sprintf("status %+v", p.Status)
		}
		return ""
	})
	before := writes.n.Load()
	mustCreate(t, c, pooledBatch(ns, "b", "warm", 10))
	b := waitServed(t, c, ns, "b", "warm", 10)
	if !slices.Contains(b.Finalizers, sandboxv1alpha1.FinalizerPoolAllocation) {
		t.Errorf("finalizers %v lack %s", b.Finalizers, sandboxv1alpha1.FinalizerPoolAllocation)
	}
	// One metadata write (alloc-status, endpoints, finalizer) and one
	// status write for 10 pods, never one per pod.
	if w := writes.n.Load() - before; w > 2 {
		t.Errorf("%d BatchSandbox writes for 10 pods; want 2 (allocation, status): %v", w, writes.ops)
	} else {
		t.Logf("%d BatchSandbox writes for 10 pods", w)
	}
	// Pods are not written either: none carries the batch.
	for _, p := range poolPodsByName(t, c, ns, "warm") {
		if _, ok := p.Labels[sandboxv1alpha1.LabelBatchSandboxName]; ok {
			t.Errorf("pod %s was labelled: %v", p.Name, p.Labels)
		}
	}
	// The pool refills: 10 allocated + 10 idle.
	eventually(t, "pool refilled", func() string {
		if n := len(poolPodsByName(t, c, ns, "warm")); n != 20 {
			return fmt.Sprintf("%d pods", n)
		}
		return ""
	})
}

func testPoolPartial(t *testing.T, env *kubetest.Env) {
	c, ns := env.Client, env.Namespace(t)
	startPoolManager(t, env, ns, nil, nil)
	mustCreate(t, c,
		warmPool(ns, "small", sandboxv1alpha1.CapacitySpec{BufferMin: 2, BufferMax: 2, PoolMax: 10}, sandboxv1alpha1.RecycleDelete, "opensandbox/base:latest"),
		pooledBatch(ns, "b", "small", 5))
	eventually(t, "2 pool pods", func() string {
		if n := len(poolPodsByName(t, c, ns, "small")); n != 2 {
			return fmt.Sprintf("%d pods", n)
		}
		return ""
	})
	if n := markPoolPodsReady(t, c, ns); n != 2 {
		t.Fatalf("marked %d pods ready, want 2", n)
	}
	eventually(t, "batch holds the 2 ready pods and waits for more", func() string {
		b := getBatch(t, c, ns, "b")
		cond := condition(b, sandboxv1alpha1.BatchSandboxConditionProgressing)
		if len(allocOf(b)) != 2 || !strings.Contains(cond, ReasonWaitingForPool) || b.Status.Phase != sandboxv1alpha1.BatchSandboxPhasePending {
			return fmt.Sprintf("alloc %v phase %s %s", allocOf(b), b.Status.Phase, cond)
		}
		eps, _ := sandboxv1alpha1.Endpoints(b)
		if len(eps) != 2 {
			return fmt.Sprintf("endpoints %v", eps)
		}
		return ""
	})
	// From here pool pods become ready as they come; the batch completes.
	kubelet(t, c, ns)
	b := waitServed(t, c, ns, "b", "small", 5)
	if got := sets.New(allocOf(b)...); got.Len() != 5 {
		t.Errorf("alloc-status %v has duplicates", allocOf(b))
	}
}

func testPoolAny(t *testing.T, env *kubetest.Env) {
	c, ns := env.Client, env.Namespace(t)
	startPoolManager(t, env, ns, nil, nil)
	kubelet(t, c, ns)
	capacity := sandboxv1alpha1.CapacitySpec{BufferMin: 3, BufferMax: 3, PoolMax: 10}
	mustCreate(t, c,
		warmPool(ns, "other", capacity, sandboxv1alpha1.RecycleDelete, "opensandbox/code-interpreter:latest"),
		warmPool(ns, "match", capacity, sandboxv1alpha1.RecycleDelete, "opensandbox/base:latest"))
	want := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sandbox", Image: "opensandbox/base:latest",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}}}},
	}
	b := pooledBatch(ns, "any", sandboxv1alpha1.PoolRefAny, 3)
	b.Spec.Template = want
	// Asks for more CPU than any pool's pods request: matches none.
	greedy := pooledBatch(ns, "greedy", sandboxv1alpha1.PoolRefAny, 1)
	greedy.Spec.Template = want.DeepCopy()
	greedy.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	mustCreate(t, c, b, greedy)
	waitServed(t, c, ns, "any", "match", 3)
	eventually(t, "greedy waits for a matching pool", func() string {
		g := getBatch(t, c, ns, "greedy")
		cond := condition(g, sandboxv1alpha1.BatchSandboxConditionProgressing)
		if !strings.Contains(cond, ReasonWaitingForPool) || !strings.Contains(cond, "matches") {
			return cond
		}
		if len(allocOf(g)) != 0 {
			return fmt.Sprintf("alloc %v", allocOf(g))
		}
		return ""
	})
}

func testPoolRelease(t *testing.T, env *kubetest.Env, recycle sandboxv1alpha1.RecycleStrategyType) {
	c, ns := env.Client, env.Namespace(t)
	startPoolManager(t, env, ns, nil, nil)
	kubelet(t, c, ns)
	mustCreate(t, c,
		warmPool(ns, "p", sandboxv1alpha1.CapacitySpec{BufferMin: 3, BufferMax: 3, PoolMax: 6}, recycle, "opensandbox/base:latest"),
		pooledBatch(ns, "b", "p", 3))
	b := waitServed(t, c, ns, "b", "p", 3)
	held := allocOf(b)
	before := poolPodsByName(t, c, ns, "p")
	if err := c.Delete(ctxT(t), b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "batch gone", func() string {
		err := c.Get(ctxT(t), client.ObjectKeyFromObject(b), &sandboxv1alpha1.BatchSandbox{})
		if !apierrors.IsNotFound(err) {
			return fmt.Sprintf("get: %v", err)
		}
		return ""
	})
	after := poolPodsByName(t, c, ns, "p")
	for _, n := range held {
		p, ok := after[n]
		same := ok && p.UID == before[n].UID
		switch recycle {
		case sandboxv1alpha1.RecycleDelete:
			if same {
				t.Errorf("pod %s survived release under Delete", n)
			}
		case sandboxv1alpha1.RecycleNoop:
			if !same {
				t.Errorf("pod %s was replaced under Noop", n)
			}
		}
	}
	// Nothing is allocated any more; the pool keeps its buffer.
	eventually(t, "pool shows no allocation", func() string {
		var p sandboxv1alpha1.Pool
		if err := c.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "p"}, &p); err != nil {
			return err.Error()
		}
		if p.Status.Allocated != 0 || p.Status.Available < 3 {
			return fmt.Sprintf("status %+v", p.Status)
		}
		return ""
	})
}

func testPoolScaleDown(t *testing.T, env *kubetest.Env) {
	c, ns := env.Client, env.Namespace(t)
	startPoolManager(t, env, ns, nil, nil)
	kubelet(t, c, ns)
	mustCreate(t, c,
		warmPool(ns, "p", sandboxv1alpha1.CapacitySpec{BufferMin: 3, BufferMax: 3, PoolMax: 6}, sandboxv1alpha1.RecycleDelete, "opensandbox/base:latest"),
		pooledBatch(ns, "b", "p", 3))
	held := allocOf(waitServed(t, c, ns, "b", "p", 3))
	before := poolPodsByName(t, c, ns, "p")
	scale(t, c, ns, "b", 1)
	b := waitServed(t, c, ns, "b", "p", 1)
	if got := allocOf(b); !slices.Equal(got, held[:1]) {
		t.Errorf("after scaling to 1 the batch holds %v, want the first of %v", got, held)
	}
	after := poolPodsByName(t, c, ns, "p")
	for _, n := range held[1:] {
		if p, ok := after[n]; ok && p.UID == before[n].UID {
			t.Errorf("pod %s of a removed replica survived (recycleStrategy Delete)", n)
		}
	}
}

func testPoolExpiry(t *testing.T, env *kubetest.Env) {
	c, ns := env.Client, env.Namespace(t)
	startPoolManager(t, env, ns, nil, nil)
	kubelet(t, c, ns)
	mustCreate(t, c, warmPool(ns, "p", sandboxv1alpha1.CapacitySpec{BufferMin: 2, BufferMax: 2, PoolMax: 6}, sandboxv1alpha1.RecycleDelete, "opensandbox/base:latest"))
	b := pooledBatch(ns, "b", "p", 2)
	b.Spec.ExpireTime = &metav1.Time{Time: time.Now().Add(8 * time.Second)}
	mustCreate(t, c, b)
	waitServed(t, c, ns, "b", "p", 2)
	eventually(t, "expired batch deleted and its pods released", func() string {
		err := c.Get(ctxT(t), client.ObjectKeyFromObject(b), &sandboxv1alpha1.BatchSandbox{})
		if !apierrors.IsNotFound(err) {
			return fmt.Sprintf("get: %v", err)
		}
		var p sandboxv1alpha1.Pool
		if err := c.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "p"}, &p); err != nil {
			return err.Error()
		}
		if p.Status.Allocated != 0 {
			return fmt.Sprintf("pool status %+v", p.Status)
		}
		return ""
	})
}

func testPoolPodFailed(t *testing.T, env *kubetest.Env) {
	c, ns := env.Client, env.Namespace(t)
	startPoolManager(t, env, ns, nil, nil)
	kubelet(t, c, ns)
	mustCreate(t, c,
		warmPool(ns, "p", sandboxv1alpha1.CapacitySpec{BufferMin: 2, BufferMax: 2, PoolMax: 6}, sandboxv1alpha1.RecycleDelete, "opensandbox/base:latest"),
		pooledBatch(ns, "b", "p", 2))
	b := waitServed(t, c, ns, "b", "p", 2)
	held := allocOf(b)
	failPod(t, c, ns, held[0], "OOMKilled")
	eventually(t, "failure reported, pod not replaced", func() string {
		b := getBatch(t, c, ns, "b")
		cond := condition(b, sandboxv1alpha1.BatchSandboxConditionPodFailed)
		if b.Status.Phase != sandboxv1alpha1.BatchSandboxPhaseFailed || !strings.Contains(cond, held[0]) || !strings.Contains(cond, "OOMKilled") {
			return fmt.Sprintf("phase %s %s", b.Status.Phase, cond)
		}
		if !slices.Equal(allocOf(b), held) {
			return fmt.Sprintf("alloc-status %v, want %v unchanged", allocOf(b), held)
		}
		eps, _ := sandboxv1alpha1.Endpoints(b)
		if len(eps) != 1 {
			return fmt.Sprintf("endpoints %v, want the one live pod", eps)
		}
		return ""
	})
}

// testPoolRestart stops the controller while two batches compete for a
// pool that cannot fill both, starts a new one, and checks that no pod is
// listed twice and that every pool pod is either idle or held once.
func testPoolRestart(t *testing.T, env *kubetest.Env) {
	c, ns := env.Client, env.Namespace(t)
	stop := startPoolManager(t, env, ns, nil, nil)
	mustCreate(t, c,
		warmPool(ns, "p", sandboxv1alpha1.CapacitySpec{BufferMin: 4, BufferMax: 4, PoolMax: 12}, sandboxv1alpha1.RecycleDelete, "opensandbox/base:latest"),
		pooledBatch(ns, "a", "p", 6), pooledBatch(ns, "b", "p", 6))
	eventually(t, "4 pool pods", func() string {
		if n := len(poolPodsByName(t, c, ns, "p")); n != 4 {
			return fmt.Sprintf("%d pods", n)
		}
		return ""
	})
	markPoolPodsReady(t, c, ns)
	eventually(t, "the 4 ready pods allocated", func() string {
		n := len(allocOf(getBatch(t, c, ns, "a"))) + len(allocOf(getBatch(t, c, ns, "b")))
		if n != 4 {
			return fmt.Sprintf("%d allocated", n)
		}
		return ""
	})
	stop()
	// While no controller runs, nothing changes; a new one takes over.
	startPoolManager(t, env, ns, nil, nil)
	kubelet(t, c, ns)
	a := waitServed(t, c, ns, "a", "p", 6)
	b := waitServed(t, c, ns, "b", "p", 6)
	all := append(slices.Clone(allocOf(a)), allocOf(b)...)
	if sets.New(all...).Len() != 12 {
		t.Fatalf("allocations %v and %v overlap", allocOf(a), allocOf(b))
	}
	pods := poolPodsByName(t, c, ns, "p")
	if len(pods) != 12 {
		t.Errorf("%d pool pods, want poolMax 12 (all held)", len(pods))
	}
	for _, n := range all {
		if _, ok := pods[n]; !ok {
			t.Errorf("allocated pod %s does not exist", n)
		}
	}
}

// testPoolConflict makes someone else update the batch between the
// controller's read and its allocation write: the write conflicts, is
// retried from fresh state, and the other writer's change survives.
func testPoolConflict(t *testing.T, env *kubetest.Env) {
	c, ns := env.Client, env.Namespace(t)
	var raced, conflicted atomic.Bool
	racing := func(cl client.WithWatch) client.WithWatch {
		return interceptor.NewClient(cl, interceptor.Funcs{
			Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
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
				err := cl.Update(ctx, obj, opts...)
				if apierrors.IsConflict(err) {
					conflicted.Store(true)
				}
				return err
			},
		})
	}
	startPoolManager(t, env, ns, racing, nil)
	kubelet(t, c, ns)
	mustCreate(t, c,
		warmPool(ns, "p", sandboxv1alpha1.CapacitySpec{BufferMin: 3, BufferMax: 3, PoolMax: 6}, sandboxv1alpha1.RecycleDelete, "opensandbox/base:latest"),
		pooledBatch(ns, "b", "p", 3))
	b := waitServed(t, c, ns, "b", "p", 3)
	if !conflicted.Load() {
		t.Errorf("the racing update caused no conflict")
	}
	if b.Labels["touched"] != "by-someone-else" {
		t.Errorf("the other writer's label was lost: %v", b.Labels)
	}
}
