package kubernetes

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// observed is what the cluster holds of one sandbox.
type observed struct {
	bsbx   *sandboxv1alpha1.BatchSandbox
	pod    *corev1.Pod    // nil when there is none (pending, paused)
	secret *corev1.Secret // nil when not (yet) seen
}

// status is a sandbox's state with why.
type status struct {
	state, reason, message string
	since                  time.Time
}

// stateOf maps the BatchSandbox's phase and conditions and its pod's status
// onto a sandbox state.
func stateOf(o observed) status {
	b := o.bsbx
	cond := func(typ string) (status, bool) {
		c := meta.FindStatusCondition(b.Status.Conditions, typ)
		if c == nil {
			return status{}, false
		}
		return status{reason: c.Reason, message: c.Message, since: c.LastTransitionTime.Time}, true
	}
	with := func(st status, state string) status {
		st.state = state
		return st
	}
	if b.DeletionTimestamp != nil {
		return status{state: sandbox.StateStopping, reason: "Deleting", since: b.DeletionTimestamp.Time}
	}
	pause := b.Spec.Pause != nil && *b.Spec.Pause
	switch b.Status.Phase {
	case sandboxv1alpha1.BatchSandboxPhaseFailed:
		if st, ok := cond(sandboxv1alpha1.BatchSandboxConditionPodFailed); ok {
			return with(st, sandbox.StateFailed)
		}
		if st, ok := cond(sandboxv1alpha1.BatchSandboxConditionResumeFailed); ok {
			return with(st, sandbox.StateFailed)
		}
		return status{state: sandbox.StateFailed, reason: "Failed", message: "the BatchSandbox failed"}
	case sandboxv1alpha1.BatchSandboxPhasePaused:
		if !pause && b.Spec.Pause != nil {
			return status{state: sandbox.StateResuming, reason: "Resuming"}
		}
		st, _ := cond(sandboxv1alpha1.BatchSandboxConditionPaused)
		return with(st, sandbox.StatePaused)
	case sandboxv1alpha1.BatchSandboxPhasePausing:
		st, _ := cond(sandboxv1alpha1.BatchSandboxConditionPaused)
		return with(st, sandbox.StatePausing)
	case sandboxv1alpha1.BatchSandboxPhaseResuming:
		st, _ := cond(sandboxv1alpha1.BatchSandboxConditionPaused)
		return with(st, sandbox.StateResuming)
	}
	if pause {
		// Asked for, not yet taken up by the operator.
		return status{state: sandbox.StatePausing, reason: "PauseRequested"}
	}
	if b.Spec.PoolRef != "" {
		// The pool's pod is not ours to watch: the operator reports it.
		if b.Status.Phase == sandboxv1alpha1.BatchSandboxPhaseSucceed && b.Status.Ready >= 1 {
			st, _ := cond(sandboxv1alpha1.BatchSandboxConditionReady)
			return with(st, sandbox.StateRunning)
		}
		return status{state: sandbox.StatePending, reason: "Allocating", message: "waiting for a pod of pool " + b.Spec.PoolRef}
	}
	return podState(o.pod)
}

// podState is the state of a sandbox that is neither paused nor failed
// by the operator's account: the pod's.
func podState(p *corev1.Pod) status {
	if p == nil {
		return status{state: sandbox.StatePending, reason: "PodPending", message: "waiting for the pod"}
	}
	if p.DeletionTimestamp != nil {
		return status{state: sandbox.StatePending, reason: "PodDeleting", message: "the pod is being replaced"}
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		msg := p.Status.Message
		if t := terminated(p); t != nil {
			msg = fmt.Sprintf("container %s exited with code %d: %s %s", mainContainer, t.ExitCode, t.Reason, t.Message)
		}
		reason := p.Status.Reason
		if reason == "" {
			reason = "Pod" + string(p.Status.Phase)
		}
		return status{state: sandbox.StateFailed, reason: reason, message: msg}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return status{state: sandbox.StatePending, reason: c.Reason, message: c.Message}
		}
	}
	if w := waiting(p); w != nil {
		return status{state: sandbox.StatePending, reason: w.Reason, message: w.Message}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return status{state: sandbox.StateRunning, since: c.LastTransitionTime.Time}
		}
	}
	return status{state: sandbox.StatePending, reason: "PodNotReady", message: "waiting for execd in the pod"}
}

// waiting is the waiting state of the first container (init containers
// first) that waits for a reason, or nil.
func waiting(p *corev1.Pod) *corev1.ContainerStateWaiting {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" && w.Reason != "ContainerCreating" {
				return w
			}
		}
	}
	return nil
}

// terminated is the main container's (or a failed init container's)
// termination, or nil.
func terminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return t
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == mainContainer && cs.State.Terminated != nil {
			return cs.State.Terminated
		}
	}
	return nil
}

// sandboxOf builds what Get reports from the observed objects.
func sandboxOf(o observed) (runtime.Sandbox, error) {
	b := o.bsbx
	st := stateOf(o)
	sb := runtime.Sandbox{
		ID:               b.Name,
		Image:            b.Annotations[annImage],
		SnapshotID:       b.Annotations[annSnapshotID],
		Metadata:         metadataOf(b.Labels),
		State:            st.state,
		Reason:           st.reason,
		Message:          st.message,
		LastTransitionAt: st.since,
		CreatedAt:        b.CreationTimestamp.Time,
	}
	// A sandbox from a pool has none of its own (the pool's template
	// runs): it reports an empty one.
	sb.Entrypoint = []string{}
	if raw := b.Annotations[annEntrypoint]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &sb.Entrypoint); err != nil {
			return runtime.Sandbox{}, fmt.Errorf("kubernetes: sandbox %s: annotation %s: %w", b.Name, annEntrypoint, err)
		}
	}
	if raw := b.Annotations[annPlatform]; raw != "" {
		var p runtime.Platform
		if err := json.Unmarshal([]byte(raw), &p); err != nil {
			return runtime.Sandbox{}, fmt.Errorf("kubernetes: sandbox %s: annotation %s: %w", b.Name, annPlatform, err)
		}
		sb.Platform = &p
	}
	if raw := b.Annotations[annResources]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &sb.Resources); err != nil {
			return runtime.Sandbox{}, fmt.Errorf("kubernetes: sandbox %s: annotation %s: %w", b.Name, annResources, err)
		}
	}
	if b.Spec.ExpireTime != nil {
		t := b.Spec.ExpireTime.Time.UTC()
		sb.ExpiresAt = &t
	}
	if o.secret != nil {
		sb.ExecdToken = string(o.secret.Data[keyExecdToken])
		sb.EgressToken = string(o.secret.Data[keyEgressToken])
	}
	return sb, nil
}

// metadataOf is the user's metadata among a BatchSandbox's labels: those
// outside the reserved domain.
func metadataOf(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.DeleteFunc(out, func(k, _ string) bool { return grammar.IsReservedKey(k) })
	return out
}
