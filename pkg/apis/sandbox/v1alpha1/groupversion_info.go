package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupName is the API group of every kind in this package.
const GroupName = "sandbox.opensandbox.io"

var (
	// GroupVersion is the group and version of the kinds in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds BatchSandbox, Pool and SandboxSnapshot (and their
	// lists) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(
		&BatchSandbox{}, &BatchSandboxList{},
		&Pool{}, &PoolList{},
		&SandboxSnapshot{}, &SandboxSnapshotList{},
	)
}

// Resource turns a resource name of this group (e.g. "batchsandboxes") into a
// group-qualified one, as the API's error values need it.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}
