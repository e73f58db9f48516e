package batchsandbox

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMatchesTemplate(t *testing.T) {
	pool := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox", "tier": "warm"}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"zone": "a"},
			Containers: []corev1.Container{
				{Name: "main", Image: "img:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
				{Name: "side", Image: "side:1"},
			},
		},
	}
	base := func(mut func(*corev1.PodTemplateSpec)) *corev1.PodTemplateSpec {
		w := &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "sandbox"}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"zone": "a"},
				Containers: []corev1.Container{{Name: "main", Image: "img:1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}},
			},
		}
		if mut != nil {
			mut(w)
		}
		return w
	}
	for _, tc := range []struct {
		name string
		want *corev1.PodTemplateSpec
		ok   bool
	}{
		{"no template", nil, true},
		{"subset", base(nil), true},
		{"no requests", base(func(w *corev1.PodTemplateSpec) { w.Spec.Containers[0].Resources = corev1.ResourceRequirements{} }), true},
		{"equal cpu", base(func(w *corev1.PodTemplateSpec) {
			w.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.5")
		}), true},
		{"more cpu", base(func(w *corev1.PodTemplateSpec) {
			w.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
		}), false},
		{"resource the pool does not request", base(func(w *corev1.PodTemplateSpec) {
			w.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}), false},
		{"other image", base(func(w *corev1.PodTemplateSpec) { w.Spec.Containers[0].Image = "img:2" }), false},
		{"unknown container", base(func(w *corev1.PodTemplateSpec) { w.Spec.Containers[0].Name = "other" }), false},
		{"label value differs", base(func(w *corev1.PodTemplateSpec) { w.Labels["app"] = "x" }), false},
		{"extra label", base(func(w *corev1.PodTemplateSpec) { w.Labels["gpu"] = "yes" }), false},
		{"other zone", base(func(w *corev1.PodTemplateSpec) { w.Spec.NodeSelector["zone"] = "b" }), false},
		{"no node selector", base(func(w *corev1.PodTemplateSpec) { w.Spec.NodeSelector = nil }), true},
	} {
		if got := matchesTemplate(tc.want, pool); got != tc.ok {
			t.Errorf("%s: matchesTemplate = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestPoolOfPodName(t *testing.T) {
	for name, want := range map[string]string{
		"warm-0": "warm", "my-pool-12": "my-pool", "warm": "", "warm-x": "", "-3": "",
	} {
		if got := poolOfPodName(name); got != want {
			t.Errorf("poolOfPodName(%q) = %q, want %q", name, got, want)
		}
	}
}
