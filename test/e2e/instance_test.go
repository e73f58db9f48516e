package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestTwoServersOneEngine is the neighbour defect: server A creates a
// sandbox with a short timeout and renews it; server B, started on the
// same engine with its own store after the original deadline passed, must
// neither list, read, delete nor expire it (before instance scoping B
// armed the stale deadline it read from the container and deleted it).
func TestTwoServersOneEngine(t *testing.T) {
	a := startServer(t, serverOpts{})
	image := ensureBaseImage(t)
	created := a.create(t, sandbox.CreateSandboxRequest{
		Image:          &sandbox.ImageSpec{URI: image},
		Entrypoint:     []string{"tail", "-f", "/dev/null"},
		Timeout:        ptr[int64](20),
		ResourceLimits: map[string]string{"cpu": "500m", "memory": "256Mi"},
	})
	id := created.ID
	if created.ExpiresAt == nil {
		t.Fatalf("create = %+v, want an expiry", created)
	}
	renewTo := time.Now().Add(20 * time.Minute).UTC().Truncate(time.Second)
	a.api(t, "POST", "/v1/sandboxes/"+id+"/renew-expiration", sandbox.RenewSandboxExpirationRequest{ExpiresAt: renewTo}, 200, nil)

	// Let the original deadline pass: B, started now, would find it due.
	time.Sleep(time.Until(created.ExpiresAt.Add(time.Second)))
	b := startServer(t, serverOpts{})

	var list sandbox.ListSandboxesResponse
	b.api(t, "GET", "/v1/sandboxes?pageSize=200", nil, 200, &list)
	for _, sb := range list.Items {
		if sb.ID == id {
			t.Errorf("server B lists server A's sandbox %s", id)
		}
	}
	// Before scoping, a GET of an overdue sandbox deleted it on the spot.
	b.apiError(t, "GET", "/v1/sandboxes/"+id, nil, http.StatusNotFound, "SANDBOX_NOT_FOUND")
	b.apiError(t, "DELETE", "/v1/sandboxes/"+id, nil, http.StatusNotFound, "SANDBOX_NOT_FOUND")
	b.apiError(t, "GET", "/v1/sandboxes/"+id+"/endpoints/44772", nil, http.StatusNotFound, "SANDBOX_NOT_FOUND")

	var got sandbox.SandboxInfo
	a.api(t, "GET", "/v1/sandboxes/"+id, nil, 200, &got)
	if got.Status.State != sandbox.StateRunning || got.ExpiresAt == nil || !got.ExpiresAt.Equal(renewTo) {
		t.Errorf("server A's sandbox after B started = %s expiring %v, want Running expiring %v", got.Status.State, got.ExpiresAt, renewTo)
	}
	if ids := containersWithLabel(t, "opensandbox.io/id="+id); len(ids) != 1 {
		t.Errorf("containers of sandbox %s = %v, want one", id, ids)
	}
}
