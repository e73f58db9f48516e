package snapshot

// These tests run the reconciler on a real kube-apiserver and etcd
// (internal/kubetest), with no kubelet and no Job controller: the tests
// write the sandbox pod's status and make the commit Job's pod (with its
// termination message) themselves, standing in for them.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
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

	"github.com/opensandbox-go/opensandbox/internal/committer"
	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

const waitTimeout = 60 * time.Second

func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, waitTimeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

var testConfig = Config{
	Registry: "127.0.0.1:5000", RegistryInsecure: true, PushSecret: "push",
	CommitterImage: "committer:test", CommitJobTimeout: time.Minute, ContainerdSocket: "/var/lib/test/containerd.sock",
}

// clock is a settable offset from the real time.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func start(t *testing.T, env *kubetest.Env, ns string, clk *clock) func() {
	t.Helper()
	return kubetest.StartManager(t, env, ns, func(mgr ctrl.Manager) error {
		return (&Reconciler{Config: testConfig, Now: clk.now}).SetupWithManager(mgr)
	})
}

// sandbox makes BatchSandbox name with one pod, running on node-a with
// container "sandbox" started as containerd ID cid (running false: the pod
// is Pending).
func sandbox(t *testing.T, c client.Client, ns, name, cid string, running bool) *corev1.Pod {
	t.Helper()
	podName := name + "-0"
	bsbx := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{sandboxv1alpha1.AnnotationAllocStatus: `{"pods":["` + podName + `"]}`}},
		Spec: sandboxv1alpha1.BatchSandboxSpec{Replicas: ptr.To[int32](1), Template: &corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sandbox", Image: "opensandbox/base:latest"}}}}},
	}
	if err := c.Create(ctxT(t), bsbx); err != nil {
		t.Fatalf("creating BatchSandbox: %v", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "push", Namespace: ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	if err := c.Create(ctxT(t), secret); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the push secret: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{
			{Name: "sandbox", Image: "opensandbox/base:latest"}, {Name: "sidecar", Image: "opensandbox/egress:latest"}}},
	}
	if err := c.Create(ctxT(t), pod); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	if running {
		setRunning(t, c, pod, cid)
	}
	return pod
}

func setRunning(t *testing.T, c client.Client, pod *corev1.Pod, cid string) {
	t.Helper()
	if err := c.Get(ctxT(t), client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "sandbox", ContainerID: "containerd://" + cid, Image: "opensandbox/base:latest", ImageID: "sha256:1", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}},
		{Name: "sidecar", ContainerID: "containerd://side-" + cid, Image: "opensandbox/egress:latest", ImageID: "sha256:2", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}},
	}
	if err := c.Status().Update(ctxT(t), pod); err != nil {
		t.Fatalf("setting pod status: %v", err)
	}
}

func newSnapshot(t *testing.T, c client.Client, ns, name, sandbox string) {
	t.Helper()
	snap := &sandboxv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: sandboxv1alpha1.SandboxSnapshotSpec{SandboxName: sandbox}}
	if err := c.Create(ctxT(t), snap); err != nil {
		t.Fatalf("creating snapshot: %v", err)
	}
}

func getSnap(t *testing.T, c client.Client, ns, name string) *sandboxv1alpha1.SandboxSnapshot {
	t.Helper()
	var s sandboxv1alpha1.SandboxSnapshot
	if err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatalf("getting snapshot: %v", err)
	}
	return &s
}

func waitPhase(t *testing.T, c client.Client, ns, name string, phase sandboxv1alpha1.SandboxSnapshotPhase) *sandboxv1alpha1.SandboxSnapshot {
	t.Helper()
	var s *sandboxv1alpha1.SandboxSnapshot
	eventually(t, "snapshot "+string(phase), func() string {
		s = getSnap(t, c, ns, name)
		if s.Status.Phase != phase {
			return fmt.Sprintf("phase %q, conditions %+v", s.Status.Phase, s.Status.Conditions)
		}
		return ""
	})
	return s
}

func waitJob(t *testing.T, c client.Client, ns, snap string) *batchv1.Job {
	t.Helper()
	var job batchv1.Job
	eventually(t, "commit job", func() string {
		if err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: JobName(snap)}, &job); err != nil {
			return err.Error()
		}
		return ""
	})
	return &job
}

func waitJobGone(t *testing.T, c client.Client, ns, snap string) {
	t.Helper()
	eventually(t, "commit job deleted", func() string {
		var job batchv1.Job
		err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: JobName(snap)}, &job)
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("still there (err %v)", err)
	})
}

// finishJob stands in for the Job controller and kubelet: a pod of job
// whose commit container exited with code and message.
func finishJob(t *testing.T, c client.Client, job *batchv1.Job, code int32, message string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x1", Namespace: job.Namespace, Labels: job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	if err := c.Create(ctxT(t), pod); err != nil {
		t.Fatalf("creating the job's pod: %v", err)
	}
	phase := corev1.PodSucceeded
	if code != 0 {
		phase = corev1.PodFailed
	}
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "commit", Image: job.Spec.Template.Spec.Containers[0].Image, ImageID: "sha256:3",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed", Message: message,
			StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}
	if err := c.Status().Update(ctxT(t), pod); err != nil {
		t.Fatalf("setting the job pod's status: %v", err)
	}
}

func condition(s *sandboxv1alpha1.SandboxSnapshot, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(s.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestSnapshotReconciler(t *testing.T) {
	env := kubetest.Start(t)
	c := env.Client

	t.Run("commit succeeds", func(t *testing.T) {
		ns := env.Namespace(t)
		clk := &clock{}
		start(t, env, ns, clk)
		sandbox(t, c, ns, "sbx", "cid1", true)
		newSnapshot(t, c, ns, "snap1", "sbx")
		job := waitJob(t, c, ns, "snap1")

		s := getSnap(t, c, ns, "snap1")
		if s.Status.Phase != sandboxv1alpha1.SandboxSnapshotPhaseCommitting || s.Status.SourcePodName != "sbx-0" || s.Status.SourceNodeName != "node-a" {
			t.Fatalf("status while committing: %+v", s.Status)
		}
		if !slices.Contains(s.Finalizers, Finalizer) {
			t.Fatalf("no finalizer: %v", s.Finalizers)
		}
		spec := job.Spec.Template.Spec
		if spec.NodeName != "node-a" || !spec.HostNetwork || *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != 60 {
			t.Fatalf("job spec: node %q hostNetwork %v", spec.NodeName, spec.HostNetwork)
		}
		if !metav1.IsControlledBy(job, s) {
			t.Fatal("the job is not controlled by the snapshot")
		}
		ctr := spec.Containers[0]
		args := strings.Join(ctr.Args, " ")
		for _, want := range []string{
			"--container=sandbox=cid1=127.0.0.1:5000/" + ns + "/sbx:snap1-sandbox",
			"--container=sidecar=side-cid1=127.0.0.1:5000/" + ns + "/sbx:snap1-sidecar",
			"--plain-http", "--registry-config=/etc/image-committer/config.json",
		} {
			if !strings.Contains(args, want) {
				t.Errorf("job args %q lack %q", args, want)
			}
		}
		if ctr.Image != "committer:test" || spec.Volumes[0].HostPath == nil || spec.Volumes[0].HostPath.Path != "/var/lib/test/containerd.sock" {
			t.Errorf("job image %q, volumes %+v", ctr.Image, spec.Volumes)
		}
		if len(spec.Volumes) != 2 || spec.Volumes[1].Secret == nil || spec.Volumes[1].Secret.SecretName != "push" {
			t.Errorf("push secret volume: %+v", spec.Volumes)
		}

		res := committer.Result{Containers: []committer.ContainerResult{
			{ContainerName: "sandbox", ImageURI: "127.0.0.1:5000/" + ns + "/sbx:snap1-sandbox", ImageDigest: "sha256:aa"},
			{ContainerName: "sidecar", ImageURI: "127.0.0.1:5000/" + ns + "/sbx:snap1-sidecar", ImageDigest: "sha256:bb"},
		}}
		finishJob(t, c, job, 0, string(res.Encode()))
		s = waitPhase(t, c, ns, "snap1", sandboxv1alpha1.SandboxSnapshotPhaseSucceed)
		if len(s.Status.Containers) != 2 || s.Status.Containers[0].ImageDigest != "sha256:aa" || s.Status.Containers[1].ContainerName != "sidecar" {
			t.Fatalf("containers %+v", s.Status.Containers)
		}
		if condition(s, "Ready").Status != metav1.ConditionTrue || condition(s, "Failed").Status != metav1.ConditionFalse {
			t.Fatalf("conditions %+v", s.Status.Conditions)
		}
		waitJobGone(t, c, ns, "snap1")
	})

	t.Run("commit fails", func(t *testing.T) {
		ns := env.Namespace(t)
		start(t, env, ns, &clock{})
		sandbox(t, c, ns, "sbx", "cid2", true)
		newSnapshot(t, c, ns, "snap2", "sbx")
		job := waitJob(t, c, ns, "snap2")
		finishJob(t, c, job, 1, string(committer.Result{Error: "container sandbox: pushing: 401 unauthorized"}.Encode()))
		s := waitPhase(t, c, ns, "snap2", sandboxv1alpha1.SandboxSnapshotPhaseFailed)
		if f := condition(s, "Failed"); f.Status != metav1.ConditionTrue || f.Reason != ReasonCommitFailed || !strings.Contains(f.Message, "401 unauthorized") {
			t.Fatalf("Failed condition %+v", f)
		}
		waitJobGone(t, c, ns, "snap2")
	})

	t.Run("committer cannot start", func(t *testing.T) {
		ns := env.Namespace(t)
		start(t, env, ns, &clock{})
		sandbox(t, c, ns, "sbx", "cid9", true)
		newSnapshot(t, c, ns, "snap9", "sbx")
		job := waitJob(t, c, ns, "snap9")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x1", Namespace: ns, Labels: job.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Spec: *job.Spec.Template.Spec.DeepCopy(),
		}
		if err := c.Create(ctxT(t), pod); err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = corev1.PodPending
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "commit", Image: "committer:test",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image committer:test is not present"}}}}
		if err := c.Status().Update(ctxT(t), pod); err != nil {
			t.Fatal(err)
		}
		s := waitPhase(t, c, ns, "snap9", sandboxv1alpha1.SandboxSnapshotPhaseFailed)
		if f := condition(s, "Failed"); !strings.Contains(f.Message, "ErrImageNeverPull") {
			t.Fatalf("Failed condition %+v", f)
		}
	})

	t.Run("job complete without its pod", func(t *testing.T) {
		ns := env.Namespace(t)
		start(t, env, ns, &clock{})
		sandbox(t, c, ns, "sbx", "cid11", true)
		newSnapshot(t, c, ns, "snap11", "sbx")
		job := waitJob(t, c, ns, "snap11")
		now := metav1.Now()
		job.Status.StartTime = &now
		job.Status.CompletionTime = &now
		job.Status.Succeeded = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		if err := c.Status().Update(ctxT(t), job); err != nil {
			t.Fatalf("setting the job's status: %v", err)
		}
		s := waitPhase(t, c, ns, "snap11", sandboxv1alpha1.SandboxSnapshotPhaseFailed)
		if f := condition(s, "Failed"); !strings.Contains(f.Message, "pod, which held the result, is gone") {
			t.Fatalf("Failed condition %+v", f)
		}
	})

	t.Run("commit times out", func(t *testing.T) {
		ns := env.Namespace(t)
		clk := &clock{}
		start(t, env, ns, clk)
		sandbox(t, c, ns, "sbx", "cid3", true)
		newSnapshot(t, c, ns, "snap3", "sbx")
		waitJob(t, c, ns, "snap3")
		clk.advance(time.Hour)
		poke(t, c, ns, "snap3")
		s := waitPhase(t, c, ns, "snap3", sandboxv1alpha1.SandboxSnapshotPhaseFailed)
		if f := condition(s, "Failed"); f.Reason != ReasonTimedOut {
			t.Fatalf("Failed condition %+v", f)
		}
		waitJobGone(t, c, ns, "snap3")
	})

	t.Run("waits for the pod, or fails", func(t *testing.T) {
		ns := env.Namespace(t)
		clk := &clock{}
		start(t, env, ns, clk)
		pod := sandbox(t, c, ns, "sbx", "cid4", false)
		newSnapshot(t, c, ns, "snap4", "sbx")
		s := waitPhase(t, c, ns, "snap4", sandboxv1alpha1.SandboxSnapshotPhasePending)
		if r := condition(s, "Ready"); r.Reason != ReasonWaitingForPod || !strings.Contains(r.Message, "not running") {
			t.Fatalf("Ready condition %+v", r)
		}
		setRunning(t, c, pod, "cid4")
		waitJob(t, c, ns, "snap4")

		newSnapshot(t, c, ns, "snap5", "no-such-sandbox")
		s = waitPhase(t, c, ns, "snap5", sandboxv1alpha1.SandboxSnapshotPhaseFailed)
		if f := condition(s, "Failed"); !strings.Contains(f.Message, "not found") {
			t.Fatalf("Failed condition %+v", f)
		}

		// A pod that never runs fails the snapshot after the timeout.
		sandbox(t, c, ns, "sbx2", "cid4b", false)
		newSnapshot(t, c, ns, "snap4b", "sbx2")
		waitPhase(t, c, ns, "snap4b", sandboxv1alpha1.SandboxSnapshotPhasePending)
		clk.advance(time.Hour)
		poke(t, c, ns, "snap4b")
		s = waitPhase(t, c, ns, "snap4b", sandboxv1alpha1.SandboxSnapshotPhaseFailed)
		if f := condition(s, "Failed"); f.Reason != ReasonTimedOut || !strings.Contains(f.Message, "no running pod") {
			t.Fatalf("Failed condition %+v", f)
		}
	})

	t.Run("restart makes no second job", func(t *testing.T) {
		ns := env.Namespace(t)
		stop := start(t, env, ns, &clock{})
		sandbox(t, c, ns, "sbx", "cid6", true)
		newSnapshot(t, c, ns, "snap6", "sbx")
		job := waitJob(t, c, ns, "snap6")
		stop()
		start(t, env, ns, &clock{})
		// Another status write brings a reconcile after the restart.
		poke(t, c, ns, "snap6")
		var jobs batchv1.JobList
		if err := c.List(ctxT(t), &jobs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 1 || jobs.Items[0].UID != job.UID {
			t.Fatalf("jobs after the restart: %d (want the one job %s)", len(jobs.Items), job.UID)
		}
		finishJob(t, c, job, 0, string(committer.Result{Containers: []committer.ContainerResult{{ContainerName: "sandbox", ImageURI: "r/x:1", ImageDigest: "sha256:cc"}}}.Encode()))
		waitPhase(t, c, ns, "snap6", sandboxv1alpha1.SandboxSnapshotPhaseSucceed)
	})

	t.Run("a recorded source without its job gets the job", func(t *testing.T) {
		// A controller that stopped between recording the source pod and
		// creating the Job.
		ns := env.Namespace(t)
		sandbox(t, c, ns, "sbx", "cid7", true)
		newSnapshot(t, c, ns, "snap7", "sbx")
		s := getSnap(t, c, ns, "snap7")
		s.Status.Phase = sandboxv1alpha1.SandboxSnapshotPhaseCommitting
		s.Status.SourcePodName, s.Status.SourceNodeName = "sbx-0", "node-a"
		if err := c.Status().Update(ctxT(t), s); err != nil {
			t.Fatal(err)
		}
		start(t, env, ns, &clock{})
		job := waitJob(t, c, ns, "snap7")
		if job.Spec.Template.Spec.NodeName != "node-a" {
			t.Fatalf("job on node %q", job.Spec.Template.Spec.NodeName)
		}
	})

	t.Run("missing push secret", func(t *testing.T) {
		ns := env.Namespace(t)
		start(t, env, ns, &clock{})
		sandbox(t, c, ns, "sbx", "cid10", true)
		if err := c.Delete(ctxT(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "push", Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
		newSnapshot(t, c, ns, "snap10", "sbx")
		s := waitPhase(t, c, ns, "snap10", sandboxv1alpha1.SandboxSnapshotPhaseFailed)
		if f := condition(s, "Failed"); !strings.Contains(f.Message, "push secret push") {
			t.Fatalf("Failed condition %+v", f)
		}
	})

	t.Run("a job of the commit name it does not own is reported and left alone", func(t *testing.T) {
		ns := env.Namespace(t)
		sandbox(t, c, ns, "sbx", "cid11", true)
		foreign := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: JobName("snap11")},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "other", Image: "someone/else"}},
			}}},
		}
		if err := c.Create(ctxT(t), foreign); err != nil {
			t.Fatal(err)
		}
		start(t, env, ns, &clock{})
		newSnapshot(t, c, ns, "snap11", "sbx")
		s := waitPhase(t, c, ns, "snap11", sandboxv1alpha1.SandboxSnapshotPhaseFailed)
		if f := condition(s, "Failed"); !strings.Contains(f.Message, "does not belong") {
			t.Fatalf("Failed condition %+v", f)
		}
		poke(t, c, ns, "snap11") // one more reconcile of the failed snapshot
		var job batchv1.Job
		if err := c.Get(ctxT(t), client.ObjectKeyFromObject(foreign), &job); err != nil || job.UID != foreign.UID || job.DeletionTimestamp != nil {
			t.Fatalf("the foreign job was touched: %v (uid %s, was %s; deleting %v)", err, job.UID, foreign.UID, job.DeletionTimestamp)
		}
	})

	t.Run("deleting a snapshot mid-commit removes its job", func(t *testing.T) {
		ns := env.Namespace(t)
		start(t, env, ns, &clock{})
		sandbox(t, c, ns, "sbx", "cid8", true)
		newSnapshot(t, c, ns, "snap8", "sbx")
		waitJob(t, c, ns, "snap8")
		if err := c.Delete(ctxT(t), getSnap(t, c, ns, "snap8")); err != nil {
			t.Fatal(err)
		}
		waitJobGone(t, c, ns, "snap8")
		eventually(t, "snapshot deleted", func() string {
			var s sandboxv1alpha1.SandboxSnapshot
			if err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: "snap8"}, &s); !apierrors.IsNotFound(err) {
				return fmt.Sprintf("still there: finalizers %v", s.Finalizers)
			}
			return ""
		})
	})
}

// poke writes an annotation on snapshot name, which makes it reconcile.
func poke(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	s := getSnap(t, c, ns, name)
	orig := s.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations["poke"] = time.Now().Format(time.RFC3339Nano)
	if err := c.Patch(ctxT(t), s, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("a", 200)
	if n := JobName("x"); n != "commit-x" {
		t.Errorf("JobName(x) = %q", n)
	}
	if n := JobName(long); len(n) > 63 || n == JobName(long+"b") {
		t.Errorf("JobName(long) = %q (%d)", n, len(n))
	}
	ref := ImageRef("127.0.0.1:5000/", "ns", "sbx", long, "main")
	tag := ref[strings.LastIndex(ref, ":")+1:]
	if !strings.HasPrefix(ref, "127.0.0.1:5000/ns/sbx:") || len(tag) > 128 {
		t.Errorf("ImageRef = %q (tag %d)", ref, len(tag))
	}
	if r := ImageRef("reg.example/p", "ns", "sbx", "s1", "main"); r != "reg.example/p/ns/sbx:s1-main" {
		t.Errorf("ImageRef = %q", r)
	}
}
