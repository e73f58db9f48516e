// Package v1alpha1 holds the Go types of the OpenSandbox custom resources,
// API group sandbox.opensandbox.io, version v1alpha1: BatchSandbox (a batch
// of sandbox pods, from a pod template or claimed from a warm Pool), Pool (a
// warm pool of idle pods) and SandboxSnapshot (a sandbox's root filesystem
// committed to an image). Field names, phases, condition types and the
// annotation, label and finalizer names match the upstream operator, so
// manifests and tools written for it work with ours.
//
// The kubebuilder markers on the types are the CRDs' validation: `make
// generate` turns them into zz_generated.deepcopy.go and the manifests in
// deploy/crds/, which are never edited by hand. The package imports no
// controller or client code beyond the scheme builder, so the lifecycle
// server's Kubernetes runtime and the operator can both use it.
//
// +kubebuilder:object:generate=true
// +groupName=sandbox.opensandbox.io
package v1alpha1
