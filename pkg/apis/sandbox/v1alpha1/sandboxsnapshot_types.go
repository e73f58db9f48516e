package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SandboxSnapshotSpec names the sandbox whose root filesystem is committed.
type SandboxSnapshotSpec struct {
	// SandboxName is the BatchSandbox (in the snapshot's namespace) whose
	// running pod is committed. It cannot change.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sandboxName cannot be changed"
	// +required
	SandboxName string `json:"sandboxName"`
}

// SandboxSnapshotPhase is the one-word summary of a SandboxSnapshot.
// +kubebuilder:validation:Enum=Pending;Committing;Succeed;Failed
type SandboxSnapshotPhase string

const (
	// SandboxSnapshotPhasePending: waiting for the sandbox's pod.
	SandboxSnapshotPhasePending SandboxSnapshotPhase = "Pending"
	// SandboxSnapshotPhaseCommitting: the containers are being committed
	// and pushed.
	SandboxSnapshotPhaseCommitting SandboxSnapshotPhase = "Committing"
	// SandboxSnapshotPhaseSucceed: every container's image is pushed;
	// status.containers lists them.
	SandboxSnapshotPhaseSucceed SandboxSnapshotPhase = "Succeed"
	// SandboxSnapshotPhaseFailed: the commit or push failed; the Failed
	// condition says why.
	SandboxSnapshotPhaseFailed SandboxSnapshotPhase = "Failed"
)

// Condition types of a SandboxSnapshot (status.conditions[].type).
const (
	// SandboxSnapshotConditionReady is True once every image is pushed.
	SandboxSnapshotConditionReady = "Ready"
	// SandboxSnapshotConditionFailed is True when the snapshot failed.
	SandboxSnapshotConditionFailed = "Failed"
)

// ContainerSnapshot is the image one container was committed to.
type ContainerSnapshot struct {
	// ContainerName is the container's name in the pod.
	ContainerName string `json:"containerName"`
	// ImageURI is the image reference the root filesystem was pushed to.
	ImageURI string `json:"imageUri"`
	// ImageDigest is the pushed image's manifest digest.
	// +optional
	ImageDigest string `json:"imageDigest,omitempty"`
}

// SandboxSnapshotStatus is the observed state of a SandboxSnapshot.
type SandboxSnapshotStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the state in one word.
	// +optional
	Phase SandboxSnapshotPhase `json:"phase,omitempty"`
	// Containers lists the image of each committed container.
	// +listType=map
	// +listMapKey=containerName
	// +optional
	Containers []ContainerSnapshot `json:"containers,omitempty"`
	// SourcePodName is the pod that was committed.
	// +optional
	SourcePodName string `json:"sourcePodName,omitempty"`
	// SourceNodeName is the node that pod ran on, where the commit ran.
	// +optional
	SourceNodeName string `json:"sourceNodeName,omitempty"`
	// Conditions are Ready and Failed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SandboxSnapshot commits a running sandbox's container root filesystems to
// images on its node and pushes them to the configured registry.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbxsnap
// +kubebuilder:printcolumn:name="Sandbox",type=string,JSONPath=`.spec.sandboxName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.sourceNodeName`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SandboxSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec SandboxSnapshotSpec `json:"spec"`
	// +optional
	Status SandboxSnapshotStatus `json:"status,omitempty"`
}

// SandboxSnapshotList is a list of SandboxSnapshots.
//
// +kubebuilder:object:root=true
type SandboxSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SandboxSnapshot `json:"items"`
}
