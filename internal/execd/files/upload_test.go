package files

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// mpart is one part of a test multipart body.
type mpart struct {
	name, filename, content string
}

func meta(md sandbox.FileMetadata) mpart {
	data, _ := json.Marshal(md)
	return mpart{name: "metadata", filename: "metadata", content: string(data)}
}

func file(content string) mpart {
	return mpart{name: "file", filename: "blob", content: content}
}

// multipartBody encodes parts and returns the body and its Content-Type.
func multipartBody(t *testing.T, parts ...mpart) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name=%q`, p.name)
		if p.filename != "" {
			cd += fmt.Sprintf(`; filename=%q`, p.filename)
		}
		h.Set("Content-Disposition", cd)
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, p.content)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

func (e *env) upload(parts ...mpart) reply {
	e.t.Helper()
	body, ct := multipartBody(e.t, parts...)
	return e.do("POST", "/files/upload", body, "Content-Type", ct)
}

// noTemps fails if an upload temporary is left anywhere under dir.
func noTemps(t *testing.T, call, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), uploadTempPrefix) {
			t.Errorf("%s left temporary file %s", call, p)
		}
		return nil
	})
}

func TestUpload(t *testing.T) {
	e := newEnv(t)
	kept := e.write("kept.sh", "old", 0o751)
	rep := e.upload(
		meta(sandbox.FileMetadata{Path: filepath.Join(e.dir, "a.txt"), Mode: 600}),
		file("alpha"),
		meta(sandbox.FileMetadata{Path: "sub/dir/b.bin"}), // relative, parents created
		file("\x00\x01binary\xff"),
		meta(sandbox.FileMetadata{Path: kept}), // replaced: keeps its mode
		file("new"),
		mpart{name: "comment", content: "ignored"},
	)
	wantOK(t, "POST /files/upload", rep)
	for rel, want := range map[string]struct {
		content string
		mode    fs.FileMode
	}{
		"a.txt":         {"alpha", 0o600},
		"sub/dir/b.bin": {"\x00\x01binary\xff", 0o644},
		"kept.sh":       {"new", 0o751},
	} {
		p := filepath.Join(e.dir, rel)
		if got := readFile(t, p); got != want.content {
			t.Errorf("after upload, %s = %q, want %q", rel, got, want.content)
		}
		if got := modeOf(t, p); got != want.mode {
			t.Errorf("after upload, mode of %s = %v, want %v", rel, got, want.mode)
		}
	}

	// All metadata first, then all files; an empty file; a metadata part
	// without a filename; a symlink at the target is replaced by the file.
	if err := os.Symlink("a.txt", filepath.Join(e.dir, "link")); err != nil {
		t.Fatal(err)
	}
	m3 := meta(sandbox.FileMetadata{Path: "link", Mode: 640})
	m3.filename = ""
	rep = e.upload(
		meta(sandbox.FileMetadata{Path: "c.txt", Mode: 4755}),
		meta(sandbox.FileMetadata{Path: "empty"}),
		m3,
		file("charlie"),
		file(""),
		file("via link"),
	)
	wantOK(t, "POST /files/upload (metadata first)", rep)
	if got := readFile(t, filepath.Join(e.dir, "c.txt")); got != "charlie" {
		t.Errorf("c.txt = %q, want charlie", got)
	}
	if got := modeOf(t, filepath.Join(e.dir, "c.txt")); got != 0o755|fs.ModeSetuid {
		t.Errorf("c.txt mode = %v, want setuid|0755", got)
	}
	if fi, err := os.Stat(filepath.Join(e.dir, "empty")); err != nil || fi.Size() != 0 {
		t.Errorf("empty file: %v, %v", fi, err)
	}
	if fi, _ := os.Lstat(filepath.Join(e.dir, "link")); !fi.Mode().IsRegular() || readFile(t, filepath.Join(e.dir, "a.txt")) != "alpha" {
		t.Errorf("upload onto a symlink: link mode %v, a.txt %q; want a regular file and a.txt untouched", fi.Mode(), readFile(t, filepath.Join(e.dir, "a.txt")))
	}
	noTemps(t, "upload", e.dir)
}

func TestUploadOwner(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	prev := e.write("prev", "old", 0o640)
	if err := os.Chown(prev, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	rep := e.upload(
		meta(sandbox.FileMetadata{Path: "owned", Owner: "65534", Group: "65534", Mode: 6750}),
		file("x"),
		meta(sandbox.FileMetadata{Path: prev}),
		file("y"),
	)
	wantOK(t, "POST /files/upload owner", rep)
	for _, p := range []string{filepath.Join(e.dir, "owned"), prev} {
		fi, _ := os.Stat(p)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 {
			t.Errorf("%s uid/gid = %d/%d, want 65534/65534", p, st.Uid, st.Gid)
		}
	}
	if got := modeOf(t, filepath.Join(e.dir, "owned")); got != 0o750|fs.ModeSetuid|fs.ModeSetgid {
		t.Errorf("owned mode = %v, want setuid|setgid|0750 (mode applied after chown)", got)
	}
	if got := modeOf(t, prev); got != 0o640 {
		t.Errorf("replaced file mode = %v, want 0640 kept", got)
	}
}

func TestUploadErrors(t *testing.T) {
	e := newEnv(t)
	e.mkdir("adir")
	e.write("afile", "", 0o644)
	ok := func(p string) mpart { return meta(sandbox.FileMetadata{Path: p}) }
	tests := []struct {
		name   string
		parts  []mpart
		status int
		code   string
		frag   string
	}{
		{"no parts", nil, 400, apierror.CodeInvalidFileMetadata, "no metadata"},
		{"file without metadata", []mpart{file("x")}, 400, apierror.CodeInvalidFileMetadata, "no metadata"},
		{"metadata without file", []mpart{ok("t1")}, 400, apierror.CodeInvalidFileContent, "t1"},
		{"extra file", []mpart{ok("t1"), file("a"), file("b")}, 400, apierror.CodeInvalidFile, "more file parts"},
		{"extra metadata", []mpart{ok("t1"), ok("t2"), file("a")}, 400, apierror.CodeInvalidFile, "2 metadata parts but 1 file"},
		{"bad JSON", []mpart{{name: "metadata", filename: "m", content: "{"}, file("a")}, 400, apierror.CodeInvalidFileMetadata, "invalid JSON"},
		{"no path", []mpart{{name: "metadata", filename: "m", content: `{"mode":644}`}, file("a")}, 400, apierror.CodeInvalidFileMetadata, "path is required"},
		{"bad mode", []mpart{meta(sandbox.FileMetadata{Path: "t1", Mode: 888}), file("a")}, 400, apierror.CodeInvalidFileMetadata, "888"},
		{"unknown owner", []mpart{meta(sandbox.FileMetadata{Path: "t1", Owner: "no-such-user-xyz"}), file("a")}, 400, apierror.CodeInvalidFileMetadata, "no-such-user-xyz"},
		{"NUL path", []mpart{ok("t\x00"), file("a")}, 400, apierror.CodeInvalidPath, "NUL"},
		{"target is a directory", []mpart{ok("t1"), file("a"), ok("adir"), file("b")}, 400, apierror.CodeIsDirectory, "adir"},
		{"parent is a file", []mpart{ok("t1"), file("a"), ok("afile/x"), file("b")}, 409, apierror.CodeFileExists, "afile/x"},
		{"huge metadata", []mpart{{name: "metadata", filename: "m", content: `{"path":"t1","pad":"` + strings.Repeat("p", maxMetadataPart) + `"}`}, file("a")}, 400, apierror.CodeInvalidFileMetadata, "exceeds"},
	}
	for _, tt := range tests {
		call := "upload " + tt.name
		wantErr(t, call, e.upload(tt.parts...), tt.status, tt.code, tt.frag)
		for _, p := range []string{"t1", "t2", "afile/x"} {
			if _, err := os.Lstat(filepath.Join(e.dir, p)); err == nil {
				t.Errorf("%s: failed upload created %s", call, p)
			}
		}
		noTemps(t, call, e.dir)
	}

	// Metadata waiting for files is bounded by MaxJSONBody (1 MiB here).
	var parts []mpart
	pad := strings.Repeat("p", 60<<10)
	for i := 0; i < 20; i++ {
		parts = append(parts, mpart{name: "metadata", filename: "m", content: fmt.Sprintf(`{"path":"t%d","pad":%q}`, i, pad)})
	}
	wantErr(t, "upload many pending metadata", e.upload(parts...), http.StatusRequestEntityTooLarge, apierror.CodeRequestTooLarge, "exceed")

	rep := e.do("POST", "/files/upload", `{"path":"x"}`, "Content-Type", "application/json")
	wantErr(t, "upload JSON body", rep, 400, apierror.CodeInvalidRequestBody, "multipart")

	// A body cut off inside the second file: nothing lands, nothing is left.
	body, ct := multipartBody(t, ok("t1"), file("complete"), ok("t2"), file(strings.Repeat("z", 10000)))
	rep = e.do("POST", "/files/upload", body[:len(body)-3000], "Content-Type", ct)
	wantErr(t, "upload truncated body", rep, 400, apierror.CodeInvalidRequestBody, "")
	for _, p := range []string{"t1", "t2"} {
		if _, err := os.Lstat(filepath.Join(e.dir, p)); err == nil {
			t.Errorf("truncated upload created %s", p)
		}
	}
	noTemps(t, "upload truncated body", e.dir)
}

// TestUploadStreams uploads 20 MiB and checks that the bytes arrive intact
// while the process allocates far less than the file size: the body is
// streamed to disk, never buffered.
func TestUploadStreams(t *testing.T) {
	const size = 20 << 20
	e := newEnv(t)
	target := filepath.Join(e.dir, "big.bin")

	pr, pw := io.Pipe()
	defer pr.Close() // unblocks the writer if the request fails early
	mw := multipart.NewWriter(pw)
	sent := sha256.New()
	done := make(chan error, 1)
	go func() {
		err := func() error {
			w, err := mw.CreateFormFile("metadata", "metadata")
			if err != nil {
				return err
			}
			if err := json.NewEncoder(w).Encode(sandbox.FileMetadata{Path: target, Mode: 600}); err != nil {
				return err
			}
			if w, err = mw.CreateFormFile("file", "big.bin"); err != nil {
				return err
			}
			rnd := rand.New(rand.NewPCG(7, 9))
			chunk := make([]byte, 64<<10)
			for n := 0; n < size; n += len(chunk) {
				for i := 0; i < len(chunk); i += 8 {
					v := rnd.Uint64()
					for j := 0; j < 8; j++ {
						chunk[i+j] = byte(v >> (8 * j))
					}
				}
				sent.Write(chunk)
				if _, err := w.Write(chunk); err != nil {
					return err
				}
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
		done <- err
	}()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req, err := http.NewRequest("POST", e.srv.URL+"/files/upload", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pr.Close()
	if err := <-done; err != nil {
		t.Fatalf("writing the request body: %v", err)
	}
	runtime.ReadMemStats(&after)

	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /files/upload (20 MiB) = %d %s, want 200", resp.StatusCode, body)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	if allocated > 8<<20 {
		t.Errorf("uploading %d bytes allocated %d bytes, want < 8 MiB (streamed, not buffered)", size, allocated)
	}
	f, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := sha256.New()
	n, _ := io.Copy(got, f)
	if n != size || !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
		t.Errorf("uploaded file has %d bytes, sha256 %x; want %d bytes, sha256 %x", n, got.Sum(nil), size, sent.Sum(nil))
	}
	if m := modeOf(t, target); m != 0o600 {
		t.Errorf("uploaded file mode = %v, want 0600", m)
	}
	t.Logf("allocated %d KiB while uploading %d MiB", allocated>>10, size>>20)
}
