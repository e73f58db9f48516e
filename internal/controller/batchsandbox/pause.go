package batchsandbox

// Pause and resume of template-mode BatchSandboxes (spec.pause).
//
// pause: true makes a SandboxSnapshot of the sandbox (named in the
// pause-snapshot annotation before it is created, so a restarted controller
// waits for the same one), and once it has succeeded records the snapshot's
// images in the resume-images annotation, empties the pod record and the
// endpoints, deletes the pod and, when it is gone, reports phase Paused. A
// failed snapshot leaves the pod running and sets PauseFailed; setting
// spec.pause to null and back to true retries with a new snapshot.
//
// pause: false on a Paused batch reports Resuming and lets the ordinary
// sync create the pod again, under the same name, with each container's
// image replaced by its snapshot image (applyResume) and the resume pull
// secret added. Null leaves a paused batch paused.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// The permissions pause and resume add to the reconciler's; controller-gen
// turns them into deploy/controller/rbac/role.yaml (make generate).
//
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=sandboxsnapshots,verbs=get;list;watch;create

// Annotations of a BatchSandbox written by pause and resume.
const (
	// AnnotationPauseSnapshot names the SandboxSnapshot of the current (or
	// last) pause.
	AnnotationPauseSnapshot = "sandbox.opensandbox.io/pause-snapshot"
	// AnnotationResumeImages holds the images the pod is made from after a
	// pause, as a JSON object from container name to image reference.
	AnnotationResumeImages = "sandbox.opensandbox.io/resume-images"
)

// Condition reasons of pause and resume.
const (
	ReasonPausing      = "Pausing"
	ReasonPaused       = "Paused"
	ReasonResuming     = "Resuming"
	ReasonNotPaused    = "NotPaused"
	ReasonSnapshotFail = "SnapshotFailed"
	ReasonPauseOK      = "PauseSucceeded"
)

// PauseConfig configures pause and resume.
type PauseConfig struct {
	// ResumePullSecret is added to the imagePullSecrets of pods resumed
	// from a snapshot.
	ResumePullSecret string
}

// podDeleteGrace is the grace period of a paused sandbox's pod: its root
// filesystem is committed already, and the new pod cannot be made under
// the same name until the old one is gone.
const podDeleteGrace = 1

// PauseSnapshotName is the SandboxSnapshot a pause of batch at generation
// makes.
func PauseSnapshotName(batch string, generation int64) string {
	suffix := fmt.Sprintf("-pause-%d", generation)
	if len(batch)+len(suffix) <= 253 {
		return batch + suffix
	}
	sum := sha256.Sum256([]byte(batch))
	return batch[:253-len(suffix)-11] + "-" + hex.EncodeToString(sum[:])[:10] + suffix
}

// reconcilePause acts on spec.pause; handled means the ordinary sync must
// not run in this reconcile (the batch is pausing or paused).
func (r *Reconciler) reconcilePause(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox) (ctrl.Result, bool, error) {
	phase := bsbx.Status.Phase
	switch {
	case bsbx.Spec.Pause != nil && *bsbx.Spec.Pause:
		return r.pause(ctx, bsbx)
	case phase == sandboxv1alpha1.BatchSandboxPhasePaused && bsbx.Spec.Pause == nil:
		return ctrl.Result{}, true, nil
	case phase == sandboxv1alpha1.BatchSandboxPhasePaused:
		return ctrl.Result{}, false, r.resume(ctx, bsbx)
	case bsbx.Annotations[AnnotationPauseSnapshot] != "":
		// A pause abandoned or failed: forget its snapshot so that the
		// next pause makes a new one.
		orig := bsbx.DeepCopy()
		delete(bsbx.Annotations, AnnotationPauseSnapshot)
		if err := r.Client.Patch(ctx, bsbx, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, true, fmt.Errorf("clearing the pause snapshot: %w", err)
		}
	}
	return ctrl.Result{}, false, nil
}

func (r *Reconciler) pause(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox) (ctrl.Result, bool, error) {
	logger := log.FromContext(ctx)
	if bsbx.Status.Phase == sandboxv1alpha1.BatchSandboxPhasePaused {
		// Paused: the pod stays away.
		_, err := r.deletePods(ctx, bsbx)
		return ctrl.Result{}, true, err
	}
	name := bsbx.Annotations[AnnotationPauseSnapshot]
	if name == "" {
		name = PauseSnapshotName(bsbx.Name, bsbx.Generation)
		orig := bsbx.DeepCopy()
		if bsbx.Annotations == nil {
			bsbx.Annotations = map[string]string{}
		}
		bsbx.Annotations[AnnotationPauseSnapshot] = name
		if err := r.Client.Patch(ctx, bsbx, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, true, fmt.Errorf("recording the pause snapshot: %w", err)
		}
	}
	var snap sandboxv1alpha1.SandboxSnapshot
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: bsbx.Namespace, Name: name}, &snap)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, types.NamespacedName{Namespace: bsbx.Namespace, Name: name}, &snap)
	}
	switch {
	case apierrors.IsNotFound(err):
		snap = sandboxv1alpha1.SandboxSnapshot{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: bsbx.Namespace,
				Labels: map[string]string{sandboxv1alpha1.LabelBatchSandboxName: bsbx.Name},
				OwnerReferences: []metav1.OwnerReference{
					*metav1.NewControllerRef(bsbx, sandboxv1alpha1.GroupVersion.WithKind("BatchSandbox")),
				},
			},
			Spec: sandboxv1alpha1.SandboxSnapshotSpec{SandboxName: bsbx.Name},
		}
		if err := r.Client.Create(ctx, &snap); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, true, fmt.Errorf("creating SandboxSnapshot %s: %w", name, err)
		}
		logger.Info("pausing: created snapshot", "snapshot", name)
	case err != nil:
		return ctrl.Result{}, true, fmt.Errorf("reading SandboxSnapshot %s: %w", name, err)
	case !metav1.IsControlledBy(&snap, bsbx):
		// Most likely the snapshot of an earlier BatchSandbox of this name
		// that the garbage collector has not removed yet: its images are
		// not this sandbox's. Retried (with back-off) until it is gone.
		return ctrl.Result{}, true, fmt.Errorf("SandboxSnapshot %s exists and does not belong to this BatchSandbox (an earlier one's, not yet garbage-collected?)", name)
	}

	switch snap.Status.Phase {
	case sandboxv1alpha1.SandboxSnapshotPhaseFailed:
		msg := fmt.Sprintf("snapshot %s failed", name)
		if c := meta.FindStatusCondition(snap.Status.Conditions, sandboxv1alpha1.SandboxSnapshotConditionFailed); c != nil {
			msg += ": " + c.Message
		}
		st := bsbx.Status.DeepCopy()
		st.PauseObservedGeneration = bsbx.Generation
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sandboxv1alpha1.BatchSandboxConditionPauseFailed,
			Status: metav1.ConditionTrue, Reason: ReasonSnapshotFail, Message: msg, ObservedGeneration: bsbx.Generation})
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sandboxv1alpha1.BatchSandboxConditionPaused,
			Status: metav1.ConditionFalse, Reason: ReasonSnapshotFail, Message: msg, ObservedGeneration: bsbx.Generation})
		if err := r.updateStatus(ctx, bsbx, st); err != nil {
			return ctrl.Result{}, true, err
		}
		// The pod keeps running; the ordinary sync reports it.
		return ctrl.Result{}, false, nil
	case sandboxv1alpha1.SandboxSnapshotPhaseSucceed:
	default:
		st := bsbx.Status.DeepCopy()
		st.Phase = sandboxv1alpha1.BatchSandboxPhasePausing
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sandboxv1alpha1.BatchSandboxConditionPaused,
			Status: metav1.ConditionFalse, Reason: ReasonPausing, Message: fmt.Sprintf("committing snapshot %s", name), ObservedGeneration: bsbx.Generation})
		// The snapshot's updates bring the next reconcile (it is owned).
		return ctrl.Result{}, true, r.updateStatus(ctx, bsbx, st)
	}

	// Committed: the pod is made from these images from now on.
	images := make(map[string]string, len(snap.Status.Containers))
	for _, c := range snap.Status.Containers {
		ref := c.ImageURI
		if c.ImageDigest != "" {
			ref += "@" + c.ImageDigest
		}
		images[c.ContainerName] = ref
	}
	raw, err := json.Marshal(images)
	if err != nil {
		return ctrl.Result{}, true, fmt.Errorf("encoding the resume images: %w", err)
	}
	orig := bsbx.DeepCopy()
	if bsbx.Annotations == nil {
		bsbx.Annotations = map[string]string{}
	}
	bsbx.Annotations[AnnotationResumeImages] = string(raw)
	sandboxv1alpha1.SetAllocation(bsbx, sandboxv1alpha1.AnnotationAllocStatus, sandboxv1alpha1.Allocation{})
	if err := sandboxv1alpha1.SetEndpoints(bsbx, nil); err != nil {
		return ctrl.Result{}, true, err
	}
	if !equality.Semantic.DeepEqual(orig.Annotations, bsbx.Annotations) {
		if err := r.Client.Patch(ctx, bsbx, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, true, fmt.Errorf("recording the resume images: %w", err)
		}
	}
	left, err := r.deletePods(ctx, bsbx)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	st := bsbx.Status.DeepCopy()
	if left > 0 {
		st.Phase = sandboxv1alpha1.BatchSandboxPhasePausing
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sandboxv1alpha1.BatchSandboxConditionPaused,
			Status: metav1.ConditionFalse, Reason: ReasonPausing, Message: fmt.Sprintf("snapshot %s committed; releasing the pod", name), ObservedGeneration: bsbx.Generation})
		return ctrl.Result{RequeueAfter: time.Second}, true, r.updateStatus(ctx, bsbx, st)
	}
	st.Phase = sandboxv1alpha1.BatchSandboxPhasePaused
	st.PauseObservedGeneration = bsbx.Generation
	st.Replicas, st.Allocated, st.Ready = 0, 0, 0
	paused := fmt.Sprintf("paused; the root filesystem is in snapshot %s", name)
	for _, c := range []metav1.Condition{
		{Type: sandboxv1alpha1.BatchSandboxConditionPaused, Status: metav1.ConditionTrue, Reason: ReasonPaused, Message: paused},
		{Type: sandboxv1alpha1.BatchSandboxConditionPauseFailed, Status: metav1.ConditionFalse, Reason: ReasonPauseOK, Message: "the last pause succeeded"},
		{Type: sandboxv1alpha1.BatchSandboxConditionReady, Status: metav1.ConditionFalse, Reason: ReasonPaused, Message: paused},
		{Type: sandboxv1alpha1.BatchSandboxConditionProgressing, Status: metav1.ConditionFalse, Reason: ReasonPaused, Message: paused},
	} {
		c.ObservedGeneration = bsbx.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if err := r.updateStatus(ctx, bsbx, st); err != nil {
		return ctrl.Result{}, true, err
	}
	logger.Info("paused", "snapshot", name)
	return ctrl.Result{}, true, nil
}

// resume turns a Paused batch to Resuming; the sync that follows makes the
// pod from the snapshot images.
func (r *Reconciler) resume(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox) error {
	if bsbx.Annotations[AnnotationPauseSnapshot] != "" {
		orig := bsbx.DeepCopy()
		delete(bsbx.Annotations, AnnotationPauseSnapshot)
		if err := r.Client.Patch(ctx, bsbx, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("clearing the pause snapshot: %w", err)
		}
	}
	st := bsbx.Status.DeepCopy()
	st.Phase = sandboxv1alpha1.BatchSandboxPhaseResuming
	st.PauseObservedGeneration = bsbx.Generation
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sandboxv1alpha1.BatchSandboxConditionPaused,
		Status: metav1.ConditionFalse, Reason: ReasonResuming, Message: "resuming from the snapshot images", ObservedGeneration: bsbx.Generation})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sandboxv1alpha1.BatchSandboxConditionResumeFailed,
		Status: metav1.ConditionFalse, Reason: ReasonResuming, Message: "resuming", ObservedGeneration: bsbx.Generation})
	log.FromContext(ctx).Info("resuming")
	return r.updateStatus(ctx, bsbx, st)
}

// updateStatus writes st as bsbx's status when it differs.
func (r *Reconciler) updateStatus(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox, st *sandboxv1alpha1.BatchSandboxStatus) error {
	if equality.Semantic.DeepEqual(*st, bsbx.Status) {
		return nil
	}
	bsbx.Status = *st
	if err := r.Client.Status().Update(ctx, bsbx); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// deletePods deletes the pods bsbx controls and returns how many still
// exist (being deleted).
func (r *Reconciler) deletePods(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox) (int, error) {
	pods, err := listPods(ctx, r.APIReader, bsbx)
	if err != nil {
		return 0, err
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}, client.GracePeriodSeconds(podDeleteGrace))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, fmt.Errorf("releasing pod %s: %w", p.Name, err)
		}
		log.FromContext(ctx).Info("pausing: released pod", "pod", p.Name)
	}
	return len(pods), nil
}

// applyResume gives pod the snapshot images recorded by the last pause, if
// any, and the resume pull secret.
func (r *Reconciler) applyResume(bsbx *sandboxv1alpha1.BatchSandbox, pod *corev1.Pod) error {
	raw := bsbx.Annotations[AnnotationResumeImages]
	if raw == "" {
		return nil
	}
	var images map[string]string
	if err := json.Unmarshal([]byte(raw), &images); err != nil {
		return fmt.Errorf("annotation %s: want {\"container\":\"image\"}: %w", AnnotationResumeImages, err)
	}
	for i := range pod.Spec.Containers {
		if img := images[pod.Spec.Containers[i].Name]; img != "" {
			pod.Spec.Containers[i].Image = img
		}
	}
	if s := r.Pause.ResumePullSecret; s != "" {
		for _, ref := range pod.Spec.ImagePullSecrets {
			if ref.Name == s {
				return nil
			}
		}
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return nil
}
