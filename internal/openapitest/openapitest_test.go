package openapitest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

const execdDoc = "api/execd.yaml"

// recorder is a testing.TB that records Errorf calls instead of failing.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func newRecorder(t *testing.T) *recorder { return &recorder{TB: t} }

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

func (r *recorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// expect fails t unless the recorded errors are as wanted: none when want is
// empty, otherwise at least one, each wanted substring found in some error.
func (r *recorder) expect(t *testing.T, want ...string) {
	t.Helper()
	errs := r.errors()
	if len(want) == 0 {
		for _, e := range errs {
			t.Errorf("unexpected validation error: %s", e)
		}
		return
	}
	if len(errs) == 0 {
		t.Errorf("no validation error reported; want one mentioning %q", want)
		return
	}
	all := strings.Join(errs, "\n")
	t.Log(all)
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("validation errors do not mention %q:\n%s", w, all)
		}
	}
}

var (
	specOnce sync.Once
	spec     *Spec
	specErr  error
)

func execdSpec(t *testing.T) *Spec {
	t.Helper()
	specOnce.Do(func() { spec, specErr = load(execdDoc) })
	if specErr != nil {
		t.Fatal(specErr)
	}
	return spec
}

// serve starts a server whose handler is h and returns a client that checks
// traffic through a recorder.
func serve(t *testing.T, h http.HandlerFunc) (*httptest.Server, *http.Client, *recorder) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	rec := newRecorder(t)
	client := &http.Client{Transport: execdSpec(t).Transport(rec, srv.Client().Transport)}
	return srv, client, rec
}

func do(t *testing.T, client *http.Client, method, url, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func TestExecdDocumentIsValid(t *testing.T) {
	full := RepoPath(execdDoc)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(full)
	if err != nil {
		t.Fatalf("load %s: %v", full, err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate %s: %v", full, err)
	}

	s := Load(t, execdDoc)
	want := map[string][]string{
		"/ping":                       {"GET"},
		"/code":                       {"POST", "DELETE"},
		"/code/context":               {"POST"},
		"/code/contexts":              {"GET", "DELETE"},
		"/code/contexts/{context_id}": {"GET", "DELETE"},
		"/session":                    {"POST"},
		"/session/{sessionId}/run":    {"POST"},
		"/session/{sessionId}":        {"DELETE"},
		"/command":                    {"POST", "DELETE"},
		"/command/status/{id}":        {"GET"},
		"/command/{id}/logs":          {"GET"},
		"/files/info":                 {"GET"},
		"/files":                      {"DELETE"},
		"/files/permissions":          {"POST"},
		"/files/mv":                   {"POST"},
		"/files/search":               {"GET"},
		"/files/replace":              {"POST"},
		"/files/upload":               {"POST"},
		"/files/download":             {"GET"},
		"/directories/list":           {"GET"},
		"/directories":                {"POST", "DELETE"},
		"/metrics":                    {"GET"},
		"/metrics/watch":              {"GET"},
		"/metrics/prometheus":         {"GET"},
		"/pty":                        {"POST"},
		"/pty/{sessionId}":            {"GET", "DELETE"},
		"/pty/{sessionId}/ws":         {"GET"},
		"/proxy/{port}/{path}":        {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"},

		"/v1/isolated/capabilities":                          {"GET"},
		"/v1/isolated/session":                               {"POST"},
		"/v1/isolated/sessions":                              {"GET"},
		"/v1/isolated/session/{sessionId}":                   {"GET", "DELETE"},
		"/v1/isolated/session/{sessionId}/run":               {"POST"},
		"/v1/isolated/session/{sessionId}/diff":              {"GET"},
		"/v1/isolated/session/{sessionId}/commit":            {"POST"},
		"/v1/isolated/session/{sessionId}/files/info":        {"GET"},
		"/v1/isolated/session/{sessionId}/files":             {"DELETE"},
		"/v1/isolated/session/{sessionId}/files/permissions": {"POST"},
		"/v1/isolated/session/{sessionId}/files/mv":          {"POST"},
		"/v1/isolated/session/{sessionId}/files/search":      {"GET"},
		"/v1/isolated/session/{sessionId}/files/replace":     {"POST"},
		"/v1/isolated/session/{sessionId}/files/upload":      {"POST"},
		"/v1/isolated/session/{sessionId}/files/download":    {"GET"},
		"/v1/isolated/session/{sessionId}/directories/list":  {"GET"},
		"/v1/isolated/session/{sessionId}/directories":       {"POST", "DELETE"},
	}
	for path, methods := range want {
		item := s.Doc.Paths.Value(path)
		if item == nil {
			t.Errorf("path %s missing", path)
			continue
		}
		for _, m := range methods {
			op := item.GetOperation(m)
			if op == nil {
				t.Errorf("%s %s missing", m, path)
				continue
			}
			if op.Responses.Value("401") == nil {
				t.Errorf("%s %s: no 401 response", m, path)
			}
		}
	}
	if n := s.Doc.Paths.Len(); n != len(want) {
		t.Errorf("document has %d paths, test knows %d: update the test", n, len(want))
	}
}

func TestRepoPath(t *testing.T) {
	p := RepoPath("go.mod")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("RepoPath(go.mod) = %s: %v", p, err)
	}
	if abs := filepath.Join(t.TempDir(), "x"); RepoPath(abs) != abs {
		t.Errorf("absolute path changed")
	}
}

const goodFileInfo = `{"/w/a.txt":{"path":"/w/a.txt","type":"file","size":3,` +
	`"modified_at":"2026-01-02T03:04:05.123456789Z","created_at":"2026-01-02T03:04:05Z",` +
	`"owner":"root","group":"root","mode":644}}`

func TestJSONBody(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{"valid", 200, goodFileInfo, nil},
		{"mode as string", 200, strings.Replace(goodFileInfo, `"mode":644`, `"mode":"644"`, 1), []string{"GET /files/info -> 200", "mode"}},
		{"missing owner", 200, strings.Replace(goodFileInfo, `"owner":"root",`, ``, 1), []string{"owner"}},
		{"bad type enum", 200, strings.Replace(goodFileInfo, `"type":"file"`, `"type":"fifo"`, 1), []string{"type"}},
		{"bad time", 200, strings.Replace(goodFileInfo, `2026-01-02T03:04:05Z`, `yesterday`, 1), []string{"created_at"}},
		{"error reply", 404, `{"code":"FILE_NOT_FOUND","message":"no such file"}`, nil},
		{"error reply without message", 404, `{"code":"FILE_NOT_FOUND"}`, []string{"message"}},
		{"undocumented status", 418, `{"code":"X","message":"y"}`, []string{"status"}},
		{"401 reply", 401, `{"error":"Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN"}`, nil},
		{"401 in the wrong shape", 401, `{"code":"UNAUTHORIZED","message":"no"}`, []string{"error"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, tc.status, tc.body)
			})
			_, got := do(t, client, "GET", srv.URL+"/files/info?path=/w/a.txt", "")
			if got != tc.body {
				t.Errorf("caller got body %q, want %q", got, tc.body)
			}
			rec.expect(t, tc.want...)
		})
	}
}

func TestWrongContentType(t *testing.T) {
	srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, goodFileInfo)
	})
	do(t, client, "GET", srv.URL+"/files/info?path=/w/a.txt", "")
	rec.expect(t, "Content-Type")
}

func TestRouting(t *testing.T) {
	cases := []struct {
		method, path string
		status       int
		want         []string
	}{
		{"GET", "/ping", 200, nil},
		{"GET", "/nope", 404, []string{"GET /nope", "path not in"}},
		{"GET", "/ping/", 200, []string{"path not in"}},
		{"PUT", "/ping", 200, []string{"method PUT"}},
		{"DELETE", "/session/s-1", 200, nil},
		{"DELETE", "/session/", 200, []string{"path not in"}},
		{"DELETE", "/code/contexts/c%2F1", 200, nil},
		{"DELETE", "/pty/p-1", 200, nil},
		{"DELETE", "/files?path=/a&path=/b", 200, nil},
	}
	for _, tc := range cases {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
			})
			do(t, client, tc.method, srv.URL+tc.path, "")
			rec.expect(t, tc.want...)
		})
	}
}

func TestEmptyBody(t *testing.T) {
	srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "pong")
	})
	_, got := do(t, client, "GET", srv.URL+"/ping", "")
	if got != "pong" {
		t.Errorf("caller got %q", got)
	}
	rec.expect(t, "empty body")
}

func TestOptionalBody(t *testing.T) {
	for _, tc := range []struct {
		name, query, body string
		want              []string
	}{
		{"plain", "", "", nil},
		{"verbose", "?verbose=true", `{"/a":{"replacedCount":2}}`, nil},
		{"verbose wrong", "?verbose=true", `{"/a":{"replaced":2}}`, []string{"replacedCount"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.body != "" {
					writeJSON(w, 200, tc.body)
				}
			})
			do(t, client, "POST", srv.URL+"/files/replace"+tc.query, `{"/a":{"old":"x","new":"y"}}`)
			rec.expect(t, tc.want...)
		})
	}
}

func TestHeadersOnlyBodies(t *testing.T) {
	t.Run("logs with cursor", func(t *testing.T) {
		srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("EXECD-COMMANDS-TAIL-CURSOR", "2")
			io.WriteString(w, "a\nb\nc\n")
		})
		_, got := do(t, client, "GET", srv.URL+"/command/c1/logs?cursor=0", "")
		if got != "a\nb\nc\n" {
			t.Errorf("caller got %q", got)
		}
		rec.expect(t)
	})
	t.Run("logs without cursor", func(t *testing.T) {
		srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "a\n")
		})
		do(t, client, "GET", srv.URL+"/command/c1/logs", "")
		rec.expect(t, "EXECD-COMMANDS-TAIL-CURSOR")
	})
	t.Run("logs with a bad cursor", func(t *testing.T) {
		srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("EXECD-COMMANDS-TAIL-CURSOR", "two")
			io.WriteString(w, "a\n")
		})
		do(t, client, "GET", srv.URL+"/command/c1/logs", "")
		rec.expect(t, "EXECD-COMMANDS-TAIL-CURSOR")
	})
	t.Run("partial download", func(t *testing.T) {
		srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Range", "bytes 0-1/10")
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, "\x00\x01")
		})
		do(t, client, "GET", srv.URL+"/files/download?path=/a", "")
		rec.expect(t)
	})
	t.Run("partial download without Content-Range", func(t *testing.T) {
		srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, "\x00\x01")
		})
		do(t, client, "GET", srv.URL+"/files/download?path=/a", "")
		rec.expect(t, "Content-Range")
	})
}

// Frames in the execd wire format: JSON, newline, blank line.
const goodStream = `{"type":"init","text":"cmd-1","timestamp":1760000000000}` + "\n\n" +
	`{"type":"stdout","text":"hi","timestamp":1760000000105}` + "\n\n" +
	`{"type":"ping","text":"pong","timestamp":1760000000200}` + "\n\n" +
	`{"type":"error","timestamp":1760000000300,"error":{"ename":"CommandExecError","evalue":"2","traceback":["exit status 2"]}}` + "\n\n" +
	`{"type":"result","results":{"text":"2","text/html":"<b>2</b>"},"execution_count":1,"timestamp":1760000000400}` + "\n\n" +
	`{"type":"execution_complete","execution_time":12,"timestamp":1760000000500}` + "\n\n"

func TestEventStream(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
	}{
		{"valid", goodStream, nil},
		{"missing timestamp", `{"type":"stdout","text":"hi"}` + "\n\n", []string{"POST /command -> 200", "frame 1", "timestamp"}},
		{"unknown type", goodStream + `{"type":"progress","timestamp":1}` + "\n\n", []string{"frame 7", "type"}},
		{"not JSON", `data: {"type":"stdout","timestamp":1}` + "\n\n", []string{"frame 1", "not a JSON value"}},
		{"no blank line", `{"type":"stdout","timestamp":1}` + "\n" + `{"type":"stdout","timestamp":2}` + "\n\n", []string{"frame 1: not followed by a blank line"}},
		{"unterminated", `{"type":"stdout","timestamp":1}`, []string{"no terminating newline"}},
		{"last blank line missing", `{"type":"stdout","timestamp":1}` + "\n", []string{"without the blank line"}},
		{"null traceback", `{"type":"error","timestamp":1,"error":{"ename":"E","evalue":"v","traceback":null}}` + "\n\n", []string{"traceback"}},
		{"string timestamp", `{"type":"stdout","timestamp":"1"}` + "\n\n", []string{"timestamp"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.body)
			})
			_, got := do(t, client, "POST", srv.URL+"/command", `{"command":"echo hi"}`)
			if got != tc.body {
				t.Errorf("caller got %q, want %q", got, tc.body)
			}
			rec.expect(t, tc.want...)
		})
	}
}

// TestEventStreamIncremental checks that frames are validated while the
// stream is still open, and that the caller sees each frame as it is sent.
func TestEventStreamIncremental(t *testing.T) {
	release := make(chan struct{})
	srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `{"type":"stdout","text":"no timestamp"}`+"\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, `{"type":"execution_complete","timestamp":2}`+"\n\n")
	})
	defer close(release)
	resp, err := client.Post(srv.URL+"/session/s1/run", "application/json", strings.NewReader(`{"command":"true"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for range 2 { // the frame line and the blank line
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	rec.expect(t, "frame 1", "timestamp")
}

func TestEventStreamEarlyClose(t *testing.T) {
	release := make(chan struct{})
	srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `{"type":"init","text":"c","timestamp":1}`+"\n\n"+`{"type":"std`)
		w.(http.Flusher).Flush()
		<-release
	})
	defer close(release)
	resp, err := client.Post(srv.URL+"/code", "application/json", strings.NewReader(`{"code":"1+1"}`))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(resp.Body, buf, len(`{"type":"init","text":"c","timestamp":1}`)+2)
	if n == 0 {
		t.Fatal("no bytes read")
	}
	resp.Body.Close()
	rec.expect(t) // a partial frame cut by the caller is not an error
}

func TestErrorReplyOnStreamEndpoint(t *testing.T) {
	srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 400, `{"code":"INVALID_REQUEST_BODY","message":"command is required"}`)
	})
	do(t, client, "POST", srv.URL+"/command", `{}`)
	rec.expect(t)
}

func TestMetricsWatchLineFraming(t *testing.T) {
	sample := `{"cpu_count":2,"cpu_used_pct":1.5,"mem_total_mib":512,"mem_used_mib":100.25,"timestamp":1760000000000}`
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"lines", sample + "\n" + sample + "\n", nil},
		{"blank lines between", sample + "\n\n" + sample + "\n\n", nil},
		{"missing field", `{"cpu_count":2,"timestamp":1}` + "\n", []string{"cpu_used_pct"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.body)
			})
			do(t, client, "GET", srv.URL+"/metrics/watch", "")
			rec.expect(t, tc.want...)
		})
	}
}

func TestProxyPassthrough(t *testing.T) {
	for _, path := range []string{"/proxy/8080/a/b/c?x=1", "/proxy/8080/", "/proxy/3000"} {
		t.Run(path, func(t *testing.T) {
			srv, client, rec := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusTeapot)
				io.WriteString(w, "<p>anything</p>")
			})
			_, got := do(t, client, "PATCH", srv.URL+path, "x")
			if got != "<p>anything</p>" {
				t.Errorf("caller got %q", got)
			}
			rec.expect(t)
		})
	}
}

func TestWebSocketUpgrade(t *testing.T) {
	upgrade := func(w http.ResponseWriter, r *http.Request) {
		conn, bufrw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		bufrw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		bufrw.Flush()
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/pty/p1/ws?since=0", nil},
		{"/terminal/p1/ws", []string{"path not in"}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			srv, client, rec := serve(t, upgrade)
			req, _ := http.NewRequest("GET", srv.URL+tc.path, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("status %d", resp.StatusCode)
			}
			rec.expect(t, tc.want...)
		})
	}
}

func TestCheckResponse(t *testing.T) {
	s := execdSpec(t)
	check := func(method, target string, h http.HandlerFunc, want ...string) {
		t.Helper()
		w := httptest.NewRecorder()
		req := httptest.NewRequest(method, target, nil)
		h(w, req)
		rec := newRecorder(t)
		s.CheckResponse(rec, req, w.Code, w.Header(), w.Body.Bytes())
		rec.expect(t, want...)
	}
	pty := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 201, body) }
	}
	check("POST", "/pty", pty(`{"session_id":"p1"}`))
	check("POST", "/pty", pty(`{"id":"p1"}`), "session_id")
	check("GET", "/pty/p1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, `{"session_id":"p1","running":true,"output_offset":12}`)
	})
	check("GET", "/pty/p1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, `{"session_id":"p1","running":"yes","output_offset":12}`)
	}, "running")
	check("GET", "/command/status/c1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, `{"id":"c1","running":false,"exit_code":null,"started_at":"2026-01-02T03:04:05Z","finished_at":null}`)
	})
	check("POST", "/command", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, goodStream)
	})
	check("POST", "/command", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `{"type":"stdout","timestamp":1}`+"\n")
	}, "without the blank line")
	check("GET", "/undocumented", func(w http.ResponseWriter, r *http.Request) {}, "path not in")
}

// TestTransportUnder: an API served under a path prefix (execd behind a
// Docker endpoint's /proxy/44772) is checked as if at the root.
func TestTransportUnder(t *testing.T) {
	cases := []struct {
		name, path, body string
		want             []string
	}{
		{"checked without the prefix", "/proxy/44772/files/info?path=/w/a.txt", goodFileInfo, nil},
		{"bad body still reported", "/proxy/44772/files/info?path=/w/a.txt", strings.Replace(goodFileInfo, `"mode":644`, `"mode":"644"`, 1), []string{"mode"}},
		{"outside the prefix", "/files/info?path=/w/a.txt", goodFileInfo, []string{"not under /proxy/44772"}},
		{"prefix is whole segments", "/proxy/447720/files/info?path=/w/a.txt", goodFileInfo, []string{"not under /proxy/44772"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen <- r.URL.Path
				writeJSON(w, 200, tc.body)
			}))
			t.Cleanup(srv.Close)
			rec := newRecorder(t)
			client := &http.Client{Transport: execdSpec(t).TransportUnder(rec, "/proxy/44772/", srv.Client().Transport)}
			do(t, client, "GET", srv.URL+tc.path, "")
			sent, _, _ := strings.Cut(tc.path, "?")
			if got := <-seen; got != sent {
				t.Errorf("server saw path %q, want %q (sent unchanged)", got, sent)
			}
			rec.expect(t, tc.want...)
		})
	}
}
