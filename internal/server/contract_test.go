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
	// call sends one request and checks its status: the contract is
	// not only the shapes of the answers but which answer each call gets.
	call := func(want int, method, path, body string, noKey ...bool) []byte {
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
		if resp.StatusCode != want {
			t.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, data)
		}
		return data
	}

	call(http.StatusOK, "GET", "/health", "", true)
	call(http.StatusOK, "GET", "/ready", "", true)
	call(http.StatusOK, "GET", "/openapi.json", "", true)
	call(401, "GET", "/v1/sandboxes", "", true)
	data := call(202, "POST", "/v1/sandboxes", `{"image":{"uri":"busybox"},"entrypoint":["sleep","1000"],"timeout":600,"metadata":{"a":"b"},"resourceLimits":{"cpu":"1","memory":"1Gi"}}`)
	var created sandbox.CreateSandboxResponse
	json.Unmarshal(data, &created)
	id := created.ID
	call(400, "POST", "/v1/sandboxes", `{"image":{"uri":"busybox"}}`)
	call(404, "POST", "/v1/sandboxes", `{"snapshotId":"missing"}`)
	call(http.StatusOK, "GET", "/v1/sandboxes?state=Running&metadata=a%3Db&page=1&pageSize=5", "")
	call(400, "GET", "/v1/sandboxes?metadata=bad", "")
	call(http.StatusOK, "GET", "/v1/sandboxes/"+id, "")
	call(404, "GET", "/v1/sandboxes/missing", "")
	call(http.StatusOK, "PATCH", "/v1/sandboxes/"+id+"/metadata", `{"a":null,"c":"d"}`)
	call(400, "PATCH", "/v1/sandboxes/"+id+"/metadata", `{"c":1}`)
	call(http.StatusOK, "POST", "/v1/sandboxes/"+id+"/renew-expiration", `{"expiresAt":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	call(400, "POST", "/v1/sandboxes/"+id+"/renew-expiration", `{"expiresAt":"2000-01-01T00:00:00Z"}`)
	call(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/endpoints/44772", "")
	call(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/endpoints/44772?use_server_proxy=true", "")
	call(400, "GET", "/v1/sandboxes/"+id+"/endpoints/80?expires=100", "")
	call(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/diagnostics/logs", "")
	call(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/diagnostics/logs?scope=container", "")
	call(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/diagnostics/events?scope=all", "")
	call(400, "GET", "/v1/sandboxes/"+id+"/diagnostics/events?scope=network", "")
	call(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/diagnostics/inspect", "")
	call(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/diagnostics/summary", "")
	call(http.StatusOK, "GET", "/sandboxes/"+id+"/proxy/8080/x?y=1", "")
	call(http.StatusOK, "POST", "/sandboxes/"+id+"/proxy/8080", "{}")
	data = call(202, "POST", "/v1/sandboxes/"+id+"/snapshots", `{"name":"n"}`)
	var snap sandbox.Snapshot
	json.Unmarshal(data, &snap)
	waitFor(t, "snapshot Ready", 5*time.Second, func() bool {
		s, err := e.store.GetSnapshot(t.Context(), snap.ID)
		return err == nil && s.Status.State == sandbox.SnapshotReady
	})
	call(http.StatusOK, "GET", "/v1/snapshots?sandboxId="+id+"&state=Ready", "")
	call(http.StatusOK, "GET", "/v1/snapshots/"+snap.ID, "")
	call(404, "GET", "/v1/snapshots/missing", "")
	call(202, "POST", "/v1/sandboxes/"+id+"/pause", "")
	call(409, "POST", "/v1/sandboxes/"+id+"/pause", "")
	call(202, "POST", "/v1/sandboxes/"+id+"/resume", "")
	call(409, "POST", "/v1/sandboxes/"+id+"/resume", "")
	call(204, "DELETE", "/v1/snapshots/"+snap.ID, "")
	call(204, "DELETE", "/v1/sandboxes/"+id, "")
	call(404, "DELETE", "/v1/sandboxes/"+id, "")

	// The stub runtime has no pools: every pool route is 501 (the
	// kubernetes flow is TestPoolsKubernetes).
	capacity := `{"bufferMax":2,"bufferMin":1,"poolMax":4,"poolMin":0}`
	call(501, "POST", "/v1/pools", `{"name":"p","template":{"spec":{"containers":[{"name":"c","image":"busybox"}]}},"capacitySpec":`+capacity+`}`)
	call(501, "GET", "/v1/pools", "")
	call(501, "GET", "/v1/pools/p", "")
	call(501, "PUT", "/v1/pools/p", `{"capacitySpec":`+capacity+`}`)
	call(501, "DELETE", "/v1/pools/p", "")
	call(401, "GET", "/v1/pools", "", true)
}
