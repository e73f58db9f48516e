package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// uploadSeen is what the fake execd found in one upload.
type uploadSeen struct {
	meta         FileMetadata
	metaFilename string
	metaType     string
	fileName     string
	size         int64
	sum          [32]byte
	chunked      bool
}

// serveUpload parses uploads with mime/multipart, streaming the file part
// through a hash.
func serveUpload(t *testing.T, s *sdkServer) *[]uploadSeen {
	var mu sync.Mutex
	var seen []uploadSeen
	s.mux.HandleFunc("POST /execd/files/upload", func(w http.ResponseWriter, r *http.Request) {
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/form-data" {
			replyJSON(w, 400, ErrorResponse{Code: "INVALID_FILE", Message: "not multipart"})
			return
		}
		mr := multipart.NewReader(r.Body, params["boundary"])
		var u uploadSeen
		u.chunked = r.ContentLength < 0
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				replyJSON(w, 400, ErrorResponse{Code: "INVALID_FILE", Message: err.Error()})
				return
			}
			switch p.FormName() {
			case "metadata":
				u.metaFilename, u.metaType = p.FileName(), p.Header.Get("Content-Type")
				json.NewDecoder(p).Decode(&u.meta)
			case "file":
				u.fileName = p.FileName()
				h := sha256.New()
				u.size, _ = io.Copy(h, p)
				copy(u.sum[:], h.Sum(nil))
			}
		}
		mu.Lock()
		seen = append(seen, u)
		mu.Unlock()
	})
	return &seen
}

// randReader yields n pseudo-random bytes from seed without holding them.
func randReader(seed uint64, n int64) io.Reader {
	rng := rand.NewChaCha8([32]byte{byte(seed)})
	return io.LimitReader(rng, n)
}

func TestUploadShape(t *testing.T) {
	s := newSDKServer(t)
	seen := serveUpload(t, s)
	sb := s.connect(t)
	if err := sb.WriteFile(testCtx(t), "/work/dir/a.txt", []byte("hello"), WriteOptions{Mode: 600, Owner: "nobody", Group: "nogroup"}); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if len(*seen) != 1 {
		t.Fatalf("server saw %d uploads, want 1", len(*seen))
	}
	u := (*seen)[0]
	if u.meta != (FileMetadata{Path: "/work/dir/a.txt", Mode: 600, Owner: "nobody", Group: "nogroup"}) {
		t.Errorf("metadata = %+v", u.meta)
	}
	if u.metaFilename != "metadata" || u.metaType != "application/json" || u.fileName != "a.txt" {
		t.Errorf("parts: metadata file %q type %q, file %q; want metadata, application/json, a.txt", u.metaFilename, u.metaType, u.fileName)
	}
	if u.size != 5 || u.sum != sha256.Sum256([]byte("hello")) {
		t.Errorf("file part = %d bytes, want hello", u.size)
	}
	if tok := s.requests("POST", "/execd/files/upload")[0].Header.Get(AccessTokenHeader); tok != sdkTestToken {
		t.Errorf("upload token = %q, want %q", tok, sdkTestToken)
	}
}

// TestUploadLarge streams 20 MiB that never exist in memory at once and
// checks every byte on the server side.
func TestUploadLarge(t *testing.T) {
	s := newSDKServer(t)
	seen := serveUpload(t, s)
	sb := s.connect(t)
	const n = 20 << 20
	if err := sb.Upload(testCtx(t), "/big.bin", randReader(7, n), WriteOptions{}); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	h := sha256.New()
	io.Copy(h, randReader(7, n))
	u := (*seen)[0]
	if u.size != n || !bytes.Equal(u.sum[:], h.Sum(nil)) {
		t.Errorf("server got %d bytes (sum match %v), want %d matching", u.size, bytes.Equal(u.sum[:], h.Sum(nil)), n)
	}
	if !u.chunked {
		t.Error("the upload had a Content-Length: it was buffered, not streamed")
	}
}

// endless is a reader that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) { return len(p), nil }

// TestUploadRejectedEarly checks that an upload the server refuses
// without reading returns (its writer goroutine ends) even though the
// source never ends.
func TestUploadRejectedEarly(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("POST /execd/files/upload", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		replyJSON(w, 403, ErrorResponse{Code: "PERMISSION_DENIED", Message: "read-only"})
	})
	sb := s.connect(t)
	done := make(chan error, 1)
	go func() { done <- sb.Upload(testCtx(t), "/ro/x", endless{}, WriteOptions{}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Upload refused by the server = nil error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Upload did not return after the server refused it")
	}
}

func TestOpenRange(t *testing.T) {
	s := newSDKServer(t)
	content := "0123456789"
	s.mux.HandleFunc("GET /execd/files/download", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("path") != "/f" {
			replyJSON(w, 404, ErrorResponse{Code: "FILE_NOT_FOUND", Message: "no"})
			return
		}
		http.ServeContent(w, r, "f", time.Time{}, strings.NewReader(content))
	})
	sb := s.connect(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		opts      OpenOptions
		want, hdr string
	}{
		{OpenOptions{}, content, ""},
		{OpenOptions{Offset: 2, Length: 3}, "234", "bytes=2-4"},
		{OpenOptions{Offset: 7}, "789", "bytes=7-"},
	} {
		rc, err := sb.Open(ctx, "/f", tc.opts)
		if err != nil {
			t.Fatalf("Open(%+v): %v", tc.opts, err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != tc.want {
			t.Errorf("Open(%+v) = %q, want %q", tc.opts, got, tc.want)
		}
		rs := s.requests("GET", "/execd/files/download")
		if h := rs[len(rs)-1].Header.Get("Range"); h != tc.hdr {
			t.Errorf("Open(%+v) Range = %q, want %q", tc.opts, h, tc.hdr)
		}
	}
	data, err := sb.ReadFile(ctx, "/f")
	if err != nil || string(data) != content {
		t.Errorf("ReadFile = %q, %v", data, err)
	}
	var buf bytes.Buffer
	if n, err := sb.Download(ctx, "/f", &buf); err != nil || n != 10 || buf.String() != content {
		t.Errorf("Download = %d, %v (%q)", n, err, buf.String())
	}
	if _, err := sb.ReadFile(ctx, "/missing"); !IsNotFound(err) {
		t.Errorf("ReadFile(missing) = %v, want IsNotFound", err)
	}
}

// TestFileCalls checks the path, query and body of every other file call.
func TestFileCalls(t *testing.T) {
	s := newSDKServer(t)
	info := FileInfo{Path: "/a", Type: FileTypeFile, Mode: 644}
	s.mux.HandleFunc("GET /execd/files/info", func(w http.ResponseWriter, r *http.Request) {
		out := map[string]FileInfo{}
		for _, p := range r.URL.Query()["path"] {
			out[p] = info
		}
		replyJSON(w, 200, out)
	})
	list := func(w http.ResponseWriter, r *http.Request) { replyJSON(w, 200, []FileInfo{info}) }
	s.mux.HandleFunc("GET /execd/directories/list", list)
	s.mux.HandleFunc("GET /execd/files/search", list)
	empty := func(w http.ResponseWriter, r *http.Request) {}
	for _, route := range []string{"POST /execd/files/mv", "DELETE /execd/files", "DELETE /execd/directories", "POST /execd/directories", "POST /execd/files/permissions"} {
		s.mux.HandleFunc(route, empty)
	}
	s.mux.HandleFunc("POST /execd/files/replace", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, map[string]ReplaceFileContentResult{"/a": {ReplacedCount: 3}})
	})
	sb := s.connect(t)
	ctx := testCtx(t)

	st, err := sb.Stat(ctx, "/a", "/b")
	if err != nil || len(st) != 2 || st["/b"] != info {
		t.Errorf("Stat = %v, %v", st, err)
	}
	if _, err := sb.ListDir(ctx, "/d", 0); err != nil {
		t.Errorf("ListDir: %v", err)
	}
	if _, err := sb.Search(ctx, "/d", "*.go"); err != nil {
		t.Errorf("Search: %v", err)
	}
	if err := sb.Move(ctx, RenameFileItem{Src: "/a", Dest: "/b"}); err != nil {
		t.Errorf("Move: %v", err)
	}
	if err := sb.Remove(ctx, "/a", "/b"); err != nil {
		t.Errorf("Remove: %v", err)
	}
	if err := sb.RemoveDirs(ctx, "/d"); err != nil {
		t.Errorf("RemoveDirs: %v", err)
	}
	if err := sb.Mkdir(ctx, "/d/e", Permission{}); err != nil {
		t.Errorf("Mkdir: %v", err)
	}
	if err := sb.Chmod(ctx, "/a", Permission{Mode: 600, Owner: "root"}); err != nil {
		t.Errorf("Chmod: %v", err)
	}
	if n, err := sb.Replace(ctx, "/a", "x", "y"); err != nil || n != 3 {
		t.Errorf("Replace = %d, %v; want 3", n, err)
	}

	queries := map[string]url.Values{
		"GET /execd/files/info":       {"path": {"/a", "/b"}},
		"GET /execd/directories/list": {"path": {"/d"}, "depth": {"1"}},
		"GET /execd/files/search":     {"path": {"/d"}, "pattern": {"*.go"}},
		"DELETE /execd/files":         {"path": {"/a", "/b"}},
		"DELETE /execd/directories":   {"path": {"/d"}},
		"POST /execd/files/replace":   {"verbose": {"true"}},
	}
	for route, want := range queries {
		m, p, _ := strings.Cut(route, " ")
		got, _ := url.ParseQuery(s.only(t, m, p).RawQuery)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s query = %v, want %v", route, got, want)
		}
	}
	bodies := map[string]string{
		"/execd/files/mv":          `[{"src":"/a","dest":"/b"}]`,
		"/execd/directories":       `{"/d/e":{"mode":755}}`,
		"/execd/files/permissions": `{"/a":{"owner":"root","mode":600}}`,
		"/execd/files/replace":     `{"/a":{"old":"x","new":"y"}}`,
	}
	for p, want := range bodies {
		if got := string(s.only(t, "POST", p).Body); got != want {
			t.Errorf("POST %s body = %s, want %s", p, got, want)
		}
	}
}
