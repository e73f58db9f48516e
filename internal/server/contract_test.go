package server

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/openapitest"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestContract drives every route, on success and on error, through a
// client whose transport checks each exchange against api/lifecycle.yaml.
func TestContract(t *testing.T) {
	spec := openapitest.Load(t, "api/lifecycle.yaml")
	e := newEnv(t, func(c *Config) {
		c.MinTimeout = time.Second
		c.OpenAPIJSON = []byte(`{"openapi":"3.0.3"}`)
	})
	e.run()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	defer backend.Close()
	host, portStr, _ := net.SplitHostPort(backend.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	e.rt.address = func(id string, p int) (runtimeAddress, error) {
		return runtimeAddress{Host: host, Port: port}, nil
	}
	e.rt.logs = []byte("hello\n")
	e.rt.events = []runtime.Event{{Time: time.Now(), Action: "start"}}

	client := &http.Client{Transport: spec.Transport(t, nil)}
	call := func(method, path, body string, noKey ...bool) (int, []byte) {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, e.http.URL+path, rd)
		if len(noKey) == 0 {
			req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}

	call("GET", "/health", "", true)
	call("GET", "/openapi.json", "", true)
	call("GET", "/v1/sandboxes", "", true)
	_, data := call("POST", "/v1/sandboxes", `{"image":{"uri":"busybox"},"entrypoint":["sleep","1000"],"timeout":600,"metadata":{"a":"b"},"resourceLimits":{"cpu":"1","memory":"1Gi"}}`)
	var created sandbox.CreateSandboxResponse
	json.Unmarshal(data, &created)
	id := created.ID
	call("POST", "/v1/sandboxes", `{"image":{"uri":"busybox"}}`)
	call("POST", "/v1/sandboxes", `{"snapshotId":"missing"}`)
	call("GET", "/v1/sandboxes?state=Running&metadata=a%3Db&page=1&pageSize=5", "")
	call("GET", "/v1/sandboxes?metadata=bad", "")
	call("GET", "/v1/sandboxes/"+id, "")
	call("GET", "/v1/sandboxes/missing", "")
	call("PATCH", "/v1/sandboxes/"+id+"/metadata", `{"a":null,"c":"d"}`)
	call("PATCH", "/v1/sandboxes/"+id+"/metadata", `{"c":1}`)
	call("POST", "/v1/sandboxes/"+id+"/renew-expiration", `{"expiresAt":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	call("POST", "/v1/sandboxes/"+id+"/renew-expiration", `{"expiresAt":"2000-01-01T00:00:00Z"}`)
	call("GET", "/v1/sandboxes/"+id+"/endpoints/44772", "")
	call("GET", "/v1/sandboxes/"+id+"/endpoints/44772?use_server_proxy=true", "")
	call("GET", "/v1/sandboxes/"+id+"/endpoints/80?expires=100", "")
	call("GET", "/v1/sandboxes/"+id+"/diagnostics/logs", "")
	call("GET", "/v1/sandboxes/"+id+"/diagnostics/logs?scope=container", "")
	call("GET", "/v1/sandboxes/"+id+"/diagnostics/events?scope=all", "")
	call("GET", "/v1/sandboxes/"+id+"/diagnostics/events?scope=network", "")
	call("GET", "/v1/sandboxes/"+id+"/diagnostics/inspect", "")
	call("GET", "/v1/sandboxes/"+id+"/diagnostics/summary", "")
	call("GET", "/sandboxes/"+id+"/proxy/8080/x?y=1", "")
	call("POST", "/sandboxes/"+id+"/proxy/8080", "{}")
	_, data = call("POST", "/v1/sandboxes/"+id+"/snapshots", `{"name":"n"}`)
	var snap sandbox.Snapshot
	json.Unmarshal(data, &snap)
	waitFor(t, "snapshot Ready", 5*time.Second, func() bool {
		s, err := e.store.GetSnapshot(t.Context(), snap.ID)
		return err == nil && s.Status.State == sandbox.SnapshotReady
	})
	call("GET", "/v1/snapshots?sandboxId="+id+"&state=Ready", "")
	call("GET", "/v1/snapshots/"+snap.ID, "")
	call("GET", "/v1/snapshots/missing", "")
	call("POST", "/v1/sandboxes/"+id+"/pause", "")
	call("POST", "/v1/sandboxes/"+id+"/pause", "")
	call("POST", "/v1/sandboxes/"+id+"/resume", "")
	call("POST", "/v1/sandboxes/"+id+"/resume", "")
	call("DELETE", "/v1/snapshots/"+snap.ID, "")
	call("DELETE", "/v1/sandboxes/"+id, "")
	call("DELETE", "/v1/sandboxes/"+id, "")
}
