package files

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDownloadLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.txt")
	os.WriteFile(path, []byte("a\nb\nc\nd"), 0o644)
	h := New(Options{})
	for _, tt := range []struct {
		query, rng string
		status     int
		body, ct   string
	}{
		{"offset=2&limit=2", "", 200, "b\nc\n", "text/plain; charset=utf-8"},
		{"offset=3", "", 200, "c\nd", "text/plain; charset=utf-8"},
		{"limit=1", "", 200, "a\n", "text/plain; charset=utf-8"},
		{"offset=9&limit=2", "", 200, "", "text/plain; charset=utf-8"},
		{"offset=0", "", 400, "", ""},
		{"limit=0", "", 400, "", ""},
		{"limit=x", "", 400, "", ""},
		{"offset=1", "bytes=0-1", 400, "", ""},
	} {
		req := httptest.NewRequest("GET", "/files/download?path="+url.QueryEscape(path)+"&"+tt.query, nil)
		if tt.rng != "" {
			req.Header.Set("Range", tt.rng)
		}
		rec := httptest.NewRecorder()
		h.Download(rec, req)
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != tt.status {
			t.Errorf("download %s (Range %q) = %d %s, want %d", tt.query, tt.rng, rec.Code, body, tt.status)
			continue
		}
		if tt.status == http.StatusOK && (string(body) != tt.body || rec.Header().Get("Content-Type") != tt.ct) {
			t.Errorf("download %s = %q (%s), want %q (%s)", tt.query, body, rec.Header().Get("Content-Type"), tt.body, tt.ct)
		}
		if tt.status == 400 && !strings.Contains(string(body), "INVALID_QUERY") {
			t.Errorf("download %s error = %s, want INVALID_QUERY", tt.query, body)
		}
	}
	// A line longer than the read buffer is skipped and returned whole.
	long := strings.Repeat("x", 200<<10)
	os.WriteFile(path, []byte(long+"\nsecond\n"+long+"\n"), 0o644)
	for q, want := range map[string]string{"offset=2&limit=1": "second\n", "offset=3": long + "\n"} {
		rec := httptest.NewRecorder()
		h.Download(rec, httptest.NewRequest("GET", "/files/download?path="+url.QueryEscape(path)+"&"+q, nil))
		if rec.Body.String() != want {
			t.Errorf("download %s of long lines: got %d bytes, want %d", q, rec.Body.Len(), len(want))
		}
	}
}
