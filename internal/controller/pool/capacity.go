package pool

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/util/intstr"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// IdleTarget is how many idle pods a pool should have when allocated of its
// pods belong to BatchSandboxes and idle are idle now (of any revision, not
// being evicted or deleted):
//
//	buffer = clamp(idle, bufferMin, bufferMax)
//	total  = clamp(allocated + buffer, poolMin, poolMax)
//	target = max(0, total - allocated)
//
// Allocated pods count toward poolMin and poolMax but are never removed to
// meet them: when allocated alone reaches poolMax the target is 0. poolMax
// wins over bufferMin and poolMin.
func IdleTarget(c sandboxv1alpha1.CapacitySpec, allocated, idle int32) int32 {
	buffer := clamp(idle, c.BufferMin, c.BufferMax)
	total := clamp(allocated+buffer, c.PoolMin, c.PoolMax)
	if total < allocated {
		return 0
	}
	return total - allocated
}

// clamp bounds v to [lo, hi]; hi wins when lo > hi.
func clamp(v, lo, hi int32) int32 {
	if v < lo {
		v = lo
	}
	if v > hi {
		v = hi
	}
	return v
}

// ResolveMaxUnavailable turns a maxUnavailable (a number or a percentage,
// nil meaning the default 25%) into a count out of total: percentages round
// up, and the result is at least 1 so that a pool always makes progress.
func ResolveMaxUnavailable(v *intstr.IntOrString, total int32) (int32, error) {
	def := intstr.FromString(sandboxv1alpha1.DefaultMaxUnavailable)
	if v == nil {
		v = &def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(total), true)
	if err != nil {
		return 0, fmt.Errorf("maxUnavailable %s: %w", v.String(), err)
	}
	if n < 1 {
		n = 1
	}
	if n > math.MaxInt32 {
		n = math.MaxInt32
	}
	return int32(n), nil
}
