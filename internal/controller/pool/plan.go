package pool

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// Revision is the revision of a pool template: the first 10 hex digits of
// the SHA-256 of its JSON encoding (which orders map keys, so the same
// template always gives the same revision). Pods carry it in the label
// LabelPoolRevision.
func Revision(t *corev1.PodTemplateSpec) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encoding pool template: %w", err)
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum[:5]), nil
}

// maxPodName is the longest name the apiserver accepts for a pod.
const maxPodName = 253

// PodName is the name of the pod in slot i of pool: "<pool>-<i>". Slots run
// from 0 to poolMax-1, so a pool can never hold more than poolMax pods, and
// creating the pod of a slot twice fails with AlreadyExists instead of
// making a second pod (see doc.go). An over-long pool name is shortened and
// given a hash so that the name stays unique and within 253 characters.
func PodName(pool string, i int32) string {
	suffix := "-" + strconv.Itoa(int(i))
	if len(pool)+len(suffix) <= maxPodName {
		return pool + suffix
	}
	sum := sha256.Sum256([]byte(pool))
	h := fmt.Sprintf("-%x", sum[:4])
	prefix := strings.TrimRight(pool[:maxPodName-len(suffix)-len(h)], "-.")
	return prefix + h + suffix
}

// podReady reports whether a pod is running with condition Ready true.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podFinished reports whether a pod's containers have all stopped for good.
func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// plan is what one reconcile does to a pool's pods, and the counts its
// status reports.
type plan struct {
	// Delete are idle pods to delete: evicted, finished, beyond the
	// target, or of an old revision being rolled.
	Delete []string
	// Create are the names of new pods of the current revision.
	Create []string
	// Status are the counts of the pods as they were observed.
	Status sandboxv1alpha1.PoolStatus
}

func (p plan) empty() bool { return len(p.Delete) == 0 && len(p.Create) == 0 }

// planPods decides what to do with pods, the pool's pods (controlled by it),
// given allocated, the pod names that BatchSandboxes list in their
// alloc-status (names of pods that no longer exist included), and revision,
// the current template's revision. It reads nothing and writes nothing.
func planPods(pool *sandboxv1alpha1.Pool, pods []corev1.Pod, allocated sets.Set[string], revision string) (plan, error) {
	var (
		out sandboxv1alpha1.PoolStatus
		// occupied are slot names that must not be created: existing pods
		// (terminating ones included) and every allocated name.
		occupied = allocated.Clone()
		// idle are healthy idle pods: not allocated, not being deleted,
		// not finished, not evicted.
		idle              []*corev1.Pod
		del               []string
		terminatingIdle   int32
		allocatedExisting int32
	)
	for i := range pods {
		p := &pods[i]
		occupied.Insert(p.Name)
		isAllocated := allocated.Has(p.Name)
		if p.DeletionTimestamp != nil {
			if !isAllocated {
				terminatingIdle++
			}
			continue
		}
		out.Total++
		if p.Labels[sandboxv1alpha1.LabelPoolRevision] == revision {
			out.Updated++
		}
		switch {
		case isAllocated:
			allocatedExisting++
		case podFinished(p):
			del = append(del, p.Name)
		case hasLabel(p, sandboxv1alpha1.LabelPoolEvict):
			del = append(del, p.Name)
		default:
			idle = append(idle, p)
		}
	}
	out.Allocated = allocatedExisting

	capSpec := pool.Spec.CapacitySpec
	target := IdleTarget(capSpec, allocatedExisting, int32(len(idle)))
	size := allocatedExisting + target

	// Scale down: delete idle pods beyond the target, old revisions first,
	// then pods not yet ready, then the highest slots.
	current := func(p *corev1.Pod) bool { return p.Labels[sandboxv1alpha1.LabelPoolRevision] == revision }
	sort.SliceStable(idle, func(a, b int) bool {
		pa, pb := idle[a], idle[b]
		if current(pa) != current(pb) {
			return !current(pa)
		}
		if podReady(pa) != podReady(pb) {
			return !podReady(pa)
		}
		return slotOf(pa.Name) > slotOf(pb.Name)
	})
	if excess := int32(len(idle)) - target; excess > 0 {
		for _, p := range idle[:excess] {
			del = append(del, p.Name)
		}
		idle = idle[excess:]
	}

	// Count what is unavailable now: idle pods of the current revision not
	// yet ready, and idle pods still terminating.
	var notReady int32
	var old []*corev1.Pod
	for _, p := range idle {
		switch {
		case !current(p):
			old = append(old, p)
		case podReady(p):
			out.Available++
		default:
			notReady++
		}
	}

	// Roll: replace idle pods of old revisions, so that no more than
	// updateStrategy.maxUnavailable idle pods are down at once (old ones
	// terminating plus new ones not yet ready). idle is sorted with old
	// pods first, not-ready ones before ready ones.
	var updMax *intstr.IntOrString
	if s := pool.Spec.UpdateStrategy; s != nil {
		updMax = s.MaxUnavailable
	}
	updBudget, err := ResolveMaxUnavailable(updMax, size)
	if err != nil {
		return plan{}, fmt.Errorf("updateStrategy: %w", err)
	}
	roll := updBudget - notReady - terminatingIdle
	if roll > int32(len(old)) {
		roll = int32(len(old))
	}
	if roll > 0 {
		for _, p := range old[:roll] {
			del = append(del, p.Name)
		}
	} else {
		roll = 0
	}
	idleAfter := int32(len(idle)) - roll

	// Scale up to the target, at most scaleStrategy.maxUnavailable pods
	// not ready at once, in the lowest free slots below poolMax.
	var scaleMax *intstr.IntOrString
	if s := pool.Spec.ScaleStrategy; s != nil {
		scaleMax = s.MaxUnavailable
	}
	scaleBudget, err := ResolveMaxUnavailable(scaleMax, size)
	if err != nil {
		return plan{}, fmt.Errorf("scaleStrategy: %w", err)
	}
	need := target - idleAfter
	if room := scaleBudget - notReady; need > room {
		need = room
	}
	var create []string
	for i := int32(0); i < capSpec.PoolMax && int32(len(create)) < need; i++ {
		name := PodName(pool.Name, i)
		if !occupied.Has(name) {
			create = append(create, name)
		}
	}
	return plan{Delete: del, Create: create, Status: out}, nil
}

func hasLabel(p *corev1.Pod, key string) bool {
	_, ok := p.Labels[key]
	return ok
}

// slotOf is the slot number in a pod name made by PodName, or -1.
func slotOf(name string) int {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return -1
	}
	return n
}
