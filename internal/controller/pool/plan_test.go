package pool

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

func capSpec(bufMin, bufMax, poolMin, poolMax int32) sandboxv1alpha1.CapacitySpec {
	return sandboxv1alpha1.CapacitySpec{BufferMin: bufMin, BufferMax: bufMax, PoolMin: poolMin, PoolMax: poolMax}
}

func TestIdleTarget(t *testing.T) {
	for _, tc := range []struct {
		name            string
		c               sandboxv1alpha1.CapacitySpec
		allocated, idle int32
		want            int32
	}{
		{"empty pool grows to bufferMin", capSpec(2, 5, 0, 10), 0, 0, 2},
		{"idle within buffer is kept", capSpec(2, 5, 0, 10), 0, 4, 4},
		{"idle beyond bufferMax shrinks", capSpec(2, 5, 0, 10), 0, 8, 5},
		{"allocation does not shrink the buffer", capSpec(2, 5, 0, 10), 6, 1, 2},
		{"poolMax caps the buffer", capSpec(2, 5, 0, 10), 9, 0, 1},
		{"allocated at poolMax leaves no idle", capSpec(2, 5, 0, 10), 10, 3, 0},
		{"allocated beyond a lowered poolMax", capSpec(2, 5, 0, 4), 6, 0, 0},
		{"poolMin raises the idle count", capSpec(1, 5, 6, 10), 2, 0, 4},
		{"poolMin counts allocated pods", capSpec(1, 5, 6, 10), 6, 0, 1},
		{"poolMax wins over bufferMin", capSpec(8, 9, 0, 3), 0, 0, 3},
		{"zero pool", capSpec(0, 0, 0, 0), 0, 3, 0},
	} {
		if got := IdleTarget(tc.c, tc.allocated, tc.idle); got != tc.want {
			t.Errorf("%s: IdleTarget(%+v, allocated %d, idle %d) = %d, want %d", tc.name, tc.c, tc.allocated, tc.idle, got, tc.want)
		}
	}
}

func TestResolveMaxUnavailable(t *testing.T) {
	i := func(v int) *intstr.IntOrString { x := intstr.FromInt32(int32(v)); return &x }
	s := func(v string) *intstr.IntOrString { x := intstr.FromString(v); return &x }
	for _, tc := range []struct {
		v     *intstr.IntOrString
		total int32
		want  int32
	}{
		{nil, 8, 2},   // 25% of 8
		{nil, 9, 3},   // rounds up
		{nil, 0, 1},   // at least 1
		{i(0), 10, 1}, // at least 1
		{i(4), 10, 4}, // a number
		{s("50%"), 5, 3},
		{s("100%"), 7, 7},
	} {
		got, err := ResolveMaxUnavailable(tc.v, tc.total)
		if err != nil || got != tc.want {
			t.Errorf("ResolveMaxUnavailable(%v, %d) = %d, %v; want %d", tc.v, tc.total, got, err, tc.want)
		}
	}
	if _, err := ResolveMaxUnavailable(s("lots"), 5); err == nil {
		t.Error("ResolveMaxUnavailable(\"lots\") gave no error")
	}
}

func TestPodName(t *testing.T) {
	if got := PodName("warm", 3); got != "warm-3" {
		t.Errorf("PodName(warm, 3) = %q", got)
	}
	long := strings.Repeat("a", 240) + "." + strings.Repeat("b", 12)
	a, b := PodName(long, 12), PodName(long[:250]+"cc", 12)
	for _, n := range []string{a, b} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("PodName of a long pool = %q: %v", n, errs)
		}
		if slotOf(n) != 12 {
			t.Errorf("slotOf(%q) = %d, want 12", n, slotOf(n))
		}
	}
	if a == b {
		t.Errorf("two long pool names gave one pod name %q", a)
	}
}

func TestRevision(t *testing.T) {
	t1 := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "a"}}}}
	t2 := t1.DeepCopy()
	t2.Spec.Containers[0].Image = "b"
	r1, _ := Revision(t1)
	r1b, _ := Revision(t1.DeepCopy())
	r2, _ := Revision(t2)
	if r1 != r1b || r1 == r2 || len(r1) != 10 {
		t.Errorf("revisions %q %q %q: want a stable 10-digit hash that changes with the template", r1, r1b, r2)
	}
	if errs := validation.IsValidLabelValue(r1); len(errs) > 0 {
		t.Errorf("revision %q is no label value: %v", r1, errs)
	}
}

// fixture builds pods for planPods: spec "<slot>:<rev>:<state>" with state
// r (ready), p (pending), e (evict label, ready), f (failed), t (terminating).
func fixture(pool string, specs ...string) []corev1.Pod {
	var out []corev1.Pod
	for _, s := range specs {
		var slot int
		var rev, state string
		parts := strings.Split(s, ":")
		fmt.Sscan(parts[0], &slot)
		rev, state = parts[1], parts[2]
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: PodName(pool, int32(slot)), Labels: map[string]string{sandboxv1alpha1.LabelPoolRevision: rev}}}
		switch state {
		case "r", "e":
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
			if state == "e" {
				p.Labels[sandboxv1alpha1.LabelPoolEvict] = ""
			}
		case "f":
			p.Status.Phase = corev1.PodFailed
		case "t":
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		out = append(out, p)
	}
	return out
}

func TestPlanPods(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { x := intstr.FromString(s); return &x }
	num := func(n int32) *intstr.IntOrString { x := intstr.FromInt32(n); return &x }
	mkPool := func(c sandboxv1alpha1.CapacitySpec, scale, update *intstr.IntOrString) *sandboxv1alpha1.Pool {
		return &sandboxv1alpha1.Pool{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: sandboxv1alpha1.PoolSpec{
				CapacitySpec:   c,
				ScaleStrategy:  &sandboxv1alpha1.ScaleStrategy{MaxUnavailable: scale},
				UpdateStrategy: &sandboxv1alpha1.UpdateStrategy{MaxUnavailable: update},
			},
		}
	}
	for _, tc := range []struct {
		name       string
		pool       *sandboxv1alpha1.Pool
		pods       []string
		allocated  []string
		wantCreate []string
		wantDelete []string
		wantStatus sandboxv1alpha1.PoolStatus
	}{
		{
			name:       "empty pool fills to bufferMin within maxUnavailable",
			pool:       mkPool(capSpec(4, 6, 0, 10), num(3), nil),
			wantCreate: []string{"p-0", "p-1", "p-2"},
		},
		{
			name:       "pending pods use the scale budget",
			pool:       mkPool(capSpec(4, 6, 0, 10), num(3), nil),
			pods:       []string{"0:R:p", "1:R:p", "2:R:r"},
			wantCreate: []string{"p-3"},
			wantStatus: sandboxv1alpha1.PoolStatus{Total: 3, Available: 1, Updated: 3},
		},
		{
			name:       "allocated pods count toward poolMax and reserve their names",
			pool:       mkPool(capSpec(2, 2, 0, 4), pct("100%"), nil),
			pods:       []string{"0:R:r", "2:R:r"},
			allocated:  []string{"p-0", "p-1", "p-2"},
			wantCreate: []string{"p-3"},
			wantStatus: sandboxv1alpha1.PoolStatus{Total: 2, Allocated: 2, Updated: 2},
		},
		{
			name:       "excess idle pods are deleted, highest slot first",
			pool:       mkPool(capSpec(1, 2, 0, 10), nil, nil),
			pods:       []string{"0:R:r", "1:R:r", "2:R:r", "3:R:r"},
			wantDelete: []string{"p-3", "p-2"},
			wantStatus: sandboxv1alpha1.PoolStatus{Total: 4, Available: 2, Updated: 4},
		},
		{
			name:       "evicted and failed idle pods are deleted and replaced; evicted allocated pods are not",
			pool:       mkPool(capSpec(3, 3, 0, 10), pct("100%"), nil),
			pods:       []string{"0:R:e", "1:R:f", "2:R:r", "3:R:e"},
			allocated:  []string{"p-3"},
			wantDelete: []string{"p-0", "p-1"},
			wantCreate: []string{"p-4", "p-5"},
			wantStatus: sandboxv1alpha1.PoolStatus{Total: 4, Allocated: 1, Available: 1, Updated: 4},
		},
		{
			name:       "rolling replaces old idle pods within updateStrategy.maxUnavailable",
			pool:       mkPool(capSpec(4, 4, 0, 10), pct("100%"), num(2)),
			pods:       []string{"0:OLD:r", "1:OLD:r", "2:OLD:r", "3:OLD:r", "4:OLD:r"},
			allocated:  []string{"p-4"},
			wantDelete: []string{"p-3", "p-2"},
			wantCreate: []string{"p-5", "p-6"},
			wantStatus: sandboxv1alpha1.PoolStatus{Total: 5, Allocated: 1},
		},
		{
			name:       "rolling waits while new pods are not ready",
			pool:       mkPool(capSpec(4, 4, 0, 10), pct("100%"), num(2)),
			pods:       []string{"2:OLD:r", "3:OLD:r", "5:R:p", "6:R:p"},
			wantStatus: sandboxv1alpha1.PoolStatus{Total: 4, Updated: 2},
		},
		{
			name:       "terminating old pods count as unavailable and hold their slot",
			pool:       mkPool(capSpec(2, 2, 0, 3), pct("100%"), num(1)),
			pods:       []string{"0:OLD:t", "1:OLD:r", "2:R:r"},
			wantCreate: []string{},
			wantStatus: sandboxv1alpha1.PoolStatus{Total: 2, Available: 1, Updated: 1},
		},
		{
			name:       "no slot is free at poolMax",
			pool:       mkPool(capSpec(3, 3, 0, 2), pct("100%"), nil),
			pods:       []string{"1:R:r"},
			allocated:  []string{"p-0"},
			wantStatus: sandboxv1alpha1.PoolStatus{Total: 1, Available: 1, Updated: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planPods(tc.pool, fixture("p", tc.pods...), sets.New(tc.allocated...), "R")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Create, tc.wantCreate) && !(len(p.Create) == 0 && len(tc.wantCreate) == 0) {
				t.Errorf("create %v, want %v", p.Create, tc.wantCreate)
			}
			if !slices.Equal(p.Delete, tc.wantDelete) && !(len(p.Delete) == 0 && len(tc.wantDelete) == 0) {
				t.Errorf("delete %v, want %v", p.Delete, tc.wantDelete)
			}
			if p.Status != tc.wantStatus {
				t.Errorf("status %+v, want %+v", p.Status, tc.wantStatus)
			}
		})
	}
}
