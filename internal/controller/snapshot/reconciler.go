// Package snapshot is the reconciler of SandboxSnapshots: it commits the
// root filesystems of a BatchSandbox's pod to images by running the image
// committer (cmd/image-committer) as a Job on the pod's node, reads the
// pushed images from the Job pod's termination message into status, and
// removes the Job.
//
// It is level-based and idempotent. The pod to commit is recorded in status
// (sourcePodName, sourceNodeName) before the Job is made, and the Job's
// name is a function of the snapshot's, so a controller restarted at any
// point finds the Job it made rather than making a second one. A finalizer
// removes the Job when a snapshot is deleted mid-commit; pushed images stay
// in the registry.
package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/opensandbox-go/opensandbox/internal/committer"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// The permissions the snapshot reconciler needs; controller-gen turns them
// into deploy/controller/rbac/role.yaml (make generate).
//
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=sandboxsnapshots,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=sandboxsnapshots/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=sandboxsnapshots/finalizers,verbs=update
// +kubebuilder:rbac:groups=sandbox.opensandbox.io,resources=batchsandboxes,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// ControllerName names the controller in logs and metrics.
const ControllerName = "sandboxsnapshot"

// Finalizer on a SandboxSnapshot holds its deletion until its commit Job
// is gone.
const Finalizer = "sandbox-snapshot.sandbox.opensandbox.io/commit-cleanup"

// Condition reasons set by this controller.
const (
	ReasonCommitted     = "Committed"
	ReasonCommitting    = "Committing"
	ReasonWaitingForPod = "WaitingForPod"
	ReasonCommitFailed  = "CommitFailed"
	ReasonTimedOut      = "CommitTimedOut"
	ReasonSourceInvalid = "SourceInvalid"
	ReasonNotFailed     = "NotFailed"
)

// Defaults of Config.
const (
	DefaultCommitterImage   = "opensandbox/image-committer:latest"
	DefaultCommitJobTimeout = 10 * time.Minute
	DefaultContainerdSocket = "/run/containerd/containerd.sock"
)

// pollInterval is how often a snapshot waiting for its sandbox's pod to run
// looks again.
const pollInterval = 2 * time.Second

// jobGrace is how long past the commit timeout the controller waits for
// the Job to report before failing the snapshot itself.
const jobGrace = 30 * time.Second

// Config is where and how snapshots are committed (the controller's
// --snapshot-* flags).
type Config struct {
	// Registry is the registry and optional path prefix images are pushed
	// under ("127.0.0.1:5000", "registry.example/sandboxes"). Empty
	// disables snapshots: they fail with a message saying so.
	Registry string
	// RegistryInsecure pushes over plain HTTP.
	RegistryInsecure bool
	// PushSecret names a kubernetes.io/dockerconfigjson Secret, in the
	// snapshot's namespace, with the registry's credentials.
	PushSecret string
	// CommitterImage is the image of the commit Job.
	CommitterImage string
	// CommitJobTimeout bounds one commit, from the Job's creation (and the
	// wait for the sandbox's pod to run).
	CommitJobTimeout time.Duration
	// ContainerdSocket is containerd's socket on the nodes.
	ContainerdSocket string
}

func (c Config) withDefaults() Config {
	if c.CommitterImage == "" {
		c.CommitterImage = DefaultCommitterImage
	}
	if c.CommitJobTimeout <= 0 {
		c.CommitJobTimeout = DefaultCommitJobTimeout
	}
	if c.ContainerdSocket == "" {
		c.ContainerdSocket = DefaultContainerdSocket
	}
	return c
}

// Reconciler reconciles SandboxSnapshots.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Config    Config
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// SetupWithManager registers the reconciler with mgr: it watches
// SandboxSnapshots, the Jobs they own and those Jobs' pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	r.Config = r.Config.withDefaults()
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&sandboxv1alpha1.SandboxSnapshot{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name := o.GetLabels()[sandboxv1alpha1.LabelSandboxSnapshotName]
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		})).
		Complete(r)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// JobName is the commit Job of snapshot name: "commit-<name>", shortened
// with a hash when that is longer than a label value may be (the Job's pods
// carry it in a label).
func JobName(snapshot string) string {
	name := "commit-" + snapshot
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(snapshot))
	return strings.TrimRight(name[:52], "-.") + "-" + hex.EncodeToString(sum[:])[:10]
}

// ImageRef is the reference container's root filesystem of sandbox is
// pushed to for snapshot: <registry>/<namespace>/<sandbox>:<snapshot>-<container>,
// the tag shortened with a hash beyond 128 characters.
func ImageRef(registry, namespace, sandbox, snapshot, container string) string {
	tag := snapshot + "-" + container
	if len(tag) > 128 {
		sum := sha256.Sum256([]byte(tag))
		tag = strings.TrimRight(tag[:117], "-.") + "-" + hex.EncodeToString(sum[:])[:10]
	}
	return fmt.Sprintf("%s/%s/%s:%s", strings.TrimRight(registry, "/"), namespace, sandbox, tag)
}

// Reconcile moves one SandboxSnapshot along Pending → Committing →
// Succeed or Failed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var snap sandboxv1alpha1.SandboxSnapshot
	if err := r.Client.Get(ctx, req.NamespacedName, &snap); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	res, err := r.reconcile(ctx, &snap)
	if err != nil {
		if ctx.Err() != nil {
			return ctrl.Result{}, nil
		}
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, snap *sandboxv1alpha1.SandboxSnapshot) (ctrl.Result, error) {
	if snap.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(snap, Finalizer) {
			return ctrl.Result{}, nil
		}
		if err := r.deleteJob(ctx, snap); err != nil {
			return ctrl.Result{}, err
		}
		orig := snap.DeepCopy()
		controllerutil.RemoveFinalizer(snap, Finalizer)
		if err := r.Client.Patch(ctx, snap, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("removing the finalizer: %w", client.IgnoreNotFound(err))
		}
		return ctrl.Result{}, nil
	}
	switch snap.Status.Phase {
	case sandboxv1alpha1.SandboxSnapshotPhaseSucceed, sandboxv1alpha1.SandboxSnapshotPhaseFailed:
		// Done; the Job may outlive a controller that stopped between
		// writing the status and deleting it.
		return ctrl.Result{}, r.deleteJob(ctx, snap)
	}
	if !controllerutil.ContainsFinalizer(snap, Finalizer) {
		orig := snap.DeepCopy()
		controllerutil.AddFinalizer(snap, Finalizer)
		if err := r.Client.Patch(ctx, snap, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	if r.Config.Registry == "" {
		return ctrl.Result{}, r.fail(ctx, snap, ReasonSourceInvalid, "snapshots are disabled: the controller runs without --snapshot-registry")
	}
	if snap.Status.SourcePodName == "" {
		return r.pickSource(ctx, snap)
	}
	return r.commit(ctx, snap)
}

// pickSource finds the running pod of the snapshot's sandbox and records it
// in status (phase Committing), or waits for it (phase Pending).
func (r *Reconciler) pickSource(ctx context.Context, snap *sandboxv1alpha1.SandboxSnapshot) (ctrl.Result, error) {
	waited := r.now().Sub(snap.CreationTimestamp.Time)
	pod, why, fatal, err := r.sourcePod(ctx, snap)
	if err != nil {
		return ctrl.Result{}, err
	}
	if fatal != "" {
		return ctrl.Result{}, r.fail(ctx, snap, ReasonSourceInvalid, fatal)
	}
	if pod == nil {
		if waited > r.Config.CommitJobTimeout {
			return ctrl.Result{}, r.fail(ctx, snap, ReasonTimedOut, fmt.Sprintf("no running pod to commit within %s: %s", r.Config.CommitJobTimeout, why))
		}
		if r.setStatus(snap, sandboxv1alpha1.SandboxSnapshotPhasePending, ReasonWaitingForPod, why) {
			if err := r.Client.Status().Update(ctx, snap); err != nil {
				return ctrl.Result{}, fmt.Errorf("updating status: %w", err)
			}
		}
		return ctrl.Result{RequeueAfter: pollInterval}, nil
	}
	snap.Status.SourcePodName = pod.Name
	snap.Status.SourceNodeName = pod.Spec.NodeName
	r.setStatus(snap, sandboxv1alpha1.SandboxSnapshotPhaseCommitting, ReasonCommitting,
		fmt.Sprintf("committing pod %s on node %s", pod.Name, pod.Spec.NodeName))
	if err := r.Client.Status().Update(ctx, snap); err != nil {
		return ctrl.Result{}, fmt.Errorf("recording the source pod: %w", err)
	}
	return r.commit(ctx, snap)
}

// sourcePod returns the sandbox's one running pod, or nil and why there is
// none yet, or why the sandbox cannot be committed at all (fatal).
func (r *Reconciler) sourcePod(ctx context.Context, snap *sandboxv1alpha1.SandboxSnapshot) (pod *corev1.Pod, why, fatal string, err error) {
	var bsbx sandboxv1alpha1.BatchSandbox
	key := types.NamespacedName{Namespace: snap.Namespace, Name: snap.Spec.SandboxName}
	if err := r.Client.Get(ctx, key, &bsbx); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Sprintf("BatchSandbox %s not found", key.Name), nil
		}
		return nil, "", "", fmt.Errorf("reading BatchSandbox %s: %w", key.Name, err)
	}
	alloc, err := sandboxv1alpha1.GetAllocation(&bsbx, sandboxv1alpha1.AnnotationAllocStatus)
	if err != nil {
		return nil, err.Error(), "", nil
	}
	switch len(alloc.Pods) {
	case 0:
		return nil, fmt.Sprintf("BatchSandbox %s has no pod", bsbx.Name), "", nil
	case 1:
	default:
		return nil, "", fmt.Sprintf("BatchSandbox %s has %d pods; a snapshot commits a sandbox of one", bsbx.Name, len(alloc.Pods)), nil
	}
	var p corev1.Pod
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: snap.Namespace, Name: alloc.Pods[0]}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("pod %s does not exist", alloc.Pods[0]), "", nil
		}
		return nil, "", "", fmt.Errorf("reading pod %s: %w", alloc.Pods[0], err)
	}
	if why := notCommittable(&p); why != "" {
		return nil, why, "", nil
	}
	return &p, "", "", nil
}

// notCommittable says why pod cannot be committed now, or "".
func notCommittable(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return fmt.Sprintf("pod %s is being deleted", pod.Name)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
		return fmt.Sprintf("pod %s is %s, not running", pod.Name, pod.Status.Phase)
	}
	ids := containerIDs(pod)
	for _, c := range pod.Spec.Containers {
		if ids[c.Name] == "" {
			return fmt.Sprintf("container %s of pod %s has not started", c.Name, pod.Name)
		}
	}
	return ""
}

func containerIDs(pod *corev1.Pod) map[string]string {
	ids := make(map[string]string, len(pod.Status.ContainerStatuses))
	for _, s := range pod.Status.ContainerStatuses {
		ids[s.Name] = s.ContainerID
	}
	return ids
}

// commit makes the commit Job if it does not exist and reads its outcome.
func (r *Reconciler) commit(ctx context.Context, snap *sandboxv1alpha1.SandboxSnapshot) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var job batchv1.Job
	jobKey := types.NamespacedName{Namespace: snap.Namespace, Name: JobName(snap.Name)}
	err := r.Client.Get(ctx, jobKey, &job)
	if apierrors.IsNotFound(err) {
		// The cache may not have the Job this controller made a moment
		// ago; ask the apiserver before making one.
		err = r.APIReader.Get(ctx, jobKey, &job)
	}
	switch {
	case apierrors.IsNotFound(err):
		var pod corev1.Pod
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: snap.Namespace, Name: snap.Status.SourcePodName}, &pod); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, r.fail(ctx, snap, ReasonCommitFailed, fmt.Sprintf("pod %s went away before it was committed", snap.Status.SourcePodName))
			}
			return ctrl.Result{}, fmt.Errorf("reading pod %s: %w", snap.Status.SourcePodName, err)
		}
		if why := notCommittable(&pod); why != "" {
			return ctrl.Result{}, r.fail(ctx, snap, ReasonCommitFailed, why)
		}
		if name := r.Config.PushSecret; name != "" {
			var secret corev1.Secret
			if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: snap.Namespace, Name: name}, &secret); err != nil {
				if apierrors.IsNotFound(err) {
					return ctrl.Result{}, r.fail(ctx, snap, ReasonSourceInvalid, fmt.Sprintf("the push secret %s (--snapshot-push-secret) does not exist in namespace %s", name, snap.Namespace))
				}
				return ctrl.Result{}, fmt.Errorf("reading the push secret %s: %w", name, err)
			}
			if _, ok := secret.Data[corev1.DockerConfigJsonKey]; !ok {
				return ctrl.Result{}, r.fail(ctx, snap, ReasonSourceInvalid, fmt.Sprintf("the push secret %s has no %s key", name, corev1.DockerConfigJsonKey))
			}
		}
		newJob, err := r.newJob(snap, &pod)
		if err != nil {
			return ctrl.Result{}, r.fail(ctx, snap, ReasonSourceInvalid, err.Error())
		}
		if err := r.Client.Create(ctx, newJob); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("creating the commit job: %w", err)
		}
		logger.Info("created commit job", "job", newJob.Name, "node", pod.Spec.NodeName)
		return ctrl.Result{RequeueAfter: r.Config.CommitJobTimeout + jobGrace}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the commit job: %w", err)
	}
	if !metav1.IsControlledBy(&job, snap) {
		return ctrl.Result{}, r.fail(ctx, snap, ReasonSourceInvalid, fmt.Sprintf("job %s exists and does not belong to this snapshot", job.Name))
	}

	done, ok, msg, err := r.outcome(ctx, snap, &job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !done {
		left := job.CreationTimestamp.Add(r.Config.CommitJobTimeout + jobGrace).Sub(r.now())
		if left <= 0 {
			return ctrl.Result{}, r.fail(ctx, snap, ReasonTimedOut, fmt.Sprintf("the commit job %s did not finish within %s", job.Name, r.Config.CommitJobTimeout))
		}
		return ctrl.Result{RequeueAfter: left}, nil
	}
	if !ok {
		return ctrl.Result{}, r.fail(ctx, snap, ReasonCommitFailed, msg)
	}
	res, err := committer.ParseResult(msg)
	if err != nil {
		return ctrl.Result{}, r.fail(ctx, snap, ReasonCommitFailed, err.Error())
	}
	if res.Error != "" || len(res.Containers) == 0 {
		return ctrl.Result{}, r.fail(ctx, snap, ReasonCommitFailed, "the committer succeeded without a result: "+res.Error)
	}
	snap.Status.Containers = snap.Status.Containers[:0]
	for _, c := range res.Containers {
		snap.Status.Containers = append(snap.Status.Containers, sandboxv1alpha1.ContainerSnapshot{
			ContainerName: c.ContainerName, ImageURI: c.ImageURI, ImageDigest: c.ImageDigest,
		})
	}
	r.setStatus(snap, sandboxv1alpha1.SandboxSnapshotPhaseSucceed, ReasonCommitted,
		fmt.Sprintf("%d container image(s) pushed", len(res.Containers)))
	if err := r.Client.Status().Update(ctx, snap); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating status: %w", err)
	}
	logger.Info("snapshot committed", "images", len(res.Containers))
	return ctrl.Result{}, r.deleteJob(ctx, snap)
}

// outcome reads the Job's result: whether it is over, whether it succeeded,
// and the committer's termination message (or why it failed). The Job's
// pod is read first, as it reports before the Job does.
func (r *Reconciler) outcome(ctx context.Context, snap *sandboxv1alpha1.SandboxSnapshot, job *batchv1.Job) (done, ok bool, msg string, err error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(snap.Namespace),
		client.MatchingLabels{sandboxv1alpha1.LabelSandboxSnapshotName: snap.Name}); err != nil {
		return false, false, "", fmt.Errorf("listing the commit job's pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if owner := metav1.GetControllerOf(p); owner == nil || owner.UID != job.UID {
			continue
		}
		for _, s := range p.Status.ContainerStatuses {
			if w := s.State.Waiting; s.Name == "commit" && w != nil && cannotStart[w.Reason] {
				return true, false, fmt.Sprintf("the commit job's pod cannot start: %s: %s", w.Reason, w.Message), nil
			}
			t := s.State.Terminated
			if s.Name != "commit" || t == nil {
				continue
			}
			if t.ExitCode == 0 {
				return true, true, t.Message, nil
			}
			why := fmt.Sprintf("the committer exited with code %d (%s)", t.ExitCode, t.Reason)
			if res, err := committer.ParseResult(t.Message); err == nil && res.Error != "" {
				why = res.Error
			} else if strings.TrimSpace(t.Message) != "" {
				why += ": " + strings.TrimSpace(t.Message)
			}
			return true, false, why, nil
		}
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobFailed:
			return true, false, fmt.Sprintf("the commit job failed: %s: %s", c.Reason, c.Message), nil
		case batchv1.JobComplete:
			// The result lives in the pod's status only.
			return true, false, "the commit job completed but its pod, which held the result, is gone", nil
		}
	}
	return false, false, "", nil
}

// cannotStart are the reasons a container waits that do not go away by
// waiting (or not within a commit's time): the snapshot fails at once.
var cannotStart = map[string]bool{
	"ErrImageNeverPull":          true,
	"InvalidImageName":           true,
	"ImagePullBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
}

// newJob is the commit Job for snap's source pod.
func (r *Reconciler) newJob(snap *sandboxv1alpha1.SandboxSnapshot, pod *corev1.Pod) (*batchv1.Job, error) {
	cfg := r.Config
	ids := containerIDs(pod)
	args := []string{"--containerd-socket=/run/containerd/containerd.sock", "--namespace=k8s.io",
		fmt.Sprintf("--timeout=%s", cfg.CommitJobTimeout)}
	for _, c := range pod.Spec.Containers {
		t := committer.Target{Name: c.Name, ContainerID: ids[c.Name],
			Ref: ImageRef(cfg.Registry, snap.Namespace, snap.Spec.SandboxName, snap.Name, c.Name)}
		parsed, err := committer.ParseTarget(t.String())
		if err != nil {
			return nil, err
		}
		args = append(args, "--container="+parsed.String())
	}
	if cfg.RegistryInsecure {
		args = append(args, "--plain-http")
	}
	volumes := []corev1.Volume{{Name: "containerd", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: cfg.ContainerdSocket, Type: ptr.To(corev1.HostPathSocket)}}}}
	mounts := []corev1.VolumeMount{{Name: "containerd", MountPath: "/run/containerd/containerd.sock"}}
	if cfg.PushSecret != "" {
		volumes = append(volumes, corev1.Volume{Name: "registry-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: cfg.PushSecret,
			Items:      []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}},
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "registry-auth", MountPath: "/etc/image-committer", ReadOnly: true})
		args = append(args, "--registry-config=/etc/image-committer/config.json")
	}
	labels := map[string]string{sandboxv1alpha1.LabelSandboxSnapshotName: snap.Name}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: JobName(snap.Name), Namespace: snap.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(snap, sandboxv1alpha1.GroupVersion.WithKind("SandboxSnapshot"))},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To(int64(cfg.CommitJobTimeout / time.Second)),
			// A safety net: the controller deletes the Job once it has
			// read it.
			TTLSecondsAfterFinished: ptr.To[int32](3600),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					// On the sandbox's node, whatever its taints.
					NodeName:    pod.Spec.NodeName,
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					// The node's network: registries the node can reach
					// (a node-local one on 127.0.0.1 too).
					HostNetwork:                  true,
					DNSPolicy:                    corev1.DNSClusterFirstWithHostNet,
					AutomountServiceAccountToken: ptr.To(false),
					Containers: []corev1.Container{{
						Name: "commit", Image: cfg.CommitterImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Args: args, VolumeMounts: mounts,
						// Root, for containerd's socket; the work is
						// done by containerd itself.
						SecurityContext:          &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)},
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
					Volumes: volumes,
				},
			},
		},
	}, nil
}

// fail records a failed snapshot and removes its Job.
func (r *Reconciler) fail(ctx context.Context, snap *sandboxv1alpha1.SandboxSnapshot, reason, msg string) error {
	r.setStatus(snap, sandboxv1alpha1.SandboxSnapshotPhaseFailed, reason, msg)
	if err := r.Client.Status().Update(ctx, snap); err != nil {
		return fmt.Errorf("recording the failure %q: %w", msg, err)
	}
	log.FromContext(ctx).Info("snapshot failed", "reason", reason, "message", msg)
	return r.deleteJob(ctx, snap)
}

// setStatus sets phase and the Ready and Failed conditions; it reports
// whether anything changed.
func (r *Reconciler) setStatus(snap *sandboxv1alpha1.SandboxSnapshot, phase sandboxv1alpha1.SandboxSnapshotPhase, reason, msg string) bool {
	before := snap.Status.DeepCopy()
	st := &snap.Status
	st.Phase = phase
	st.ObservedGeneration = snap.Generation
	ready, failed := metav1.ConditionFalse, metav1.ConditionFalse
	failReason, failMsg := ReasonNotFailed, "the snapshot has not failed"
	switch phase {
	case sandboxv1alpha1.SandboxSnapshotPhaseSucceed:
		ready = metav1.ConditionTrue
	case sandboxv1alpha1.SandboxSnapshotPhaseFailed:
		failed, failReason, failMsg = metav1.ConditionTrue, reason, msg
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sandboxv1alpha1.SandboxSnapshotConditionReady,
		Status: ready, Reason: reason, Message: msg, ObservedGeneration: snap.Generation})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sandboxv1alpha1.SandboxSnapshotConditionFailed,
		Status: failed, Reason: failReason, Message: failMsg, ObservedGeneration: snap.Generation})
	return !equalStatus(before, st)
}

func equalStatus(a, b *sandboxv1alpha1.SandboxSnapshotStatus) bool {
	if a.Phase != b.Phase || a.ObservedGeneration != b.ObservedGeneration || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return true
}

// deleteJob removes the snapshot's commit Job and its pods, if any.
func (r *Reconciler) deleteJob(ctx context.Context, snap *sandboxv1alpha1.SandboxSnapshot) error {
	var job batchv1.Job
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: snap.Namespace, Name: JobName(snap.Name)}, &job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the commit job %s: %w", JobName(snap.Name), err)
	}
	// A job of that name that this snapshot does not control (someone
	// else's) is left alone; the UID precondition keeps a job made
	// anew since the read from being deleted in its place.
	if !metav1.IsControlledBy(&job, snap) {
		return nil
	}
	uid := job.UID
	err = r.Client.Delete(ctx, &job, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting the commit job %s: %w", job.Name, err)
	}
	return nil
}
