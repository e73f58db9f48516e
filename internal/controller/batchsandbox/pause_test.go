package batchsandbox

// Pause and resume on the apiserver+etcd, with the test standing in for the
// kubelet (runPod) and for the SandboxSnapshot controller (setSnapshot).

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubetest"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

func startPauseManager(t *testing.T, env *kubetest.Env, ns string) func() {
	t.Helper()
	return kubetest.StartManager(t, env, ns, func(mgr ctrl.Manager) error {
		return (&Reconciler{Pause: PauseConfig{ResumePullSecret: "pull"}}).SetupWithManager(mgr)
	})
}

func setPause(t *testing.T, c client.Client, ns, name string, pause *bool) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"pause": pause}})
	b := &sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Patch(ctxT(t), b, client.RawPatch(types.MergePatchType, raw)); err != nil {
		t.Fatalf("setting spec.pause: %v", err)
	}
}

// setSnapshot stands in for the snapshot controller.
func setSnapshot(t *testing.T, c client.Client, ns, name string, phase sandboxv1alpha1.SandboxSnapshotPhase, failure string) {
	t.Helper()
	var s sandboxv1alpha1.SandboxSnapshot
	if err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatal(err)
	}
	s.Status.Phase = phase
	switch phase {
	case sandboxv1alpha1.SandboxSnapshotPhaseSucceed:
		s.Status.Containers = []sandboxv1alpha1.ContainerSnapshot{{ContainerName: "sandbox", ImageURI: "127.0.0.1:5000/" + ns + "/b:" + name + "-sandbox", ImageDigest: "sha256:" + strings.Repeat("ab", 32)}}
	case sandboxv1alpha1.SandboxSnapshotPhaseFailed:
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: "Failed", Status: metav1.ConditionTrue, Reason: "CommitFailed", Message: failure})
	}
	if err := c.Status().Update(ctxT(t), &s); err != nil {
		t.Fatal(err)
	}
}

func waitSnapshot(t *testing.T, c client.Client, ns, name string) *sandboxv1alpha1.SandboxSnapshot {
	t.Helper()
	var s sandboxv1alpha1.SandboxSnapshot
	eventually(t, "snapshot "+name, func() string {
		if err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
			return err.Error()
		}
		return ""
	})
	return &s
}

func waitPhase(t *testing.T, c client.Client, ns, name string, phase sandboxv1alpha1.BatchSandboxPhase) *sandboxv1alpha1.BatchSandbox {
	t.Helper()
	var b *sandboxv1alpha1.BatchSandbox
	eventually(t, "phase "+string(phase), func() string {
		b = getBatch(t, c, ns, name)
		if b.Status.Phase != phase {
			return fmt.Sprintf("phase %q; %s", b.Status.Phase, condition(b, sandboxv1alpha1.BatchSandboxConditionPaused))
		}
		return ""
	})
	return b
}

func TestPauseResume(t *testing.T) {
	env := kubetest.Start(t)
	c := env.Client

	t.Run("PauseThenResume", func(t *testing.T) {
		ns := env.Namespace(t)
		stop := startPauseManager(t, env, ns)
		if err := c.Create(ctxT(t), newBatch(ns, "b", 1)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "pod", func() string {
			if len(pods(t, c, ns, "b")) != 1 {
				return "no pod"
			}
			return ""
		})
		runPod(t, c, ns, "b-0", "10.0.0.5")
		waitPhase(t, c, ns, "b", sandboxv1alpha1.BatchSandboxPhaseSucceed)
		oldUID := pods(t, c, ns, "b")["b-0"].UID

		setPause(t, c, ns, "b", ptr.To(true))
		b := waitPhase(t, c, ns, "b", sandboxv1alpha1.BatchSandboxPhasePausing)
		name := b.Annotations[AnnotationPauseSnapshot]
		if name != PauseSnapshotName("b", b.Generation) {
			t.Fatalf("pause snapshot annotation %q", name)
		}
		snap := waitSnapshot(t, c, ns, name)
		if snap.Spec.SandboxName != "b" || !metav1.IsControlledBy(snap, b) {
			t.Fatalf("snapshot %+v", snap.ObjectMeta)
		}
		// A restart while the snapshot is committing makes no second one.
		stop()
		stop = startPauseManager(t, env, ns)
		if len(pods(t, c, ns, "b")) != 1 {
			t.Fatal("the pod went before the snapshot was committed")
		}
		setSnapshot(t, c, ns, name, sandboxv1alpha1.SandboxSnapshotPhaseSucceed, "")
		b = waitPhase(t, c, ns, "b", sandboxv1alpha1.BatchSandboxPhasePaused)
		var list sandboxv1alpha1.SandboxSnapshotList
		if err := c.List(ctxT(t), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
			t.Fatalf("snapshots: %d, %v", len(list.Items), err)
		}
		if n := len(pods(t, c, ns, "b")); n != 0 {
			t.Fatalf("%d pods while paused", n)
		}
		if eps, _ := sandboxv1alpha1.Endpoints(b); len(eps) != 0 {
			t.Fatalf("endpoints while paused: %v", eps)
		}
		if got := condition(b, sandboxv1alpha1.BatchSandboxConditionPaused); !strings.HasPrefix(got, "Paused=True") {
			t.Fatalf("paused condition: %s", got)
		}
		if b.Status.PauseObservedGeneration != b.Generation || b.Status.Ready != 0 {
			t.Fatalf("status %+v", b.Status)
		}

		// null keeps it paused.
		setPause(t, c, ns, "b", nil)
		b = getBatch(t, c, ns, "b")
		if b.Status.Phase != sandboxv1alpha1.BatchSandboxPhasePaused || len(pods(t, c, ns, "b")) != 0 {
			t.Fatalf("pause null: phase %s", b.Status.Phase)
		}

		setPause(t, c, ns, "b", ptr.To(false))
		eventually(t, "pod made again", func() string {
			p, ok := pods(t, c, ns, "b")["b-0"]
			if !ok {
				return "no pod"
			}
			if p.UID == oldUID {
				return "the old pod"
			}
			return ""
		})
		p := pods(t, c, ns, "b")["b-0"]
		want := "127.0.0.1:5000/" + ns + "/b:" + name + "-sandbox@sha256:" + strings.Repeat("ab", 32)
		if p.Spec.Containers[0].Image != want {
			t.Fatalf("resumed image %q, want %q", p.Spec.Containers[0].Image, want)
		}
		if len(p.Spec.ImagePullSecrets) != 1 || p.Spec.ImagePullSecrets[0].Name != "pull" {
			t.Fatalf("pull secrets %v", p.Spec.ImagePullSecrets)
		}
		runPod(t, c, ns, "b-0", "10.0.0.6")
		b = waitPhase(t, c, ns, "b", sandboxv1alpha1.BatchSandboxPhaseSucceed)
		if eps, _ := sandboxv1alpha1.Endpoints(b); len(eps) != 1 || eps[0] != "10.0.0.6" {
			t.Fatalf("endpoints after resume: %v", eps)
		}
		if got := condition(b, sandboxv1alpha1.BatchSandboxConditionPaused); !strings.HasPrefix(got, "Paused=False") {
			t.Fatalf("paused condition after resume: %s", got)
		}
		if _, ok := b.Annotations[AnnotationPauseSnapshot]; ok {
			t.Fatal("the pause snapshot annotation outlived the resume")
		}
	})

	t.Run("FailedSnapshotKeepsThePod", func(t *testing.T) {
		ns := env.Namespace(t)
		startPauseManager(t, env, ns)
		if err := c.Create(ctxT(t), newBatch(ns, "b", 1)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "pod", func() string {
			if len(pods(t, c, ns, "b")) != 1 {
				return "no pod"
			}
			return ""
		})
		runPod(t, c, ns, "b-0", "10.0.0.7")
		waitPhase(t, c, ns, "b", sandboxv1alpha1.BatchSandboxPhaseSucceed)
		setPause(t, c, ns, "b", ptr.To(true))
		b := waitPhase(t, c, ns, "b", sandboxv1alpha1.BatchSandboxPhasePausing)
		first := b.Annotations[AnnotationPauseSnapshot]
		waitSnapshot(t, c, ns, first)
		setSnapshot(t, c, ns, first, sandboxv1alpha1.SandboxSnapshotPhaseFailed, "pushing: 401 unauthorized")
		b = waitPhase(t, c, ns, "b", sandboxv1alpha1.BatchSandboxPhaseSucceed)
		if got := condition(b, sandboxv1alpha1.BatchSandboxConditionPauseFailed); !strings.HasPrefix(got, "PauseFailed=True") || !strings.Contains(got, "401 unauthorized") {
			t.Fatalf("PauseFailed: %s", got)
		}
		if len(pods(t, c, ns, "b")) != 1 {
			t.Fatal("the pod went although the snapshot failed")
		}
		// null, then true again: a new snapshot.
		setPause(t, c, ns, "b", nil)
		eventually(t, "pause snapshot forgotten", func() string {
			if a := getBatch(t, c, ns, "b").Annotations[AnnotationPauseSnapshot]; a != "" {
				return a
			}
			return ""
		})
		setPause(t, c, ns, "b", ptr.To(true))
		eventually(t, "a second snapshot", func() string {
			a := getBatch(t, c, ns, "b").Annotations[AnnotationPauseSnapshot]
			if a == "" || a == first {
				return fmt.Sprintf("annotation %q", a)
			}
			var s sandboxv1alpha1.SandboxSnapshot
			if err := c.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: a}, &s); err != nil {
				if apierrors.IsNotFound(err) {
					return "not created"
				}
				return err.Error()
			}
			return ""
		})
	})

	t.Run("SnapshotOfAnotherBatchIsNotAdopted", func(t *testing.T) {
		ns := env.Namespace(t)
		startPauseManager(t, env, ns)
		if err := c.Create(ctxT(t), newBatch(ns, "b", 1)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "pod", func() string {
			if len(pods(t, c, ns, "b")) != 1 {
				return "no pod"
			}
			return ""
		})
		runPod(t, c, ns, "b-0", "10.0.0.8")
		waitPhase(t, c, ns, "b", sandboxv1alpha1.BatchSandboxPhaseSucceed)
		// A finished snapshot under the name the next pause will use, left
		// by an earlier BatchSandbox "b" (no owner: not this one's).
		gen := getBatch(t, c, ns, "b").Generation + 1
		stale := &sandboxv1alpha1.SandboxSnapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PauseSnapshotName("b", gen)},
			Spec:       sandboxv1alpha1.SandboxSnapshotSpec{SandboxName: "b"},
		}
		if err := c.Create(ctxT(t), stale); err != nil {
			t.Fatal(err)
		}
		setSnapshot(t, c, ns, stale.Name, sandboxv1alpha1.SandboxSnapshotPhaseSucceed, "")
		setPause(t, c, ns, "b", ptr.To(true))
		eventually(t, "pause started on the snapshot name", func() string {
			if a := getBatch(t, c, ns, "b").Annotations[AnnotationPauseSnapshot]; a != stale.Name {
				return fmt.Sprintf("annotation %q, want %q", a, stale.Name)
			}
			return ""
		})
		// Some reconciles later it is still not paused and keeps its pod.
		poked := getBatch(t, c, ns, "b")
		orig := poked.DeepCopy()
		poked.Labels = map[string]string{"poke": "1"}
		if err := c.Patch(ctxT(t), poked, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // no event to wait for: the test checks that nothing happens
		if b := getBatch(t, c, ns, "b"); b.Status.Phase == sandboxv1alpha1.BatchSandboxPhasePaused || len(pods(t, c, ns, "b")) != 1 {
			t.Fatalf("paused on another batch's snapshot: phase %s, pods %v", b.Status.Phase, podNames(pods(t, c, ns, "b")))
		}
	})
}

func TestApplyResume(t *testing.T) {
	r := &Reconciler{Pause: PauseConfig{ResumePullSecret: "pull"}}
	b := newBatch("ns", "b", 1)
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sandbox", Image: "old"}, {Name: "other", Image: "keep"}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}}}
	if err := r.applyResume(b, pod); err != nil || pod.Spec.Containers[0].Image != "old" {
		t.Fatalf("without the annotation: %v, %s", err, pod.Spec.Containers[0].Image)
	}
	b.Annotations = map[string]string{AnnotationResumeImages: `{"sandbox":"new@sha256:1"}`}
	if err := r.applyResume(b, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Containers[0].Image != "new@sha256:1" || pod.Spec.Containers[1].Image != "keep" || len(pod.Spec.ImagePullSecrets) != 1 {
		t.Fatalf("pod %+v", pod.Spec)
	}
	b.Annotations[AnnotationResumeImages] = "{"
	if err := r.applyResume(b, pod); err == nil {
		t.Fatal("a broken annotation was accepted")
	}
	if n := PauseSnapshotName(strings.Repeat("x", 253), 7); len(n) > 253 || !strings.HasSuffix(n, "-pause-7") {
		t.Fatalf("PauseSnapshotName of a long name: %q (%d)", n, len(n))
	}
}
