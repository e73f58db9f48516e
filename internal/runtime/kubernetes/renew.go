package kubernetes

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

var _ runtime.Renewer = (*Runtime)(nil)

// Renew moves the BatchSandbox's expireTime (which the operator enforces)
// to at and returns once the cache has seen it. ErrConflict for a sandbox
// created without expiry.
func (r *Runtime) Renew(ctx context.Context, id string, at time.Time) error {
	o, err := r.observe(ctx, id, true)
	if err != nil {
		return err
	}
	b := o.bsbx
	if b.Spec.ExpireTime == nil {
		return classErr(runtime.ErrConflict, "kubernetes: renew sandbox %s: it was created without expiry", id)
	}
	want := metav1.NewTime(at.UTC().Truncate(time.Second))
	orig := b.DeepCopy()
	b.Spec.ExpireTime = &want
	// Last writer wins: two renewals each move the expiry to a time they chose.
	if err := r.cached.Patch(ctx, b, client.MergeFrom(orig)); err != nil {
		return apiErr(err, "kubernetes: renew sandbox %s", id)
	}
	err = poll(ctx, func() (bool, error) {
		c := &sandboxv1alpha1.BatchSandbox{}
		if err := r.cached.Get(ctx, r.key(id), c); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return c.Spec.ExpireTime != nil && c.Spec.ExpireTime.Equal(&want), nil
	})
	if err != nil {
		return apiErr(err, "kubernetes: renew sandbox %s: waiting for the cache", id)
	}
	r.log.InfoContext(ctx, "sandbox renewed", "sandbox", id, "expires_at", want.Time)
	return nil
}
