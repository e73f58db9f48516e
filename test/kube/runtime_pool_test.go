package kube

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/runtime/kubernetes"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestKubernetesRuntimePool creates sandboxes from a warm Pool made
// through the driver (Spec.PoolRef, by name and "*"): the pod's execd,
// started with the pools' claim token, is claimed with the sandbox's own
// token and environment; the claim token then opens nothing and cannot be
// read inside the sandbox. A pool whose pods were not made for sandboxes
// is refused without leaving anything. (Pooled against cold create time is
// measured by make bench, not asserted here.)
func TestKubernetesRuntimePool(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	deleteBatchesOnCleanup(t, cl, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*podTimeout)
	defer cancel()
	rt, err := kubernetes.New(ctx, kubernetes.Options{RESTConfig: c.config, Namespace: ns, ExecdImage: execdImage, CreateTimeout: podTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	tmpl, _ := json.Marshal(corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr(int64(0)),
		Containers: []corev1.Container{{Name: "main", Image: baseImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sleep", "infinity"}}},
	}})
	if _, err := rt.CreatePool(ctx, runtime.Pool{Name: "warm", Template: tmpl,
		CapacitySpec: runtime.PoolCapacity{BufferMin: 2, BufferMax: 2, PoolMax: 4}}); err != nil {
		t.Fatal(err)
	}
	// A pool made without the driver: its execd has no claim token.
	if err := cl.Create(ctx, newE2EPool(ns, "foreign", sandboxv1alpha1.CapacitySpec{BufferMin: 1, BufferMax: 1, PoolMax: 1})); err != nil {
		t.Fatal(err)
	}
	waitPoolAvailable(ctx, t, cl, ns, "warm", 2, 2)
	waitPoolAvailable(ctx, t, cl, ns, "foreign", 1, 1)

	var claimSecret corev1.Secret
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubernetes.ClaimSecret}, &claimSecret); err != nil {
		t.Fatalf("the pools' claim token Secret: %v", err)
	}
	claimToken := string(claimSecret.Data["claim-token"])

	for _, ref := range []string{"warm", "*"} {
		spec := runtime.Spec{ID: "rt-" + token(t), PoolRef: ref, ExecdToken: "tok-" + token(t),
			Env: map[string]string{"POOLED_ENV": "from-create " + ref}, Metadata: map[string]string{"kind": "pooled"}}
		t.Cleanup(func() { removeSandbox(t, cl, ns, spec.ID) })
		start := time.Now()
		sb, err := rt.Create(ctx, spec)
		if err != nil {
			t.Fatalf("Create (poolRef %q): %v", ref, err)
		}
		a, err := rt.Address(ctx, spec.ID, sandbox.ExecdPort)
		if err != nil {
			t.Fatal(err)
		}
		if out, ok := execdRun(ctx, t, a, spec.ExecdToken, `echo "$POOLED_ENV"`); !ok || out != "from-create "+ref+"\n" {
			t.Fatalf("first command in %s: %q (ok %v), want the create's environment", spec.ID, out, ok)
		}
		t.Logf("poolRef %q: create -> first command %s", ref, time.Since(start).Round(time.Millisecond))
		if sb.State != sandbox.StateRunning || sb.Metadata["kind"] != "pooled" || sb.Entrypoint == nil {
			t.Errorf("Create (poolRef %q) returned %+v", ref, sb)
		}
		// The claim token opens nothing now, and no process in the
		// sandbox can read it (execd is not dumpable).
		if code := pingStatus(ctx, t, a, claimToken); code != http.StatusUnauthorized {
			t.Errorf("/ping with the claim token after the claim = %d, want 401", code)
		}
		out, ok := execdRun(ctx, t, a, spec.ExecdToken,
			`env | grep -c EXECD_; for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ 2>/dev/null; done | grep -c `+claimToken+`; true`)
		if !ok || out != "0\n0\n" {
			t.Errorf("the claim token inside the sandbox: %q (ok %v), want none seen", out, ok)
		}
	}

	// The foreign pool's execd has nothing to claim: the create fails at
	// once, naming the way to make a pool for sandboxes.
	id := "rt-" + token(t)
	_, err = rt.Create(ctx, runtime.Spec{ID: id, PoolRef: "foreign", ExecdToken: "tok-" + token(t)})
	if !isClass(err, runtime.ErrInvalid) || !strings.Contains(err.Error(), "/pools") {
		t.Errorf("Create from a pool not made for sandboxes: %v, want ErrInvalid pointing at /pools", err)
	}
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("the refused create left %v", left)
	}

	pooledID := ""
	if list, err := rt.List(ctx); err == nil {
		for _, sb := range list {
			if sb.Metadata["kind"] == "pooled" {
				pooledID = sb.ID
			}
		}
	}
	if pooledID == "" {
		t.Fatal("List does not show the pooled sandboxes")
	}
	if err := rt.Pause(ctx, pooledID); !isClass(err, runtime.ErrNotSupported) {
		t.Errorf("Pause of a pooled sandbox: %v, want ErrNotSupported", err)
	}
	if _, err := rt.Logs(ctx, pooledID, runtime.LogOptions{Tail: 10}); err != nil {
		t.Errorf("Logs of the pooled sandbox: %v", err)
	}
	if err := rt.Delete(ctx, pooledID); err != nil {
		t.Fatalf("Delete of the pooled sandbox: %v", err)
	}
	if left := leftovers(t, c, cl, ns, pooledID); len(left) > 0 {
		t.Errorf("Delete of the pooled sandbox left %v", left)
	}
}

// pingStatus is the status of GET /ping on execd at a with token.
func pingStatus(ctx context.Context, t *testing.T, a runtime.Address, token string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(a.Host, strconv.Itoa(a.Port))+"/ping", nil)
	req.Header.Set(sandbox.AccessTokenHeader, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /ping: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
