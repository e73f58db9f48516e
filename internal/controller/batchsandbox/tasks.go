package batchsandbox

// Tasks: a BatchSandbox with spec.taskTemplate runs one task in every
// replica. The controller injects the task executor (cmd/task-executor)
// into each pod as a sidecar container sharing the pod's process namespace,
// hands each ready replica its task (the template with the replica's
// shardTaskPatches entry applied as a JSON merge patch) through the
// executor's POST /setTasks, counts the task states it answers into
// status.task*, and, holding the task-cleanup finalizer, stops the tasks
// before the BatchSandbox goes.
//
// The executor runs the task inside the sandbox container: it finds that
// container's processes by the OPENSANDBOX_MAIN_CONTAINER variable injected
// into it and chroots into their root, so the task sees (and writes) the
// sandbox's filesystem, with its environment and PATH.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/opensandbox-go/opensandbox/internal/taskexecutor"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// DefaultTaskExecutorImage is the executor's image unless
// TaskOptions.ExecutorImage says otherwise.
const DefaultTaskExecutorImage = "opensandbox/task-executor:latest"

// TaskExecutorContainer is the name of the injected sidecar container.
const TaskExecutorContainer = "task-executor"

const (
	taskExecutorDataVolume = "task-executor-data"
	taskExecutorDataDir    = "/var/lib/task-executor"
	// taskCleanupGiveUp is how long a deleted BatchSandbox waits for its
	// executors to confirm their tasks stopped before the finalizer is
	// removed anyway (an executor that never answers must not keep the
	// object forever; its pod goes with the BatchSandbox regardless).
	taskCleanupGiveUp = 2 * time.Minute
)

// TaskOptions configures how the reconciler runs tasks. The zero value
// works in a cluster.
type TaskOptions struct {
	// ExecutorImage is the sidecar's image; default DefaultTaskExecutorImage.
	ExecutorImage string
	// ExecutorURL returns the base URL of pod's executor; default
	// http://<pod IP>:5758. Tests point it at executors of their own.
	ExecutorURL func(pod *corev1.Pod) string
	// HTTP is the client for executors; default one with a 5 s timeout.
	HTTP *http.Client
	// PollInterval is how often unfinished tasks are looked at (an
	// executor tells nobody when a task ends); default 2 s.
	PollInterval time.Duration
}

var defaultTaskHTTP = &http.Client{Timeout: 5 * time.Second}

func (o TaskOptions) image() string {
	if o.ExecutorImage != "" {
		return o.ExecutorImage
	}
	return DefaultTaskExecutorImage
}

func (o TaskOptions) client(pod *corev1.Pod) *taskexecutor.Client {
	url := "http://" + pod.Status.PodIP + ":" + strconv.Itoa(taskexecutor.DefaultPort)
	if o.ExecutorURL != nil {
		url = o.ExecutorURL(pod)
	}
	hc := o.HTTP
	if hc == nil {
		hc = defaultTaskHTTP
	}
	return &taskexecutor.Client{BaseURL: url, HTTP: hc}
}

func (o TaskOptions) poll() time.Duration {
	if o.PollInterval > 0 {
		return o.PollInterval
	}
	return 2 * time.Second
}

// taskFor returns the task of replica index of bsbx: spec.taskTemplate
// with spec.shardTaskPatches[index] applied as a JSON merge patch, named
// after the replica's pod.
func taskFor(bsbx *sandboxv1alpha1.BatchSandbox, index int) (taskexecutor.Task, error) {
	tmpl := bsbx.Spec.TaskTemplate
	if tmpl == nil {
		return taskexecutor.Task{}, fmt.Errorf("spec.taskTemplate is not set")
	}
	spec := tmpl.Spec
	if index < len(bsbx.Spec.ShardTaskPatches) && len(bsbx.Spec.ShardTaskPatches[index].Raw) > 0 {
		base, err := json.Marshal(tmpl)
		if err != nil {
			return taskexecutor.Task{}, fmt.Errorf("encoding spec.taskTemplate: %w", err)
		}
		patched, err := jsonpatch.MergePatch(base, bsbx.Spec.ShardTaskPatches[index].Raw)
		if err != nil {
			return taskexecutor.Task{}, fmt.Errorf("applying spec.shardTaskPatches[%d]: %w", index, err)
		}
		var out sandboxv1alpha1.TaskTemplateSpec
		if err := json.Unmarshal(patched, &out); err != nil {
			return taskexecutor.Task{}, fmt.Errorf("decoding spec.taskTemplate patched by spec.shardTaskPatches[%d]: %w", index, err)
		}
		spec = out.Spec
	}
	if spec.Process == nil || len(spec.Process.Command) == 0 {
		return taskexecutor.Task{}, fmt.Errorf("replica %d: the task has no process.command", index)
	}
	p := spec.Process
	return taskexecutor.Task{
		Name: PodName(bsbx.Name, index),
		Process: &taskexecutor.Process{
			Command: p.Command, Args: p.Args, Env: p.Env, WorkingDir: p.WorkingDir,
			TimeoutSeconds: spec.TimeoutSeconds,
		},
	}, nil
}

// injectTaskExecutor adds the executor sidecar to pod when bsbx has tasks:
// the pod shares its process namespace, the first container (the sandbox)
// is marked for the executor to find, and the executor keeps its state in
// an emptyDir so that a restart of its container loses no task.
func injectTaskExecutor(bsbx *sandboxv1alpha1.BatchSandbox, pod *corev1.Pod, image string) {
	if bsbx.Spec.TaskTemplate == nil || len(pod.Spec.Containers) == 0 {
		return
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == TaskExecutorContainer {
			return
		}
	}
	share := true
	pod.Spec.ShareProcessNamespace = &share
	main := &pod.Spec.Containers[0]
	main.Env = append(main.Env, corev1.EnvVar{Name: taskexecutor.MainContainerEnv, Value: main.Name})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name: taskExecutorDataVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
	})
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
		Name:            TaskExecutorContainer,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Env: []corev1.EnvVar{
			{Name: "LISTEN_ADDR", Value: ":" + strconv.Itoa(taskexecutor.DefaultPort)},
			{Name: "DATA_DIR", Value: taskExecutorDataDir},
			{Name: "ENABLE_SIDECAR_MODE", Value: "true"},
			{Name: "MAIN_CONTAINER_NAME", Value: main.Name},
		},
		Ports:        []corev1.ContainerPort{{Name: "task-executor", ContainerPort: taskexecutor.DefaultPort}},
		VolumeMounts: []corev1.VolumeMount{{Name: taskExecutorDataVolume, MountPath: taskExecutorDataDir}},
	})
}

// taskCounts are the status counters.
type taskCounts struct{ running, succeeded, failed, pending, unknown int32 }

func (c *taskCounts) add(s taskexecutor.State) {
	switch s {
	case taskexecutor.StateRunning:
		c.running++
	case taskexecutor.StateSucceeded:
		c.succeeded++
	case taskexecutor.StateFailed:
		c.failed++
	case taskexecutor.StatePending:
		c.pending++
	default:
		c.unknown++
	}
}

// maxTaskCalls bounds the executors called at once by one reconcile.
const maxTaskCalls = 16

// syncTasks hands each ready replica of bsbx its task and writes the task
// counters into st. It adds the task-cleanup finalizer first. The result
// asks for another look while some task is unfinished.
func (r *Reconciler) syncTasks(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox, obs observation, pods podSet, st *sandboxv1alpha1.BatchSandboxStatus) (ctrl.Result, error) {
	if bsbx.Spec.TaskTemplate == nil {
		return ctrl.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(bsbx, sandboxv1alpha1.FinalizerTaskCleanup) {
		orig := bsbx.DeepCopy()
		controllerutil.AddFinalizer(bsbx, sandboxv1alpha1.FinalizerTaskCleanup)
		if err := r.Client.Patch(ctx, bsbx, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the task-cleanup finalizer: %w", err)
		}
	}
	logger := log.FromContext(ctx)
	states := make([]taskexecutor.State, obs.n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxTaskCalls)
	for i := range obs.n {
		p := obs.pods[i]
		if s, ok := obs.released[i]; ok {
			states[i] = s
			continue
		}
		switch {
		case p == nil || podFailure(p) != "":
			if p != nil || obs.vanished[i] {
				states[i] = "Unknown"
			} else {
				states[i] = taskexecutor.StatePending
			}
			continue
		case !podReady(p) || p.Status.PodIP == "":
			states[i] = taskexecutor.StatePending
			continue
		}
		task, err := taskFor(bsbx, i)
		if err != nil {
			logger.Info("cannot make the task of a replica", "replica", i, "error", err.Error())
			states[i] = "Unknown"
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			tasks, err := r.Tasks.client(p).SetTasks(cctx, []taskexecutor.Task{task})
			if err != nil {
				logger.Info("task executor did not take the task", "pod", p.Name, "error", err.Error())
				states[i] = "Unknown"
				return
			}
			states[i] = "Unknown"
			for j := range tasks {
				if tasks[j].Name == task.Name {
					states[i] = taskexecutor.StateOf(&tasks[j])
				}
			}
		}()
	}
	wg.Wait()
	if err := r.releaseCompleted(ctx, bsbx, obs, pods, states); err != nil {
		return ctrl.Result{}, err
	}
	var c taskCounts
	for _, s := range states {
		c.add(s)
	}
	st.TaskRunning, st.TaskSucceed, st.TaskFailed, st.TaskPending, st.TaskUnknown =
		c.running, c.succeeded, c.failed, c.pending, c.unknown
	if c.succeeded+c.failed < int32(obs.n) {
		return ctrl.Result{RequeueAfter: r.Tasks.poll()}, nil
	}
	return ctrl.Result{}, nil
}

// finalizeTasks stops the tasks of a deleted bsbx: every executor of a pod
// that still runs is given an empty task list, and the task-cleanup
// finalizer goes once each answers with no task left (or after
// taskCleanupGiveUp).
func (r *Reconciler) finalizeTasks(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	pods, err := listPods(ctx, r.Client, bsbx)
	if err != nil {
		return ctrl.Result{}, err
	}
	var mu sync.Mutex
	var pending []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxTaskCalls)
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue // no process left to stop
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			left, err := r.Tasks.client(p).SetTasks(cctx, nil)
			if err == nil && len(left) == 0 {
				return
			}
			why := fmt.Sprintf("%d task(s) stopping", len(left))
			if err != nil {
				why = err.Error()
			}
			mu.Lock()
			pending = append(pending, p.Name+": "+why)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(pending) > 0 {
		if since := r.now().Sub(bsbx.DeletionTimestamp.Time); since < taskCleanupGiveUp {
			logger.V(1).Info("waiting for tasks to stop", "pods", pending)
			return ctrl.Result{RequeueAfter: 500 * time.Millisecond}, nil
		}
		logger.Info("tasks not confirmed stopped; removing the task-cleanup finalizer anyway", "after", taskCleanupGiveUp.String(), "pods", pending)
	}
	orig := bsbx.DeepCopy()
	controllerutil.RemoveFinalizer(bsbx, sandboxv1alpha1.FinalizerTaskCleanup)
	if err := r.Client.Patch(ctx, bsbx, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("removing the task-cleanup finalizer: %w", err))
	}
	logger.Info("tasks stopped; removed the task-cleanup finalizer")
	return ctrl.Result{}, nil
}

// AnnotationTaskReleased on a BatchSandbox records the replicas whose task
// completed and whose pod was released under
// taskResourcePolicyWhenCompleted Release, as a JSON object from pod name
// to the task's final state ("Succeeded" or "Failed"), so that the counts
// survive the pods and the replicas are not made again. (Our own key: the
// upstream operator keeps this in memory.)
const AnnotationTaskReleased = "batch-sandbox.sandbox.opensandbox.io/task-released"

// releasedReplicas reads AnnotationTaskReleased of bsbx: the replicas
// below n whose pod was released, with their task's final state. An
// unreadable annotation counts as empty (and is logged).
func releasedReplicas(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox, n int) map[int]taskexecutor.State {
	raw := bsbx.Annotations[AnnotationTaskReleased]
	if raw == "" {
		return nil
	}
	var m map[string]taskexecutor.State
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		log.FromContext(ctx).Info("ignoring unreadable annotation", "annotation", AnnotationTaskReleased, "error", err.Error())
		return nil
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	out := map[int]taskexecutor.State{}
	for i := range recordedIndexes(bsbx.Name, sandboxv1alpha1.Allocation{Pods: names}) {
		if i < n {
			out[i] = m[PodName(bsbx.Name, i)]
		}
	}
	return out
}

// releaseCompleted, under taskResourcePolicyWhenCompleted Release, records
// the replicas whose task has just completed in AnnotationTaskReleased
// (first, so that a controller killed in between finds the record) and
// deletes the pods of released replicas.
func (r *Reconciler) releaseCompleted(ctx context.Context, bsbx *sandboxv1alpha1.BatchSandbox, obs observation, pods podSet, states []taskexecutor.State) error {
	if p := bsbx.Spec.TaskResourcePolicyWhenCompleted; p == nil || *p != sandboxv1alpha1.TaskResourcePolicyRelease {
		return nil
	}
	rec := map[string]taskexecutor.State{}
	if raw := bsbx.Annotations[AnnotationTaskReleased]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &rec)
	}
	added := false
	for i, s := range states {
		if _, ok := obs.released[i]; ok {
			continue
		}
		if s == taskexecutor.StateSucceeded || s == taskexecutor.StateFailed {
			rec[PodName(bsbx.Name, i)] = s
			added = true
		}
	}
	if added {
		data, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", AnnotationTaskReleased, err)
		}
		orig := bsbx.DeepCopy()
		if bsbx.Annotations == nil {
			bsbx.Annotations = map[string]string{}
		}
		bsbx.Annotations[AnnotationTaskReleased] = string(data)
		if err := r.Client.Patch(ctx, bsbx, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("recording released replicas: %w", err)
		}
	}
	for name := range rec {
		for i, p := range pods {
			if p.Name != name || p.DeletionTimestamp != nil || i >= obs.n {
				continue
			}
			if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return fmt.Errorf("releasing pod %s of a completed task: %w", p.Name, err)
			}
			log.FromContext(ctx).Info("released the pod of a completed task", "pod", p.Name, "task", rec[name])
		}
	}
	return nil
}
