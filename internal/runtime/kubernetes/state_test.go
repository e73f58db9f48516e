package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func readyPod() *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.0.7",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}}
}

func waitingPod(reason, msg string) *corev1.Pod {
	p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: mainContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	return p
}

func TestStateOf(t *testing.T) {
	now := metav1.Now()
	bs := func(phase sandboxv1alpha1.BatchSandboxPhase, pause *bool, conds ...metav1.Condition) *sandboxv1alpha1.BatchSandbox {
		b := &sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
		b.Spec.Pause = pause
		b.Status.Phase = phase
		b.Status.Conditions = conds
		return b
	}
	deleting := bs("", nil)
	deleting.DeletionTimestamp = &now
	failedPod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: mainContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}}}
	for _, c := range []struct {
		name   string
		o      observed
		state  string
		reason string
	}{
		{"no pod yet", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhasePending, nil)}, sandbox.StatePending, "PodPending"},
		{"pulling", observed{bsbx: bs("", nil), pod: waitingPod("ErrImagePull", "no such image")}, sandbox.StatePending, "ErrImagePull"},
		{"running", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhaseSucceed, nil), pod: readyPod()}, sandbox.StateRunning, ""},
		{"unschedulable", observed{bsbx: bs("", nil), pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes"}}}}}, sandbox.StatePending, "Unschedulable"},
		{"pod not ready", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhasePending, nil), pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}}, sandbox.StatePending, "PodNotReady"},
		{"pod failed", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhasePending, nil), pod: failedPod}, sandbox.StateFailed, "PodFailed"},
		{"batch failed", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhaseFailed, nil, metav1.Condition{Type: sandboxv1alpha1.BatchSandboxConditionPodFailed, Reason: "PodFailed", Message: "m"})}, sandbox.StateFailed, "PodFailed"},
		{"pause asked", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhaseSucceed, ptr.To(true)), pod: readyPod()}, sandbox.StatePausing, "PauseRequested"},
		{"pausing", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhasePausing, ptr.To(true))}, sandbox.StatePausing, ""},
		{"paused", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhasePaused, ptr.To(true))}, sandbox.StatePaused, ""},
		{"resume asked", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhasePaused, ptr.To(false))}, sandbox.StateResuming, "Resuming"},
		{"resuming", observed{bsbx: bs(sandboxv1alpha1.BatchSandboxPhaseResuming, ptr.To(false))}, sandbox.StateResuming, ""},
		{"pool allocating", observed{bsbx: func() *sandboxv1alpha1.BatchSandbox {
			b := bs(sandboxv1alpha1.BatchSandboxPhasePending, nil)
			b.Spec.PoolRef = "p"
			return b
		}()}, sandbox.StatePending, "Allocating"},
		{"pool running", observed{bsbx: func() *sandboxv1alpha1.BatchSandbox {
			b := bs(sandboxv1alpha1.BatchSandboxPhaseSucceed, nil)
			b.Spec.PoolRef, b.Status.Ready = "p", 1
			return b
		}()}, sandbox.StateRunning, ""},
		{"deleting", observed{bsbx: deleting, pod: readyPod()}, sandbox.StateStopping, "Deleting"},
	} {
		st := stateOf(c.o)
		if st.state != c.state || st.reason != c.reason {
			t.Errorf("%s: %s (%s: %s), want %s (%s)", c.name, st.state, st.reason, st.message, c.state, c.reason)
		}
	}
	if st := stateOf(observed{bsbx: bs("", nil), pod: failedPod}); st.message == "" {
		t.Errorf("a failed pod's state has no message")
	}
}

func TestStartFailure(t *testing.T) {
	b := &sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	if err := startFailure(observed{bsbx: b, pod: waitingPod("ImagePullBackOff", "pull access denied")}); !errors.Is(err, runtime.ErrImagePull) ||
		!errors.Is(err, runtime.ErrInvalid) || err == nil || !strings.Contains(err.Error(), "pull access denied") {
		t.Errorf("image pull back-off: %v, want ErrImagePull with the kubelet's message", err)
	}
	if err := startFailure(observed{bsbx: b, pod: waitingPod("CrashLoopBackOff", "back-off")}); err == nil || errors.Is(err, runtime.ErrImagePull) {
		t.Errorf("crash loop: %v", err)
	}
	if err := startFailure(observed{bsbx: b, pod: waitingPod("ContainerCreating", "")}); err != nil {
		t.Errorf("creating: %v", err)
	}
	// The kubelet retries these (a secret cache not yet synced): not a
	// failure at once, but retried, which the create waits out for a while.
	o := observed{bsbx: b, pod: waitingPod("CreateContainerConfigError", "failed to sync secret cache: timed out waiting for the condition")}
	if err := startFailure(o); err != nil {
		t.Errorf("a config error the kubelet retries: %v, want no failure at once", err)
	}
	if w := retried(o); w == nil || w.Reason != "CreateContainerConfigError" {
		t.Errorf("retried = %+v, want the config error", w)
	}
	if w := retried(observed{bsbx: b, pod: waitingPod("CrashLoopBackOff", "")}); w != nil {
		t.Errorf("a crash loop is not retried: %+v", w)
	}
	if err := startFailure(observed{bsbx: b, pod: readyPod()}); err != nil {
		t.Errorf("ready: %v", err)
	}
	// The operator says the pod failed; the pod says why (no entrypoint).
	failed := &sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	failed.Status.Phase = sandboxv1alpha1.BatchSandboxPhaseFailed
	failed.Status.Conditions = []metav1.Condition{{Type: sandboxv1alpha1.BatchSandboxConditionPodFailed, Reason: "PodFailed", Message: "pod s-0 failed"}}
	exited := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: mainContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 127, Reason: "Error"}}}}}}
	if err := startFailure(observed{bsbx: failed, pod: exited}); err == nil || !strings.Contains(err.Error(), "exited with code 127") {
		t.Errorf("failed pod: %v, want the exit code", err)
	}
	if err := startFailure(observed{bsbx: failed}); err == nil || !strings.Contains(err.Error(), "pod s-0 failed") {
		t.Errorf("failed BatchSandbox without its pod: %v, want the operator's message", err)
	}
}

func TestPodIP(t *testing.T) {
	b := &sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	if ip, err := podIP(observed{bsbx: b, pod: readyPod()}); err != nil || ip != "10.0.0.7" {
		t.Errorf("pod IP: %q %v", ip, err)
	}
	if err := sandboxv1alpha1.SetEndpoints(b, []string{"10.0.0.9"}); err != nil {
		t.Fatal(err)
	}
	if ip, err := podIP(observed{bsbx: b, pod: readyPod()}); err != nil || ip != "10.0.0.9" {
		t.Errorf("endpoints: %q %v", ip, err)
	}
	b.Status.Phase = sandboxv1alpha1.BatchSandboxPhasePaused
	if _, err := podIP(observed{bsbx: b}); !errors.Is(err, runtime.ErrConflict) {
		t.Errorf("paused: %v, want ErrConflict", err)
	}
}

func TestClassOf(t *testing.T) {
	gr := schema.GroupResource{Group: "sandbox.opensandbox.io", Resource: "batchsandboxes"}
	for _, c := range []struct {
		err   error
		class error
	}{
		{apierrors.NewNotFound(gr, "x"), runtime.ErrNotFound},
		{apierrors.NewAlreadyExists(gr, "x"), runtime.ErrConflict},
		{apierrors.NewConflict(gr, "x", errors.New("changed")), runtime.ErrConflict},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "BatchSandbox"}, "x", field.ErrorList{field.Invalid(field.NewPath("metadata"), "x", "bad")}), runtime.ErrInvalid},
		{apierrors.NewBadRequest("bad"), runtime.ErrInvalid},
		{apierrors.NewServiceUnavailable("down"), runtime.ErrUnavailable},
		{apierrors.NewTooManyRequests("slow down", 1), runtime.ErrUnavailable},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, runtime.ErrUnavailable},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), nil},
		{context.Canceled, nil},
	} {
		err := apiErr(c.err, "op")
		if c.class == nil {
			for _, cl := range []error{runtime.ErrNotFound, runtime.ErrInvalid, runtime.ErrConflict, runtime.ErrUnavailable} {
				if errors.Is(err, cl) {
					t.Errorf("%v: class %v, want none", c.err, cl)
				}
			}
		} else if !errors.Is(err, c.class) {
			t.Errorf("%v: not %v", c.err, c.class)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%v: the API error is lost in %v", c.err, err)
		}
	}
	if err := apiErr(fmt.Errorf("wrapped: %w", runtime.ErrNotFound), "op"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("already classified: %v", err)
	}
}
