package v1alpha1

// The annotation, label and finalizer names of the OpenSandbox resources and
// the pods they own, in one place. They are part of the API: tools written
// for the upstream operator read and write the same names.

// Annotations on a BatchSandbox.
const (
	// AnnotationEndpoints holds the IPs of the batch's pods as a JSON array
	// of strings in replica order, e.g. ["10.244.0.7","10.244.0.8"]
	// (Endpoints, SetEndpoints).
	AnnotationEndpoints = "sandbox.opensandbox.io/endpoints"
	// AnnotationAllocStatus holds the pods allocated to the batch as
	// {"pods":["name",...]}: claiming N pods from a pool is one write of
	// this annotation, never a write per pod (GetAllocation, SetAllocation).
	AnnotationAllocStatus = "sandbox.opensandbox.io/alloc-status"
	// AnnotationAllocRelease holds, in the same format, the allocated pods
	// the batch gives back to their pool.
	AnnotationAllocRelease = "sandbox.opensandbox.io/alloc-release"
	// AnnotationAllocReleased holds, in the same format, the pods the pool
	// has taken back, so that a release is acted on once.
	AnnotationAllocReleased = "sandbox.opensandbox.io/alloc-released"
)

// Labels on the pods of a BatchSandbox.
const (
	// LabelBatchSandboxName is the name of the BatchSandbox a pod serves.
	LabelBatchSandboxName = "batch-sandbox.sandbox.opensandbox.io/name"
	// LabelBatchSandboxPodIndex is the pod's replica index ("0", "1", ...),
	// which selects its shard patches.
	LabelBatchSandboxPodIndex = "batch-sandbox.sandbox.opensandbox.io/pod-index"
)

// Labels and annotations of Pools and their pods.
const (
	// LabelPoolName is the name of the Pool a pod belongs to.
	LabelPoolName = "sandbox.opensandbox.io/pool-name"
	// LabelPoolRevision is the template revision a pool pod was made from
	// (PoolStatus.Revision when it was created).
	LabelPoolRevision = "sandbox.opensandbox.io/pool-revision"
	// LabelPoolEvict on an idle pool pod asks the pool to evict it; pods
	// allocated to a BatchSandbox are not evicted.
	LabelPoolEvict = "pool.opensandbox.io/evict"
	// LabelPoolEvictionHandler on a Pool names a custom eviction handler in
	// place of the default one.
	LabelPoolEvictionHandler = "pool.opensandbox.io/eviction-handler"
	// AnnotationRestartRecord on a pool pod recycled with the Restart
	// strategy records the in-place restarts done so far.
	AnnotationRestartRecord = "sandbox.opensandbox.io/restart-record"
	// AnnotationRestartConfig on a pool pod holds the settings of its
	// in-place restart.
	AnnotationRestartConfig = "sandbox.opensandbox.io/restart-config"
)

// Labels of SandboxSnapshots and what they make.
const (
	// LabelSandboxSnapshotName is the name of the SandboxSnapshot an object
	// (such as the commit job) works for.
	LabelSandboxSnapshotName = "sandbox.opensandbox.io/sandbox-snapshot-name"
)

// Finalizers.
const (
	// FinalizerTaskCleanup on a BatchSandbox holds its deletion until the
	// tasks in its pods are stopped and collected.
	FinalizerTaskCleanup = "batch-sandbox.sandbox.opensandbox.io/task-cleanup"
	// FinalizerPoolAllocation on a BatchSandbox holds its deletion until its
	// pool pods are given back to their pool.
	FinalizerPoolAllocation = "pool.sandbox.opensandbox.io/pool-allocation"
)
