package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// pingRuntime is a stub whose engine can be switched off: Ping and List
// then fail as the Docker driver does when dockerd is down.
type pingRuntime struct {
	*stubRuntime
	mu   sync.Mutex
	down bool
}

func (r *pingRuntime) setDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

func (r *pingRuntime) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return fmt.Errorf("stub: cannot connect to the engine: %w", runtime.ErrUnavailable)
	}
	return nil
}

func (r *pingRuntime) Ping(ctx context.Context) error { return r.err() }

func (r *pingRuntime) List(ctx context.Context) ([]runtime.Sandbox, error) {
	if err := r.err(); err != nil {
		return nil, err
	}
	return r.stubRuntime.List(ctx)
}

func TestReadyFollowsTheEngine(t *testing.T) {
	var pr *pingRuntime
	e := newEnv(t, func(c *Config) {
		pr = &pingRuntime{stubRuntime: c.Runtime.(*stubRuntime)}
		c.Runtime = pr
	})
	noKey := []string{"OPEN-SANDBOX-API-KEY", ""}
	for _, prefix := range []string{"", "/v1"} {
		if res := e.do("GET", prefix+"/ready", nil, noKey...); res.status != http.StatusOK || strings.TrimSpace(string(res.body)) != `{"status":"ready"}` {
			t.Errorf("GET %s/ready with the engine up = %s; want 200 ready", prefix, res)
		}
	}
	pr.setDown(true)
	res := e.do("GET", "/ready", nil, noKey...)
	if code, msg := res.errorCode(); res.status != http.StatusServiceUnavailable || code != "RUNTIME_UNAVAILABLE" || msg == "" {
		t.Errorf("GET /ready with the engine down = %s; want 503 RUNTIME_UNAVAILABLE", res)
	}
	if res := e.do("GET", "/health", nil, noKey...); res.status != http.StatusOK {
		t.Errorf("GET /health with the engine down = %s; want 200 (liveness)", res)
	}
	res = e.do("GET", "/v1/sandboxes", nil)
	if code, _ := res.errorCode(); res.status != http.StatusServiceUnavailable || code != "RUNTIME_UNAVAILABLE" {
		t.Errorf("GET /v1/sandboxes with the engine down = %s; want 503 RUNTIME_UNAVAILABLE", res)
	}
	pr.setDown(false)
	if res := e.do("GET", "/ready", nil, noKey...); res.status != http.StatusOK {
		t.Errorf("GET /ready with the engine back = %s; want 200", res)
	}
}
