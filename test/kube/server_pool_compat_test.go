package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/opensandbox-go/opensandbox/internal/jscompat"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestServerPooledSandbox makes a pool through POST /v1/pools on the real
// server and takes sandboxes from it through POST /v1/sandboxes with
// extensions.poolRef (by name and "*"): each runs commands through the
// server's proxy and directly, with the environment of its create; what a
// pool cannot honour is refused; deleting the sandbox gives the pod back.
func TestServerPooledSandbox(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	deleteBatchesOnCleanup(t, cl, ns)
	s := c.startServer(t, ns, "A", serverOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*podTimeout)
	defer cancel()

	tmpl, _ := json.Marshal(corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr(int64(0)),
		Containers: []corev1.Container{{Name: "main", Image: baseImage, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sleep", "infinity"}}},
	}})
	s.must("POST", "/v1/pools", map[string]any{"name": "warm", "template": json.RawMessage(tmpl),
		"capacitySpec": map[string]int{"bufferMin": 2, "bufferMax": 2, "poolMin": 0, "poolMax": 4}}, http.StatusCreated, nil)
	poll(t, 2*podTimeout, func() (bool, error) {
		var p struct {
			Status struct{ Available int } `json:"status"`
		}
		s.must("GET", "/v1/pools/warm", nil, http.StatusOK, &p)
		return p.Status.Available == 2, nil
	}, func() string { return "pool warm with 2 available pods" })

	for _, ref := range []string{"warm", "*"} {
		start := time.Now()
		created := s.create(cl, ns, sandbox.CreateSandboxRequest{
			// What the JS SDK sends besides poolRef: accepted, not used.
			Image: &sandbox.ImageSpec{URI: baseImage}, Entrypoint: []string{"tail", "-f", "/dev/null"},
			ResourceLimits: map[string]string{"cpu": "1", "memory": "2Gi"},
			Env:            map[string]string{"FROM_CREATE": "pooled " + ref},
			Metadata:       map[string]string{"kind": "pooled"},
			Extensions:     map[string]string{"poolRef": ref},
			Timeout:        ptr(int64(300)),
		})
		t.Logf("poolRef %q: created %s in %s", ref, created.ID, time.Since(start).Round(time.Millisecond))
		if created.Status.State != sandbox.StateRunning {
			t.Errorf("poolRef %q: create answered state %s", ref, created.Status.State)
		}
		for name, run := range map[string]func(context.Context, string, string) (string, bool){"proxy": s.runProxied, "direct": s.runDirect} {
			if out, ok := run(ctx, created.ID, `echo "$FROM_CREATE"`); !ok || out != "pooled "+ref+"\n" {
				t.Errorf("poolRef %q, %s: %q (ok %v), want the create's environment", ref, name, out, ok)
			}
		}
		info, status := s.get(created.ID)
		if status != http.StatusOK || info.Metadata["kind"] != "pooled" || info.Entrypoint == nil {
			t.Errorf("GET of the pooled sandbox: %d %+v", status, info)
		}
		s.must("DELETE", "/v1/sandboxes/"+created.ID, nil, http.StatusNoContent, nil)
		if left := leftovers(t, c, cl, ns, created.ID); len(left) > 0 {
			t.Errorf("DELETE of the pooled sandbox left %v", left)
		}
	}

	e := s.wantError("POST", "/v1/sandboxes", sandbox.CreateSandboxRequest{
		Extensions: map[string]string{"poolRef": "warm"}, Volumes: []sandbox.Volume{{Name: "d", MountPath: "/d", PVC: &sandbox.PVCVol{ClaimName: "c"}}},
	}, http.StatusBadRequest, "INVALID_REQUEST")
	if !strings.Contains(e.Message, "volumes") {
		t.Errorf("a pooled create with volumes: %q, want it to name volumes", e.Message)
	}
	// A pool that does not exist fails the create at once.
	start := time.Now()
	e = s.wantError("POST", "/v1/sandboxes", sandbox.CreateSandboxRequest{Extensions: map[string]string{"poolRef": "missing-pool"}, Timeout: ptr(int64(60))},
		http.StatusBadRequest, "INVALID_REQUEST")
	if !strings.Contains(e.Message, `no pool "missing-pool"`) || time.Since(start) > podTimeout/2 {
		t.Errorf("a create from a missing pool: %q after %s", e.Message, time.Since(start))
	}
}

// TestServerCompatJSSDK runs the official JS SDK suite (test/compat/js)
// against the server on the kubernetes runtime: commands, sessions,
// files, metrics, renew, metadata, snapshots, pause/resume, the egress
// sidecar's policy and credential vault, in both endpoint modes.
func TestServerCompatJSSDK(t *testing.T) {
	c := connect(t)
	node := jscompat.Node(t)
	ns := c.namespace(t)
	c.startSnapshotOperator(t, ns)
	cl := c.sandboxClient(t)
	deleteBatchesOnCleanup(t, cl, ns)
	s := c.startServer(t, ns, "A", serverOpts{})
	runID := fmt.Sprintf("compat-kube-%d", time.Now().UnixNano())
	out, err := jscompat.Run(node, strings.TrimPrefix(s.base, "http://"), serverAPIKey, baseImage, runID, "COMPAT_RUNTIME=kubernetes")
	if err != nil {
		t.Fatalf("node compat.mjs: %v\n%s", err, out)
	}
	t.Logf("node compat.mjs:\n%s", out)
}
