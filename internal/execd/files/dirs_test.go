package files

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestListDir(t *testing.T) {
	e := newEnv(t)
	e.write("top/b.txt", "", 0o644)
	e.write("top/a/z.txt", "", 0o644)
	e.write("top/a/y/deep.txt", "", 0o644)
	e.write("top/a/y/deeper/x", "", 0o644)
	e.write("top/c/only.txt", "", 0o644)
	e.write("elsewhere/secret", "", 0o644)
	if err := os.Symlink(filepath.Join(e.dir, "elsewhere"), filepath.Join(e.dir, "top/L")); err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(e.dir, "top")
	rel := func(ps ...string) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, filepath.Join(top, p))
		}
		return out
	}
	tests := []struct {
		depth string // "" means absent
		want  []string
	}{
		{"", rel("L", "a", "b.txt", "c")},
		{"1", rel("L", "a", "b.txt", "c")},
		{"0", rel()},
		{"2", rel("L", "a", "a/y", "a/z.txt", "b.txt", "c", "c/only.txt")},
		{"3", rel("L", "a", "a/y", "a/y/deep.txt", "a/y/deeper", "a/z.txt", "b.txt", "c", "c/only.txt")},
		{"99", rel("L", "a", "a/y", "a/y/deep.txt", "a/y/deeper", "a/y/deeper/x", "a/z.txt", "b.txt", "c", "c/only.txt")},
	}
	for _, tt := range tests {
		target := "/directories/list" + q("path", "top")
		if tt.depth != "" {
			target += "&depth=" + tt.depth
		}
		var got []sandbox.FileInfo
		decode(t, "GET "+target, e.do("GET", target, nil), &got)
		var paths []string
		for _, fi := range got {
			paths = append(paths, fi.Path)
		}
		if got == nil || (!slices.Equal(paths, tt.want) && len(tt.want) > 0) || len(paths) != len(tt.want) {
			t.Errorf("GET %s = %q, want %q", target, paths, tt.want)
		}
		for _, fi := range got {
			if fi.Path == filepath.Join(top, "L") && fi.Type != sandbox.FileTypeSymlink {
				t.Errorf("GET %s: L has type %q, want symlink", target, fi.Type)
			}
		}
	}
}

func TestListDirErrors(t *testing.T) {
	e := newEnv(t)
	f := e.write("f", "", 0o644)
	d := e.mkdir("d")
	link := filepath.Join(e.dir, "link")
	if err := os.Symlink(d, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query  string
		status int
		code   string
		frag   string
	}{
		{"", 400, apierror.CodeMissingQuery, "path"},
		{q("path", "missing"), 404, apierror.CodeFileNotFound, "missing"},
		{q("path", f), 400, apierror.CodeNotDirectory, f},
		{q("path", link), 400, apierror.CodeInvalidPath, "symbolic link"},
		{q("path", d, "depth", "-1"), 400, apierror.CodeInvalidQuery, "-1"},
		{q("path", d, "depth", "two"), 400, apierror.CodeInvalidQuery, "two"},
		{q("path", d, "depth", ""), 400, apierror.CodeInvalidQuery, "depth"},
		{q("path", "\x00"), 400, apierror.CodeInvalidPath, "NUL"},
	}
	for _, tt := range tests {
		call := "GET /directories/list" + tt.query
		wantErr(t, call, e.do("GET", "/directories/list"+tt.query, nil), tt.status, tt.code, tt.frag)
	}
}

func TestMakeDirs(t *testing.T) {
	old := syscall.Umask(0o077) // the requested mode must win over the umask
	defer syscall.Umask(old)
	e := newEnv(t)
	existing := e.mkdir("existing")
	if err := os.Chmod(existing, 0o700); err != nil {
		t.Fatal(err)
	}
	rep := e.do("POST", "/directories", map[string]sandbox.Permission{
		"a/b/c":    {Mode: 755},
		"plain":    {},
		"sticky":   {Mode: 1777},
		"existing": {},
	})
	wantOK(t, "POST /directories", rep)
	for rel, want := range map[string]fs.FileMode{
		"a/b/c":    0o755,
		"plain":    0o755,
		"sticky":   0o777 | fs.ModeSticky,
		"existing": 0o700, // no mode given: left alone
	} {
		if got := modeOf(t, filepath.Join(e.dir, rel)); got != want {
			t.Errorf("after POST /directories, mode of %s = %v, want %v", rel, got, want)
		}
	}
	// An explicit mode is applied to an existing directory too.
	wantOK(t, "POST /directories existing", e.do("POST", "/directories", map[string]sandbox.Permission{existing: {Mode: 750}}))
	if got := modeOf(t, existing); got != 0o750 {
		t.Errorf("mode of existing dir after explicit mode = %v, want 0750", got)
	}
}

func TestMakeDirsOwner(t *testing.T) {
	needRoot(t)
	e := newEnv(t)
	rep := e.do("POST", "/directories", map[string]sandbox.Permission{"owned/leaf": {Owner: "65534", Group: "65534", Mode: 700}})
	wantOK(t, "POST /directories owner", rep)
	fi, err := os.Stat(filepath.Join(e.dir, "owned/leaf"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("leaf uid/gid = %d/%d, want 65534/65534", st.Uid, st.Gid)
	}
	fi, _ = os.Stat(filepath.Join(e.dir, "owned"))
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Geteuid()) {
		t.Errorf("intermediate dir uid = %d, want ours (only the leaf is chowned)", st.Uid)
	}
}

func TestMakeDirsErrors(t *testing.T) {
	e := newEnv(t)
	f := e.write("file", "", 0o644)
	tests := []struct {
		name   string
		body   any
		status int
		code   string
		frag   string
	}{
		{"existing file", map[string]sandbox.Permission{f: {Mode: 755}}, 409, apierror.CodeFileExists, f},
		{"under a file", map[string]sandbox.Permission{"file/sub": {Mode: 755}}, 409, apierror.CodeFileExists, "not a directory"},
		{"bad mode", map[string]sandbox.Permission{"x": {Mode: 999}}, 400, apierror.CodeInvalidRequestBody, "999"},
		{"unknown owner", map[string]sandbox.Permission{"x": {Owner: "no-such-user-xyz"}}, 400, apierror.CodeInvalidRequestBody, "no-such-user-xyz"},
		{"empty path", map[string]sandbox.Permission{"": {}}, 400, apierror.CodeInvalidPath, "empty"},
		{"bad JSON", "[", 400, apierror.CodeInvalidRequestBody, "JSON"},
	}
	for _, tt := range tests {
		wantErr(t, "mkdir "+tt.name, e.do("POST", "/directories", tt.body), tt.status, tt.code, tt.frag)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "x")); !os.IsNotExist(err) {
		t.Errorf("a rejected request created x (%v)", err)
	}
}

func TestRemoveDirs(t *testing.T) {
	e := newEnv(t)
	e.write("tree/a/b/c", "", 0o644)
	e.write("other/x", "", 0o644)
	f := e.write("lone", "", 0o644)
	rep := e.do("DELETE", "/directories"+q("path", "tree", "path", "missing", "path", f, "path", f+"/under"), nil)
	wantOK(t, "DELETE /directories", rep)
	for _, p := range []string{"tree", "lone"} {
		if _, err := os.Lstat(filepath.Join(e.dir, p)); !os.IsNotExist(err) {
			t.Errorf("after DELETE /directories, %s still exists (%v)", p, err)
		}
	}

	rootH := New(Options{BaseDir: "/"})
	rootH.removeAll = func(p string) error {
		t.Errorf("RemoveAll(%q) called by a request that names the root", p)
		return nil
	}
	srv := routes(rootH)
	for _, p := range []string{"/", ".", "/..", "//"} {
		rec := newRecorder()
		srv.ServeHTTP(rec, newRequest(t, "DELETE", "/directories"+q("path", filepath.Join(e.dir, "other"), "path", p)))
		wantErr(t, "DELETE /directories path="+p, rec.reply(), http.StatusBadRequest, apierror.CodeInvalidPath, "root")
	}
	if _, err := os.Stat(filepath.Join(e.dir, "other/x")); err != nil {
		t.Errorf("a refused request removed other paths: %v", err)
	}
	wantErr(t, "DELETE /directories no path", e.do("DELETE", "/directories", nil), 400, apierror.CodeMissingQuery, "path")
}
