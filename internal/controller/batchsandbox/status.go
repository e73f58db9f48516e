package batchsandbox

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opensandbox-go/opensandbox/internal/taskexecutor"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// Condition reasons set by this controller.
const (
	ReasonAllReady        = "AllReplicasReady"
	ReasonNotReady        = "ReplicasNotReady"
	ReasonPodsStarting    = "PodsStarting"
	ReasonPodsUp          = "PodsUp"
	ReasonPodCreateFailed = "PodCreateFailed"
	ReasonPodFailed       = "PodFailed"
	ReasonNoPodFailed     = "NoPodFailed"
)

// observation is what one reconcile saw of a batch's replicas below n.
type observation struct {
	// n is spec.replicas.
	n int
	// pods holds the existing pods of replicas below n by index.
	pods map[int]*corev1.Pod
	// vanished are indexes below n whose pod was created (it is in the
	// alloc-status record) and no longer exists.
	vanished map[int]bool
	// createErr is why creating a pod failed in this reconcile, if it did.
	createErr error
	// released are indexes below n whose task completed and whose pod was
	// released (taskResourcePolicyWhenCompleted Release), with the task's
	// final state; they need no pod.
	released map[int]taskexecutor.State
	// names, in pool mode, are the pod names of the replicas by index (the
	// alloc-status order); nil in template mode, where they are PodName.
	names []string
}

// failures lists, in index order, why replicas failed: pods that failed,
// exited or are being deleted, and pods that vanished.
func (o observation) failures(batch string) []string {
	var out []string
	for i := range o.n {
		if p, ok := o.pods[i]; ok {
			if why := podFailure(p); why != "" {
				out = append(out, fmt.Sprintf("pod %s %s", p.Name, why))
			}
		} else if o.vanished[i] {
			name := PodName(batch, i)
			if i < len(o.names) {
				name = o.names[i]
			}
			out = append(out, fmt.Sprintf("pod %s was deleted", name))
		}
	}
	return out
}

// computeStatus returns bsbx's status for what was observed, keeping the
// task counters, pause fields and foreign conditions of the current status
// and the transition times of conditions whose status did not change.
func computeStatus(bsbx *sandboxv1alpha1.BatchSandbox, o observation) sandboxv1alpha1.BatchSandboxStatus {
	st := *bsbx.Status.DeepCopy()
	st.ObservedGeneration = bsbx.Generation
	var total, allocated, ready int32
	for i := range o.n {
		p, ok := o.pods[i]
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		total++
		if podScheduled(p) {
			allocated++
		}
		if podReady(p) {
			ready++
		}
	}
	st.Replicas, st.Allocated, st.Ready = total, allocated, ready

	failed := o.failures(bsbx.Name)
	n := int32(o.n - len(o.released))
	switch {
	case len(failed) > 0:
		st.Phase = sandboxv1alpha1.BatchSandboxPhaseFailed
	case ready == n:
		st.Phase = sandboxv1alpha1.BatchSandboxPhaseSucceed
	default:
		st.Phase = sandboxv1alpha1.BatchSandboxPhasePending
	}

	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: bsbx.Generation,
		})
	}
	readyMsg := fmt.Sprintf("%d of %d replicas ready", ready, n)
	if ready == n {
		set(sandboxv1alpha1.BatchSandboxConditionReady, metav1.ConditionTrue, ReasonAllReady, readyMsg)
	} else {
		set(sandboxv1alpha1.BatchSandboxConditionReady, metav1.ConditionFalse, ReasonNotReady, readyMsg)
	}
	// Progressing: some replica that has not failed is still coming up.
	starting := n - ready - int32(len(failed))
	switch {
	case o.createErr != nil:
		set(sandboxv1alpha1.BatchSandboxConditionProgressing, metav1.ConditionTrue, ReasonPodCreateFailed,
			fmt.Sprintf("creating pods: %v", o.createErr))
	case starting > 0:
		set(sandboxv1alpha1.BatchSandboxConditionProgressing, metav1.ConditionTrue, ReasonPodsStarting,
			fmt.Sprintf("%d of %d replicas starting", starting, n))
	default:
		set(sandboxv1alpha1.BatchSandboxConditionProgressing, metav1.ConditionFalse, ReasonPodsUp,
			"no replica is starting")
	}
	if len(failed) > 0 {
		set(sandboxv1alpha1.BatchSandboxConditionPodFailed, metav1.ConditionTrue, ReasonPodFailed, failureMessage(failed))
	} else {
		set(sandboxv1alpha1.BatchSandboxConditionPodFailed, metav1.ConditionFalse, ReasonNoPodFailed, "no pod failed")
	}
	return st
}

// maxListedFailures bounds the pods named in the PodFailed message (a
// condition message is limited to 32 KiB).
const maxListedFailures = 20

// failureMessage joins failed, naming at most maxListedFailures of them.
func failureMessage(failed []string) string {
	if len(failed) <= maxListedFailures {
		return strings.Join(failed, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(failed[:maxListedFailures], "; "), len(failed)-maxListedFailures)
}
