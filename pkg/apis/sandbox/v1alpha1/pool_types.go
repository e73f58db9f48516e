package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultMaxUnavailable is the default of scaleStrategy.maxUnavailable and
// updateStrategy.maxUnavailable (the schema fills it in; the controller uses
// it when the whole strategy is left out).
const DefaultMaxUnavailable = "25%"

// PoolSpec is the desired state of a Pool: idle pods made from template,
// kept warm so that BatchSandboxes with poolRef claim them instead of
// waiting for new pods.
type PoolSpec struct {
	// Template describes the pool's pods. Changing it starts a new revision:
	// idle pods of older revisions are replaced, at most
	// updateStrategy.maxUnavailable at a time; allocated pods are left alone.
	// +required
	Template corev1.PodTemplateSpec `json:"template"`

	// CapacitySpec bounds the pool's size.
	// +required
	CapacitySpec CapacitySpec `json:"capacitySpec"`

	// ScaleStrategy limits how many pods may be unavailable while the pool
	// scales. Left out, its defaults apply.
	// +kubebuilder:default={}
	// +optional
	ScaleStrategy *ScaleStrategy `json:"scaleStrategy,omitempty"`

	// UpdateStrategy limits how fast a template change is rolled out. Left
	// out, its defaults apply.
	// +kubebuilder:default={}
	// +optional
	UpdateStrategy *UpdateStrategy `json:"updateStrategy,omitempty"`

	// RecycleStrategy says what becomes of a pod its BatchSandbox gives
	// back. Left out, the pod is deleted.
	// +kubebuilder:default={}
	// +optional
	RecycleStrategy *RecycleStrategy `json:"recycleStrategy,omitempty"`
}

// CapacitySpec bounds a Pool: the idle (buffer) pods stay within
// [bufferMin, bufferMax] and all pods, idle and allocated, within
// [poolMin, poolMax]; poolMax wins when the two disagree.
//
// +kubebuilder:validation:XValidation:rule="self.bufferMin <= self.bufferMax",message="bufferMin must not exceed bufferMax",fieldPath=".bufferMin"
// +kubebuilder:validation:XValidation:rule="self.poolMin <= self.poolMax",message="poolMin must not exceed poolMax",fieldPath=".poolMin"
type CapacitySpec struct {
	// BufferMax is the most idle pods kept.
	// +kubebuilder:validation:Minimum=0
	// +required
	BufferMax int32 `json:"bufferMax"`
	// BufferMin is the fewest idle pods kept; below it the pool grows.
	// +kubebuilder:validation:Minimum=0
	// +required
	BufferMin int32 `json:"bufferMin"`
	// PoolMax is the most pods the pool has, idle and allocated.
	// +kubebuilder:validation:Minimum=0
	// +required
	PoolMax int32 `json:"poolMax"`
	// PoolMin is the fewest pods the pool has, idle and allocated.
	// +kubebuilder:validation:Minimum=0
	// +required
	PoolMin int32 `json:"poolMin"`
}

// ScaleStrategy limits scaling of a Pool.
type ScaleStrategy struct {
	// MaxUnavailable is how many pods (a number, or a percentage of the
	// pool's target size) may be not ready at once while the pool scales.
	// Default 25%.
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxUnavailable must be a number >= 0 or a percentage from 0% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// UpdateStrategy limits the roll-out of a new Pool template.
type UpdateStrategy struct {
	// MaxUnavailable is how many idle pods (a number, or a percentage of the
	// pool's size) may be replaced at once. Default 25%.
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxUnavailable must be a number >= 0 or a percentage from 0% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// RecycleStrategyType is what becomes of a pod given back to its Pool.
// +kubebuilder:validation:Enum=Delete;Restart;Noop
type RecycleStrategyType string

const (
	// RecycleDelete deletes the pod; the pool makes a fresh one.
	RecycleDelete RecycleStrategyType = "Delete"
	// RecycleRestart restarts the pod's containers and returns the pod to
	// the pool (upstream does it in place, see AnnotationRestartRecord; on
	// plain Kubernetes, which cannot restart a container on request, our
	// controller replaces the pod with a fresh one, as Delete).
	RecycleRestart RecycleStrategyType = "Restart"
	// RecycleNoop returns the pod to the pool as it is.
	RecycleNoop RecycleStrategyType = "Noop"
)

// RecycleStrategy says what becomes of a pod given back to its Pool.
type RecycleStrategy struct {
	// Type is Delete (default), Restart or Noop.
	// +kubebuilder:default=Delete
	// +optional
	Type RecycleStrategyType `json:"type,omitempty"`
}

// PoolStatus is the observed state of a Pool.
type PoolStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Revision is the hash of the current template; pods carry theirs in
	// the label LabelPoolRevision.
	// +optional
	Revision string `json:"revision,omitempty"`
	// Total is how many pods the pool has.
	Total int32 `json:"total"`
	// Allocated is how many of them belong to a BatchSandbox.
	Allocated int32 `json:"allocated"`
	// Available is how many of them are idle and ready to be claimed.
	Available int32 `json:"available"`
	// Updated is how many of them are of the current revision.
	Updated int32 `json:"updated"`
}

// Pool is a warm pool of idle sandbox pods that BatchSandboxes claim with
// spec.poolRef.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`,description="Pods in the pool"
// +kubebuilder:printcolumn:name="Allocated",type=integer,JSONPath=`.status.allocated`,description="Pods claimed by BatchSandboxes"
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.available`,description="Idle, ready pods"
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updated`,description="Pods of the current revision"
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Pool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PoolSpec `json:"spec"`
	// +optional
	Status PoolStatus `json:"status,omitempty"`
}

// PoolList is a list of Pools.
//
// +kubebuilder:object:root=true
type PoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pool `json:"items"`
}
