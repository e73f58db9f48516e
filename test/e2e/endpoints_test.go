package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// endpointGet makes one raw GET to "http://<endpoint><path>" with headers
// and returns status and body.
func endpointGet(t *testing.T, endpoint, path string, headers map[string]string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestEndpointShapes: on the Docker bridge the endpoints have upstream's
// shapes and each reaches what it names, over raw HTTP: execd's own port
// is <host>:<execd's published port>/proxy/44772 and execd answers there
// itself (a hop through its forwarding proxy would drop the token and
// answer 401), streams and terminals included; a service's port is the
// same address under /proxy/<port>; 8080 is its own published port.
func TestEndpointShapes(t *testing.T) {
	s := startServer(t, serverOpts{})
	sb := s.create(t, sandbox.CreateSandboxRequest{Image: &sandbox.ImageSpec{URI: minimalImage(t)}, Entrypoint: []string{"sleep", "100000"}, ResourceLimits: map[string]string{"cpu": "1"}})
	endpoint := func(port int) sandbox.Endpoint {
		var ep sandbox.Endpoint
		s.api(t, "GET", fmt.Sprintf("/v1/sandboxes/%s/endpoints/%d", sb.ID, port), nil, 200, &ep)
		return ep
	}

	ex := endpoint(sandbox.ExecdPort)
	u, err := url.Parse("http://" + ex.Endpoint)
	if err != nil || u.Path != "/proxy/44772" || u.Port() == "" || u.Port() == "44772" || ex.Headers[sandbox.AccessTokenHeader] == "" {
		t.Fatalf("execd endpoint = %+v (%v); want <host>:<published port>/proxy/44772 with the token header", ex, err)
	}
	// What upstream's suites accept as an execd endpoint.
	if !strings.HasSuffix(ex.Endpoint, "/44772") && u.Port() != "44772" {
		t.Errorf("execd endpoint %q neither ends in /44772 nor has port 44772", ex.Endpoint)
	}
	if code, body, err := endpointGet(t, ex.Endpoint, "/ping", ex.Headers); err != nil || code != 200 {
		t.Errorf("GET %s/ping = %d %q, %v; want 200 from execd", ex.Endpoint, code, body, err)
	}
	if code, _, err := endpointGet(t, ex.Endpoint, "/ping", nil); err != nil || code != 401 {
		t.Errorf("GET %s/ping without the token = %d, %v; want 401", ex.Endpoint, code, err)
	}

	// A streamed command through the endpoint starts two web servers.
	e := s.execd(t, sb.ID, false)
	run := e.stream(t, "/command", sandbox.RunCommandRequest{Command: "mkdir -p /www && echo from-3000 > /www/index.html && mkdir -p /www8080 && echo from-8080 > /www8080/index.html && echo started"})
	if joined(run.stdout) != "started" {
		t.Fatalf("command through %s = stdout %q", ex.Endpoint, run.stdout)
	}
	e.stream(t, "/command", sandbox.RunCommandRequest{Command: "httpd -f -p 3000 -h /www", Background: true})
	e.stream(t, "/command", sandbox.RunCommandRequest{Command: "httpd -f -p 8080 -h /www8080", Background: true})

	svc := endpoint(3000)
	if want := strings.TrimSuffix(ex.Endpoint, "/44772") + "/3000"; svc.Endpoint != want || svc.Headers[sandbox.AccessTokenHeader] == "" {
		t.Errorf("endpoint 3000 = %+v, want %s with the token header", svc, want)
	}
	var body string
	poll(t, "the service on 3000 through its endpoint", func() bool {
		code, b, err := endpointGet(t, svc.Endpoint, "/index.html", svc.Headers)
		body = b
		return err == nil && code == 200
	})
	if body != "from-3000\n" {
		t.Errorf("GET %s/index.html = %q, want the service's page", svc.Endpoint, body)
	}

	web := endpoint(sandbox.HTTPPort)
	if strings.Contains(web.Endpoint, "/") || len(web.Headers) != 0 || strings.HasSuffix(web.Endpoint, ":"+u.Port()) {
		t.Errorf("endpoint 8080 = %+v, want its own published host:port and no headers", web)
	}
	poll(t, "the service on 8080 through its endpoint", func() bool {
		code, b, err := endpointGet(t, web.Endpoint, "/index.html", nil)
		body = b
		return err == nil && code == 200
	})
	if body != "from-8080\n" {
		t.Errorf("GET %s/index.html = %q, want the service's page", web.Endpoint, body)
	}

	// A terminal over WebSocket through execd's endpoint.
	var pty sandbox.CreatePTYResponse
	e.call(t, "POST", "/pty", sandbox.CreatePTYRequest{Command: "echo pty-through-endpoint"}, 201, &pty)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wsURL := "ws://" + ex.Endpoint + "/pty/" + url.PathEscape(pty.SessionID) + "/ws"
	c, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{sandbox.AccessTokenHeader: {ex.Headers[sandbox.AccessTokenHeader]}}})
	if err != nil {
		t.Fatalf("websocket %s: %v", wsURL, err)
	}
	defer c.CloseNow()
	var out bytes.Buffer
	for !strings.Contains(out.String(), "pty-through-endpoint") {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("ws read: %v (so far %q)", err, out.String())
		}
		if typ == websocket.MessageBinary && len(msg) > 0 && msg[0] == 1 {
			out.Write(msg[1:])
		}
	}
}
