package files

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestReplace(t *testing.T) {
	e := newEnv(t)
	a := e.write("a.cfg", "host=localhost\nport=8080\nbackup=localhost\n", 0o751|fs.ModeSetgid)
	b := e.write("b.cfg", "nothing here", 0o600)
	past := time.Date(2021, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(b, past, past); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(e.dir, "link.cfg")
	if err := os.Symlink("a.cfg", link); err != nil {
		t.Fatal(err)
	}

	var got map[string]sandbox.ReplaceFileContentResult
	rep := e.do("POST", "/files/replace?verbose=true", map[string]sandbox.ReplaceFileContentItem{
		"a.cfg": {Old: "localhost", New: "0.0.0.0"},
		b:       {Old: "absent", New: "x"},
	})
	decode(t, "POST /files/replace?verbose=true", rep, &got)
	if got["a.cfg"].ReplacedCount != 2 || got[b].ReplacedCount != 0 || len(got) != 2 {
		t.Errorf("replace counts = %+v, want a.cfg:2 %s:0", got, b)
	}
	if s := readFile(t, a); s != "host=0.0.0.0\nport=8080\nbackup=0.0.0.0\n" {
		t.Errorf("after replace, a.cfg = %q", s)
	}
	if m := modeOf(t, a); m != 0o751|fs.ModeSetgid {
		t.Errorf("after replace, mode = %v, want setgid|0751 kept", m)
	}
	if fi, _ := os.Stat(b); !fi.ModTime().Equal(past) {
		t.Errorf("file without a match was rewritten: mtime %v, want %v", fi.ModTime(), past)
	}

	// Without verbose: empty body. Through a symlink: the target changes and
	// the link stays a link. Deleting text (new "") works.
	rep = e.do("POST", "/files/replace", map[string]sandbox.ReplaceFileContentItem{link: {Old: "0.0.0.0", New: ""}})
	wantOK(t, "POST /files/replace", rep)
	if s := readFile(t, a); s != "host=\nport=8080\nbackup=\n" {
		t.Errorf("after replace via symlink, a.cfg = %q", s)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("replace through symlink replaced the link itself (%v)", err)
	}
	entries, _ := os.ReadDir(e.dir)
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), ".osb-") {
			t.Errorf("temporary file %s left behind", en.Name())
		}
	}
}

func TestReplaceKeepsOwner(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	p := e.write("owned", "aaa", 0o640)
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	rep := e.do("POST", "/files/replace", map[string]sandbox.ReplaceFileContentItem{p: {Old: "a", New: "bb"}})
	wantOK(t, "POST /files/replace", rep)
	fi, _ := os.Stat(p)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("after replace, uid/gid = %d/%d, want 65534/65534 kept", st.Uid, st.Gid)
	}
	if s := readFile(t, p); s != "bbbbbb" {
		t.Errorf("after replace, content = %q, want bbbbbb", s)
	}
}

func TestReplaceErrors(t *testing.T) {
	e := newEnv(t)
	a := e.write("a", "abc", 0o644)
	e.mkdir("d")
	tests := []struct {
		name   string
		query  string
		body   any
		status int
		code   string
		frag   string
	}{
		{"empty old", "", map[string]sandbox.ReplaceFileContentItem{a: {Old: "", New: "x"}}, 400, apierror.CodeInvalidRequestBody, "old must not be empty"},
		{"missing file", "", map[string]sandbox.ReplaceFileContentItem{a: {Old: "abc", New: "X"}, "missing": {Old: "a", New: "b"}}, 404, apierror.CodeFileNotFound, "missing"},
		{"directory", "", map[string]sandbox.ReplaceFileContentItem{"d": {Old: "a", New: "b"}}, 400, apierror.CodeIsDirectory, "is a directory"},
		{"bad verbose", "?verbose=maybe", map[string]sandbox.ReplaceFileContentItem{a: {Old: "a", New: "b"}}, 400, apierror.CodeInvalidQuery, "maybe"},
		{"NUL path", "", map[string]sandbox.ReplaceFileContentItem{"a\x00": {Old: "a", New: "b"}}, 400, apierror.CodeInvalidPath, "NUL"},
		{"not JSON", "", "nope", 400, apierror.CodeInvalidRequestBody, "JSON"},
	}
	for _, tt := range tests {
		wantErr(t, "replace "+tt.name, e.do("POST", "/files/replace"+tt.query, tt.body), tt.status, tt.code, tt.frag)
	}
	if s := readFile(t, a); s != "abc" {
		t.Errorf("after failed requests, a = %q, want abc (validate all before changing any)", s)
	}
	fifo := filepath.Join(e.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "replace fifo", e.do("POST", "/files/replace", map[string]sandbox.ReplaceFileContentItem{fifo: {Old: "a", New: "b"}}),
		400, apierror.CodeInvalidFile, "not a regular file")
}

func TestStreamReplace(t *testing.T) {
	big := strings.Repeat("x", replaceChunk-2) + "NEEDLE" + strings.Repeat("y", replaceChunk) + "NEEDLE"
	tests := []struct{ in, old, new string }{
		{"", "a", "b"},
		{"aaaa", "aa", "b"},
		{"aaa", "aa", "b"},
		{"abcabc", "abc", ""},
		{"xyz", "q", "long replacement"},
		{"ab", "abc", "z"},
		{big, "NEEDLE", "pin"},
		{big, "x", "xx"},
		{strings.Repeat("ab", replaceChunk), "ba", "-"},
		{strings.Repeat("a", 3*replaceChunk+1), strings.Repeat("a", 1000), "B"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		n, err := streamReplace(context.Background(), &out, strings.NewReader(tt.in), []byte(tt.old), []byte(tt.new))
		want := strings.ReplaceAll(tt.in, tt.old, tt.new)
		if err != nil || out.String() != want || n != strings.Count(tt.in, tt.old) {
			t.Errorf("streamReplace(len %d, %q, %q) = %d, %v (len %d); want %d (len %d)",
				len(tt.in), tt.old, tt.new, n, err, out.Len(), strings.Count(tt.in, tt.old), len(want))
		}
	}
}

// FuzzStreamReplace checks streamReplace against strings.ReplaceAll, with
// the input repeated so that matches straddle chunk boundaries.
func FuzzStreamReplace(f *testing.F) {
	f.Add("abcabc", "bc", "X", uint16(1))
	f.Add("aaaa", "aa", "", uint16(30000))
	f.Add("x", "xx", "y", uint16(5))
	f.Fuzz(func(t *testing.T, in, old, repl string, reps uint16) {
		if old == "" {
			return
		}
		s := strings.Repeat(in, 1+int(reps)%(2*replaceChunk/max(1, len(in))+2))
		var out bytes.Buffer
		n, err := streamReplace(context.Background(), &out, strings.NewReader(s), []byte(old), []byte(repl))
		if err != nil || out.String() != strings.ReplaceAll(s, old, repl) || n != strings.Count(s, old) {
			t.Fatalf("streamReplace(len %d, %q, %q) = %d, %v; disagrees with strings.ReplaceAll", len(s), old, repl, n, err)
		}
	})
}

// Replacing a short string by a long one multiplies a file; one request
// may grow its files by at most the cap, and one that would grow them more
// changes nothing.
func TestReplaceGrowthLimit(t *testing.T) {
	e := newEnv(t)
	small := filepath.Join(e.dir, "a-small.txt") // sorted first: would be rewritten first
	big := filepath.Join(e.dir, "b-big.txt")
	os.WriteFile(small, []byte("x-x"), 0o644)
	os.WriteFile(big, bytes.Repeat([]byte("x"), 64<<10), 0o644)
	long := strings.Repeat("y", 1100) // 64 Ki matches x 1099 bytes > 64 MiB
	r := e.do("POST", "/files/replace", map[string]sandbox.ReplaceFileContentItem{
		small: {Old: "x", New: "z"},
		big:   {Old: "x", New: long},
	})
	wantErr(t, "replace", r, http.StatusRequestEntityTooLarge, "RESULT_TOO_LARGE", "nothing was changed")
	if b, _ := os.ReadFile(small); string(b) != "x-x" {
		t.Errorf("small file = %q, want it unchanged", b)
	}
	if fi, _ := os.Stat(big); fi.Size() != 64<<10 {
		t.Errorf("big file size = %d, want it unchanged", fi.Size())
	}
	if left, _ := filepath.Glob(filepath.Join(e.dir, ".osb-replace-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// Work stops with the request: a request whose context has ended changes
// nothing and leaves no temporary file.
func TestReplaceStopsWithRequest(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.dir, "f.txt")
	content := bytes.Repeat([]byte("ab"), 1<<20)
	os.WriteFile(path, content, 0o644)
	body, _ := json.Marshal(map[string]sandbox.ReplaceFileContentItem{path: {Old: "a", New: "c"}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, "POST", "/files/replace", bytes.NewReader(body))
	rec := httptest.NewRecorder()
	e.h.Replace(rec, req)
	wantErr(t, "replace", reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, http.StatusRequestTimeout, "REQUEST_CANCELED", "canceled")
	if b, _ := os.ReadFile(path); !bytes.Equal(b, content) {
		t.Error("the file changed")
	}
	if left, _ := filepath.Glob(filepath.Join(e.dir, ".osb-replace-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// Mid-stream: streamReplace notices the end between chunks.
	ctx, cancel = context.WithCancel(context.Background())
	var out bytes.Buffer
	n, err := streamReplace(ctx, writerFunc(func(p []byte) (int, error) {
		cancel() // the client leaves once output starts
		return out.Write(p)
	}), bytes.NewReader(content), []byte("a"), []byte("c"))
	if !errors.Is(err, context.Canceled) || out.Len() >= len(content) {
		t.Errorf("streamReplace after cancel = %d, %v with %d of %d bytes written; want context.Canceled early", n, err, out.Len(), len(content))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
