package files

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestInfo(t *testing.T) {
	e := newEnv(t)
	before := time.Now().Add(-time.Minute)
	f := e.write("dir/file.txt", "hello", 0o640)
	d := filepath.Join(e.dir, "dir")
	link := filepath.Join(e.dir, "link")
	if err := os.Symlink(f, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o750|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}

	var got map[string]sandbox.FileInfo
	rep := e.do("GET", "/files/info"+q("path", "dir/file.txt", "path", d+"/", "path", link), nil)
	decode(t, "GET /files/info", rep, &got)
	if len(got) != 3 {
		t.Fatalf("GET /files/info returned %d entries, want 3: %s", len(got), rep.body)
	}
	fi := got["dir/file.txt"]
	if fi.Path != f || fi.Type != sandbox.FileTypeFile || fi.Size != 5 || fi.Mode != 640 {
		t.Errorf("info(file) = %+v, want path %s type file size 5 mode 640", fi, f)
	}
	if fi.ModifiedAt.Before(before) || fi.CreatedAt.IsZero() || fi.CreatedAt.Before(before) {
		t.Errorf("info(file) times = modified %v created %v, want recent", fi.ModifiedAt, fi.CreatedAt)
	}
	if fi.ModifiedAt.Location() != time.UTC {
		t.Errorf("info(file).ModifiedAt zone = %v, want UTC", fi.ModifiedAt.Location())
	}
	n := newNames()
	if want := n.userName(uint32(os.Geteuid())); fi.Owner != want {
		t.Errorf("info(file).Owner = %q, want %q", fi.Owner, want)
	}
	if fi.Group == "" {
		t.Errorf("info(file).Group is empty")
	}
	if di := got[d+"/"]; di.Path != d || di.Type != sandbox.FileTypeDirectory || di.Mode != 2750 {
		t.Errorf("info(dir) = %+v, want path %s type directory mode 2750", di, d)
	}
	if li := got[link]; li.Type != sandbox.FileTypeSymlink || li.Path != link {
		t.Errorf("info(symlink) = %+v, want type symlink (not followed)", li)
	}
}

func TestInfoOwnerIDs(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	p := e.write("x", "", 0o644)
	if err := os.Chown(p, 54321, 54322); err != nil {
		t.Fatal(err)
	}
	var got map[string]sandbox.FileInfo
	decode(t, "GET /files/info", e.do("GET", "/files/info"+q("path", p), nil), &got)
	if fi := got[p]; fi.Owner != "54321" || fi.Group != "54322" {
		t.Errorf("info(uid 54321 gid 54322) owner/group = %q/%q, want numeric strings", fi.Owner, fi.Group)
	}
}

func TestInfoErrors(t *testing.T) {
	e := newEnv(t)
	f := e.write("f", "x", 0o644)
	tests := []struct {
		query  string
		status int
		code   string
		frag   string
	}{
		{"", 400, apierror.CodeMissingQuery, "path"},
		{q("path", f, "path", "missing.txt"), 404, apierror.CodeFileNotFound, filepath.Join(e.dir, "missing.txt")},
		{q("path", f+"/child"), 404, apierror.CodeFileNotFound, "not a directory"},
		{q("path", ""), 400, apierror.CodeInvalidPath, "empty"},
		{q("path", "a\x00b"), 400, apierror.CodeInvalidPath, "NUL"},
	}
	for _, tt := range tests {
		call := "GET /files/info" + tt.query
		wantErr(t, call, e.do("GET", "/files/info"+tt.query, nil), tt.status, tt.code, tt.frag)
	}
}

func TestRemove(t *testing.T) {
	e := newEnv(t)
	a := e.write("a", "a", 0o644)
	b := e.write("sub/b", "b", 0o644)
	link := filepath.Join(e.dir, "link")
	if err := os.Symlink(filepath.Join(e.dir, "sub"), link); err != nil {
		t.Fatal(err)
	}
	rep := e.do("DELETE", "/files"+q("path", "a", "path", b, "path", link, "path", "never-existed", "path", a+"/under-file"), nil)
	wantOK(t, "DELETE /files", rep)
	for _, p := range []string{a, b, link} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("after DELETE /files, Lstat(%s) = %v, want not exist", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "sub")); err != nil {
		t.Errorf("removing a symlink to a directory touched the directory: %v", err)
	}

	// A directory fails the request before anything is removed.
	c := e.write("c", "c", 0o644)
	d := e.mkdir("d")
	rep = e.do("DELETE", "/files"+q("path", c, "path", d), nil)
	wantErr(t, "DELETE /files dir", rep, http.StatusBadRequest, apierror.CodeIsDirectory, d)
	for _, p := range []string{c, d} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after rejected DELETE /files, %s is gone: %v", p, err)
		}
	}
	wantErr(t, "DELETE /files no path", e.do("DELETE", "/files", nil), 400, apierror.CodeMissingQuery, "path")
	wantErr(t, "DELETE /files NUL", e.do("DELETE", "/files"+q("path", "x\x00"), nil), 400, apierror.CodeInvalidPath, "NUL")
}

// TestPermissionDenied runs only without root, where the kernel enforces
// permissions: the reply must be 403 PERMISSION_DENIED naming the path.
func TestPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root bypasses permission checks; fsError's mapping is covered by TestFSError")
	}
	e := newEnv(t)
	locked := e.mkdir("locked")
	f := e.write("locked/f", "x", 0o644)
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(locked, 0o755)
	wantErr(t, "GET /files/info locked", e.do("GET", "/files/info"+q("path", f), nil), http.StatusForbidden, apierror.CodePermissionDenied, f)
	wantErr(t, "GET /directories/list locked", e.do("GET", "/directories/list"+q("path", locked), nil), http.StatusForbidden, apierror.CodePermissionDenied, locked)
	wantErr(t, "GET /files/download locked", e.do("GET", "/files/download"+q("path", f), nil), http.StatusForbidden, apierror.CodePermissionDenied, f)
}
