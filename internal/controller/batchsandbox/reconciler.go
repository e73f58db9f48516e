// Package batchsandbox is the reconciler of BatchSandboxes in template mode
// (spec.template): it creates one pod per replica, named <batch>-<index>,
// publishes their IPs in the endpoints annotation, reports their state in
// status, and deletes the BatchSandbox when its expireTime passes.
//
// It is level-based and idempotent: every reconcile compares what exists
// with spec and converges, so a controller killed at any moment and started
// again finishes the job without making a pod twice. Pod names are
// deterministic, and the pods the batch has been given are recorded in the
// alloc-status annotation once they exist; a recorded pod that no longer
// exists was deleted by someone else and is reported in the PodFailed
// condition, not recreated.
//
// BatchSandboxes with spec.poolRef (pool mode) are left to PoolReconciler
// (poolmode.go). Tasks are in tasks.go, pause and resume in pause.go.
package batchsandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/opensandbox-go/opensandbox/internal/taskexecutor"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// The permissions the template-mode reconciler needs; controller-gen turns
// them into deploy/controller/rbac/role.yaml (make generate).
//
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=batchsandboxes,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=batchsandboxes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=batchsandboxes/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete

// ControllerName names the controller in logs and metrics.
const ControllerName = "batchsandbox-template"

// conflictRetry is how soon a reconcile that lost a write race runs again
// (the winning write also triggers one through the watch).
const conflictRetry = 100 * time.Millisecond

// Reconciler reconciles template-mode BatchSandboxes.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the apiserver.
	Client client.Client
	// APIReader reads from the apiserver directly; it is used before a
	// decision that a stale cache could get wrong (creating a pod, or
	// declaring one vanished).
	APIReader client.Reader
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Tasks configures spec.taskTemplate's executors (tasks.go).
	Tasks TaskOptions
	// Pause configures pause and resume (pause.go).
	Pause PauseConfig
}

// SetupWithManager registers the reconciler with mgr: it watches
// BatchSandboxes and the pods they control.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&sandboxv1alpha1.BatchSandbox{}).
		Owns(&corev1.Pod{}).
		Owns(&sandboxv1alpha1.SandboxSnapshot{}).
		// Reconciles of one batch never overlap; several batches are
		// reconciled at once so that one whose task executors are slow
		// to answer (tasks.go) does not hold up the creation, expiry
		// and pause of the others.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile brings one BatchSandbox's pods, annotations and status in line
// with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var bsbx sandboxv1alpha1.BatchSandbox
	if err := r.Client.Get(ctx, req.NamespacedName, &bsbx); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if bsbx.DeletionTimestamp != nil && controllerutil.ContainsFinalizer(&bsbx, sandboxv1alpha1.FinalizerTaskCleanup) {
		return r.finalizeTasks(ctx, &bsbx)
	}
	if bsbx.DeletionTimestamp != nil || bsbx.Spec.PoolRef != "" || bsbx.Spec.Template == nil {
		// Being deleted (its pods go with it through their owner
		// references), or pool mode, which is not ours.
		return ctrl.Result{}, nil
	}

	var result ctrl.Result
	if exp := bsbx.Spec.ExpireTime; exp != nil {
		left := exp.Sub(r.now())
		if left <= 0 {
			return ctrl.Result{}, r.expire(ctx, &bsbx)
		}
		result.RequeueAfter = left
	}

	res, handled, err := r.reconcilePause(ctx, &bsbx)
	if !handled && err == nil {
		res, err = r.sync(ctx, &bsbx)
	}
	if err != nil {
		return errorResult(ctx, err)
	}
	if res.RequeueAfter > 0 && (result.RequeueAfter == 0 || res.RequeueAfter < result.RequeueAfter) {
		result.RequeueAfter = res.RequeueAfter
	}
	return result, nil
}

// errorResult is what a reconcile that failed with err returns: nothing
// when the manager is stopping (the next one starts over), a short requeue
// for a lost write race (the winning write also brings a reconcile), else
// err, for the work queue's back-off.
func errorResult(ctx context.Context, err error) (ctrl.Result, error) {
	if ctx.Err() != nil {
		return ctrl.Result{}, nil
	}
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("write conflict; reconciling again", "error", err.Error())
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{}, err
}

// expire deletes bsbx, whose expireTime has passed. The UID precondition
// keeps it from deleting a new BatchSandbox of the same name.
func (r *Reconciler) expire(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox) error {
	uid := bsbx.UID
	err := r.Client.Delete(ctx, bsbx, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsConflict(err) {
			return nil // another object of that name now; its own reconcile decides
		}
		return fmt.Errorf("deleting expired BatchSandbox %s/%s: %w", bsbx.Namespace, bsbx.Name, err)
	}
	log.FromContext(ctx).Info("deleted expired BatchSandbox", "expireTime", bsbx.Spec.ExpireTime.UTC().Format(time.RFC3339))
	return nil
}

// podSet is the pods a batch controls, by replica index.
type podSet map[int]*corev1.Pod

// listPods lists the pods bsbx controls through reader, by index. Pods whose
// name does not match their index label are not counted as replicas.
func listPods(ctx context.Context, reader client.Reader, bsbx *sandboxv1alpha1.BatchSandbox) (podSet, error) {
	var list corev1.PodList
	if err := reader.List(ctx, &list, client.InNamespace(bsbx.Namespace),
		client.MatchingLabels{sandboxv1alpha1.LabelBatchSandboxName: bsbx.Name}); err != nil {
		return nil, fmt.Errorf("listing pods of BatchSandbox %s/%s: %w", bsbx.Namespace, bsbx.Name, err)
	}
	pods := make(podSet, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if !metav1.IsControlledBy(p, bsbx) {
			continue
		}
		idx, ok := podIndex(p)
		if !ok || p.Name != PodName(bsbx.Name, idx) {
			continue
		}
		pods[idx] = p
	}
	return pods, nil
}

// sync converges bsbx (not expired, template mode): pods, annotations and
// status. Write conflicts come back as conflict errors.
func (r *Reconciler) sync(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	n := 1
	if bsbx.Spec.Replicas != nil {
		n = int(*bsbx.Spec.Replicas)
	}
	pods, err := listPods(ctx, r.Client, bsbx)
	if err != nil {
		return ctrl.Result{}, err
	}
	alloc, err := sandboxv1alpha1.GetAllocation(bsbx, sandboxv1alpha1.AnnotationAllocStatus)
	if err != nil {
		// A mangled record cannot tell created from never-created pods;
		// start a new one from the pods that exist.
		logger.Info("ignoring unreadable pod record", "error", err.Error())
	}
	rec := recordedIndexes(bsbx.Name, alloc)
	released := releasedReplicas(ctx, bsbx, n)

	// A replica without a pod in the cache is either not created yet or
	// gone. The cache may lag behind this controller's own writes, so that
	// decision is taken on fresh reads.
	if missing(pods, n, released) {
		fresh := &sandboxv1alpha1.BatchSandbox{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(bsbx), fresh); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if fresh.UID != bsbx.UID || fresh.DeletionTimestamp != nil {
			return ctrl.Result{}, nil
		}
		if fresh.ResourceVersion != bsbx.ResourceVersion {
			// The cache is behind; the event bringing it up to date
			// triggers another reconcile.
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		if pods, err = listPods(ctx, r.APIReader, bsbx); err != nil {
			return ctrl.Result{}, err
		}
	}

	obs := observation{n: n, pods: make(podSet, n), vanished: map[int]bool{}, released: released}
	var createErrs []error
	for i := range n {
		if _, ok := released[i]; ok {
			continue // its task completed and its pod was given up (tasks.go)
		}
		if p, ok := pods[i]; ok {
			if p.DeletionTimestamp != nil && !rec[i] {
				// The terminating pod of a replica scaled away (or
				// paused) and wanted again before it was gone: not
				// this replica's pod. Its deletion event brings the
				// reconcile that creates the new one.
				logger.V(1).Info("waiting for the old pod of a replica to go", "pod", p.Name)
				continue
			}
			obs.pods[i] = p
			continue
		}
		if rec[i] {
			obs.vanished[i] = true
			continue
		}
		p, err := r.createPod(ctx, bsbx, i)
		if err != nil {
			createErrs = append(createErrs, err)
			continue
		}
		obs.pods[i] = p
		logger.V(1).Info("created pod", "pod", p.Name)
	}
	obs.createErr = errors.Join(createErrs...)

	// The record holds the replicas below n that have had a pod.
	newRec := make(map[int]bool, n)
	for i := range n {
		if obs.pods[i] != nil || obs.vanished[i] {
			newRec[i] = true
		}
	}
	if err := r.writeAnnotations(ctx, bsbx, newRec, endpoints(obs.pods, n)); err != nil {
		return ctrl.Result{}, err
	}

	// Scale down: the highest indexes go. Only now that the record no
	// longer holds them: a replica scaled back before its old pod is gone
	// must find that pod terminating and outside the record (so it waits
	// for it), not inside it (which reads as someone else deleting a
	// sandbox's pod, and fails the batch).
	for i, p := range pods {
		if i < n || p.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return ctrl.Result{}, fmt.Errorf("deleting pod %s of scaled-down replica %d: %w", p.Name, i, err)
		}
		logger.V(1).Info("deleted pod of removed replica", "pod", p.Name)
	}

	st := computeStatus(bsbx, obs)
	taskRes, err := r.syncTasks(ctx, bsbx, obs, pods, &st)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !equality.Semantic.DeepEqual(st, bsbx.Status) {
		bsbx.Status = st
		if err := r.Client.Status().Update(ctx, bsbx); err != nil {
			return ctrl.Result{}, fmt.Errorf("updating status: %w", err)
		}
	}
	if obs.createErr != nil {
		return ctrl.Result{}, obs.createErr
	}
	return taskRes, nil
}

// missing reports whether some replica below n, not released, has no pod
// in pods.
func missing(pods podSet, n int, released map[int]taskexecutor.State) bool {
	for i := range n {
		if _, ok := released[i]; !ok && pods[i] == nil {
			return true
		}
	}
	return false
}

// createPod creates the pod of replica index. A pod of that name that bsbx
// already controls (created by an earlier reconcile this one did not see)
// is returned as if created; one it does not control is an error.
func (r *Reconciler) createPod(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox, index int) (*corev1.Pod, error) {
	pod, err := newPod(bsbx, index)
	if err == nil {
		err = r.applyResume(bsbx, pod)
	}
	if err != nil {
		return nil, fmt.Errorf("replica %d: %w", index, err)
	}
	injectTaskExecutor(bsbx, pod, r.Tasks.image())
	err = r.Client.Create(ctx, pod)
	if err == nil {
		return pod, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
	existing := &corev1.Pod{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, existing); err != nil {
		return nil, fmt.Errorf("reading existing pod %s: %w", pod.Name, err)
	}
	if !metav1.IsControlledBy(existing, bsbx) {
		return nil, fmt.Errorf("pod name %s is taken by a pod this BatchSandbox does not control", pod.Name)
	}
	return existing, nil
}

// writeAnnotations sets the alloc-status record and the endpoints annotation
// of bsbx when either differs, in one patch guarded by bsbx's
// resourceVersion (a stale bsbx gets a conflict).
func (r *Reconciler) writeAnnotations(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox, rec map[int]bool, ips []string) error {
	orig := bsbx.DeepCopy()
	sandboxv1alpha1.SetAllocation(bsbx, sandboxv1alpha1.AnnotationAllocStatus, allocationOf(bsbx.Name, rec))
	if err := sandboxv1alpha1.SetEndpoints(bsbx, ips); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(orig.Annotations, bsbx.Annotations) {
		return nil
	}
	if err := r.Client.Patch(ctx, bsbx, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("writing annotations: %w", err)
	}
	return nil
}
