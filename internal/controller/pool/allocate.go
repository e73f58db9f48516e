package pool

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// locks holds one mutex per pool ("namespace/name"). Allocate, Release and
// the reconciler's writes take it, so that within the controller process
// (the single writer, under leader election) the allocation of a pool is
// read and changed by one of them at a time.
var locks sync.Map

func lockPool(pool *sandboxv1alpha1.Pool) (unlock func()) {
	m, _ := locks.LoadOrStore(pool.Namespace+"/"+pool.Name, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Allocate makes bsbx hold n pods of pool in its alloc-status annotation,
// adding available pods (idle, ready, of the pool's current revision, not
// labelled for eviction) in name order, and returns the pods it holds then.
// n is the total the BatchSandbox should hold, not how many to add, so that
// calling Allocate again after a crash or with stale state allocates
// nothing twice; when fewer pods are available than needed it takes what
// there is and the caller sees len(result) < n.
//
// The annotation is written in ONE update of bsbx, however many pods are
// added; the update carries the resourceVersion read, and a conflict starts
// over from fresh state. No pod is handed to two BatchSandboxes because the
// allocation of a pool only changes under the pool's lock (taken here, in
// Release and by the reconciler before it deletes idle pods) and, under it,
// is read from the apiserver, never from a cache: c must read from the
// apiserver (a client from client.New, not a manager's cached client), and
// Allocate must run in the one process that writes allocations — the
// controller, which holds the leader-election lease.
func Allocate(ctx context.Context, c client.Client, pool *sandboxv1alpha1.Pool, bsbx *sandboxv1alpha1.BatchSandbox, n int) ([]string, error) {
	return AllocateWith(ctx, c, pool, bsbx, n, nil)
}

// AllocateHook is called by AllocateWith on the fresh BatchSandbox b just
// before the update that adds pods to its alloc-status: held is what
// alloc-status will list, added the pods being added as just read from the
// apiserver (their IPs, for instance). What the hook changes in b's
// metadata (annotations, finalizers) goes out in the same write; an error
// aborts the allocation. It may be called more than once (on conflicts).
type AllocateHook func(b *sandboxv1alpha1.BatchSandbox, held []string, added []corev1.Pod) error

// AllocateWith is Allocate with a hook that rides along in the one write
// of the allocation (for the endpoints annotation and the finalizer), so
// that claiming N pods and publishing them stays one API write. hook may
// be nil.
func AllocateWith(ctx context.Context, c client.Client, pool *sandboxv1alpha1.Pool, bsbx *sandboxv1alpha1.BatchSandbox, n int, hook AllocateHook) ([]string, error) {
	if bsbx.Namespace != pool.Namespace {
		return nil, fmt.Errorf("allocating from pool %s/%s to BatchSandbox %s/%s: not in the same namespace", pool.Namespace, pool.Name, bsbx.Namespace, bsbx.Name)
	}
	if bsbx.Spec.PoolRef != pool.Name && bsbx.Spec.PoolRef != sandboxv1alpha1.PoolRefAny {
		return nil, fmt.Errorf("allocating from pool %s to BatchSandbox %s/%s: its poolRef is %q", pool.Name, bsbx.Namespace, bsbx.Name, bsbx.Spec.PoolRef)
	}
	unlock := lockPool(pool)
	defer unlock()
	var held []string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var fresh sandboxv1alpha1.BatchSandbox
		if err := c.Get(ctx, client.ObjectKeyFromObject(bsbx), &fresh); err != nil {
			return fmt.Errorf("reading BatchSandbox %s/%s: %w", bsbx.Namespace, bsbx.Name, err)
		}
		a, err := sandboxv1alpha1.GetAllocation(&fresh, sandboxv1alpha1.AnnotationAllocStatus)
		if err != nil {
			return err
		}
		held = a.Pods
		if len(held) >= n {
			return nil
		}
		avail, err := availablePods(ctx, c, pool)
		if err != nil {
			return err
		}
		take := min(n-len(held), len(avail))
		if take == 0 {
			return nil
		}
		next := slices.Clone(held)
		for i := range avail[:take] {
			next = append(next, avail[i].Name)
		}
		sandboxv1alpha1.SetAllocation(&fresh, sandboxv1alpha1.AnnotationAllocStatus, sandboxv1alpha1.Allocation{Pods: next})
		if hook != nil {
			if err := hook(&fresh, next, avail[:take]); err != nil {
				return err
			}
		}
		if err := c.Update(ctx, &fresh); err != nil {
			return fmt.Errorf("writing alloc-status of BatchSandbox %s/%s: %w", bsbx.Namespace, bsbx.Name, err)
		}
		held = next
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("allocating %d pods of pool %s/%s: %w", n, pool.Namespace, pool.Name, err)
	}
	return held, nil
}

// availablePods are pool's pods that can be allocated, sorted by name,
// read from the apiserver through c.
func availablePods(ctx context.Context, c client.Client, pool *sandboxv1alpha1.Pool) ([]corev1.Pod, error) {
	var fresh sandboxv1alpha1.Pool
	if err := c.Get(ctx, client.ObjectKeyFromObject(pool), &fresh); err != nil {
		return nil, fmt.Errorf("reading pool: %w", err)
	}
	revision, err := Revision(&fresh.Spec.Template)
	if err != nil {
		return nil, err
	}
	pods, err := ownedPods(ctx, c, &fresh)
	if err != nil {
		return nil, err
	}
	// Reading the allocations lists the namespace's BatchSandboxes; with
	// no ready pod of the revision there is nothing to check them for
	// (batches waiting on an empty pool call this at every pod event).
	if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return podAvailable(&p, revision, nil) }) {
		return nil, nil
	}
	allocated, err := allocatedFresh(ctx, c, &fresh)
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for i := range pods {
		if podAvailable(&pods[i], revision, allocated) {
			out = append(out, pods[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// podAvailable reports whether p can be allocated.
func podAvailable(p *corev1.Pod, revision string, allocated sets.Set[string]) bool {
	return p.DeletionTimestamp == nil &&
		!allocated.Has(p.Name) &&
		p.Labels[sandboxv1alpha1.LabelPoolRevision] == revision &&
		!hasLabel(p, sandboxv1alpha1.LabelPoolEvict) &&
		podReady(p)
}

// Release gives pods, which bsbx holds from pool, back to the pool by the
// pool's recycleStrategy, and removes them from bsbx's alloc-status in one
// update (a conflict starts over from fresh state). Names bsbx does not
// hold are ignored, so a repeated Release does nothing more.
//
//   - Delete (the default): the pods are deleted first, then unlisted; the
//     pool creates fresh ones. Until they are unlisted their names stay
//     reserved, so no new pod under an old name is taken for allocated.
//   - Noop: the pods are unlisted and are idle again as they are.
//   - Restart: as Delete. Kubernetes has no API to restart a pod's
//     containers in place, so a restart is a fresh pod, which the pool
//     makes in the lowest free slot (usually the released pod's own name).
//
// c must read from the apiserver, as for Allocate.
func Release(ctx context.Context, c client.Client, pool *sandboxv1alpha1.Pool, bsbx *sandboxv1alpha1.BatchSandbox, pods []string) error {
	var fresh sandboxv1alpha1.Pool
	if err := c.Get(ctx, client.ObjectKeyFromObject(pool), &fresh); err != nil {
		return fmt.Errorf("releasing pods to pool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	strategy := sandboxv1alpha1.RecycleDelete
	if s := fresh.Spec.RecycleStrategy; s != nil && s.Type != "" {
		strategy = s.Type
	}
	switch strategy {
	case sandboxv1alpha1.RecycleDelete, sandboxv1alpha1.RecycleNoop:
	case sandboxv1alpha1.RecycleRestart:
		strategy = sandboxv1alpha1.RecycleDelete
	default:
		return fmt.Errorf("releasing pods to pool %s/%s: unknown recycleStrategy %q", pool.Namespace, pool.Name, strategy)
	}
	unlock := lockPool(&fresh)
	defer unlock()
	release := sets.New(pods...)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var b sandboxv1alpha1.BatchSandbox
		if err := c.Get(ctx, client.ObjectKeyFromObject(bsbx), &b); err != nil {
			return fmt.Errorf("reading BatchSandbox %s/%s: %w", bsbx.Namespace, bsbx.Name, err)
		}
		a, err := sandboxv1alpha1.GetAllocation(&b, sandboxv1alpha1.AnnotationAllocStatus)
		if err != nil {
			return err
		}
		var keep, gone []string
		for _, name := range a.Pods {
			if release.Has(name) {
				gone = append(gone, name)
			} else {
				keep = append(keep, name)
			}
		}
		if len(gone) == 0 {
			return nil
		}
		if strategy == sandboxv1alpha1.RecycleDelete {
			if err := deletePoolPods(ctx, c, &fresh, gone); err != nil {
				return err
			}
		}
		sandboxv1alpha1.SetAllocation(&b, sandboxv1alpha1.AnnotationAllocStatus, sandboxv1alpha1.Allocation{Pods: keep})
		if err := c.Update(ctx, &b); err != nil {
			return fmt.Errorf("writing alloc-status of BatchSandbox %s/%s: %w", bsbx.Namespace, bsbx.Name, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("releasing %d pods to pool %s/%s: %w", len(pods), pool.Namespace, pool.Name, err)
	}
	return nil
}

// deletePoolPods deletes the named pods that belong to pool; pods already
// gone, or not the pool's, are skipped.
func deletePoolPods(ctx context.Context, c client.Client, pool *sandboxv1alpha1.Pool, names []string) error {
	owned, err := ownedPods(ctx, c, pool)
	if err != nil {
		return err
	}
	want := sets.New(names...)
	for i := range owned {
		p := &owned[i]
		if !want.Has(p.Name) {
			continue
		}
		if err := c.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}
