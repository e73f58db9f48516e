package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/httpmw"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// slowLimits are short so the tests take seconds.
var slowLimits = httpmw.BodyLimits{Idle: 2 * time.Second, MinRate: 100, Grace: 2 * time.Second}

// serveReal serves the env's server through NewHTTPServer on a loopback
// listener, as the program does.
func serveReal(t *testing.T, e *testEnv) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer(e.srv.Handler(), ln.Addr().String())
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ln)
	}()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	return ln.Addr().String()
}

// trickle sends head (request line and headers, without the blank line)
// and then a body of length bytes, one byte every 500 ms, until the server
// answers and closes the connection; it fails the test if the server
// takes the whole body (over 8 minutes) or is still open after 60 s.
func trickle(t *testing.T, addr, head string, length int) reply {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n", head, length)
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c) // until the server closes, or the deadline
		got <- b
	}()
	for range length {
		select {
		case b := <-got:
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(b))), nil)
			if err != nil {
				t.Fatalf("reply %q: %v", b, err)
			}
			body, _ := io.ReadAll(resp.Body)
			return reply{status: resp.StatusCode, header: resp.Header, body: body}
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := io.WriteString(c, " "); err != nil { // white space: still valid JSON so far
			break
		}
	}
	t.Fatalf("the server took a trickled body of %d bytes", length)
	return reply{}
}

// readAll is a sandbox's handler that reads the whole body and says how
// much it got.
func readAll(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	json.NewEncoder(w).Encode(map[string]int64{"received": n})
}

// TestSlowBodyIsCut: a client sending its body a byte every 500 ms is cut
// with 408 REQUEST_TIMEOUT, on an API route and on the open proxy route
// (no API key needed to try), and never ties up the sandbox.
func TestSlowBodyIsCut(t *testing.T) {
	p := newProxyEnv(t, http.HandlerFunc(readAll), func(c *Config) {
		c.BodyLimits = slowLimits
		c.OpenProxy = true
	})
	addr := serveReal(t, p.testEnv)
	for _, head := range []string{
		"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + keyLine,
		"POST /sandboxes/sb1/proxy/8080/upload HTTP/1.1\r\nHost: x\r\n",
	} {
		r := trickle(t, addr, head, 1000)
		wantError(t, strings.SplitN(head, " HTTP", 2)[0], r, http.StatusRequestTimeout, apierror.CodeRequestTimeout)
	}
}

// TestSteadyProxiedUploadPasses: an upload through the proxy that takes
// longer than Idle and Grace together but keeps its pace reaches the
// sandbox whole.
func TestSteadyProxiedUploadPasses(t *testing.T) {
	p := newProxyEnv(t, http.HandlerFunc(readAll), func(c *Config) { c.BodyLimits = slowLimits })
	addr := serveReal(t, p.testEnv)
	pr, pw := io.Pipe()
	go func() {
		chunk := strings.Repeat("u", 64)
		for range 60 { // 6 s at 640 B/s
			time.Sleep(100 * time.Millisecond) // the client's pace
			if _, err := io.WriteString(pw, chunk); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/sandboxes/sb1/proxy/8080/upload", pr)
	req.ContentLength = 64 * 60
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		pr.CloseWithError(err)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != `{"received":3840}` {
		t.Fatalf("steady upload through the proxy = %d %s", resp.StatusCode, b)
	}
}

// TestProxiedStreamOutlivesBodyLimits: the body limits bound only the
// wait for the client's body. A reply the sandbox streams for longer than
// Idle and Grace together, after a POST body and on a GET, reaches the
// client whole, and the next request on the same connections works.
func TestProxiedStreamOutlivesBodyLimits(t *testing.T) {
	const lines = 10
	p := newProxyEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for i := range lines {
			fmt.Fprintf(w, "line %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(500 * time.Millisecond) // the sandbox's pace: 5 s in all
		}
	}), func(c *Config) { c.BodyLimits = slowLimits })
	addr := serveReal(t, p.testEnv)
	var want strings.Builder
	for i := range lines {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	for i, method := range []string{http.MethodPost, http.MethodGet, http.MethodPost} {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"command":"stream"}`)
		}
		req, _ := http.NewRequest(method, "http://"+addr+"/sandboxes/sb1/proxy/8080/stream", body)
		req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d (%s): %v", i, method, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(b) != want.String() {
			t.Fatalf("request %d (%s) = %d %q, %v; want the whole stream", i, method, resp.StatusCode, b, err)
		}
	}
	if logs := p.logs.String(); strings.Contains(logs, "proxied reply cut") {
		t.Errorf("the server logged a cut reply:\n%s", logs)
	}
}
