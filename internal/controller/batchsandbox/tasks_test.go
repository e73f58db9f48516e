package batchsandbox

// The task tests run the reconciler on the apiserver+etcd harness with
// real task executors (internal/taskexecutor) served in-process on
// loopback: TaskOptions.ExecutorURL maps each pod to its executor in place
// of the pod's IP, and the executors run their tasks as processes of this
// machine (not in sidecar mode, there being no pod to enter).

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	"github.com/opensandbox-go/opensandbox/internal/taskexecutor"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// TestMain lets the test binary serve as the executors' per-task shim.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(taskexecutor.RunShim(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// executors opens one real executor per pod name.
func executors(t *testing.T, names ...string) map[string]*taskexecutor.Executor {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*taskexecutor.Executor{}
	for _, n := range names {
		e, err := taskexecutor.Open(taskexecutor.Config{
			DataDir: t.TempDir(), ShimCommand: []string{self, "shim"}, StopGrace: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		out[n] = e
	}
	return out
}

// startTaskManager runs the reconciler with each pod's executor served on
// loopback; a pod without one gets an address nobody answers on.
func startTaskManager(t *testing.T, env *kubetest.Env, ns string, ex map[string]*taskexecutor.Executor) {
	t.Helper()
	urls := map[string]string{}
	for name, e := range ex {
		srv := httptest.NewServer(taskexecutor.Handler(e, nil))
		t.Cleanup(srv.Close)
		urls[name] = srv.URL
	}
	r := &Reconciler{Tasks: TaskOptions{
		ExecutorURL: func(p *corev1.Pod) string {
			if u, ok := urls[p.Name]; ok {
				return u
			}
			return "http://127.0.0.1:1"
		},
		PollInterval: 100 * time.Millisecond,
	}}
	kubetest.StartManager(t, env, ns, r.SetupWithManager)
}

func TestTasks(t *testing.T) {
	env := kubetest.Start(t)
	t.Run("CountsAndShardPatches", func(t *testing.T) { testTaskCounts(t, env) })
	t.Run("CleanupFinalizer", func(t *testing.T) { testTaskCleanup(t, env) })
	t.Run("ReleasePolicy", func(t *testing.T) { testTaskRelease(t, env) })
}

func countsOf(b *sandboxv1alpha1.BatchSandbox) string {
	s := b.Status
	return fmt.Sprintf("running=%d succeed=%d failed=%d pending=%d unknown=%d",
		s.TaskRunning, s.TaskSucceed, s.TaskFailed, s.TaskPending, s.TaskUnknown)
}

func testTaskCounts(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	ex := executors(t, "tk-0", "tk-1")
	startTaskManager(t, env, ns, ex)
	c := env.Client
	out := t.TempDir()

	b := newBatch(ns, "tk", 3)
	b.Spec.TaskTemplate = &sandboxv1alpha1.TaskTemplateSpec{Spec: sandboxv1alpha1.TaskSpec{Process: &sandboxv1alpha1.ProcessTask{
		Command: []string{"sh", "-c"},
		Args:    []string{`printf "$MSG" > "$OUT/r0"`},
		Env:     []corev1.EnvVar{{Name: "MSG", Value: "hello"}, {Name: "OUT", Value: out}},
	}}}
	b.Spec.ShardTaskPatches = []runtime.RawExtension{
		{Raw: []byte(`{}`)},
		{Raw: []byte(`{"spec":{"process":{"args":["printf \"$MSG\" > \"$OUT/r1\"; exit 3"]}}}`)},
	}
	if err := c.Create(ctxT(t), b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "3 pods with the executor injected, 3 tasks pending, the finalizer", func() string {
		ps := pods(t, c, ns, "tk")
		if len(ps) != 3 {
			return fmt.Sprintf("pods %v", podNames(ps))
		}
		for _, p := range ps {
			if len(p.Spec.Containers) != 2 || p.Spec.Containers[1].Name != TaskExecutorContainer ||
				p.Spec.ShareProcessNamespace == nil || !*p.Spec.ShareProcessNamespace {
				return "pod " + p.Name + " has no task-executor sidecar sharing its process namespace"
			}
			main := p.Spec.Containers[0]
			if e := main.Env[len(main.Env)-1]; e.Name != taskexecutor.MainContainerEnv || e.Value != main.Name {
				return "pod " + p.Name + ": sandbox container not marked"
			}
		}
		got := getBatch(t, c, ns, "tk")
		if !controllerutil.ContainsFinalizer(got, sandboxv1alpha1.FinalizerTaskCleanup) {
			return "no task-cleanup finalizer"
		}
		if got.Status.TaskPending != 3 {
			return countsOf(got)
		}
		return ""
	})

	// Replicas 0 and 1 run with executors; replica 2's pod runs but its
	// executor does not answer.
	runPod(t, c, ns, "tk-0", "10.0.0.1")
	runPod(t, c, ns, "tk-1", "10.0.0.2")
	runPod(t, c, ns, "tk-2", "10.0.0.3")
	eventually(t, "1 task succeeded, 1 failed, 1 unknown", func() string {
		got := getBatch(t, c, ns, "tk")
		s := got.Status
		if s.TaskSucceed != 1 || s.TaskFailed != 1 || s.TaskUnknown != 1 || s.TaskRunning != 0 || s.TaskPending != 0 {
			return countsOf(got)
		}
		return ""
	})
	for i, want := range []int32{0, 3} {
		name := PodName("tk", i)
		task, err := ex[name].Get(name)
		if err != nil {
			t.Fatalf("executor of %s: %v", name, err)
		}
		term := task.ProcessStatus.Terminated
		if term == nil || term.ExitCode != want {
			t.Errorf("task %s: %+v, want exit code %d", name, task.ProcessStatus, want)
		}
		if data, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("r%d", i))); err != nil || string(data) != "hello" {
			t.Errorf("task %s wrote %q (%v), want hello", name, data, err)
		}
	}
}

// testTaskCleanup: deleting a BatchSandbox whose task runs stops the task
// before the BatchSandbox goes.
func testTaskCleanup(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	ex := executors(t, "tc-0")
	startTaskManager(t, env, ns, ex)
	c := env.Client
	pidFile := filepath.Join(t.TempDir(), "pid")

	b := newBatch(ns, "tc", 1)
	b.Spec.TaskTemplate = &sandboxv1alpha1.TaskTemplateSpec{Spec: sandboxv1alpha1.TaskSpec{Process: &sandboxv1alpha1.ProcessTask{
		Command: []string{"sh", "-c", "echo $$ > " + pidFile + "; exec sleep 300"},
	}}}
	if err := c.Create(ctxT(t), b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod", func() string {
		if len(pods(t, c, ns, "tc")) != 1 {
			return "no pod"
		}
		return ""
	})
	runPod(t, c, ns, "tc-0", "10.0.0.9")
	eventually(t, "the task running", func() string {
		got := getBatch(t, c, ns, "tc")
		if got.Status.TaskRunning != 1 {
			return countsOf(got)
		}
		if _, err := os.Stat(pidFile); err != nil {
			return "task has not written its pid"
		}
		return ""
	})
	if err := c.Delete(ctxT(t), getBatch(t, c, ns, "tc")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the BatchSandbox gone", func() string {
		var got sandboxv1alpha1.BatchSandbox
		err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: "tc"}, &got)
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("still there (finalizers %v, err %v)", got.Finalizers, err)
	})
	if left := ex["tc-0"].List(); len(left) != 0 {
		t.Errorf("executor still has %d task(s) after the BatchSandbox went", len(left))
	}
	data, _ := os.ReadFile(pidFile)
	if _, err := os.Stat("/proc/" + string(data[:len(data)-1]) + "/stat"); err == nil {
		stat, _ := os.ReadFile("/proc/" + string(data[:len(data)-1]) + "/stat")
		if len(stat) > 0 && !containsZombie(string(stat)) {
			t.Errorf("task process %s still runs after the BatchSandbox went", data)
		}
	}
}

// containsZombie reports whether a /proc/pid/stat line is a zombie's.
func containsZombie(stat string) bool {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			return len(stat) > i+2 && stat[i+2] == 'Z'
		}
	}
	return false
}

func TestTaskFor(t *testing.T) {
	b := newBatch("ns", "b", 3)
	b.Spec.TaskTemplate = &sandboxv1alpha1.TaskTemplateSpec{Spec: sandboxv1alpha1.TaskSpec{
		Process: &sandboxv1alpha1.ProcessTask{Command: []string{"/usr/bin/sleep"}, Args: []string{"1"}, WorkingDir: "/w"},
	}}
	b.Spec.ShardTaskPatches = []runtime.RawExtension{
		{Raw: []byte(`{"spec":{"process":{"command":["python"],"args":["-m","http.server"]}}}`)},
		{Raw: []byte(`{"spec":{"process":{"args":["456"]},"timeoutSeconds":9}}`)},
	}
	for i, want := range []string{"[python] [-m http.server] /w <nil>", "[/usr/bin/sleep] [456] /w 9", "[/usr/bin/sleep] [1] /w <nil>"} {
		task, err := taskFor(b, i)
		if err != nil {
			t.Fatal(err)
		}
		p := task.Process
		timeout := "<nil>"
		if p.TimeoutSeconds != nil {
			timeout = fmt.Sprint(*p.TimeoutSeconds)
		}
		if got := fmt.Sprintf("%v %v %s %s", p.Command, p.Args, p.WorkingDir, timeout); got != want || task.Name != PodName("b", i) {
			t.Errorf("replica %d: %s %s, want %s", i, task.Name, got, want)
		}
	}
	b.Spec.ShardTaskPatches[0] = runtime.RawExtension{Raw: []byte(`{"spec":{"process":null}}`)}
	if _, err := taskFor(b, 0); err == nil {
		t.Error("a patch removing the process: no error")
	}
}

// testTaskRelease: under taskResourcePolicyWhenCompleted Release the pod of
// a completed task is deleted and not made again, and the counts keep the
// task's outcome.
func testTaskRelease(t *testing.T, env *kubetest.Env) {
	ns := env.Namespace(t)
	ex := executors(t, "tr-0", "tr-1")
	startTaskManager(t, env, ns, ex)
	c := env.Client

	b := newBatch(ns, "tr", 2)
	release := sandboxv1alpha1.TaskResourcePolicyRelease
	b.Spec.TaskResourcePolicyWhenCompleted = &release
	b.Spec.TaskTemplate = &sandboxv1alpha1.TaskTemplateSpec{Spec: sandboxv1alpha1.TaskSpec{Process: &sandboxv1alpha1.ProcessTask{
		Command: []string{"true"},
	}}}
	b.Spec.ShardTaskPatches = []runtime.RawExtension{{Raw: []byte(`{}`)}, {Raw: []byte(`{"spec":{"process":{"command":["false"]}}}`)}}
	if err := c.Create(ctxT(t), b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 pods", func() string {
		if n := len(pods(t, c, ns, "tr")); n != 2 {
			return fmt.Sprintf("%d pods", n)
		}
		return ""
	})
	runPod(t, c, ns, "tr-0", "10.0.1.1")
	runPod(t, c, ns, "tr-1", "10.0.1.2")
	eventually(t, "both pods released, counts 1 succeeded 1 failed, phase Succeed", func() string {
		got := getBatch(t, c, ns, "tr")
		if ps := pods(t, c, ns, "tr"); len(ps) != 0 {
			return fmt.Sprintf("pods %v remain", podNames(ps))
		}
		if got.Status.TaskSucceed != 1 || got.Status.TaskFailed != 1 {
			return countsOf(got)
		}
		if got.Status.Phase != sandboxv1alpha1.BatchSandboxPhaseSucceed {
			return "phase " + string(got.Status.Phase) + "; " + condition(got, sandboxv1alpha1.BatchSandboxConditionPodFailed)
		}
		return ""
	})
	got := getBatch(t, c, ns, "tr")
	if want := `{"tr-0":"Succeeded","tr-1":"Failed"}`; got.Annotations[AnnotationTaskReleased] != want {
		t.Errorf("%s = %s, want %s", AnnotationTaskReleased, got.Annotations[AnnotationTaskReleased], want)
	}
	if ps := pods(t, c, ns, "tr"); len(ps) != 0 {
		t.Errorf("released replicas got pods again: %v", podNames(ps))
	}
}
