package batchsandbox

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

func testBatch(replicas int32, patches ...string) *sandboxv1alpha1.BatchSandbox {
	b := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "uid-1", Generation: 3},
		Spec: sandboxv1alpha1.BatchSandboxSpec{
			Replicas: ptr.To(replicas),
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "1"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "sandbox", Image: "opensandbox/base:latest",
					Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
				}}},
			},
		},
	}
	for _, p := range patches {
		b.Spec.ShardPatches = append(b.Spec.ShardPatches, runtime.RawExtension{Raw: []byte(p)})
	}
	return b
}

func TestNewPodAppliesShardPatch(t *testing.T) {
	b := testBatch(3, `{"metadata":{"labels":{"shard":"zero"}},"spec":{"containers":[{"name":"sandbox","env":[{"name":"B","value":"2"}]}]}}`)
	p0, err := newPod(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p0.Name != "b-0" || p0.Namespace != "ns" {
		t.Errorf("name %s/%s, want ns/b-0", p0.Namespace, p0.Name)
	}
	wantLabels := map[string]string{"app": "x", "shard": "zero",
		sandboxv1alpha1.LabelBatchSandboxName: "b", sandboxv1alpha1.LabelBatchSandboxPodIndex: "0"}
	if d := cmp.Diff(wantLabels, p0.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	// Strategic merge: env lists merge by name, containers by name.
	wantEnv := []corev1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}}
	if len(p0.Spec.Containers) != 1 || p0.Spec.Containers[0].Image != "opensandbox/base:latest" {
		t.Fatalf("containers after patch: %+v", p0.Spec.Containers)
	}
	if d := cmp.Diff(wantEnv, p0.Spec.Containers[0].Env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if !metav1.IsControlledBy(p0, b) {
		t.Errorf("pod is not controlled by its batch: %+v", p0.OwnerReferences)
	}
	// Index 2 has no patch: the template as is.
	p2, err := newPod(b, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p2.Labels["shard"]; ok || len(p2.Spec.Containers[0].Env) != 1 {
		t.Errorf("unpatched replica got the patch: labels %v env %v", p2.Labels, p2.Spec.Containers[0].Env)
	}
	if p2.Labels[sandboxv1alpha1.LabelBatchSandboxPodIndex] != "2" {
		t.Errorf("index label %q", p2.Labels[sandboxv1alpha1.LabelBatchSandboxPodIndex])
	}
	// The template itself is untouched.
	if len(b.Spec.Template.Spec.Containers[0].Env) != 1 || b.Spec.Template.Labels["shard"] != "" {
		t.Errorf("template modified: %+v", b.Spec.Template)
	}
}

func TestNewPodBadPatch(t *testing.T) {
	b := testBatch(1, `{"spec":`)
	_, err := newPod(b, 0)
	if err == nil || !strings.Contains(err.Error(), "shardPatches[0]") {
		t.Fatalf("err = %v, want one naming shardPatches[0]", err)
	}
}

func TestPodIndex(t *testing.T) {
	for v, want := range map[string]int{"0": 0, "12": 12, "-1": -1, "01": -1, "x": -1, "": -1} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{sandboxv1alpha1.LabelBatchSandboxPodIndex: v}}}
		got, ok := podIndex(p)
		if want < 0 && ok || want >= 0 && (!ok || got != want) {
			t.Errorf("podIndex(%q) = %d, %v; want %d", v, got, ok, want)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	rec := recordedIndexes("b", sandboxv1alpha1.Allocation{Pods: []string{"b-10", "b-2", "other-1", "b-x", "b-01", "b-"}})
	if d := cmp.Diff(map[int]bool{2: true, 10: true}, rec); d != "" {
		t.Fatalf("recorded (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"b-2", "b-10"}, allocationOf("b", rec).Pods); d != "" {
		t.Errorf("allocation (-want +got):\n%s", d)
	}
}

func TestEndpointsInIndexOrder(t *testing.T) {
	pod := func(ip string) *corev1.Pod { return &corev1.Pod{Status: corev1.PodStatus{PodIP: ip}} }
	pods := map[int]*corev1.Pod{2: pod("10.0.0.3"), 0: pod("10.0.0.9"), 1: pod(""), 3: pod("10.0.0.4")}
	if d := cmp.Diff([]string{"10.0.0.9", "10.0.0.3"}, endpoints(pods, 3)); d != "" {
		t.Errorf("endpoints (-want +got):\n%s", d)
	}
}

func readyPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
}

func TestComputeStatus(t *testing.T) {
	b := testBatch(3)
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b-2"}}
	st := computeStatus(b, observation{n: 3, pods: map[int]*corev1.Pod{0: readyPod("b-0"), 1: readyPod("b-1"), 2: pending}})
	if st.Replicas != 3 || st.Allocated != 2 || st.Ready != 2 || st.Phase != sandboxv1alpha1.BatchSandboxPhasePending || st.ObservedGeneration != 3 {
		t.Errorf("status %+v", st)
	}
	if c := meta.FindStatusCondition(st.Conditions, "Progressing"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Progressing = %+v, want True", c)
	}

	b.Status = st
	st = computeStatus(b, observation{n: 3, pods: map[int]*corev1.Pod{0: readyPod("b-0"), 1: readyPod("b-1"), 2: readyPod("b-2")}})
	if st.Phase != sandboxv1alpha1.BatchSandboxPhaseSucceed || !meta.IsStatusConditionTrue(st.Conditions, "Ready") ||
		meta.IsStatusConditionTrue(st.Conditions, "Progressing") || meta.IsStatusConditionTrue(st.Conditions, "PodFailed") {
		t.Errorf("all ready: %+v", st)
	}

	failed := readyPod("b-1")
	failed.Status.Phase = corev1.PodFailed
	failed.Status.Reason = "Evicted"
	st = computeStatus(b, observation{n: 3, pods: map[int]*corev1.Pod{0: readyPod("b-0"), 1: failed}, vanished: map[int]bool{2: true}})
	if st.Phase != sandboxv1alpha1.BatchSandboxPhaseFailed || st.Ready != 1 || st.Replicas != 2 {
		t.Errorf("failed: %+v", st)
	}
	c := meta.FindStatusCondition(st.Conditions, "PodFailed")
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "pod b-1 failed: Evicted") ||
		!strings.Contains(c.Message, "pod b-2 was deleted") {
		t.Errorf("PodFailed = %+v", c)
	}
	if meta.IsStatusConditionTrue(st.Conditions, "Progressing") {
		t.Errorf("Progressing True with nothing starting: %+v", st.Conditions)
	}
}

func TestFailureMessageBounded(t *testing.T) {
	var f []string
	for range 25 {
		f = append(f, "pod x failed")
	}
	if m := failureMessage(f); !strings.HasSuffix(m, "; and 5 more") {
		t.Errorf("message %q", m)
	}
}
