package v1alpha1

import (
	"encoding/json"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Allocation is the value of the alloc-status, alloc-release and
// alloc-released annotations: the names of pods, as {"pods":[...]}.
type Allocation struct {
	// Pods are pod names in the BatchSandbox's namespace.
	Pods []string `json:"pods"`
}

// GetAllocation reads the Allocation in annotation key (AnnotationAllocStatus,
// AnnotationAllocRelease or AnnotationAllocReleased) of obj. A missing or
// empty annotation is an empty Allocation; a malformed one is an error naming
// the annotation.
func GetAllocation(obj metav1.Object, key string) (Allocation, error) {
	var a Allocation
	raw := obj.GetAnnotations()[key]
	if raw == "" {
		return a, nil
	}
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return Allocation{}, fmt.Errorf("annotation %s of %s: want {\"pods\":[...]}: %w", key, obj.GetName(), err)
	}
	return a, nil
}

// SetAllocation writes a into annotation key of obj, replacing what was
// there; an empty Allocation is written as {"pods":[]}.
func SetAllocation(obj metav1.Object, key string, a Allocation) {
	if a.Pods == nil {
		a.Pods = []string{}
	}
	setAnnotation(obj, key, mustJSON(a))
}

// Endpoints returns the pod IPs in obj's endpoints annotation, in replica
// order; nil when the annotation is missing or empty. A value that is not a
// JSON array of IP addresses is an error naming the annotation.
func Endpoints(obj metav1.Object) ([]string, error) {
	raw := obj.GetAnnotations()[AnnotationEndpoints]
	if raw == "" {
		return nil, nil
	}
	var ips []string
	if err := json.Unmarshal([]byte(raw), &ips); err != nil {
		return nil, fmt.Errorf("annotation %s of %s: want a JSON array of IPs: %w", AnnotationEndpoints, obj.GetName(), err)
	}
	for _, ip := range ips {
		if _, err := netip.ParseAddr(ip); err != nil {
			return nil, fmt.Errorf("annotation %s of %s: %w", AnnotationEndpoints, obj.GetName(), err)
		}
	}
	if len(ips) == 0 {
		return nil, nil
	}
	return ips, nil
}

// SetEndpoints writes ips into obj's endpoints annotation, replacing what
// was there. Every element must be an IP address.
func SetEndpoints(obj metav1.Object, ips []string) error {
	for _, ip := range ips {
		if _, err := netip.ParseAddr(ip); err != nil {
			return fmt.Errorf("endpoints of %s: %w", obj.GetName(), err)
		}
	}
	if ips == nil {
		ips = []string{}
	}
	setAnnotation(obj, AnnotationEndpoints, mustJSON(ips))
	return nil
}

func setAnnotation(obj metav1.Object, key, value string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = make(map[string]string, 1)
	}
	ann[key] = value
	obj.SetAnnotations(ann)
}

// mustJSON encodes values that cannot fail to encode (strings and structs
// of strings).
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", v, err))
	}
	return string(b)
}
