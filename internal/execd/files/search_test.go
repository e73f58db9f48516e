package files

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestSearch(t *testing.T) {
	e := newEnv(t)
	e.write("root/a.txt", "", 0o644)
	e.write("root/b.go", "", 0o644)
	e.write("root/sub/c.txt", "", 0o644)
	e.write("root/sub/deeper/d.TXT", "", 0o644)
	e.write("root/sub/deeper/e.txt", "", 0o644)
	e.write("outside/hidden.txt", "", 0o644)
	e.mkdir("root/dir.txt") // a directory whose name matches: never reported
	if err := os.Symlink(filepath.Join(e.dir, "outside"), filepath.Join(e.dir, "root/link")); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(e.dir, "root")
	rel := func(ps ...string) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, filepath.Join(root, p))
		}
		return out
	}
	tests := []struct {
		pattern string
		want    []string
	}{
		{"", rel("a.txt", "b.go", "link", "sub/c.txt", "sub/deeper/d.TXT", "sub/deeper/e.txt")},
		{"**", rel("a.txt", "b.go", "link", "sub/c.txt", "sub/deeper/d.TXT", "sub/deeper/e.txt")},
		{"*.txt", rel("a.txt", "sub/c.txt", "sub/deeper/e.txt")},
		{"**.txt", rel("a.txt", "sub/c.txt", "sub/deeper/e.txt")},
		{"[ab].*", rel("a.txt", "b.go")},
		{"?.go", rel("b.go")},
		{"sub/*.txt", rel()},
		{"nothing", rel()},
	}
	for _, tt := range tests {
		var got []sandbox.FileInfo
		target := "/files/search" + q("path", "root", "pattern", tt.pattern)
		call := "GET " + target
		rep := e.do("GET", target, nil)
		decode(t, call, rep, &got)
		if got == nil {
			t.Errorf("%s = null, want an array", call)
		}
		var paths []string
		for _, fi := range got {
			paths = append(paths, fi.Path)
			if fi.Type == sandbox.FileTypeDirectory {
				t.Errorf("%s returned directory %s", call, fi.Path)
			}
		}
		if !slices.Equal(paths, tt.want) && !(len(paths) == 0 && len(tt.want) == 0) {
			t.Errorf("%s = %q, want %q", call, paths, tt.want)
		}
	}
	if rep := e.do("GET", "/files/search"+q("path", "root", "pattern", "zzz"), nil); string(rep.body) != "[]" {
		t.Errorf("search with no match body = %q, want []", rep.body)
	}
}

func TestSearchErrors(t *testing.T) {
	e := newEnv(t)
	f := e.write("f", "", 0o644)
	e.mkdir("d")
	tests := []struct {
		query  string
		status int
		code   string
		frag   string
	}{
		{"", 400, apierror.CodeMissingQuery, "path"},
		{q("pattern", "*"), 400, apierror.CodeMissingQuery, "path"},
		{q("path", "nope"), 404, apierror.CodeFileNotFound, "nope"},
		{q("path", f), 400, apierror.CodeNotDirectory, f},
		{q("path", "d", "pattern", "[unclosed"), 400, apierror.CodeInvalidQuery, "[unclosed"},
		{q("path", "d", "pattern", `bad\`), 400, apierror.CodeInvalidQuery, "malformed"},
		{q("path", ""), 400, apierror.CodeInvalidPath, "empty"},
	}
	for _, tt := range tests {
		call := "GET /files/search" + tt.query
		wantErr(t, call, e.do("GET", "/files/search"+tt.query, nil), tt.status, tt.code, tt.frag)
	}
}
