package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// IndexPoolRef is the cache field index over BatchSandboxes by spec.poolRef
// (a pool name, or "*"), registered by SetupWithManager. The BatchSandbox
// controller may list with client.MatchingFields{IndexPoolRef: name}.
const IndexPoolRef = "spec.poolRef"

// The permissions of the Pool reconciler and of Allocate and Release;
// controller-gen turns them into deploy/controller/rbac/role.yaml.
//
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=pools,verbs=get;list;watch
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=pools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=pools/finalizers,verbs=update
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=batchsandboxes,verbs=get;list;watch;update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete

// ControllerName names the Pool controller in logs and metrics.
const ControllerName = "pool"

// Reconciler keeps a Pool's pods between its bounds (see doc.go).
type Reconciler struct {
	// Client reads from the manager's cache and writes to the apiserver.
	Client client.Client
	// APIReader reads from the apiserver directly; the allocation is read
	// through it, under the pool's lock, before any pod is created or
	// deleted.
	APIReader client.Reader
	// Scheme knows Pool, for owner references.
	Scheme *runtime.Scheme
	// Log receives the controller's logs; nil means slog.Default().
	Log *slog.Logger
}

// SetupWithManager registers IndexPoolRef and a Pool controller with mgr.
func SetupWithManager(mgr ctrl.Manager) error {
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme()}
	return r.SetupWithManager(mgr)
}

// SetupWithManager registers IndexPoolRef and r as the Pool controller of
// mgr. It watches Pools, the pods they own, and BatchSandboxes (whose
// alloc-status decides which pods are allocated).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &sandboxv1alpha1.BatchSandbox{}, IndexPoolRef, func(o client.Object) []string {
		b := o.(*sandboxv1alpha1.BatchSandbox)
		if b.Spec.PoolRef == "" {
			return nil
		}
		return []string{b.Spec.PoolRef}
	}); err != nil {
		return fmt.Errorf("indexing BatchSandboxes by %s: %w", IndexPoolRef, err)
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&sandboxv1alpha1.Pool{}).
		Owns(&corev1.Pod{}).
		Watches(&sandboxv1alpha1.BatchSandbox{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfBatchSandbox)).
		Complete(r)
	if err != nil {
		return fmt.Errorf("pool controller: %w", err)
	}
	return nil
}

// poolsOfBatchSandbox maps a BatchSandbox to the pools whose pods it may
// hold: its poolRef, or for "*" every pool of its namespace.
func (r *Reconciler) poolsOfBatchSandbox(ctx context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*sandboxv1alpha1.BatchSandbox)
	if !ok || b.Spec.PoolRef == "" {
		return nil
	}
	if b.Spec.PoolRef != sandboxv1alpha1.PoolRefAny {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.PoolRef}}}
	}
	var pools sandboxv1alpha1.PoolList
	if err := r.Client.List(ctx, &pools, client.InNamespace(b.Namespace)); err != nil {
		r.log().Error("listing pools for a BatchSandbox with poolRef *", "batchsandbox", b.Name, "namespace", b.Namespace, "err", err)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pools.Items))
	for _, p := range pools.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	return reqs
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

// Reconcile brings one Pool's pods and status in line with its spec. The
// cache tells whether anything needs doing; when it does, the pods and the
// allocation are read again from the apiserver under the pool's lock
// (shared with Allocate and Release), so that no pod is deleted, or counted
// idle, while it is being allocated, and no pod is created on stale counts.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pool sandboxv1alpha1.Pool
	if err := r.Client.Get(ctx, req.NamespacedName, &pool); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pool.DeletionTimestamp != nil {
		// Its pods go with it: they carry an owner reference.
		return reconcile.Result{}, nil
	}
	revision, err := Revision(&pool.Spec.Template)
	if err != nil {
		return reconcile.Result{}, err
	}
	pods, err := ownedPods(ctx, r.Client, &pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	allocated, err := allocatedCached(ctx, r.Client, &pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	p, err := planPods(&pool, pods, allocated, revision)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("pool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	var requeue bool
	if !p.empty() {
		unlock := lockPool(&pool)
		p, requeue, err = r.act(ctx, &pool, revision)
		unlock()
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, &pool, revision, p.Status); err != nil {
		return reconcile.Result{}, err
	}
	if requeue {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	return reconcile.Result{}, nil
}

// act plans again with the pods and the allocation read from the
// apiserver, not the cache, and carries the plan out; the caller holds the
// pool's lock. (A cache that has seen a deletion but not a creation would
// otherwise offer a freed name and make one pod too many.) requeue is true
// when a pod changed under the plan.
func (r *Reconciler) act(ctx context.Context, pool *sandboxv1alpha1.Pool, revision string) (p plan, requeue bool, err error) {
	pods, err := ownedPods(ctx, r.APIReader, pool)
	if err != nil {
		return plan{}, false, err
	}
	allocated, err := allocatedFresh(ctx, r.APIReader, pool)
	if err != nil {
		return plan{}, false, err
	}
	p, err = planPods(pool, pods, allocated, revision)
	if err != nil {
		return plan{}, false, fmt.Errorf("pool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	log := r.log().With("pool", pool.Name, "namespace", pool.Namespace)
	byName := make(map[string]*corev1.Pod, len(pods))
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	for _, name := range p.Delete {
		pod := byName[name]
		// The UID precondition makes sure it is the pod planned on, not a
		// newer one of the same name.
		err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			requeue = true
		case err != nil:
			return p, false, fmt.Errorf("deleting pod %s/%s of pool %s: %w", pool.Namespace, name, pool.Name, err)
		default:
			log.Info("deleted idle pool pod", "pod", name, "revision", pod.Labels[sandboxv1alpha1.LabelPoolRevision])
		}
	}
	for _, name := range p.Create {
		pod, err := newPod(pool, name, revision, r.Scheme)
		if err != nil {
			return p, false, err
		}
		err = r.Client.Create(ctx, pod)
		switch {
		case apierrors.IsAlreadyExists(err):
			// Made by another writer since the read; counted next time.
			requeue = true
		case err != nil:
			return p, false, fmt.Errorf("creating pod %s/%s of pool %s: %w", pool.Namespace, name, pool.Name, err)
		default:
			log.Info("created pool pod", "pod", name, "revision", revision)
		}
	}
	return p, requeue, nil
}

// newPod makes the pod of slot name from the pool's template.
func newPod(pool *sandboxv1alpha1.Pool, name, revision string, scheme *runtime.Scheme) (*corev1.Pod, error) {
	t := pool.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   pool.Namespace,
			Labels:      t.Labels,
			Annotations: t.Annotations,
		},
		Spec: t.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[sandboxv1alpha1.LabelPoolName] = pool.Name
	pod.Labels[sandboxv1alpha1.LabelPoolRevision] = revision
	if err := controllerutil.SetControllerReference(pool, pod, scheme); err != nil {
		return nil, fmt.Errorf("owner reference on pod %s: %w", name, err)
	}
	return pod, nil
}

func (r *Reconciler) writeStatus(ctx context.Context, pool *sandboxv1alpha1.Pool, revision string, s sandboxv1alpha1.PoolStatus) error {
	s.ObservedGeneration = pool.Generation
	s.Revision = revision
	if pool.Status == s {
		return nil
	}
	// The whole status, zero counts included: the schema requires them,
	// and a diff against the (possibly empty) stored status would omit
	// them.
	body, err := json.Marshal(map[string]any{"status": s})
	if err != nil {
		return fmt.Errorf("encoding status of pool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	pool.Status = s
	if err := r.Client.Status().Patch(ctx, pool, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("status of pool %s/%s: %w", pool.Namespace, pool.Name, client.IgnoreNotFound(err))
	}
	return nil
}

// ownedPods lists the pods labelled with the pool's name whose controller
// is this pool (by UID, so that a pool re-created under the same name does
// not adopt its predecessor's pods).
func ownedPods(ctx context.Context, c client.Reader, pool *sandboxv1alpha1.Pool) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(pool.Namespace), client.MatchingLabels{sandboxv1alpha1.LabelPoolName: pool.Name}); err != nil {
		return nil, fmt.Errorf("listing pods of pool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	pods := list.Items[:0]
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == pool.UID {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// allocatedCached is the union of the alloc-status of the BatchSandboxes
// whose poolRef is the pool or "*", read from the cache through IndexPoolRef.
func allocatedCached(ctx context.Context, c client.Reader, pool *sandboxv1alpha1.Pool) (sets.Set[string], error) {
	out := sets.New[string]()
	for _, ref := range []string{pool.Name, sandboxv1alpha1.PoolRefAny} {
		var list sandboxv1alpha1.BatchSandboxList
		if err := c.List(ctx, &list, client.InNamespace(pool.Namespace), client.MatchingFields{IndexPoolRef: ref}); err != nil {
			return nil, fmt.Errorf("listing BatchSandboxes of pool %s/%s: %w", pool.Namespace, pool.Name, err)
		}
		if err := addAllocations(out, list.Items, ""); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// allocatedFresh is allocatedCached read from the apiserver, which has no
// index on poolRef: it lists the namespace's BatchSandboxes and filters.
func allocatedFresh(ctx context.Context, c client.Reader, pool *sandboxv1alpha1.Pool) (sets.Set[string], error) {
	var list sandboxv1alpha1.BatchSandboxList
	if err := c.List(ctx, &list, client.InNamespace(pool.Namespace)); err != nil {
		return nil, fmt.Errorf("listing BatchSandboxes of pool %s/%s: %w", pool.Namespace, pool.Name, err)
	}
	out := sets.New[string]()
	if err := addAllocations(out, list.Items, pool.Name); err != nil {
		return nil, err
	}
	return out, nil
}

// errMalformedAllocation marks an alloc-status that cannot be read: the
// pool then changes nothing, since it cannot tell which pods are idle.
var errMalformedAllocation = errors.New("malformed allocation")

// addAllocations adds the alloc-status pod names of items to out; with pool
// set, only of items whose poolRef is pool or "*".
func addAllocations(out sets.Set[string], items []sandboxv1alpha1.BatchSandbox, pool string) error {
	for i := range items {
		b := &items[i]
		if pool != "" && b.Spec.PoolRef != pool && b.Spec.PoolRef != sandboxv1alpha1.PoolRefAny {
			continue
		}
		a, err := sandboxv1alpha1.GetAllocation(b, sandboxv1alpha1.AnnotationAllocStatus)
		if err != nil {
			return fmt.Errorf("%w: BatchSandbox %s/%s: %w", errMalformedAllocation, b.Namespace, b.Name, err)
		}
		out.Insert(a.Pods...)
	}
	return nil
}
