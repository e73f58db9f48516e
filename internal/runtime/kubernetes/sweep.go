package kubernetes

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

var _ runtime.Sweeper = (*Runtime)(nil)

// sweepGrace is how much older than the longest create a Secret without
// its BatchSandbox must be before Sweep removes it: a younger one may
// belong to a create in progress (on this server or another).
const sweepGrace = time.Minute

// Sweep deletes the Secrets of sandboxes whose BatchSandbox does not
// exist: a server that died between a create's first step (the token
// Secret, made before the BatchSandbox) and its owner reference leaves one,
// and it would make every later create of that id a conflict. Secrets
// with an owner are the garbage collector's.
func (r *Runtime) Sweep(ctx context.Context) {
	var list corev1.SecretList
	if err := r.cached.List(ctx, &list, client.InNamespace(r.ns), client.HasLabels{labelID}); err != nil {
		r.log.WarnContext(ctx, "sweep: list secrets", "err", err)
		return
	}
	cutoff := time.Now().Add(-(r.opts.CreateTimeout + cleanupTimeout + sweepGrace))
	for i := range list.Items {
		s := &list.Items[i]
		if len(s.OwnerReferences) > 0 || s.CreationTimestamp.Time.After(cutoff) || s.DeletionTimestamp != nil {
			continue
		}
		id := s.Labels[labelID]
		err := r.api.Get(ctx, r.key(id), &sandboxv1alpha1.BatchSandbox{})
		if !apierrors.IsNotFound(err) {
			if err != nil {
				r.log.WarnContext(ctx, "sweep: get sandbox", "sandbox", id, "err", err)
			}
			continue
		}
		err = r.cached.Delete(ctx, s, preconditionUID(s.UID))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			r.log.WarnContext(ctx, "sweep: delete an orphaned secret", "sandbox", id, "secret", s.Name, "err", err)
			continue
		}
		r.log.InfoContext(ctx, "sweep: deleted the secret of a sandbox that was never made", "sandbox", id, "secret", s.Name)
	}
}
