package v1alpha1

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAllocationRoundTrip(t *testing.T) {
	for _, key := range []string{AnnotationAllocStatus, AnnotationAllocRelease, AnnotationAllocReleased} {
		bs := &BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{"other": "kept"}}}
		SetAllocation(bs, key, Allocation{Pods: []string{"pool-a-1", "pool-a-2"}})
		if got, want := bs.Annotations[key], `{"pods":["pool-a-1","pool-a-2"]}`; got != want {
			t.Errorf("SetAllocation(%s) wrote %s, want %s", key, got, want)
		}
		if bs.Annotations["other"] != "kept" {
			t.Errorf("SetAllocation(%s) lost another annotation: %v", key, bs.Annotations)
		}
		got, err := GetAllocation(bs, key)
		if err != nil || !slices.Equal(got.Pods, []string{"pool-a-1", "pool-a-2"}) {
			t.Errorf("GetAllocation(%s) = %v, %v; want the two pods", key, got, err)
		}
	}
}

func TestAllocationEmptyAndMissing(t *testing.T) {
	bs := &BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	if got, err := GetAllocation(bs, AnnotationAllocStatus); err != nil || len(got.Pods) != 0 {
		t.Errorf("GetAllocation without annotations = %v, %v; want empty, nil", got, err)
	}
	SetAllocation(bs, AnnotationAllocStatus, Allocation{})
	if got, want := bs.Annotations[AnnotationAllocStatus], `{"pods":[]}`; got != want {
		t.Errorf("SetAllocation(empty) wrote %s, want %s", got, want)
	}
}

func TestAllocationMalformed(t *testing.T) {
	bs := &BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{AnnotationAllocStatus: `["pod"]`}}}
	_, err := GetAllocation(bs, AnnotationAllocStatus)
	if err == nil || !strings.Contains(err.Error(), AnnotationAllocStatus) {
		t.Errorf("GetAllocation(%q) error = %v, want one naming the annotation", `["pod"]`, err)
	}
}

func TestEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name    string
		value   *string
		want    []string
		wantErr bool
	}{
		{name: "missing"},
		{name: "empty string", value: ptr("")},
		{name: "empty array", value: ptr("[]")},
		{name: "two", value: ptr(`["10.244.0.7","10.244.0.8"]`), want: []string{"10.244.0.7", "10.244.0.8"}},
		{name: "ipv6", value: ptr(`["fd00::7"]`), want: []string{"fd00::7"}},
		{name: "not json", value: ptr("10.244.0.7"), wantErr: true},
		{name: "not an ip", value: ptr(`["pod-a"]`), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := &BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
			if tc.value != nil {
				bs.Annotations = map[string]string{AnnotationEndpoints: *tc.value}
			}
			got, err := Endpoints(bs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Endpoints() error = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), AnnotationEndpoints) {
				t.Errorf("Endpoints() error %q does not name the annotation", err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Endpoints() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSetEndpoints(t *testing.T) {
	bs := &BatchSandbox{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	if err := SetEndpoints(bs, []string{"10.244.0.7", "fd00::7"}); err != nil {
		t.Fatal(err)
	}
	if got, want := bs.Annotations[AnnotationEndpoints], `["10.244.0.7","fd00::7"]`; got != want {
		t.Errorf("SetEndpoints wrote %s, want %s", got, want)
	}
	if err := SetEndpoints(bs, nil); err != nil || bs.Annotations[AnnotationEndpoints] != "[]" {
		t.Errorf("SetEndpoints(nil) = %v, wrote %q; want nil, []", err, bs.Annotations[AnnotationEndpoints])
	}
	if err := SetEndpoints(bs, []string{"10.244.0.7", "pod-b"}); err == nil {
		t.Errorf("SetEndpoints with a non-IP succeeded")
	}
	if got := bs.Annotations[AnnotationEndpoints]; got != "[]" {
		t.Errorf("a refused SetEndpoints changed the annotation to %s", got)
	}
}

func ptr[T any](v T) *T { return &v }
