package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// TestAddToScheme checks that every kind and its list is registered under
// sandbox.opensandbox.io/v1alpha1.
func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"BatchSandbox", "BatchSandboxList", "Pool", "PoolList", "SandboxSnapshot", "SandboxSnapshotList"} {
		if !s.Recognizes(GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not recognise %s", GroupVersion.WithKind(kind))
		}
	}
	gvks, _, err := s.ObjectKinds(&BatchSandbox{})
	if err != nil || len(gvks) != 1 || gvks[0].Group != "sandbox.opensandbox.io" || gvks[0].Version != "v1alpha1" {
		t.Errorf("ObjectKinds(BatchSandbox) = %v, %v", gvks, err)
	}
}
