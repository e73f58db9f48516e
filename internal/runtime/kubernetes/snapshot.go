package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// CommitSnapshot makes the SandboxSnapshot snapshotID of sandbox sandboxID
// and waits (bounded by SnapshotTimeout) until the operator has committed
// and pushed its images. A failed or timed-out snapshot is deleted.
func (r *Runtime) CommitSnapshot(ctx context.Context, sandboxID, snapshotID string) error {
	if snapshotID == "" {
		return classErr(runtime.ErrInvalid, "kubernetes: snapshot of sandbox %s: empty snapshot id", sandboxID)
	}
	if err := grammar.CheckDNSSubdomain(snapshotID); err != nil {
		return fmt.Errorf("kubernetes: snapshot id %q cannot name a resource: %w", snapshotID, err)
	}
	o, err := r.observe(ctx, sandboxID, false)
	if err != nil {
		return err
	}
	// The operator commits a running pod; anything else would only wait
	// out SnapshotTimeout.
	if st := stateOf(o); st.state != sandbox.StateRunning {
		return classErr(runtime.ErrConflict, "kubernetes: snapshot of sandbox %s: it is %s, not Running", sandboxID, st.state)
	}
	start := time.Now()
	snap := &sandboxv1alpha1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: snapshotID, Namespace: r.ns, Labels: map[string]string{
			labelSnapshotID: snapshotID, labelSnapshotOf: sandboxID,
		}},
		Spec: sandboxv1alpha1.SandboxSnapshotSpec{SandboxName: sandboxID},
	}
	if err := r.cached.Create(ctx, snap); err != nil {
		return apiErr(err, "kubernetes: snapshot %s of sandbox %s", snapshotID, sandboxID)
	}
	wctx, cancel := context.WithTimeout(ctx, r.opts.SnapshotTimeout)
	defer cancel()
	var why string
	err = poll(wctx, func() (bool, error) {
		s := &sandboxv1alpha1.SandboxSnapshot{}
		if err := r.cached.Get(wctx, r.key(snapshotID), s); err != nil {
			return false, ignoreNotFound(err)
		}
		why = string(s.Status.Phase)
		if c := meta.FindStatusCondition(s.Status.Conditions, sandboxv1alpha1.SandboxSnapshotConditionReady); c != nil {
			why += ": " + c.Message
		}
		switch s.Status.Phase {
		case sandboxv1alpha1.SandboxSnapshotPhaseSucceed:
			return true, nil
		case sandboxv1alpha1.SandboxSnapshotPhaseFailed:
			return false, errSnapshotFailed
		}
		return false, nil
	})
	if err != nil {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer dcancel()
		if derr := r.DeleteSnapshot(dctx, snapshotID); derr != nil && !errors.Is(derr, runtime.ErrNotFound) {
			r.log.ErrorContext(ctx, "delete a failed snapshot", "snapshot", snapshotID, "err", derr)
		}
		switch {
		case errors.Is(err, errSnapshotFailed):
			return fmt.Errorf("kubernetes: snapshot %s of sandbox %s failed: %s", snapshotID, sandboxID, why)
		case ctx.Err() != nil:
			return fmt.Errorf("kubernetes: snapshot %s of sandbox %s (%s): %w", snapshotID, sandboxID, why, ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			return classErr(runtime.ErrUnavailable, "kubernetes: snapshot %s of sandbox %s: not done within %s (%s)", snapshotID, sandboxID, r.opts.SnapshotTimeout, why)
		}
		return apiErr(err, "kubernetes: snapshot %s of sandbox %s", snapshotID, sandboxID)
	}
	r.log.InfoContext(ctx, "snapshot committed", "sandbox", sandboxID, "snapshot", snapshotID, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

var errSnapshotFailed = errors.New("snapshot failed")

// ignoreNotFound treats a snapshot not (yet) in the cache as not done.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// DeleteSnapshot deletes the SandboxSnapshot and waits until it is gone
// (its commit Job removed); ErrNotFound if there is none of ours. The
// images it pushed stay in the registry.
func (r *Runtime) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	if snapshotID == "" {
		return classErr(runtime.ErrInvalid, "kubernetes: delete snapshot: empty snapshot id")
	}
	s := &sandboxv1alpha1.SandboxSnapshot{}
	if err := r.api.Get(ctx, r.key(snapshotID), s); err != nil {
		return apiErr(err, "kubernetes: delete snapshot %s", snapshotID)
	}
	if s.Labels[labelSnapshotID] != snapshotID {
		return classErr(runtime.ErrNotFound, "kubernetes: delete snapshot %s: not one of this runtime's", snapshotID)
	}
	if err := r.cached.Delete(ctx, s); err != nil {
		return apiErr(err, "kubernetes: delete snapshot %s", snapshotID)
	}
	wctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	err := poll(wctx, func() (bool, error) {
		err := r.api.Get(wctx, r.key(snapshotID), &sandboxv1alpha1.SandboxSnapshot{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return apiErr(err, "kubernetes: delete snapshot %s: waiting for it to go", snapshotID)
	}
	r.log.InfoContext(ctx, "snapshot deleted", "snapshot", snapshotID)
	return nil
}

// snapshotImage is the image of the main container the snapshot holds.
func (r *Runtime) snapshotImage(ctx context.Context, snapshotID string) (string, error) {
	s := &sandboxv1alpha1.SandboxSnapshot{}
	err := r.cached.Get(ctx, r.key(snapshotID), s)
	if apierrors.IsNotFound(err) {
		err = r.api.Get(ctx, r.key(snapshotID), s)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", classErr(runtime.ErrInvalid, "snapshot %s does not exist", snapshotID)
		}
		return "", apiErr(err, "snapshot %s", snapshotID)
	}
	if s.Labels[labelSnapshotID] != snapshotID {
		return "", classErr(runtime.ErrInvalid, "snapshot %s is not one of this runtime's", snapshotID)
	}
	if s.Status.Phase != sandboxv1alpha1.SandboxSnapshotPhaseSucceed {
		return "", classErr(runtime.ErrConflict, "snapshot %s is %s, not ready", snapshotID, s.Status.Phase)
	}
	for _, c := range s.Status.Containers {
		if c.ContainerName == mainContainer && c.ImageURI != "" {
			if c.ImageDigest != "" {
				// Pinned, as the operator's resume does.
				return c.ImageURI + "@" + c.ImageDigest, nil
			}
			return c.ImageURI, nil
		}
	}
	return "", classErr(runtime.ErrInvalid, "snapshot %s has no image of container %s", snapshotID, mainContainer)
}
