// Package pool is the Pool controller: it keeps a warm pool of idle pods
// made from a Pool's template, and hands them to BatchSandboxes (Allocate)
// and takes them back (Release).
//
// # Sizes
//
// A pool's pods are those labelled sandbox.opensandbox.io/pool-name=<pool>
// whose controller owner reference is the Pool. A pod is allocated when the
// alloc-status annotation of a BatchSandbox whose poolRef is the pool (or
// "*") lists it; every other pod, not being deleted, not finished and not
// labelled pool.opensandbox.io/evict, is idle. With A allocated and I idle:
//
//	target idle = max(0, clamp(A + clamp(I, bufferMin, bufferMax), poolMin, poolMax) - A)
//
// (IdleTarget). Idle pods beyond it are deleted (old revisions, then not
// ready ones, then the highest slots first); below it pods are created.
// scaleStrategy.maxUnavailable (of A + target, rounded up, at least 1)
// bounds the idle pods of the current revision that are not yet ready, new
// ones included. Finished and evict-labelled idle pods are deleted at once
// and replaced. Allocated pods are never deleted by the pool.
//
// # Revisions
//
// The revision is the first 10 hex digits of the SHA-256 of the template's
// JSON (Revision); pods carry it in sandbox.opensandbox.io/pool-revision.
// Only ready idle pods of the current revision are available. After a
// template change idle pods of older revisions are deleted and replaced so
// that at most updateStrategy.maxUnavailable idle pods (old ones
// terminating plus new ones not yet ready) are down at once. Allocated pods
// keep their revision; once released (Noop) they are rolled like any other
// idle pod.
//
// # Names: no over-creation after a restart
//
// Pod names are deterministic: slot i of pool p is "p-i" (PodName), with i
// in [0, poolMax), and a new pod takes the lowest slot no pod (terminating
// included) and no alloc-status holds. Before it creates or deletes, the
// reconciler reads the pods and allocations from the apiserver, not its
// cache, so a restarted controller counts exactly what exists; and should a
// second writer (an old leader that has not yet stopped) pick a slot too,
// its create fails with AlreadyExists. No expectations bookkeeping is
// needed, and no state at all can make the pool hold more than poolMax pods.
// (With generateName every retry is a new pod, and in-memory expectations
// are lost with the process.) Names held by an alloc-status
// stay reserved even when their pod is gone, so that a new pod is never
// mistaken for one a BatchSandbox still lists.
//
// # Allocation: one writer
//
// Allocate writes the chosen pods into the BatchSandbox's alloc-status in
// one update; no pod is written. Two BatchSandboxes are different objects,
// so optimistic concurrency on each alone cannot stop both from listing one
// pod: the pool's allocation is changed only under a per-pool lock held by
// Allocate, Release and the reconciler (when it creates or deletes pods),
// and under that lock it is read from the apiserver, not the cache. That
// makes the controller process, which leader election makes the only one
// running, the single writer of allocations. A conflict on the update
// (someone else changed the BatchSandbox) retries from fresh state.
//
// # Recycling
//
// Release acts per recycleStrategy: Delete deletes the pods, then unlists
// them; the pool replaces them. Noop unlists them. Restart is Delete:
// Kubernetes has no API to restart a container in place (the upstream
// operator relies on an agent of its own inside the pod), so the restarted
// sandbox is a fresh pod, made in the lowest free slot.
package pool
