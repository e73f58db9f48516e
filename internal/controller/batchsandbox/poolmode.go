package batchsandbox

// Pool mode: a BatchSandbox with spec.poolRef gets its pods from warm Pools
// instead of creating them.
//
//   - Allocation goes through pool.AllocateWith, which lists the chosen
//     pods in the alloc-status annotation in one update under the pool's
//     lock; the endpoints annotation and the pool-allocation finalizer ride
//     in that same update, so claiming N pods and publishing their IPs is
//     one API write (plus one status write), whatever N.
//   - spec.replicas is the total the batch should hold: a batch the pools
//     cannot fill yet keeps what it got and takes more as pool pods become
//     ready (it watches pool pods). Allocate is given the total, not a
//     count to add, so a restarted controller never allocates twice.
//   - poolRef "*" takes from every Pool of the namespace whose template
//     matches the batch's template (matchesTemplate), the pool with the
//     most available pods first.
//   - A pod that fails or vanishes while allocated is reported (phase
//     Failed, condition PodFailed) and stays listed: it is not replaced.
//   - Deleting the batch (or its expireTime passing) releases its pods to
//     their pools by their recycleStrategy (pool.Release) before the
//     finalizer lets the object go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opensandbox-go/opensandbox/internal/controller/pool"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// PoolControllerName names the pool-mode controller in logs and metrics.
const PoolControllerName = "batchsandbox-pool"

// Condition reasons of pool mode.
const (
	// ReasonWaitingForPool: the batch holds fewer pods than replicas and
	// no matching pool has a ready idle pod to give.
	ReasonWaitingForPool = "WaitingForPool"
	// ReasonReleaseFailed: giving pods back to their pool failed.
	ReasonReleaseFailed = "ReleaseFailed"
)

// shortRetry is how soon a batch still short of pods is looked at again
// should no pool pod event come first (the watch normally wakes it).
const shortRetry = 10 * time.Second

// PoolReconciler reconciles pool-mode BatchSandboxes (spec.poolRef set).
type PoolReconciler struct {
	// Client reads from the manager's cache and writes to the apiserver.
	Client client.Client
	// Direct reads from and writes to the apiserver with no cache, as
	// pool.Allocate and pool.Release require.
	Direct client.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// SetupWithManager registers the pool-mode controller with mgr: it watches
// BatchSandboxes with a poolRef and the pods of pools.
func (r *PoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Direct == nil {
		c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("%s: uncached client: %w", PoolControllerName, err)
		}
		r.Direct = c
	}
	pooled := predicate.NewPredicateFuncs(func(o client.Object) bool {
		b, ok := o.(*sandboxv1alpha1.BatchSandbox)
		return ok && b.Spec.PoolRef != ""
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named(PoolControllerName).
		For(&sandboxv1alpha1.BatchSandbox{}, builder.WithPredicates(pooled)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.batchesOfPod)).
		Complete(r)
}

func (r *PoolReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// batchesOfPod maps a pool pod to the pool-mode batches it concerns: the
// one holding it, and those of its pool (or "*") still short of pods.
func (r *PoolReconciler) batchesOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	poolName := o.GetLabels()[sandboxv1alpha1.LabelPoolName]
	if poolName == "" {
		return nil
	}
	var list sandboxv1alpha1.BatchSandboxList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing BatchSandboxes for a pool pod", "pod", o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.PoolRef != poolName && b.Spec.PoolRef != sandboxv1alpha1.PoolRefAny {
			continue
		}
		a, _ := sandboxv1alpha1.GetAllocation(b, sandboxv1alpha1.AnnotationAllocStatus)
		if len(a.Pods) < replicasOf(b) || slices.Contains(a.Pods, o.GetName()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)})
		}
	}
	return reqs
}

func replicasOf(b *sandboxv1alpha1.BatchSandbox) int {
	if b.Spec.Replicas == nil {
		return 1
	}
	return int(*b.Spec.Replicas)
}

// Reconcile brings one pool-mode BatchSandbox's allocation, annotations and
// status in line with its spec, and releases its pods when it is deleted.
func (r *PoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b sandboxv1alpha1.BatchSandbox
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.Spec.PoolRef == "" {
		return ctrl.Result{}, nil
	}
	var res ctrl.Result
	var err error
	switch {
	case b.DeletionTimestamp != nil:
		err = r.finalize(ctx, &b)
	case b.Spec.ExpireTime != nil && !b.Spec.ExpireTime.Time.After(r.now()):
		err = r.expire(ctx, &b)
	default:
		res, err = r.sync(ctx, &b)
		if exp := b.Spec.ExpireTime; exp != nil {
			left := exp.Sub(r.now())
			if res.RequeueAfter == 0 || left < res.RequeueAfter {
				res.RequeueAfter = left
			}
		}
	}
	if err != nil {
		return errorResult(ctx, err)
	}
	return res, nil
}

// expire deletes b, whose expireTime has passed; the finalizer then
// releases its pods.
func (r *PoolReconciler) expire(ctx context.Context, b *sandboxv1alpha1.BatchSandbox) error {
	uid := b.UID
	err := r.Client.Delete(ctx, b, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting expired BatchSandbox %s/%s: %w", b.Namespace, b.Name, err)
	}
	log.FromContext(ctx).Info("deleted expired BatchSandbox", "expireTime", b.Spec.ExpireTime.UTC().Format(time.RFC3339))
	return nil
}

// errReplaced aborts an allocation whose BatchSandbox is no longer the one
// reconciled (deleted and re-created, or being deleted).
var errReplaced = errors.New("BatchSandbox was deleted or replaced meanwhile")

// sync converges b (pool mode, not being deleted, not expired).
func (r *PoolReconciler) sync(ctx context.Context, b *sandboxv1alpha1.BatchSandbox) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	n := replicasOf(b)
	alloc, err := sandboxv1alpha1.GetAllocation(b, sandboxv1alpha1.AnnotationAllocStatus)
	if err != nil {
		// Which pods are ours cannot be told; change nothing.
		return ctrl.Result{}, fmt.Errorf("BatchSandbox %s/%s: %w", b.Namespace, b.Name, err)
	}
	held := alloc.Pods

	// Scale down: the last pods listed go back to their pools.
	if len(held) > n {
		if err := r.release(ctx, b, held[n:]); err != nil {
			return ctrl.Result{}, err
		}
		logger.Info("released pods of removed replicas", "pods", len(held)-n)
		return ctrl.Result{}, nil // the write brings the next reconcile
	}

	pods, err := r.poolPods(ctx, b.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	var waiting string
	wrote := false
	if len(held) < n {
		pools, why, err := r.candidatePools(ctx, b)
		if err != nil {
			return ctrl.Result{}, err
		}
		waiting = why
		for i := range pools {
			p := &pools[i]
			var added []corev1.Pod
			hook := func(fresh *sandboxv1alpha1.BatchSandbox, next []string, add []corev1.Pod) error {
				if fresh.UID != b.UID || fresh.DeletionTimestamp != nil {
					return errReplaced
				}
				added = add
				withAdded := withPods(pods, add)
				if err := sandboxv1alpha1.SetEndpoints(fresh, endpointsOf(next, withAdded)); err != nil {
					return err
				}
				controllerutil.AddFinalizer(fresh, sandboxv1alpha1.FinalizerPoolAllocation)
				return nil
			}
			before := len(held)
			held, err = pool.AllocateWith(ctx, r.Direct, p, b, n, hook)
			if errors.Is(err, errReplaced) {
				return ctrl.Result{}, nil
			}
			if err != nil {
				return ctrl.Result{}, err
			}
			if len(held) > before {
				wrote = true
				pods = withPods(pods, added)
				logger.Info("allocated pool pods", "pool", p.Name, "added", len(held)-before, "held", len(held), "replicas", n)
			}
			if len(held) >= n {
				break
			}
		}
		if len(held) < n && waiting == "" {
			waiting = fmt.Sprintf("holds %d of %d pods; no matching pool has a ready idle pod", len(held), n)
		}
	}

	// Pods listed but not in the cache: read them before calling them gone.
	for _, name := range held {
		if _, ok := pods[name]; ok {
			continue
		}
		var p corev1.Pod
		err := r.Direct.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: name}, &p)
		switch {
		case err == nil:
			pods[name] = &p
		case !apierrors.IsNotFound(err):
			return ctrl.Result{}, fmt.Errorf("reading pod %s/%s: %w", b.Namespace, name, err)
		}
	}

	if !wrote && !slices.Equal(held, alloc.Pods) {
		// Allocate read a newer alloc-status than the cache holds: the
		// cache lags; the event bringing it up to date reconciles again.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if !wrote {
		// The allocation write carried endpoints and finalizer; without
		// one, bring them up to date (a pod's IP or state changed).
		if err := r.writeAnnotations(ctx, b, held, pods); err != nil {
			return ctrl.Result{}, err
		}
	}

	obs := observation{n: n, pods: map[int]*corev1.Pod{}, vanished: map[int]bool{}, names: held}
	for i, name := range held {
		if p, ok := pods[name]; ok {
			obs.pods[i] = p
		} else {
			obs.vanished[i] = true
		}
	}
	status := func(base *sandboxv1alpha1.BatchSandbox) sandboxv1alpha1.BatchSandboxStatus {
		st := computeStatus(base, obs)
		st.Allocated = int32(len(held))
		if len(held) < n {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{
				Type: sandboxv1alpha1.BatchSandboxConditionProgressing, Status: metav1.ConditionTrue,
				Reason: ReasonWaitingForPool, Message: waiting, ObservedGeneration: base.Generation,
			})
		}
		return st
	}
	if err := r.writeStatus(ctx, b, status); err != nil {
		return ctrl.Result{}, err
	}
	if len(held) < n {
		return ctrl.Result{RequeueAfter: shortRetry}, nil
	}
	return ctrl.Result{}, nil
}

// withPods returns base with pods added (a copy when there are any).
func withPods(base map[string]*corev1.Pod, add []corev1.Pod) map[string]*corev1.Pod {
	if len(add) == 0 {
		return base
	}
	out := make(map[string]*corev1.Pod, len(base)+len(add))
	for k, v := range base {
		out[k] = v
	}
	for i := range add {
		out[add[i].Name] = &add[i]
	}
	return out
}

// endpointsOf is the IPs of the held pods in alloc-status order, leaving
// out pods without an IP, failed, or gone (as template mode does).
func endpointsOf(held []string, pods map[string]*corev1.Pod) []string {
	ips := []string{}
	for _, name := range held {
		if p, ok := pods[name]; ok && p.Status.PodIP != "" && podFailure(p) == "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips
}

// poolPods are the cached pods of the namespace that belong to a pool, by
// name.
func (r *PoolReconciler) poolPods(ctx context.Context, ns string) (map[string]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{sandboxv1alpha1.LabelPoolName}); err != nil {
		return nil, fmt.Errorf("listing pool pods of namespace %s: %w", ns, err)
	}
	out := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// candidatePools are the pools b may take pods from, in the order to try
// them; why says, when there is none, what is missing.
func (r *PoolReconciler) candidatePools(ctx context.Context, b *sandboxv1alpha1.BatchSandbox) (pools []sandboxv1alpha1.Pool, why string, err error) {
	if b.Spec.PoolRef != sandboxv1alpha1.PoolRefAny {
		var p sandboxv1alpha1.Pool
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.PoolRef}, &p)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("pool %s not found", b.Spec.PoolRef), nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("reading pool %s/%s: %w", b.Namespace, b.Spec.PoolRef, err)
		}
		if p.DeletionTimestamp != nil {
			return nil, fmt.Sprintf("pool %s is being deleted", p.Name), nil
		}
		return []sandboxv1alpha1.Pool{p}, "", nil
	}
	var list sandboxv1alpha1.PoolList
	if err := r.Client.List(ctx, &list, client.InNamespace(b.Namespace)); err != nil {
		return nil, "", fmt.Errorf("listing pools of namespace %s: %w", b.Namespace, err)
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && matchesTemplate(b.Spec.Template, &p.Spec.Template) {
			pools = append(pools, p)
		}
	}
	if len(pools) == 0 {
		return nil, `no pool in the namespace matches the template (poolRef "*")`, nil
	}
	sort.SliceStable(pools, func(i, j int) bool {
		if pools[i].Status.Available != pools[j].Status.Available {
			return pools[i].Status.Available > pools[j].Status.Available
		}
		return pools[i].Name < pools[j].Name
	})
	return pools, "", nil
}

// matchesTemplate reports whether a pool made from have can serve a batch
// asking for want (poolRef "*"), by the checks the upstream auto-assign
// proposal names: every container of want is in have under the same name
// with the same image and at least the resources want requests; want's
// labels and node selector are have's too. A nil want matches any pool.
func matchesTemplate(want, have *corev1.PodTemplateSpec) bool {
	if want == nil {
		return true
	}
	for k, v := range want.Labels {
		if hv, ok := have.Labels[k]; !ok || hv != v {
			return false
		}
	}
	for k, v := range want.Spec.NodeSelector {
		if hv, ok := have.Spec.NodeSelector[k]; !ok || hv != v {
			return false
		}
	}
	for _, wc := range want.Spec.Containers {
		i := slices.IndexFunc(have.Spec.Containers, func(c corev1.Container) bool { return c.Name == wc.Name })
		if i < 0 {
			return false
		}
		hc := have.Spec.Containers[i]
		if hc.Image != wc.Image {
			return false
		}
		for res, q := range wc.Resources.Requests {
			hq, ok := hc.Resources.Requests[res]
			if !ok || hq.Cmp(q) < 0 {
				return false
			}
		}
	}
	return true
}

// writeAnnotations sets b's endpoints, and the finalizer when b holds
// pods, if they differ, in one patch guarded by b's resourceVersion.
func (r *PoolReconciler) writeAnnotations(ctx context.Context, b *sandboxv1alpha1.BatchSandbox, held []string, pods map[string]*corev1.Pod) error {
	orig := b.DeepCopy()
	if err := sandboxv1alpha1.SetEndpoints(b, endpointsOf(held, pods)); err != nil {
		return err
	}
	if len(held) > 0 {
		controllerutil.AddFinalizer(b, sandboxv1alpha1.FinalizerPoolAllocation)
	}
	if equality.Semantic.DeepEqual(orig.Annotations, b.Annotations) && equality.Semantic.DeepEqual(orig.Finalizers, b.Finalizers) {
		return nil
	}
	if err := r.Client.Patch(ctx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing annotations: %w", err)
	}
	return nil
}

// writeStatus writes status(b) as b's whole status when it differs, as a
// merge patch (b's resourceVersion may be behind the allocation just
// written; this controller is the only writer of a pool-mode batch's
// status). The cache often lacks the last status write just after an
// allocation, so before writing, the status is computed again on a fresh
// read (keeping its condition times): a read is cheaper than a write.
func (r *PoolReconciler) writeStatus(ctx context.Context, b *sandboxv1alpha1.BatchSandbox, status func(*sandboxv1alpha1.BatchSandbox) sandboxv1alpha1.BatchSandboxStatus) error {
	st := status(b)
	if equality.Semantic.DeepEqual(st, b.Status) {
		return nil
	}
	var fresh sandboxv1alpha1.BatchSandbox
	if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(b), &fresh); err != nil {
		return fmt.Errorf("reading BatchSandbox %s/%s: %w", b.Namespace, b.Name, client.IgnoreNotFound(err))
	}
	if fresh.UID != b.UID {
		return nil
	}
	if st = status(&fresh); equality.Semantic.DeepEqual(st, fresh.Status) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return fmt.Errorf("encoding status: %w", err)
	}
	b.Status = st
	if err := r.Client.Status().Patch(ctx, b, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("updating status: %w", client.IgnoreNotFound(err))
	}
	return nil
}

// finalize releases the pods of b, which is being deleted, to their pools
// and then removes the pool-allocation finalizer.
func (r *PoolReconciler) finalize(ctx context.Context, b *sandboxv1alpha1.BatchSandbox) error {
	if !controllerutil.ContainsFinalizer(b, sandboxv1alpha1.FinalizerPoolAllocation) {
		return nil
	}
	alloc, err := sandboxv1alpha1.GetAllocation(b, sandboxv1alpha1.AnnotationAllocStatus)
	if err != nil {
		return fmt.Errorf("BatchSandbox %s/%s: %w", b.Namespace, b.Name, err)
	}
	if len(alloc.Pods) > 0 {
		if err := r.release(ctx, b, alloc.Pods); err != nil {
			r.reportReleaseFailure(ctx, b, err)
			return err
		}
		log.FromContext(ctx).Info("released pods of deleted BatchSandbox", "pods", len(alloc.Pods))
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var fresh sandboxv1alpha1.BatchSandbox
		if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(b), &fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		if fresh.UID != b.UID || !controllerutil.ContainsFinalizer(&fresh, sandboxv1alpha1.FinalizerPoolAllocation) {
			return nil
		}
		a, err := sandboxv1alpha1.GetAllocation(&fresh, sandboxv1alpha1.AnnotationAllocStatus)
		if err != nil {
			return err
		}
		if len(a.Pods) > 0 {
			// Listed after our read (should not happen: no allocation
			// to a batch being deleted); the next reconcile releases them.
			return apierrors.NewConflict(sandboxv1alpha1.GroupVersion.WithResource("batchsandboxes").GroupResource(), b.Name, errors.New("pods still allocated"))
		}
		controllerutil.RemoveFinalizer(&fresh, sandboxv1alpha1.FinalizerPoolAllocation)
		if err := r.Direct.Update(ctx, &fresh); err != nil {
			return fmt.Errorf("removing finalizer: %w", client.IgnoreNotFound(err))
		}
		return nil
	})
}

// reportReleaseFailure puts why the release failed into the Progressing
// condition (best effort: the error is returned and logged anyway).
func (r *PoolReconciler) reportReleaseFailure(ctx context.Context, b *sandboxv1alpha1.BatchSandbox, cause error) {
	status := func(base *sandboxv1alpha1.BatchSandbox) sandboxv1alpha1.BatchSandboxStatus {
		st := *base.Status.DeepCopy()
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: sandboxv1alpha1.BatchSandboxConditionProgressing, Status: metav1.ConditionTrue,
			Reason: ReasonReleaseFailed, Message: cause.Error(), ObservedGeneration: base.Generation,
		})
		return st
	}
	if err := r.writeStatus(ctx, b, status); err != nil {
		log.FromContext(ctx).Error(err, "reporting a failed release")
	}
}

// release gives names, which b holds, back to their pools (grouped by the
// pool-name label of the pod; a pod gone is put with b's pool, or for "*"
// the pool its name was made from). Names whose pool no longer exists are
// simply unlisted: their pods go with the pool.
func (r *PoolReconciler) release(ctx context.Context, b *sandboxv1alpha1.BatchSandbox, names []string) error {
	var list corev1.PodList
	if err := r.Direct.List(ctx, &list, client.InNamespace(b.Namespace), client.HasLabels{sandboxv1alpha1.LabelPoolName}); err != nil {
		return fmt.Errorf("listing pool pods of namespace %s: %w", b.Namespace, err)
	}
	poolOf := make(map[string]string, len(list.Items))
	for _, p := range list.Items {
		poolOf[p.Name] = p.Labels[sandboxv1alpha1.LabelPoolName]
	}
	groups := map[string][]string{}
	for _, name := range names {
		poolName := poolOf[name]
		if poolName == "" {
			poolName = b.Spec.PoolRef
		}
		if poolName == sandboxv1alpha1.PoolRefAny {
			poolName = poolOfPodName(name)
		}
		groups[poolName] = append(groups[poolName], name)
	}
	var orphans []string
	for poolName, group := range groups {
		var p sandboxv1alpha1.Pool
		err := r.Direct.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: poolName}, &p)
		if apierrors.IsNotFound(err) || poolName == "" {
			orphans = append(orphans, group...)
			continue
		}
		if err != nil {
			return fmt.Errorf("reading pool %s/%s: %w", b.Namespace, poolName, err)
		}
		if err := pool.Release(ctx, r.Direct, &p, b, group); err != nil {
			return err
		}
	}
	if len(orphans) > 0 {
		return r.unlist(ctx, b, orphans)
	}
	return nil
}

// poolOfPodName is the pool a pool pod's name was made from ("<pool>-<slot>",
// pool.PodName), or "" when the name is not of that form.
func poolOfPodName(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return ""
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return ""
	}
	return name[:i]
}

// unlist removes names from b's alloc-status without touching pods (their
// pool is gone, and they with it).
func (r *PoolReconciler) unlist(ctx context.Context, b *sandboxv1alpha1.BatchSandbox, names []string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var fresh sandboxv1alpha1.BatchSandbox
		if err := r.Direct.Get(ctx, client.ObjectKeyFromObject(b), &fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		a, err := sandboxv1alpha1.GetAllocation(&fresh, sandboxv1alpha1.AnnotationAllocStatus)
		if err != nil {
			return err
		}
		keep := slices.DeleteFunc(slices.Clone(a.Pods), func(n string) bool { return slices.Contains(names, n) })
		if len(keep) == len(a.Pods) {
			return nil
		}
		sandboxv1alpha1.SetAllocation(&fresh, sandboxv1alpha1.AnnotationAllocStatus, sandboxv1alpha1.Allocation{Pods: keep})
		if err := r.Direct.Update(ctx, &fresh); err != nil {
			return fmt.Errorf("unlisting pods of deleted pools from BatchSandbox %s/%s: %w", b.Namespace, b.Name, err)
		}
		return nil
	})
}
