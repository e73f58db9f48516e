package files

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/testenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// env is a Handler mounted on the production route patterns, served over
// loopback, with a fresh temporary directory as its base.
type env struct {
	t   *testing.T
	dir string
	h   *Handler
	srv *httptest.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	h := New(Options{BaseDir: dir, MaxJSONBody: 1 << 20})
	srv := httptest.NewServer(routes(h))
	t.Cleanup(srv.Close)
	return &env{t: t, dir: dir, h: h, srv: srv}
}

// routes mounts h the way execd's route table does.
func routes(h *Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /files/info", h.Info)
	mux.HandleFunc("DELETE /files", h.Remove)
	mux.HandleFunc("POST /files/permissions", h.Chmod)
	mux.HandleFunc("POST /files/mv", h.Move)
	mux.HandleFunc("GET /files/search", h.Search)
	mux.HandleFunc("POST /files/replace", h.Replace)
	mux.HandleFunc("POST /files/upload", h.Upload)
	mux.HandleFunc("GET /files/download", h.Download)
	mux.HandleFunc("GET /directories/list", h.ListDir)
	mux.HandleFunc("POST /directories", h.MakeDirs)
	mux.HandleFunc("DELETE /directories", h.RemoveDirs)
	return mux
}

// reply is a response read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string {
	return http.StatusText(r.status) + " " + strings.TrimSpace(string(r.body))
}

// do sends a request; body may be nil, a []byte, a string or any JSON value.
func (e *env) do(method, target string, body any, header ...string) reply {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	case io.Reader:
		rd = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatalf("marshal %T: %v", body, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.srv.URL+target, rd)
	if err != nil {
		e.t.Fatalf("NewRequest(%s %s): %v", method, target, err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if req.Header.Get("Content-Type") == "" && body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading body: %v", method, target, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// wantOK fails unless rep is a 200 with an empty body.
func wantOK(t *testing.T, call string, rep reply) {
	t.Helper()
	if rep.status != http.StatusOK || len(rep.body) != 0 {
		t.Fatalf("%s = %s, want 200 with empty body", call, rep)
	}
}

// wantErr fails unless rep is a JSON {code, message} error with the given
// status and code whose message contains every fragment.
func wantErr(t *testing.T, call string, rep reply, status int, code string, fragments ...string) {
	t.Helper()
	var er sandbox.ErrorResponse
	if err := json.Unmarshal(rep.body, &er); err != nil {
		t.Fatalf("%s: body %q is not an error object: %v", call, rep.body, err)
	}
	if rep.status != status || er.Code != code {
		t.Fatalf("%s = %d %s (%q), want %d %s", call, rep.status, er.Code, er.Message, status, code)
	}
	if er.Message == "" {
		t.Errorf("%s: empty error message", call)
	}
	for _, f := range fragments {
		if !strings.Contains(er.Message, f) {
			t.Errorf("%s: message %q does not mention %q", call, er.Message, f)
		}
	}
}

// decode unmarshals a JSON reply into v.
func decode(t *testing.T, call string, rep reply, v any) {
	t.Helper()
	if rep.status != http.StatusOK {
		t.Fatalf("%s = %s, want 200", call, rep)
	}
	if err := json.Unmarshal(rep.body, v); err != nil {
		t.Fatalf("%s: decoding %q: %v", call, rep.body, err)
	}
}

// write creates a file (and its parents) under the env directory and
// returns its absolute path.
func (e *env) write(rel, content string, mode fs.FileMode) string {
	e.t.Helper()
	p := filepath.Join(e.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// mkdir creates a directory (and parents) under the env directory.
func (e *env) mkdir(rel string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, rel)
	if err := os.MkdirAll(p, 0o755); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// q builds a query string escaping each value.
func q(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if b.Len() == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(pairs[i] + "=" + url.QueryEscape(pairs[i+1]))
	}
	return b.String()
}

// readFile returns the content of p or fails.
func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// modeOf returns the permission bits (with setuid/setgid/sticky) of p.
func modeOf(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode() & permBits
}

// needRoot skips tests that change ownership.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.NeedRoot(t, "change file ownership")
	}
}

// recorder adapts httptest.ResponseRecorder to reply.
type recorder struct{ *httptest.ResponseRecorder }

func newRecorder() recorder { return recorder{httptest.NewRecorder()} }

func (r recorder) reply() reply {
	res := r.Result()
	return reply{status: res.StatusCode, header: res.Header, body: r.Body.Bytes()}
}

func newRequest(t *testing.T, method, target string) *http.Request {
	t.Helper()
	return httptest.NewRequest(method, target, nil)
}

// discardLogger silences the handler in fuzz runs.
func discardLogger() *slog.Logger {
	return slog.New(slog.DiscardHandler)
}
