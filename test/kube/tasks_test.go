package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// TestOperatorTasks runs a BatchSandbox of two replicas with a task: the
// task writes a file in the sandbox container and exits 0, and replica 1's
// shard patch makes it exit 3. The status counts one succeeded and one
// failed task, and the files are read back through execd in the sandbox
// containers (so the task really ran there, not in the executor's
// sidecar). Deleting the BatchSandbox goes through the task-cleanup
// finalizer.
func TestOperatorTasks(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
	defer cancel()

	replicas := int32(2)
	bsbx := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tasks"},
		Spec: sandboxv1alpha1.BatchSandboxSpec{
			Replicas: &replicas,
			Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr(int64(0)),
				Volumes:                       []corev1.Volume{{Name: "execd", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				InitContainers: []corev1.Container{{
					Name: "install-execd", Image: execdImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Args:         []string{"install", "/opt/opensandbox"},
					VolumeMounts: []corev1.VolumeMount{{Name: "execd", MountPath: "/opt/opensandbox"}},
				}},
				Containers: []corev1.Container{{
					Name: "main", Image: baseImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Command:      []string{"/opt/opensandbox/execd"},
					Env:          []corev1.EnvVar{{Name: "GREETING", Value: "from the sandbox"}},
					VolumeMounts: []corev1.VolumeMount{{Name: "execd", MountPath: "/opt/opensandbox"}},
				}},
			}},
			TaskTemplate: &sandboxv1alpha1.TaskTemplateSpec{Spec: sandboxv1alpha1.TaskSpec{Process: &sandboxv1alpha1.ProcessTask{
				Command:    []string{"sh", "-c"},
				Args:       []string{`printf '%s %s' "$GREETING" "$(pwd)" > /tmp/task-out`},
				WorkingDir: "/tmp",
			}}},
			ShardTaskPatches: []runtime.RawExtension{
				{Raw: []byte(`{}`)},
				{Raw: []byte(`{"spec":{"process":{"args":["printf '%s %s' \"$GREETING\" \"$(pwd)\" > /tmp/task-out; exit 3"]}}}`)},
			},
		},
	}
	if err := cl.Create(ctx, bsbx); err != nil {
		t.Fatalf("create BatchSandbox: %v", err)
	}
	// The task-cleanup finalizer needs the controller: should the test stop
	// early, delete the BatchSandbox while it still runs (cleanups run last
	// registered first), or the namespace would never finish terminating.
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		b := &sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tasks"}}
		if err := cl.Delete(cctx, b); apierrors.IsNotFound(err) {
			return
		}
		_ = wait.PollUntilContextCancel(cctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKeyFromObject(b), b)), nil
		})
	})
	start := time.Now()
	var ips []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(bsbx), bsbx); err != nil {
			return false, err
		}
		got, err := sandboxv1alpha1.Endpoints(bsbx)
		if err != nil {
			return false, err
		}
		ips = got
		s := bsbx.Status
		return len(ips) == 2 && s.TaskSucceed == 1 && s.TaskFailed == 1, nil
	})
	if err != nil {
		s := bsbx.Status
		for i := range 2 {
			name := fmt.Sprintf("tasks-%d", i)
			pod, _ := c.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			t.Logf("pod %s:\n%s", name, c.describe(ns, name, pod))
		}
		t.Fatalf("want 1 succeeded and 1 failed task: %v (running %d succeed %d failed %d pending %d unknown %d, endpoints %q)",
			err, s.TaskRunning, s.TaskSucceed, s.TaskFailed, s.TaskPending, s.TaskUnknown, ips)
	}
	t.Logf("tasks counted 1 succeeded, 1 failed %v after create", time.Since(start).Round(time.Millisecond))
	if s := bsbx.Status; s.TaskRunning != 0 || s.TaskPending != 0 || s.TaskUnknown != 0 {
		t.Errorf("status: running %d pending %d unknown %d, want 0", s.TaskRunning, s.TaskPending, s.TaskUnknown)
	}
	for i, ip := range ips {
		got := execdDownload(ctx, t, ip, "/tmp/task-out")
		if want := "from the sandbox /tmp"; got != want {
			t.Errorf("replica %d: /tmp/task-out through execd = %q, want %q", i, got, want)
		}
	}

	// Deleting waits for the executors to stop the tasks (the finalizer),
	// then the BatchSandbox goes.
	start = time.Now()
	if err := cl.Delete(ctx, bsbx); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(bsbx), bsbx)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("BatchSandbox not gone after delete: %v (finalizers %v)", err, bsbx.Finalizers)
	}
	t.Logf("BatchSandbox gone %v after delete", time.Since(start).Round(time.Millisecond))
}
