package kube

import (
	"context"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/runtime/kubernetes"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestKubernetesRuntimePool creates a sandbox from a warm Pool
// (Spec.PoolRef) and one cold, each followed by a first command through
// execd, and wants the pooled one well below the cold one. The pool's
// execd runs without a token (the pool template's choice).
func TestKubernetesRuntimePool(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	deleteBatchesOnCleanup(t, cl, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*podTimeout)
	defer cancel()
	if err := cl.Create(ctx, newE2EPool(ns, "warm", sandboxv1alpha1.CapacitySpec{BufferMin: 2, BufferMax: 2, PoolMax: 4})); err != nil {
		t.Fatal(err)
	}
	waitPoolAvailable(ctx, t, cl, ns, "warm", 2, 2)
	rt, err := kubernetes.New(ctx, kubernetes.Options{RESTConfig: c.config, Namespace: ns, ExecdImage: execdImage, CreateTimeout: podTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	firstCommand := func(spec runtime.Spec) time.Duration {
		t.Helper()
		t.Cleanup(func() { removeSandbox(t, cl, ns, spec.ID) })
		start := time.Now()
		sb, err := rt.Create(ctx, spec)
		if err != nil {
			t.Fatalf("Create %s (poolRef %q): %v", spec.ID, spec.PoolRef, err)
		}
		if sb.State != sandbox.StateRunning {
			t.Errorf("Create %s: state %s", spec.ID, sb.State)
		}
		a, err := rt.Address(ctx, spec.ID, sandbox.ExecdPort)
		if err != nil {
			t.Fatal(err)
		}
		if out, ok := execdRun(ctx, t, a, spec.ExecdToken, "echo first"); !ok || out != "first\n" {
			t.Fatalf("first command in %s: %q (ok %v)", spec.ID, out, ok)
		}
		return time.Since(start)
	}
	pooledSpec := runtime.Spec{ID: "rt-" + token(t), Image: baseImage, Entrypoint: []string{"sleep", "infinity"},
		ExecdToken: "tok", PoolRef: "warm", Metadata: map[string]string{"kind": "pooled"}}
	pooled := firstCommand(pooledSpec)
	cold := firstCommand(runtime.Spec{ID: "rt-" + token(t), Image: baseImage, Entrypoint: []string{"sleep", "infinity"}, ExecdToken: "tok"})
	t.Logf("create -> first command: pooled %s, cold %s (ratio %.2f)", pooled.Round(time.Millisecond), cold.Round(time.Millisecond), pooled.Seconds()/cold.Seconds())
	if pooled*2 > cold {
		t.Errorf("pooled create -> first command %s is not well below the cold one %s", pooled, cold)
	}

	got, err := rt.Get(ctx, pooledSpec.ID)
	if err != nil || got.Metadata["kind"] != "pooled" || got.Image != baseImage {
		t.Errorf("Get of the pooled sandbox: %+v %v", got, err)
	}
	if err := rt.Pause(ctx, pooledSpec.ID); !isClass(err, runtime.ErrNotSupported) {
		t.Errorf("Pause of a pooled sandbox: %v, want ErrNotSupported", err)
	}
	if logs, err := rt.Logs(ctx, pooledSpec.ID, runtime.LogOptions{Tail: 10}); err != nil {
		t.Errorf("Logs of the pooled sandbox: %v", err)
	} else {
		t.Logf("pooled logs: %d bytes", len(logs))
	}
	if err := rt.Delete(ctx, pooledSpec.ID); err != nil {
		t.Fatalf("Delete of the pooled sandbox: %v", err)
	}
	if left := leftovers(t, c, cl, ns, pooledSpec.ID); len(left) > 0 {
		t.Errorf("Delete of the pooled sandbox left %v", left)
	}
}
