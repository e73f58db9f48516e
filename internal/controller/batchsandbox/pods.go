package batchsandbox

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// PodName is the name of replica index of BatchSandbox batch. Names are
// deterministic so that creating a pod twice (a controller restarted before
// it saw its own create) fails with AlreadyExists instead of making a second
// pod.
func PodName(batch string, index int) string {
	return batch + "-" + strconv.Itoa(index)
}

// podIndex returns the replica index in pod's pod-index label, or false when
// the label is missing or not a non-negative integer.
func podIndex(pod *corev1.Pod) (int, bool) {
	v, ok := pod.Labels[sandboxv1alpha1.LabelBatchSandboxPodIndex]
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || strconv.Itoa(i) != v {
		return 0, false
	}
	return i, true
}

// templateFor returns bsbx's pod template for replica index: spec.template
// with spec.shardPatches[index] applied as a strategic merge patch, or the
// template itself for an index beyond the patches.
func templateFor(bsbx *sandboxv1alpha1.BatchSandbox, index int) (*corev1.PodTemplateSpec, error) {
	if bsbx.Spec.Template == nil {
		return nil, fmt.Errorf("spec.template is not set")
	}
	if index >= len(bsbx.Spec.ShardPatches) || len(bsbx.Spec.ShardPatches[index].Raw) == 0 {
		return bsbx.Spec.Template.DeepCopy(), nil
	}
	base, err := json.Marshal(bsbx.Spec.Template)
	if err != nil {
		return nil, fmt.Errorf("encoding spec.template: %w", err)
	}
	patched, err := strategicpatch.StrategicMergePatch(base, bsbx.Spec.ShardPatches[index].Raw, corev1.PodTemplateSpec{})
	if err != nil {
		return nil, fmt.Errorf("applying spec.shardPatches[%d]: %w", index, err)
	}
	var tmpl corev1.PodTemplateSpec
	if err := json.Unmarshal(patched, &tmpl); err != nil {
		return nil, fmt.Errorf("decoding spec.template patched by spec.shardPatches[%d]: %w", index, err)
	}
	return &tmpl, nil
}

// newPod builds the pod of replica index of bsbx: the (patched) template,
// named PodName, labelled with the batch's name and the index, and controlled
// by bsbx so that it is garbage-collected with it.
func newPod(bsbx *sandboxv1alpha1.BatchSandbox, index int) (*corev1.Pod, error) {
	tmpl, err := templateFor(bsbx, index)
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(tmpl.Labels)+2)
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	labels[sandboxv1alpha1.LabelBatchSandboxName] = bsbx.Name
	labels[sandboxv1alpha1.LabelBatchSandboxPodIndex] = strconv.Itoa(index)
	var annotations map[string]string
	if len(tmpl.Annotations) > 0 {
		annotations = make(map[string]string, len(tmpl.Annotations))
		for k, v := range tmpl.Annotations {
			annotations[k] = v
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        PodName(bsbx.Name, index),
			Namespace:   bsbx.Namespace,
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(bsbx, sandboxv1alpha1.GroupVersion.WithKind("BatchSandbox")),
			},
		},
		Spec: tmpl.Spec,
	}
	return pod, nil
}

// endpoints returns the IPs of pods (indexed by replica) for the replicas
// below n, in index order; a replica without a pod or without an IP yet,
// or whose pod failed or is going away, is left out.
func endpoints(pods map[int]*corev1.Pod, n int) []string {
	ips := []string{}
	for i := range n {
		if p, ok := pods[i]; ok && p.Status.PodIP != "" && podFailure(p) == "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips
}

// recordedIndexes returns the replica indexes of the pods named in alloc
// that belong to batch (named PodName(batch, i)), sorted; other names are
// ignored.
func recordedIndexes(batch string, alloc sandboxv1alpha1.Allocation) map[int]bool {
	out := make(map[int]bool, len(alloc.Pods))
	prefix := batch + "-"
	for _, name := range alloc.Pods {
		if len(name) <= len(prefix) || name[:len(prefix)] != prefix {
			continue
		}
		s := name[len(prefix):]
		i, err := strconv.Atoi(s)
		if err != nil || i < 0 || strconv.Itoa(i) != s {
			continue
		}
		out[i] = true
	}
	return out
}

// allocationOf is the alloc-status value for the replica indexes in rec:
// their pod names in index order.
func allocationOf(batch string, rec map[int]bool) sandboxv1alpha1.Allocation {
	idx := make([]int, 0, len(rec))
	for i := range rec {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	a := sandboxv1alpha1.Allocation{Pods: make([]string, 0, len(idx))}
	for _, i := range idx {
		a.Pods = append(a.Pods, PodName(batch, i))
	}
	return a
}

// podReady reports whether pod runs and its Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podScheduled reports whether pod has a node.
func podScheduled(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podFailure says why pod no longer serves as a sandbox ("" while it does):
// it failed, it ran to completion (a sandbox is not meant to exit), or it is
// being deleted by someone other than this controller.
func podFailure(pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "is being deleted"
	case pod.Status.Phase == corev1.PodFailed:
		msg := "failed"
		if pod.Status.Reason != "" {
			msg += ": " + pod.Status.Reason
		}
		if pod.Status.Message != "" {
			msg += ": " + pod.Status.Message
		}
		return msg
	case pod.Status.Phase == corev1.PodSucceeded:
		return "exited (phase Succeeded)"
	}
	return ""
}
