package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubepool"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Sandboxes from a warm pool. A pool's pods start before their sandbox
// exists, so they cannot carry its token: the pools this driver makes run
// execd with the namespace's claim token (a Secret every such pool shares,
// made on first use), and Create hands a pod to its sandbox with one
// POST /claim that sets the sandbox's own token and environment. A pod is
// claimed once; after that the claim token opens nothing on it.

const (
	// ClaimSecret holds the claim token of the namespace's pools.
	ClaimSecret = "opensandbox-execd-claim"
	keyClaim    = "claim-token"
	claimEnv    = "EXECD_CLAIM_TOKEN"
	// labelExecd marks the pod templates of pools made by this driver, so
	// poolRef "*" picks only pools whose execd can be claimed.
	labelExecd = prefix + "execd"
	execdClaim = "claim"
)

// claimKeeper loads (or makes) the claim token once.
type claimKeeper struct {
	mu    sync.Mutex
	token string
}

// claimToken returns the namespace's claim token, creating its Secret when
// there is none. Two servers racing to create it both end up with the one
// that was stored.
func (r *Runtime) claimToken(ctx context.Context) (string, error) {
	r.claims.mu.Lock()
	defer r.claims.mu.Unlock()
	if r.claims.token != "" {
		return r.claims.token, nil
	}
	key := r.key(ClaimSecret)
	for range 2 {
		s := &corev1.Secret{}
		err := r.direct.Get(ctx, key, s)
		if err == nil {
			tok := string(s.Data[keyClaim])
			if len(tok) < 32 {
				return "", classErr(runtime.ErrInvalid, "kubernetes: Secret %s/%s has no usable %s (at least 32 characters); delete it to have a new one made", r.ns, ClaimSecret, keyClaim)
			}
			r.claims.token = tok
			return tok, nil
		}
		if !apierrors.IsNotFound(err) {
			return "", apiErr(err, "kubernetes: read the pools' claim token")
		}
		b := make([]byte, 32)
		rand.Read(b)
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ClaimSecret, Namespace: r.ns, Labels: map[string]string{labelExecd: execdClaim}},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{keyClaim: []byte(hex.EncodeToString(b))},
		}
		switch err := r.direct.Create(ctx, s); {
		case err == nil:
			r.claims.token = string(s.Data[keyClaim])
			r.log.InfoContext(ctx, "made the pools' claim token", "secret", ClaimSecret)
			return r.claims.token, nil
		case !apierrors.IsAlreadyExists(err):
			return "", apiErr(err, "kubernetes: create the pools' claim token")
		}
		// Another server made it first: read theirs.
	}
	return "", classErr(runtime.ErrUnavailable, "kubernetes: the pools' claim token Secret %s/%s keeps appearing and vanishing", r.ns, ClaimSecret)
}

// CreatePool creates a Pool whose pods run execd waiting to be claimed by
// a sandbox: in.Template's first container (or the one named "main")
// becomes execd supervising the container's command and args. A container
// without a command runs execd alone (its image's entrypoint is not
// known here), so args without a command are refused.
func (r *Runtime) CreatePool(ctx context.Context, in runtime.Pool) (runtime.Pool, error) {
	t, err := kubepool.DecodeTemplate(in.Template)
	if err != nil {
		return runtime.Pool{}, err
	}
	if err := r.poolTemplate(&t); err != nil {
		return runtime.Pool{}, err
	}
	if _, err := r.claimToken(ctx); err != nil {
		return runtime.Pool{}, err
	}
	if in.Template, err = json.Marshal(t); err != nil {
		return runtime.Pool{}, fmt.Errorf("kubernetes: pool %s: encode its template: %w", in.Name, err)
	}
	return r.Pools.CreatePool(ctx, in)
}

// poolTemplate turns a pool's pod template into one whose pods a sandbox
// can claim.
func (r *Runtime) poolTemplate(t *corev1.PodTemplateSpec) error {
	ps := &t.Spec
	c := sandboxContainer(ps.Containers)
	i := slices.IndexFunc(ps.Containers, func(x corev1.Container) bool { return x.Name == c.Name })
	entry := slices.Concat(c.Command, c.Args)
	switch {
	case len(c.Command) == 1 && c.Command[0] == execdBinary:
		// Already ours (a template read back from a pool): keep its entrypoint.
		entry = nil
		if len(c.Args) > 1 && c.Args[0] == "--" {
			entry = c.Args[1:]
		}
	case len(c.Command) == 0 && len(c.Args) > 0:
		return runtime.Classify(runtime.ErrInvalid, fmt.Errorf("template.spec.containers[%d]: args without a command: the image's own entrypoint is not known here, so give the whole command", i))
	}
	r.installExecd(ps, c, entry)
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == claimEnv || e.Name == execdTokenEnv })
	c.Env = append(c.Env, corev1.EnvVar{Name: claimEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: ClaimSecret}, Key: keyClaim,
	}}})
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[labelExecd] = execdClaim
	// As for any sandbox: no credentials of the cluster, no service links.
	ps.AutomountServiceAccountToken = ptr.To(false)
	ps.EnableServiceLinks = ptr.To(false)
	if r.opts.RuntimeClassName != "" {
		ps.RuntimeClassName = ptr.To(r.opts.RuntimeClassName)
	}
	if r.opts.ServiceAccount != "" && ps.ServiceAccountName == "" {
		ps.ServiceAccountName = r.opts.ServiceAccount
	}
	return nil
}

// resolvePoolRef picks the pool of a poolRef "*": among the namespace's
// pools made for sandboxes (their execd can be claimed), those whose main
// container runs spec.Image when the spec names one, the one with the
// most available pods. (The operator's own "*" matching would also take
// pools whose pods cannot be claimed.)
func (r *Runtime) resolvePoolRef(ctx context.Context, spec runtime.Spec) (string, error) {
	var list sandboxv1alpha1.PoolList
	if err := r.direct.List(ctx, &list, client.InNamespace(r.ns)); err != nil {
		return "", apiErr(err, "kubernetes: sandbox %s: list the pools for poolRef \"*\"", spec.ID)
	}
	var fit []sandboxv1alpha1.Pool
	for _, p := range list.Items {
		t := p.Spec.Template
		if p.DeletionTimestamp != nil || t.Labels[labelExecd] != execdClaim || len(t.Spec.Containers) == 0 {
			continue
		}
		if spec.Image != "" && sandboxContainer(t.Spec.Containers).Image != spec.Image {
			continue
		}
		fit = append(fit, p)
	}
	if len(fit) == 0 {
		what := "no pool of namespace " + r.ns + " was made for sandboxes (through /pools)"
		if spec.Image != "" {
			what = "no pool of namespace " + r.ns + " made for sandboxes runs image " + spec.Image
		}
		return "", classErr(runtime.ErrInvalid, "kubernetes: sandbox %s: poolRef \"*\": %s", spec.ID, what)
	}
	slices.SortStableFunc(fit, func(a, b sandboxv1alpha1.Pool) int {
		if a.Status.Available != b.Status.Available {
			return int(b.Status.Available - a.Status.Available)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return fit[0].Name, nil
}

// checkPool makes sure the named pool exists and was made for sandboxes,
// so a create fails at once instead of waiting for an allocation that
// cannot come, or for a pod whose execd cannot be claimed.
func (r *Runtime) checkPool(ctx context.Context, spec runtime.Spec) error {
	var p sandboxv1alpha1.Pool
	if err := r.direct.Get(ctx, r.key(spec.PoolRef), &p); err != nil {
		if apierrors.IsNotFound(err) {
			return classErr(runtime.ErrInvalid, "kubernetes: sandbox %s: poolRef: no pool %q in namespace %s", spec.ID, spec.PoolRef, r.ns)
		}
		return apiErr(err, "kubernetes: sandbox %s: read pool %s", spec.ID, spec.PoolRef)
	}
	if p.Spec.Template.Labels[labelExecd] != execdClaim {
		return classErr(runtime.ErrInvalid, "kubernetes: sandbox %s: pool %s was not made for sandboxes (its execd cannot be claimed); make pools for sandboxes through the server's /pools API", spec.ID, spec.PoolRef)
	}
	return nil
}

// sandboxContainer is the container of a pool's pods that runs execd: the
// one named "main", else the first.
func sandboxContainer(cs []corev1.Container) *corev1.Container {
	if i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == mainContainer }); i >= 0 {
		return &cs[i]
	}
	return &cs[0]
}

// errClaimedBefore: the pod's execd was claimed by someone else; it must
// not serve this sandbox.
var errClaimedBefore = errors.New("the pool pod's execd was claimed before")

// claim hands execd at ip to the sandbox: its token and environment.
// A 409 after a lost answer to our own claim is recognised by the token
// working.
func (r *Runtime) claim(ctx context.Context, ip string, spec runtime.Spec) error {
	claimTok, err := r.claimToken(ctx)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"accessToken": spec.ExecdToken, "env": spec.Env})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(sandbox.ExecdPort)) + "/claim"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(sandbox.AccessTokenHeader, claimTok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusOK:
		return nil
	case http.StatusConflict:
		if r.ping(ctx, ip, spec.ExecdToken) == nil {
			return nil
		}
		return errClaimedBefore
	case http.StatusNotFound, http.StatusUnauthorized:
		return fmt.Errorf("%w: execd at %s cannot be claimed with this namespace's claim token (%s %s); a pool for sandboxes must be made through the server's /pools API", errNotClaimable, ip, resp.Status, strings.TrimSpace(string(msg)))
	}
	return fmt.Errorf("claim answered %s %s", resp.Status, strings.TrimSpace(string(msg)))
}

// errNotClaimable: the pool's pods do not run a claimable execd.
var errNotClaimable = errors.New("not a pool for sandboxes")
