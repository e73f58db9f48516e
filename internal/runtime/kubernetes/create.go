package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
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

// cleanupTimeout bounds the removal of what a failed Create made; it runs
// even when the caller's context is gone.
const cleanupTimeout = time.Minute

// pullFailures are the kubelet's waiting reasons that mean the image
// cannot be pulled.
var pullFailures = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
}

// startFailures are waiting reasons after which the pod does not start.
var startFailures = map[string]bool{"CrashLoopBackOff": true}

// retriedFailures are waiting reasons the kubelet retries and that often
// pass: "failed to sync secret cache: timed out" (a CI run failed on it
// while the Node authorizer had not yet seen the pod), a runtime busy
// under load. They fail a create only once they have lasted
// retriedFailureGrace; until then the create waits, as the kubelet does.
var retriedFailures = map[string]bool{
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

const retriedFailureGrace = 30 * time.Second

// Create creates sandbox spec.ID and returns once execd in its pod
// answers. A failed create leaves nothing behind.
func (r *Runtime) Create(ctx context.Context, spec runtime.Spec) (runtime.Sandbox, error) {
	if err := validate(spec); err != nil {
		return runtime.Sandbox{}, err
	}
	start := time.Now()
	switch spec.PoolRef {
	case "":
	case sandboxv1alpha1.PoolRefAny:
		ref, err := r.resolvePoolRef(ctx, spec)
		if err != nil {
			return runtime.Sandbox{}, err
		}
		spec.PoolRef = ref
	default:
		if err := r.checkPool(ctx, spec); err != nil {
			return runtime.Sandbox{}, err
		}
	}
	image := spec.Image
	if spec.SnapshotID != "" {
		var err error
		if image, err = r.snapshotImage(ctx, spec.SnapshotID); err != nil {
			return runtime.Sandbox{}, fmt.Errorf("kubernetes: sandbox %s: %w", spec.ID, err)
		}
	}
	pull, err := r.registrySecret(spec)
	if err != nil {
		return runtime.Sandbox{}, fmt.Errorf("kubernetes: sandbox %s: image pull secret: %w", spec.ID, err)
	}
	var pullNames []string
	if pull != nil {
		pullNames = append(pullNames, pull.Name)
	}

	// The token Secret comes first, so the pod never waits for it; it is
	// also what makes a second create of the same id fail before it
	// touches anything of the first.
	tok := r.tokenSecret(spec)
	if err := r.cached.Create(ctx, tok); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return runtime.Sandbox{}, classErr(runtime.ErrConflict, "kubernetes: sandbox %s already exists", spec.ID)
		}
		return runtime.Sandbox{}, apiErr(err, "kubernetes: sandbox %s: create its secret", spec.ID)
	}
	claims, managed, err := r.prepareVolumes(ctx, spec)
	var bsbx *sandboxv1alpha1.BatchSandbox
	if err == nil {
		bsbx, err = r.batchSandbox(spec, image, pullNames, managed)
		if err != nil {
			err = fmt.Errorf("kubernetes: sandbox %s: %w", spec.ID, err)
		}
	}
	if err != nil {
		r.undoCreate(ctx, spec.ID, false, claims)
		return runtime.Sandbox{}, err
	}
	sb, madeBatch, err := r.create(ctx, spec, bsbx, managed, tok, pull)
	if err != nil {
		r.undoCreate(ctx, spec.ID, madeBatch, claims)
		return runtime.Sandbox{}, err
	}
	r.log.InfoContext(ctx, "sandbox created", "sandbox", spec.ID, "image", image, "elapsed", time.Since(start).Round(time.Millisecond))
	return sb, nil
}

// create makes the rest of the sandbox after its token Secret and waits for
// it; madeBatch tells whether the BatchSandbox is ours to remove.
func (r *Runtime) create(ctx context.Context, spec runtime.Spec, bsbx *sandboxv1alpha1.BatchSandbox, managed []string, secrets ...*corev1.Secret) (_ runtime.Sandbox, madeBatch bool, _ error) {
	if secrets[1] != nil {
		if err := r.cached.Create(ctx, secrets[1]); err != nil {
			return runtime.Sandbox{}, false, apiErr(err, "kubernetes: sandbox %s: create its image pull secret", spec.ID)
		}
	}
	if err := r.cached.Create(ctx, bsbx); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Not ours to undo: a BatchSandbox of that name without our
			// Secret (made by someone else).
			return runtime.Sandbox{}, false, classErr(runtime.ErrConflict, "kubernetes: sandbox %s: a BatchSandbox of that name exists", spec.ID)
		}
		return runtime.Sandbox{}, false, apiErr(err, "kubernetes: sandbox %s: create the BatchSandbox", spec.ID)
	}
	// The Secrets go with the BatchSandbox.
	owner := metav1.OwnerReference{
		APIVersion: sandboxv1alpha1.GroupVersion.String(), Kind: "BatchSandbox",
		Name: bsbx.Name, UID: bsbx.UID, BlockOwnerDeletion: ptr.To(true),
	}
	for _, s := range secrets {
		if s == nil {
			continue
		}
		orig := s.DeepCopy()
		s.OwnerReferences = []metav1.OwnerReference{owner}
		if err := r.cached.Patch(ctx, s, client.MergeFrom(orig)); err != nil {
			return runtime.Sandbox{}, true, apiErr(err, "kubernetes: sandbox %s: own secret %s", spec.ID, s.Name)
		}
	}
	for _, name := range managed {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: name}}
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q}]}}`,
			owner.APIVersion, owner.Kind, owner.Name, owner.UID)))
		if err := r.cached.Patch(ctx, pvc, patch); err != nil {
			return runtime.Sandbox{}, true, apiErr(err, "kubernetes: sandbox %s: own claim %s", spec.ID, name)
		}
	}
	if err := r.waitRunning(ctx, spec); err != nil {
		return runtime.Sandbox{}, true, err
	}
	sb, err := r.Get(ctx, spec.ID)
	return sb, true, err
}

// undoCreate removes what a failed Create made, even when ctx is done.
// Without madeBatch only the Secrets and claims are removed: a
// BatchSandbox of that name is someone else's. claims are those the create
// made.
func (r *Runtime) undoCreate(ctx context.Context, id string, madeBatch bool, claims []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var err error
	if madeBatch {
		err = r.deleteAll(ctx, id, claims)
	} else if err = r.deleteSecrets(ctx, id); err == nil {
		err = r.deleteClaims(ctx, id, claims)
	}
	if err != nil {
		r.log.ErrorContext(ctx, "remove what a failed create made", "sandbox", id, "err", err)
	}
}

// waitRunning waits (bounded by CreateTimeout) until the pod is ready and
// execd answers /ping with the token; it fails early when the pod cannot
// start. A pool's pod is claimed for the sandbox first. A timeout is a
// start failure saying where the sandbox stood (the pod unschedulable,
// say), not ErrUnavailable: the cluster answered, the sandbox did not
// start. Only when the BatchSandbox never showed up is it ErrUnavailable.
func (r *Runtime) waitRunning(ctx context.Context, spec runtime.Spec) error {
	id, token := spec.ID, spec.ExecdToken
	wctx, cancel := context.WithTimeout(ctx, r.opts.CreateTimeout)
	defer cancel()
	var why string
	var failure error
	seen := false
	var retriedSince time.Time
	claimed := spec.PoolRef == ""
	err := pollUpTo(wctx, r.opts.CreatePollInterval, func() (bool, error) {
		o, err := r.observe(wctx, id, false)
		if errors.Is(err, runtime.ErrNotFound) {
			why = "the BatchSandbox is not in the cache yet"
			return false, nil
		}
		if err != nil {
			return false, err
		}
		seen = true
		if failure = startFailure(o); failure != nil {
			return false, failure
		}
		if w := retried(o); w != nil {
			if retriedSince.IsZero() {
				retriedSince = time.Now()
			}
			if time.Since(retriedSince) >= retriedFailureGrace {
				failure = fmt.Errorf("kubernetes: sandbox %s: the pod cannot start (for %s): %s: %s", id, retriedFailureGrace, w.Reason, w.Message)
				return false, failure
			}
			why = fmt.Sprintf("the kubelet retries: %s: %s", w.Reason, w.Message)
			return false, nil
		}
		retriedSince = time.Time{}
		st := stateOf(o)
		why = fmt.Sprintf("%s: %s %s", st.state, st.reason, st.message)
		if st.state != sandbox.StateRunning {
			return false, nil
		}
		ip, err := podIP(o)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		if !claimed {
			switch err := r.claim(wctx, ip, spec); {
			case errors.Is(err, errClaimedBefore):
				failure = classErr(runtime.ErrUnavailable, "kubernetes: sandbox %s: pool %s handed over a pod whose execd was claimed before; it is given back", id, spec.PoolRef)
				return false, failure
			case errors.Is(err, errNotClaimable):
				failure = classErr(runtime.ErrInvalid, "kubernetes: sandbox %s: pool %s: %v", id, spec.PoolRef, err)
				return false, failure
			case err != nil:
				why = "claiming execd: " + err.Error()
				return false, nil
			}
			claimed = true
		}
		if err := r.ping(wctx, ip, token); err != nil {
			why = "execd: " + err.Error()
			return false, nil
		}
		return true, nil
	})
	switch {
	case err == nil:
		return nil
	case failure != nil:
		return failure
	case ctx.Err() != nil:
		return fmt.Errorf("kubernetes: sandbox %s: waiting for it to run (%s): %w", id, why, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded) && !seen:
		return classErr(runtime.ErrUnavailable, "kubernetes: sandbox %s: not running within %s (%s)", id, r.opts.CreateTimeout, why)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("kubernetes: sandbox %s: not running within %s (%s)", id, r.opts.CreateTimeout, why)
	}
	return apiErr(err, "kubernetes: sandbox %s: waiting for it to run", id)
}

// retried is the pod's waiting state when the kubelet retries it
// (retriedFailures), else nil.
func retried(o observed) *corev1.ContainerStateWaiting {
	if o.pod == nil {
		return nil
	}
	if w := waiting(o.pod); w != nil && retriedFailures[w.Reason] {
		return w
	}
	return nil
}

// startFailure tells whether the sandbox can no longer start: an image
// that cannot be pulled (ErrImagePull), a container that keeps failing, a
// failed pod or BatchSandbox.
func startFailure(o observed) error {
	id := o.bsbx.Name
	if st := stateOf(o); st.state == sandbox.StateFailed {
		// The operator's account of a failed pod names the pod; the pod's
		// own names the exit code (127: no such entrypoint).
		if o.pod != nil {
			if ps := podState(o.pod); ps.state == sandbox.StateFailed {
				st = ps
			}
		}
		return fmt.Errorf("kubernetes: sandbox %s failed: %s: %s", id, st.reason, st.message)
	}
	if o.pod == nil {
		return nil
	}
	w := waiting(o.pod)
	switch {
	case w == nil:
		return nil
	case pullFailures[w.Reason]:
		return fmt.Errorf("kubernetes: sandbox %s: %s: %s: %w", id, w.Reason, w.Message, runtime.ErrImagePull)
	case startFailures[w.Reason]:
		return fmt.Errorf("kubernetes: sandbox %s: the pod cannot start: %s: %s", id, w.Reason, w.Message)
	}
	return nil
}

// ping makes one GET /ping to execd at ip with the token.
func (r *Runtime) ping(ctx context.Context, ip, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(sandbox.ExecdPort)) + "/ping"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set(sandbox.AccessTokenHeader, token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/ping answered %s %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
