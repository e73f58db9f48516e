package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PoolRefAny as spec.poolRef lets the controller pick any Pool whose template
// matches what the BatchSandbox asks for.
const PoolRefAny = "*"

// BatchSandboxSpec is the desired state of a BatchSandbox: replicas sandbox
// pods, made from template (template mode) or claimed idle from a warm Pool
// (pool mode, poolRef). Exactly one of template and poolRef is set, except
// that poolRef "*" may come with a template: it then picks a Pool whose
// template matches that one (same images, labels, node selector, enough
// resources); without one, any Pool of the namespace.
//
// +kubebuilder:validation:XValidation:rule="has(self.template) != has(self.poolRef) || (has(self.poolRef) && self.poolRef == '*')",message="exactly one of spec.template and spec.poolRef must be set (a template may come with poolRef \"*\" only, to choose the pool)",fieldPath=".poolRef"
// +kubebuilder:validation:XValidation:rule="has(self.poolRef) == has(oldSelf.poolRef) && (!has(self.poolRef) || self.poolRef == oldSelf.poolRef)",message="spec.poolRef cannot be set, removed or changed after creation: the pods a batch holds belong to its pool",fieldPath=".poolRef"
// +kubebuilder:validation:XValidation:rule="!has(self.poolRef) || (!has(self.taskTemplate) && !(has(self.pause) && self.pause))",message="spec.taskTemplate and spec.pause are supported in template mode only: pool pods carry no task executor and are not committed",fieldPath=".poolRef"
// +kubebuilder:validation:XValidation:rule="!has(self.pause) || !self.pause || self.replicas == 1",message="spec.pause can be true only when spec.replicas is 1",fieldPath=".pause"
type BatchSandboxSpec struct {
	// Replicas is how many sandbox pods the batch has. Default 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// PoolRef names the Pool whose idle pods are claimed (pool mode), or is
	// "*" for any Pool whose template matches template (when set). Mutually
	// exclusive with template except for "*". Claiming costs one write to this object's alloc-status
	// annotation, however many pods it takes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)$`
	// +optional
	PoolRef string `json:"poolRef,omitempty"`

	// Template describes the pods created in template mode. Mutually
	// exclusive with poolRef.
	// +optional
	Template *corev1.PodTemplateSpec `json:"template,omitempty"`

	// ShardPatches are patches to template, one per replica in index order
	// (strategic merge patches of a PodTemplateSpec); replicas beyond the
	// list use template unpatched.
	// +optional
	ShardPatches []runtime.RawExtension `json:"shardPatches,omitempty"`

	// ExpireTime is when the BatchSandbox is deleted; a time in the past
	// deletes it at once. Unset, it lives until deleted.
	// +optional
	ExpireTime *metav1.Time `json:"expireTime,omitempty"`

	// TaskTemplate is a process run in every replica once its pod is ready;
	// status counts the tasks by state.
	// +optional
	TaskTemplate *TaskTemplateSpec `json:"taskTemplate,omitempty"`

	// ShardTaskPatches are patches to taskTemplate, one per replica in index
	// order (JSON merge patches of a TaskTemplateSpec).
	// +optional
	ShardTaskPatches []runtime.RawExtension `json:"shardTaskPatches,omitempty"`

	// TaskResourcePolicyWhenCompleted says what happens to a replica's pod
	// once its task has succeeded or failed: Retain (default) keeps it until
	// the BatchSandbox is deleted, Release frees it at once.
	// +kubebuilder:default=Retain
	// +optional
	TaskResourcePolicyWhenCompleted *TaskResourcePolicy `json:"taskResourcePolicyWhenCompleted,omitempty"`

	// Pause true commits the sandbox's root filesystem to a snapshot image
	// and releases its pod; false resumes it, recreating the pod from the
	// snapshot under the same name; unset does neither. Needs replicas 1.
	// Memory and processes are not kept.
	// +optional
	Pause *bool `json:"pause,omitempty"`
}

// TaskResourcePolicy is what happens to a pod whose task has completed.
// +kubebuilder:validation:Enum=Retain;Release
type TaskResourcePolicy string

const (
	// TaskResourcePolicyRetain keeps the pod until the BatchSandbox goes.
	TaskResourcePolicyRetain TaskResourcePolicy = "Retain"
	// TaskResourcePolicyRelease frees the pod as soon as its task completes.
	TaskResourcePolicyRelease TaskResourcePolicy = "Release"
)

// TaskTemplateSpec describes the task run in each replica.
type TaskTemplateSpec struct {
	// Spec is the task.
	// +optional
	Spec TaskSpec `json:"spec,omitempty"`
}

// TaskSpec is one task: a process and how long it may run.
type TaskSpec struct {
	// Process is the process to run in the sandbox container.
	// +optional
	Process *ProcessTask `json:"process,omitempty"`

	// TimeoutSeconds is how long the task may run before it is stopped
	// and counted as failed. Unset, it may run as long as the sandbox lives.
	// +kubebuilder:validation:Minimum=1
	// +optional
	TimeoutSeconds *int64 `json:"timeoutSeconds,omitempty"`
}

// ProcessTask is a process started inside a sandbox.
type ProcessTask struct {
	// Command is the executable and its leading arguments.
	// +kubebuilder:validation:MinItems=1
	// +required
	Command []string `json:"command"`

	// Args are appended to command.
	// +optional
	Args []string `json:"args,omitempty"`

	// Env are environment variables added to the process's environment.
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// WorkingDir is the process's working directory; unset, the
	// container's.
	// +optional
	WorkingDir string `json:"workingDir,omitempty"`
}

// BatchSandboxPhase is the one-word summary of a BatchSandbox.
// +kubebuilder:validation:Enum=Pending;Succeed;Pausing;Paused;Resuming;Failed
type BatchSandboxPhase string

const (
	// BatchSandboxPhasePending: not every replica has a ready pod yet.
	BatchSandboxPhasePending BatchSandboxPhase = "Pending"
	// BatchSandboxPhaseSucceed: every replica has a ready pod (the sandboxes run).
	BatchSandboxPhaseSucceed BatchSandboxPhase = "Succeed"
	// BatchSandboxPhasePausing: the root filesystem is being committed.
	BatchSandboxPhasePausing BatchSandboxPhase = "Pausing"
	// BatchSandboxPhasePaused: the snapshot exists and the pod is released.
	BatchSandboxPhasePaused BatchSandboxPhase = "Paused"
	// BatchSandboxPhaseResuming: the pod is being recreated from the snapshot.
	BatchSandboxPhaseResuming BatchSandboxPhase = "Resuming"
	// BatchSandboxPhaseFailed: a pod failed, or a pause or resume did.
	BatchSandboxPhaseFailed BatchSandboxPhase = "Failed"
)

// Condition types of a BatchSandbox (status.conditions[].type).
const (
	// BatchSandboxConditionReady is True when every replica's pod is ready.
	BatchSandboxConditionReady = "Ready"
	// BatchSandboxConditionProgressing is True while pods are being created, claimed
	// or replaced.
	BatchSandboxConditionProgressing = "Progressing"
	// BatchSandboxConditionPaused is True while the sandbox is paused.
	BatchSandboxConditionPaused = "Paused"
	// BatchSandboxConditionPauseFailed is True when the last pause failed; its
	// message says why.
	BatchSandboxConditionPauseFailed = "PauseFailed"
	// BatchSandboxConditionResumeFailed is True when the last resume failed.
	BatchSandboxConditionResumeFailed = "ResumeFailed"
	// BatchSandboxConditionPodFailed is True when a pod of the batch has failed or
	// vanished; the pod is reported, not silently replaced.
	BatchSandboxConditionPodFailed = "PodFailed"
)

// BatchSandboxStatus is the observed state of a BatchSandbox.
type BatchSandboxStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is how many pods the batch has now.
	Replicas int32 `json:"replicas"`
	// Allocated is how many of them are scheduled to a node (or claimed
	// from a pool).
	Allocated int32 `json:"allocated"`
	// Ready is how many of them are ready.
	Ready int32 `json:"ready"`
	// TaskRunning counts tasks that are running.
	TaskRunning int32 `json:"taskRunning"`
	// TaskSucceed counts tasks that exited 0.
	TaskSucceed int32 `json:"taskSucceed"`
	// TaskFailed counts tasks that failed or timed out.
	TaskFailed int32 `json:"taskFailed"`
	// TaskPending counts tasks not yet handed to a pod.
	TaskPending int32 `json:"taskPending"`
	// TaskUnknown counts tasks whose state could not be read.
	TaskUnknown int32 `json:"taskUnknown"`
	// Phase summarises the state in one word.
	// +optional
	Phase BatchSandboxPhase `json:"phase,omitempty"`
	// PauseObservedGeneration is the metadata.generation whose spec.pause
	// the controller last acted on.
	// +optional
	PauseObservedGeneration int64 `json:"pauseObservedGeneration,omitempty"`
	// Conditions are Ready, Progressing, Paused, PauseFailed, ResumeFailed
	// and PodFailed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BatchSandbox is a batch of sandboxes: replicas pods made from a template or
// claimed from a warm Pool, their IPs published in the endpoints annotation.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bsbx
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`,description="Replicas asked for"
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.replicas`,description="Pods the batch has"
// +kubebuilder:printcolumn:name="Allocated",type=integer,JSONPath=`.status.allocated`,description="Pods scheduled or claimed"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`,description="Pods ready"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.poolRef`,priority=1
// +kubebuilder:printcolumn:name="Task_Running",type=integer,JSONPath=`.status.taskRunning`,priority=1
// +kubebuilder:printcolumn:name="Task_Succeed",type=integer,JSONPath=`.status.taskSucceed`,priority=1
// +kubebuilder:printcolumn:name="Task_Failed",type=integer,JSONPath=`.status.taskFailed`,priority=1
// +kubebuilder:printcolumn:name="Task_Unknown",type=integer,JSONPath=`.status.taskUnknown`,priority=1
// +kubebuilder:printcolumn:name="Expire",type=string,JSONPath=`.spec.expireTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BatchSandbox struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec BatchSandboxSpec `json:"spec"`
	// +optional
	Status BatchSandboxStatus `json:"status,omitempty"`
}

// BatchSandboxList is a list of BatchSandboxes.
//
// +kubebuilder:object:root=true
type BatchSandboxList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BatchSandbox `json:"items"`
}
