package pool_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/controller/pool"
	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// These tests run the Pool controller against a real kube-apiserver and
// etcd (internal/kubetest). There is no kubelet and no scheduler: pods stay
// Pending until the test, standing in for the kubelet, sets their status to
// Running and Ready (setReady). Pods without a node are deleted at once by
// the apiserver, so deletions need no grace period here.

const waitTimeout = 60 * time.Second

// startManager runs a manager with the Pool controller, caching only ns,
// until the returned stop is called (or the test ends).
func startManager(t *testing.T, env *kubetest.Env, ns string) (stop func()) {
	t.Helper()
	return kubetest.StartManager(t, env, ns, pool.SetupWithManager)
}

func newPool(ns, name string, c sandboxv1alpha1.CapacitySpec, recycle sandboxv1alpha1.RecycleStrategyType) *sandboxv1alpha1.Pool {
	all := intstr.FromString("100%")
	return &sandboxv1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sandboxv1alpha1.PoolSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "sandbox", Image: "opensandbox/base:latest"}}},
			},
			CapacitySpec:    c,
			ScaleStrategy:   &sandboxv1alpha1.ScaleStrategy{MaxUnavailable: &all},
			RecycleStrategy: &sandboxv1alpha1.RecycleStrategy{Type: recycle},
		},
	}
}

func newBatch(ns, name, poolName string, replicas int32) *sandboxv1alpha1.BatchSandbox {
	return &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr.To(replicas), PoolRef: poolName},
	}
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// poolPods lists the pods labelled with the pool's name, by name.
func poolPods(t *testing.T, c client.Client, ns, name string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{sandboxv1alpha1.LabelPoolName: name}); err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return p.Status.Phase == corev1.PodRunning && c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setReady does the kubelet's part: it marks every pending pod of the
// pool Running and Ready. It returns how many it marked.
func setReady(t *testing.T, c client.Client, ns, name string) int {
	t.Helper()
	n := 0
	for _, p := range poolPods(t, c, ns, name) {
		if isReady(&p) || p.DeletionTimestamp != nil {
			continue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		err := c.Status().Update(context.Background(), &p)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // deleted or changed meanwhile; the next call sees it again
		}
		if err != nil {
			t.Fatalf("setting pod %s ready: %v", p.Name, err)
		}
		n++
	}
	return n
}

// waitFor polls cond until it holds or waitTimeout passes; cond returns a
// description of what it saw for the failure message.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last string
	for time.Now().Before(deadline) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last saw: %s", what, last)
}

// waitStatus waits until the pool's status, observing its generation, has
// the given counts.
func waitStatus(t *testing.T, c client.Client, p *sandboxv1alpha1.Pool, total, allocated, available int32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("pool %s total %d allocated %d available %d", p.Name, total, allocated, available), func() (bool, string) {
		var got sandboxv1alpha1.Pool
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
			return false, err.Error()
		}
		s := got.Status
		return s.ObservedGeneration == got.Generation && s.Total == total && s.Allocated == allocated && s.Available == available,
			fmt.Sprintf("%+v (generation %d)", s, got.Generation)
	})
}

// waitReadyPods waits until the pool has exactly n pods, marking them
// ready as they come (the kubelet's part).
func waitReadyPods(t *testing.T, c client.Client, ns, name string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, fmt.Sprintf("%d ready pods in pool %s", n, name), func() (bool, string) {
		setReady(t, c, ns, name)
		pods = poolPods(t, c, ns, name)
		ready := 0
		for i := range pods {
			if isReady(&pods[i]) && pods[i].DeletionTimestamp == nil {
				ready++
			}
		}
		return ready == n && len(pods) == n, fmt.Sprintf("%d pods, %d ready", len(pods), ready)
	})
	return pods
}

func allocation(t *testing.T, c client.Client, b *sandboxv1alpha1.BatchSandbox) []string {
	t.Helper()
	var got sandboxv1alpha1.BatchSandbox
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(b), &got); err != nil {
		t.Fatal(err)
	}
	a, err := sandboxv1alpha1.GetAllocation(&got, sandboxv1alpha1.AnnotationAllocStatus)
	if err != nil {
		t.Fatal(err)
	}
	return a.Pods
}

func names(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i := range pods {
		out[i] = pods[i].Name
	}
	return out
}

func TestPool(t *testing.T) {
	env := kubetest.Start(t)
	c := env.Client
	ctx := context.Background()

	t.Run("ScaleAllocateRefillCap", func(t *testing.T) {
		ns := env.Namespace(t)
		startManager(t, env, ns)
		p := newPool(ns, "warm", sandboxv1alpha1.CapacitySpec{BufferMin: 2, BufferMax: 3, PoolMin: 0, PoolMax: 4}, sandboxv1alpha1.RecycleDelete)
		b := newBatch(ns, "batch", "warm", 3)
		create(t, c, p, b)

		// Scale up to bufferMin.
		pods := waitReadyPods(t, c, ns, "warm", 2)
		if got := names(pods); fmt.Sprint(got) != "[warm-0 warm-1]" {
			t.Errorf("pods %v, want warm-0 and warm-1", got)
		}
		waitStatus(t, c, p, 2, 0, 2)

		// Allocation takes what is available: 2 of the 3 asked for.
		got, err := pool.Allocate(ctx, c, p, b, 3)
		if err != nil || len(got) != 2 {
			t.Fatalf("Allocate(3) = %v, %v; want the 2 available pods", got, err)
		}
		if a := allocation(t, c, b); fmt.Sprint(a) != fmt.Sprint(got) {
			t.Errorf("alloc-status %v, Allocate returned %v", a, got)
		}
		// The pool refills its buffer: 2 allocated + bufferMin 2 = poolMax 4.
		waitReadyPods(t, c, ns, "warm", 4)
		waitStatus(t, c, p, 4, 2, 2)

		got, err = pool.Allocate(ctx, c, p, b, 3)
		if err != nil || len(got) != 3 {
			t.Fatalf("second Allocate(3) = %v, %v; want 3 pods", got, err)
		}
		// Again once: the batch already holds 3, nothing more is taken.
		again, err := pool.Allocate(ctx, c, p, b, 3)
		if err != nil || fmt.Sprint(again) != fmt.Sprint(got) {
			t.Fatalf("repeated Allocate(3) = %v, %v; want %v unchanged", again, err, got)
		}
		// poolMax caps the pool: 3 allocated + 1 idle, no fifth pod.
		waitStatus(t, c, p, 4, 3, 1)
		if n := len(poolPods(t, c, ns, "warm")); n != 4 {
			t.Errorf("%d pods, want poolMax 4", n)
		}
	})

	t.Run("ReleaseDelete", func(t *testing.T) {
		ns := env.Namespace(t)
		startManager(t, env, ns)
		p := newPool(ns, "del", sandboxv1alpha1.CapacitySpec{BufferMin: 1, BufferMax: 1, PoolMin: 0, PoolMax: 5}, sandboxv1alpha1.RecycleDelete)
		b := newBatch(ns, "batch", "del", 1)
		create(t, c, p, b)
		before := waitReadyPods(t, c, ns, "del", 1)
		got, err := pool.Allocate(ctx, c, p, b, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("Allocate = %v, %v", got, err)
		}
		waitReadyPods(t, c, ns, "del", 2)
		waitStatus(t, c, p, 2, 1, 1)

		if err := pool.Release(ctx, c, p, b, got); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if a := allocation(t, c, b); len(a) != 0 {
			t.Errorf("alloc-status after release %v, want empty", a)
		}
		var gone corev1.Pod
		err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: got[0]}, &gone)
		if err == nil && gone.UID == before[0].UID {
			t.Errorf("released pod %s still exists under Delete", got[0])
		} else if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		// Back to bufferMin 1 idle, nothing allocated.
		waitReadyPods(t, c, ns, "del", 1)
		waitStatus(t, c, p, 1, 0, 1)
		// Releasing again does nothing.
		if err := pool.Release(ctx, c, p, b, got); err != nil {
			t.Fatalf("second Release: %v", err)
		}
	})

	t.Run("ReleaseNoop", func(t *testing.T) {
		ns := env.Namespace(t)
		startManager(t, env, ns)
		p := newPool(ns, "noop", sandboxv1alpha1.CapacitySpec{BufferMin: 1, BufferMax: 2, PoolMin: 0, PoolMax: 5}, sandboxv1alpha1.RecycleNoop)
		b := newBatch(ns, "batch", "noop", 1)
		create(t, c, p, b)
		waitReadyPods(t, c, ns, "noop", 1)
		got, err := pool.Allocate(ctx, c, p, b, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("Allocate = %v, %v", got, err)
		}
		var held corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: got[0]}, &held); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, c, p, 2, 1, 0)
		waitReadyPods(t, c, ns, "noop", 2)
		if err := pool.Release(ctx, c, p, b, got); err != nil {
			t.Fatalf("Release: %v", err)
		}
		// The pod is idle again, the same pod; 2 idle is within bufferMax.
		waitStatus(t, c, p, 2, 0, 2)
		var back corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: got[0]}, &back); err != nil || back.UID != held.UID {
			t.Errorf("released pod under Noop: %v (uid %s, was %s), want the same pod", err, back.UID, held.UID)
		}
	})

	t.Run("ReleaseRestartIsDelete", func(t *testing.T) {
		ns := env.Namespace(t)
		startManager(t, env, ns)
		p := newPool(ns, "restart", sandboxv1alpha1.CapacitySpec{BufferMin: 1, BufferMax: 1, PoolMin: 0, PoolMax: 2}, sandboxv1alpha1.RecycleRestart)
		b := newBatch(ns, "batch", "restart", 1)
		create(t, c, p, b)
		waitReadyPods(t, c, ns, "restart", 1)
		got, err := pool.Allocate(ctx, c, p, b, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("Allocate = %v, %v", got, err)
		}
		var held corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: got[0]}, &held); err != nil {
			t.Fatal(err)
		}
		if err := pool.Release(ctx, c, p, b, got); err != nil {
			t.Fatalf("Release under Restart: %v", err)
		}
		if a := allocation(t, c, b); len(a) != 0 {
			t.Errorf("alloc-status %v after release, want empty", a)
		}
		// The released pod is gone: no pod of that UID is left.
		var back corev1.Pod
		err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: got[0]}, &back)
		if err == nil && back.UID == held.UID && back.DeletionTimestamp == nil {
			t.Errorf("released pod %s kept under Restart, want a fresh one", got[0])
		} else if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		waitReadyPods(t, c, ns, "restart", 1)
		waitStatus(t, c, p, 1, 0, 1)
	})

	t.Run("Eviction", func(t *testing.T) {
		ns := env.Namespace(t)
		startManager(t, env, ns)
		p := newPool(ns, "ev", sandboxv1alpha1.CapacitySpec{BufferMin: 2, BufferMax: 2, PoolMin: 0, PoolMax: 5}, sandboxv1alpha1.RecycleDelete)
		b := newBatch(ns, "batch", "ev", 1)
		create(t, c, p, b)
		waitReadyPods(t, c, ns, "ev", 2)
		got, err := pool.Allocate(ctx, c, p, b, 1)
		if err != nil || len(got) != 1 {
			t.Fatalf("Allocate = %v, %v", got, err)
		}
		pods := waitReadyPods(t, c, ns, "ev", 3)
		waitStatus(t, c, p, 3, 1, 2)
		uids := map[string]string{}
		for _, pod := range pods {
			uids[pod.Name] = string(pod.UID)
			pod.Labels[sandboxv1alpha1.LabelPoolEvict] = "true"
			if err := c.Update(ctx, &pod); err != nil {
				t.Fatalf("labelling %s: %v", pod.Name, err)
			}
		}
		// Both idle pods are replaced; the allocated one stays.
		waitFor(t, "evicted idle pods replaced", func() (bool, string) {
			setReady(t, c, ns, "ev")
			now := poolPods(t, c, ns, "ev")
			fresh := 0
			for _, pod := range now {
				if uids[pod.Name] != string(pod.UID) {
					fresh++
				}
			}
			return len(now) == 3 && fresh == 2, fmt.Sprintf("%d pods, %d new", len(now), fresh)
		})
		var held corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: got[0]}, &held); err != nil || string(held.UID) != uids[got[0]] {
			t.Errorf("allocated pod %s with the evict label: %v, want it kept", got[0], err)
		}
		waitReadyPods(t, c, ns, "ev", 3)
		waitStatus(t, c, p, 3, 1, 2)
	})

	t.Run("RollTemplate", func(t *testing.T) {
		ns := env.Namespace(t)
		startManager(t, env, ns)
		p := newPool(ns, "roll", sandboxv1alpha1.CapacitySpec{BufferMin: 4, BufferMax: 4, PoolMin: 0, PoolMax: 8}, sandboxv1alpha1.RecycleDelete)
		one := intstr.FromInt32(1)
		p.Spec.UpdateStrategy = &sandboxv1alpha1.UpdateStrategy{MaxUnavailable: &one}
		b := newBatch(ns, "batch", "roll", 1)
		create(t, c, p, b)
		waitReadyPods(t, c, ns, "roll", 4)
		held, err := pool.Allocate(ctx, c, p, b, 1)
		if err != nil || len(held) != 1 {
			t.Fatalf("Allocate = %v, %v", held, err)
		}
		waitReadyPods(t, c, ns, "roll", 5)
		waitStatus(t, c, p, 5, 1, 4)
		var cur sandboxv1alpha1.Pool
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &cur); err != nil {
			t.Fatal(err)
		}
		oldRev := cur.Status.Revision

		cur.Spec.Template.Spec.Containers[0].Image = "opensandbox/base:v2"
		if err := c.Update(ctx, &cur); err != nil {
			t.Fatalf("changing the template: %v", err)
		}
		// Roll, doing the kubelet's part one pod at a time: at no point may
		// more than updateStrategy.maxUnavailable (1) idle pods be down,
		// i.e. fewer than 4-1 idle pods ready.
		waitFor(t, "idle pods rolled to the new revision", func() (bool, string) {
			pods := poolPods(t, c, ns, "roll")
			var readyIdle, newIdle int
			for i := range pods {
				pod := &pods[i]
				if pod.Name == held[0] {
					continue
				}
				if isReady(pod) && pod.DeletionTimestamp == nil {
					readyIdle++
					if pod.Labels[sandboxv1alpha1.LabelPoolRevision] != oldRev {
						newIdle++
					}
				}
			}
			if readyIdle < 3 {
				t.Fatalf("%d idle pods ready during the roll, want at least 3 (maxUnavailable 1)", readyIdle)
			}
			setReady(t, c, ns, "roll")
			return newIdle == 4 && len(pods) == 5, fmt.Sprintf("%d pods, %d ready idle, %d new", len(pods), readyIdle, newIdle)
		})
		var kept corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: held[0]}, &kept); err != nil {
			t.Fatal(err)
		}
		if rev := kept.Labels[sandboxv1alpha1.LabelPoolRevision]; rev != oldRev {
			t.Errorf("allocated pod has revision %s, want it to keep %s", rev, oldRev)
		}
		waitFor(t, "status after the roll", func() (bool, string) {
			var got sandboxv1alpha1.Pool
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
				return false, err.Error()
			}
			s := got.Status
			return s.ObservedGeneration == got.Generation && s.Revision != oldRev && s.Updated == 4 && s.Total == 5 && s.Available == 4,
				fmt.Sprintf("%+v", s)
		})
	})

	t.Run("ManagerRestartCreatesNoExtraPods", func(t *testing.T) {
		ns := env.Namespace(t)
		stop := startManager(t, env, ns)
		p := newPool(ns, "rs", sandboxv1alpha1.CapacitySpec{BufferMin: 3, BufferMax: 3, PoolMin: 0, PoolMax: 10}, sandboxv1alpha1.RecycleDelete)
		create(t, c, p)
		// The first manager creates 3 pods; they stay pending (not ready).
		waitFor(t, "3 pending pods", func() (bool, string) {
			n := len(poolPods(t, c, ns, "rs"))
			return n == 3, fmt.Sprintf("%d pods", n)
		})
		waitStatus(t, c, p, 3, 0, 0)
		first := poolPods(t, c, ns, "rs")
		stop()

		// A new manager sees the same pods and makes none: status follows
		// the pods turning ready, and the set of pods is unchanged.
		startManager(t, env, ns)
		setReady(t, c, ns, "rs")
		waitStatus(t, c, p, 3, 0, 3)
		after := poolPods(t, c, ns, "rs")
		if len(after) != 3 {
			t.Fatalf("%d pods after the restart, want 3", len(after))
		}
		for i := range after {
			if after[i].UID != first[i].UID {
				t.Errorf("pod %s replaced across the restart", after[i].Name)
			}
		}
	})

	t.Run("ConcurrentAllocate", func(t *testing.T) {
		ns := env.Namespace(t)
		startManager(t, env, ns)
		const podsN, batches, each = 10, 6, 3
		p := newPool(ns, "conc", sandboxv1alpha1.CapacitySpec{BufferMin: podsN, BufferMax: podsN, PoolMin: 0, PoolMax: podsN}, sandboxv1alpha1.RecycleDelete)
		create(t, c, p)
		var bs []*sandboxv1alpha1.BatchSandbox
		for i := range batches {
			b := newBatch(ns, fmt.Sprintf("b%d", i), "conc", each)
			create(t, c, b)
			bs = append(bs, b)
		}
		waitReadyPods(t, c, ns, "conc", podsN)
		// Two callers per batch, all at once: 6 batches want 18 pods of 10.
		var wg sync.WaitGroup
		errs := make(chan error, 2*batches)
		for _, b := range bs {
			for range 2 {
				wg.Go(func() {
					if _, err := pool.Allocate(ctx, c, p, b, each); err != nil {
						errs <- err
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("Allocate: %v", err)
		}
		owner := map[string]string{}
		total := 0
		for _, b := range bs {
			a := allocation(t, c, b)
			if len(a) > each {
				t.Errorf("%s holds %d pods, asked for %d", b.Name, len(a), each)
			}
			for _, name := range a {
				if o, dup := owner[name]; dup {
					t.Errorf("pod %s allocated to both %s and %s", name, o, b.Name)
				}
				owner[name] = b.Name
				total++
			}
		}
		if total != podsN {
			t.Errorf("%d pods allocated, want all %d", total, podsN)
		}
		waitStatus(t, c, p, podsN, podsN, 0)
	})
}
