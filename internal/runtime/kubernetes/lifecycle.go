package kubernetes

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// deleteTimeout bounds Delete's wait for the objects to go when ctx has no
// earlier deadline.
const deleteTimeout = 2 * time.Minute

func (r *Runtime) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: r.ns, Name: name}
}

// observe reads sandbox id's objects from the cache, or from the API
// server when fresh is set (decisions that must not act on a stale view).
func (r *Runtime) observe(ctx context.Context, id string, fresh bool) (observed, error) {
	var rd client.Reader = r.cached
	if fresh {
		rd = r.api
	}
	var o observed
	b := &sandboxv1alpha1.BatchSandbox{}
	if err := rd.Get(ctx, r.key(id), b); err != nil {
		return o, apiErr(err, "kubernetes: sandbox %s", id)
	}
	if b.Labels[labelID] != id {
		return o, classErr(runtime.ErrNotFound, "kubernetes: sandbox %s: the BatchSandbox is not one of this runtime's", id)
	}
	o.bsbx = b
	p := &corev1.Pod{}
	switch err := rd.Get(ctx, r.key(podName(id)), p); {
	case err == nil:
		if metav1.IsControlledBy(p, b) {
			o.pod = p
		}
	case !apierrors.IsNotFound(err):
		return o, apiErr(err, "kubernetes: pod of sandbox %s", id)
	}
	s := &corev1.Secret{}
	err := rd.Get(ctx, r.key(id), s)
	if apierrors.IsNotFound(err) && !fresh {
		// The informer may lag behind a create.
		err = r.api.Get(ctx, r.key(id), s)
	}
	switch {
	case err == nil:
		o.secret = s
	case !apierrors.IsNotFound(err):
		return o, apiErr(err, "kubernetes: secret of sandbox %s", id)
	}
	return o, nil
}

// Get reports sandbox id from the cache.
func (r *Runtime) Get(ctx context.Context, id string) (runtime.Sandbox, error) {
	o, err := r.observe(ctx, id, false)
	if err != nil {
		return runtime.Sandbox{}, err
	}
	return sandboxOf(o)
}

// List reports every sandbox of the namespace from the cache.
func (r *Runtime) List(ctx context.Context) ([]runtime.Sandbox, error) {
	var list sandboxv1alpha1.BatchSandboxList
	if err := r.cached.List(ctx, &list, client.InNamespace(r.ns), client.HasLabels{labelID}); err != nil {
		return nil, apiErr(err, "kubernetes: list sandboxes")
	}
	out := make([]runtime.Sandbox, 0, len(list.Items))
	for i := range list.Items {
		b := &list.Items[i]
		id := b.Labels[labelID]
		if id != b.Name {
			continue
		}
		o := observed{bsbx: b}
		p := &corev1.Pod{}
		if err := r.cached.Get(ctx, r.key(podName(id)), p); err == nil && metav1.IsControlledBy(p, b) {
			o.pod = p
		}
		s := &corev1.Secret{}
		if err := r.cached.Get(ctx, r.key(id), s); err == nil {
			o.secret = s
		}
		sb, err := sandboxOf(o)
		if err != nil {
			r.log.WarnContext(ctx, "skipping an unreadable sandbox", "sandbox", id, "err", err)
			continue
		}
		out = append(out, sb)
	}
	return out, nil
}

// Delete deletes the BatchSandbox (its pod and Secrets with it) and waits
// until the cluster and the cache hold none of them.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	b := &sandboxv1alpha1.BatchSandbox{}
	if err := r.api.Get(ctx, r.key(id), b); err != nil {
		return apiErr(err, "kubernetes: delete sandbox %s", id)
	}
	if b.Labels[labelID] != id {
		return classErr(runtime.ErrNotFound, "kubernetes: delete sandbox %s: the BatchSandbox is not one of this runtime's", id)
	}
	if err := r.deleteAll(ctx, id, managedClaims(b.Annotations)); err != nil {
		return err
	}
	r.log.InfoContext(ctx, "sandbox deleted", "sandbox", id)
	return nil
}

// deleteAll deletes every object of sandbox id, and the claims among
// claims that it made, and waits for them to go.
func (r *Runtime) deleteAll(ctx context.Context, id string, claims []string) error {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	fg := client.PropagationPolicy(metav1.DeletePropagationForeground)
	err := r.cached.Delete(ctx, &sandboxv1alpha1.BatchSandbox{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: id}}, fg)
	if err != nil && !apierrors.IsNotFound(err) {
		return apiErr(err, "kubernetes: delete sandbox %s", id)
	}
	// The Secrets are owned by the BatchSandbox; deleting them here does
	// not wait for the garbage collector (and covers a failed create that
	// never set the owner).
	if err := r.deleteSecrets(ctx, id); err != nil {
		return err
	}
	if err := r.waitGone(ctx, id); err != nil {
		return err
	}
	// A claim goes once no pod uses it (pvc-protection).
	if err := r.deleteClaims(ctx, id, claims); err != nil {
		return apiErr(err, "kubernetes: sandbox %s: waiting for its volumes to go", id)
	}
	return nil
}

// deleteSecrets deletes the Secrets of sandbox id.
func (r *Runtime) deleteSecrets(ctx context.Context, id string) error {
	for _, name := range []string{id, pullSecret(id)} {
		err := r.cached.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}})
		if err != nil && !apierrors.IsNotFound(err) {
			return apiErr(err, "kubernetes: delete secret %s of sandbox %s", name, id)
		}
	}
	return nil
}

// waitGone polls (the cache, then the API server to confirm) until no
// BatchSandbox, pod or Secret of sandbox id is left.
func (r *Runtime) waitGone(ctx context.Context, id string) error {
	left := func(rd client.Reader) (string, error) {
		objs := []struct {
			obj  client.Object
			name string
		}{
			{&sandboxv1alpha1.BatchSandbox{}, id},
			{&corev1.Pod{}, podName(id)},
			{&corev1.Secret{}, id},
			{&corev1.Secret{}, pullSecret(id)},
		}
		for _, o := range objs {
			err := rd.Get(ctx, r.key(o.name), o.obj)
			if err == nil {
				return fmt.Sprintf("%T %s", o.obj, o.name), nil
			}
			if !apierrors.IsNotFound(err) {
				return "", err
			}
		}
		return "", nil
	}
	var last string
	err := poll(ctx, func() (bool, error) {
		var err error
		if last, err = left(r.cached); err != nil || last != "" {
			return false, err
		}
		last, err = left(r.api)
		return last == "", err
	})
	if err != nil {
		return apiErr(err, "kubernetes: sandbox %s: waiting for its objects to go (left: %s)", id, last)
	}
	return nil
}

// poll calls cond with a growing delay (up to 250ms) until it holds,
// fails or ctx ends.
func poll(ctx context.Context, cond func() (bool, error)) error {
	return pollUpTo(ctx, DefaultCreatePollInterval, cond)
}

// pollUpTo is poll with delays growing up to most.
func pollUpTo(ctx context.Context, most time.Duration, cond func() (bool, error)) error {
	for delay := min(10*time.Millisecond, most); ; delay = min(2*delay, most) {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Pause sets spec.pause: the operator commits the root filesystem and
// releases the pod. ErrConflict unless the sandbox runs.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	return r.setPause(ctx, id, true, sandbox.StateRunning)
}

// Resume clears spec.pause: the operator makes the pod again from the
// snapshot. ErrConflict unless the sandbox is paused.
//
// It returns once the sandbox runs again and execd answers (bounded by
// CreateTimeout), as on Docker, where a resume is done when it returns:
// the SDKs connect to execd right after it (the JS SDK's resume does), and
// a pod recreated from the snapshot takes seconds to get there.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	if err := r.setPause(ctx, id, false, sandbox.StatePaused); err != nil {
		return err
	}
	o, err := r.observe(ctx, id, false)
	if err != nil {
		return err
	}
	var token string
	if o.secret != nil {
		token = string(o.secret.Data[keyExecdToken])
	}
	if err := r.waitRunning(ctx, runtime.Spec{ID: id, ExecdToken: token}); err != nil {
		return fmt.Errorf("kubernetes: resume sandbox %s: %w", id, err)
	}
	return nil
}

func (r *Runtime) setPause(ctx context.Context, id string, pause bool, from string) error {
	verb := map[bool]string{true: "pause", false: "resume"}[pause]
	for attempt := 0; ; attempt++ {
		o, err := r.observe(ctx, id, true)
		if err != nil {
			return err
		}
		if st := stateOf(o); st.state != from {
			return classErr(runtime.ErrConflict, "kubernetes: %s sandbox %s: it is %s, not %s", verb, id, st.state, from)
		}
		b := o.bsbx
		if b.Spec.PoolRef != "" {
			return classErr(runtime.ErrNotSupported, "kubernetes: %s sandbox %s: a pooled sandbox cannot be paused", verb, id)
		}
		orig := b.DeepCopy()
		b.Spec.Pause = ptr.To(pause)
		err = r.cached.Patch(ctx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) && attempt < 5 {
			continue // changed under us (the operator's status); look again
		}
		if err != nil {
			return apiErr(err, "kubernetes: %s sandbox %s", verb, id)
		}
		// Get reads the cache: return once it has seen the change, so a
		// Get after Pause never reports the sandbox still running.
		rv := b.ResourceVersion
		werr := poll(ctx, func() (bool, error) {
			c := &sandboxv1alpha1.BatchSandbox{}
			if err := r.cached.Get(ctx, r.key(id), c); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return c.ResourceVersion == rv || c.Spec.Pause != nil && *c.Spec.Pause == pause, nil
		})
		if werr != nil {
			return apiErr(werr, "kubernetes: %s sandbox %s: waiting for the cache", verb, id)
		}
		r.log.InfoContext(ctx, "sandbox "+verb+"d", "sandbox", id)
		return nil
	}
}

// Address is the pod's IP (the endpoints the operator publishes) and the
// port itself.
func (r *Runtime) Address(ctx context.Context, id string, port int) (runtime.Address, error) {
	if port < 1 || port > 65535 {
		return runtime.Address{}, classErr(runtime.ErrInvalid, "kubernetes: sandbox %s: port %d out of range", id, port)
	}
	o, err := r.observe(ctx, id, false)
	if err != nil {
		return runtime.Address{}, err
	}
	ip, err := podIP(o)
	if err != nil {
		return runtime.Address{}, err
	}
	return runtime.Address{Host: ip, Port: port}, nil
}

// podIP is the address of the sandbox's pod.
func podIP(o observed) (string, error) {
	id := o.bsbx.Name
	if st := stateOf(o); st.state != sandbox.StateRunning && st.state != sandbox.StatePending {
		return "", classErr(runtime.ErrConflict, "kubernetes: sandbox %s is %s: no address", id, st.state)
	}
	ips, err := sandboxv1alpha1.Endpoints(o.bsbx)
	if err != nil {
		return "", fmt.Errorf("kubernetes: sandbox %s: %w", id, err)
	}
	if len(ips) > 0 && ips[0] != "" {
		return ips[0], nil
	}
	if o.pod != nil && o.pod.Status.PodIP != "" && net.ParseIP(o.pod.Status.PodIP) != nil {
		return o.pod.Status.PodIP, nil
	}
	return "", classErr(runtime.ErrConflict, "kubernetes: sandbox %s has no pod address yet", id)
}
