package files

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// fuzzBoundary is the boundary of the raw bodies FuzzUploadBody feeds in.
const fuzzBoundary = "FUZZB"

// dirToken in a fuzzed body stands for the absolute base directory, so that
// seeds can carry absolute paths under the per-run temporary directory.
const dirToken = "$DIR"

// FuzzUploadBody feeds raw multipart bodies to Upload. Whatever the bytes,
// the handler must not panic, must answer 200 or a 4xx {code, message},
// must leave no temporary file, and, as long as every metadata path lies
// under the base directory, must write nothing outside it.
func FuzzUploadBody(f *testing.F) {
	seed := func(parts ...string) []byte {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString("--" + fuzzBoundary + "\r\n" + p)
		}
		b.WriteString("--" + fuzzBoundary + "--\r\n")
		return []byte(b.String())
	}
	metaPart := func(js string) string {
		return "Content-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n\r\n" + js + "\r\n"
	}
	filePart := func(content string) string {
		return "Content-Disposition: form-data; name=\"file\"; filename=\"f\"\r\nContent-Type: application/octet-stream\r\n\r\n" + content + "\r\n"
	}
	f.Add(seed(metaPart(`{"path":"a.txt","mode":644}`), filePart("hello")))
	f.Add(seed(metaPart(`{"path":"$DIR/abs/b.txt","mode":4755}`), filePart("x"), metaPart(`{"path":"c"}`), filePart("")))
	f.Add(seed(metaPart(`{"path":"m1"}`), metaPart(`{"path":"m2"}`), filePart("1"), filePart("2")))
	f.Add(seed(filePart("orphan")))
	f.Add(seed(metaPart(`{"path":"x"}`)))
	f.Add(seed(metaPart(`{"path":"x","owner":"root","group":"0"}`), filePart("r")))
	f.Add(seed(metaPart(`{"path":""}`), filePart("r")))
	f.Add(seed(metaPart(`not json`), filePart("r")))
	f.Add(seed(metaPart(`{"path":"d/"}`), filePart("r")))
	f.Add(seed(metaPart(`{"path":"x","mode":999}`), filePart("r")))
	f.Add([]byte("--" + fuzzBoundary + "\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ntruncated"))
	f.Add([]byte(""))
	f.Add([]byte("garbage"))

	f.Fuzz(func(t *testing.T, body []byte) {
		root := t.TempDir()
		base := filepath.Join(root, "base")
		if err := os.Mkdir(base, 0o755); err != nil {
			t.Fatal(err)
		}
		h := New(Options{BaseDir: base, MaxJSONBody: 1 << 20})
		h.log = discardLogger()
		body = bytes.ReplaceAll(body, []byte(dirToken), []byte(base))
		targets, ok := uploadTargets(h, body)
		if !ok {
			t.Skip("a metadata path points outside the base directory")
		}

		req := httptest.NewRequest("POST", "/files/upload", bytes.NewReader(body))
		req.Header.Set("Content-Type", "multipart/form-data; boundary="+fuzzBoundary)
		rec := httptest.NewRecorder()
		h.Upload(rec, req)
		checkUploadReply(t, rec, targets)

		entries, err := os.ReadDir(root)
		if err != nil || len(entries) != 1 || entries[0].Name() != "base" {
			t.Fatalf("upload wrote outside the base directory: %v %v", entries, err)
		}
		if !hasTempPrefix(targets) {
			noTemps(t, "fuzzed upload", root)
		}
	})
}

// uploadTargets pre-reads body the way Upload does and returns the
// resolved metadata paths, or false if one falls outside the base directory.
func uploadTargets(h *Handler, body []byte) ([]string, bool) {
	mr := multipart.NewReader(bytes.NewReader(body), fuzzBoundary)
	var targets []string
	for {
		part, err := mr.NextPart()
		if err != nil {
			return targets, true
		}
		if part.FormName() != "metadata" {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(part, min(int64(maxMetadataPart), h.maxJSON)+1))
		if err != nil {
			return targets, true
		}
		md, err := decodeMetadata(data)
		if err != nil {
			continue
		}
		abs, err := h.resolve(md.Path)
		if err != nil {
			continue
		}
		if abs != h.base && !strings.HasPrefix(abs, h.base+string(filepath.Separator)) {
			return nil, false
		}
		targets = append(targets, abs)
	}
}

// checkUploadReply accepts 200 with an empty body (and every target then
// a regular file) or a 4xx with a {code, message} body.
func checkUploadReply(t *testing.T, rec *httptest.ResponseRecorder, targets []string) {
	t.Helper()
	switch {
	case rec.Code == http.StatusOK:
		if rec.Body.Len() != 0 {
			t.Fatalf("upload = 200 with body %q, want empty", rec.Body.Bytes())
		}
		for _, p := range targets {
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("upload = 200 but target %s is %v, %v", p, fi, err)
			}
		}
	case rec.Code >= 400 && rec.Code < 500:
		var er sandbox.ErrorResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &er); err != nil || er.Code == "" || er.Message == "" {
			t.Fatalf("upload = %d with body %q, want {code, message}", rec.Code, rec.Body.Bytes())
		}
	default:
		t.Fatalf("upload = %d %q, want 200 or 4xx", rec.Code, rec.Body.Bytes())
	}
}

func hasTempPrefix(paths []string) bool {
	for _, p := range paths {
		for _, el := range strings.Split(p, string(filepath.Separator)) {
			if strings.HasPrefix(el, uploadTempPrefix) {
				return true
			}
		}
	}
	return false
}

// FuzzUploadParts builds well-formed multipart bodies from fuzzed part
// names, metadata and contents, to reach the pairing logic more often than
// raw bytes do. spec holds parts separated by '|'; each starts with a kind:
// 'm' metadata with a filename, 'M' metadata without, 'f' file, other
// characters an unrelated part.
func FuzzUploadParts(f *testing.F) {
	f.Add(`m{"path":"a","mode":600}|fdata`)
	f.Add(`m{"path":"$DIR/x/y","mode":755}|M{"path":"z"}|fone|ftwo`)
	f.Add(`fonly`)
	f.Add(`m{"path":"a"}|m{"path":"b"}|f1`)
	f.Add(`m{"path":"a"}|f1|f2`)
	f.Add(`xcomment|m{"path":"a","owner":"0"}|f`)
	f.Add(`m{"path":"a/b"}|f1|m{"path":"a/b/c"}|f2`)
	f.Add(`m{"path":"."}|f1`)
	f.Fuzz(func(t *testing.T, spec string) {
		root := t.TempDir()
		base := filepath.Join(root, "base")
		if err := os.Mkdir(base, 0o755); err != nil {
			t.Fatal(err)
		}
		h := New(Options{BaseDir: base, MaxJSONBody: 1 << 20})
		h.log = discardLogger()
		spec = strings.ReplaceAll(spec, dirToken, base)

		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		mw.SetBoundary(fuzzBoundary)
		for _, p := range strings.Split(spec, "|") {
			if p == "" {
				continue
			}
			var w io.Writer
			var err error
			switch p[0] {
			case 'm':
				w, err = mw.CreateFormFile("metadata", "metadata")
			case 'M':
				w, err = mw.CreateFormField("metadata")
			case 'f':
				w, err = mw.CreateFormFile("file", "blob")
			default:
				w, err = mw.CreateFormField("other")
			}
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(w, p[1:])
		}
		mw.Close()
		body := buf.Bytes()
		targets, ok := uploadTargets(h, body)
		if !ok {
			t.Skip("a metadata path points outside the base directory")
		}
		req := httptest.NewRequest("POST", "/files/upload", bytes.NewReader(body))
		req.Header.Set("Content-Type", mw.FormDataContentType())
		rec := httptest.NewRecorder()
		h.Upload(rec, req)
		checkUploadReply(t, rec, targets)
		entries, err := os.ReadDir(root)
		if err != nil || len(entries) != 1 || entries[0].Name() != "base" {
			t.Fatalf("upload wrote outside the base directory: %v %v", entries, err)
		}
		if !hasTempPrefix(targets) {
			noTemps(t, "fuzzed upload", root)
		}
	})
}
