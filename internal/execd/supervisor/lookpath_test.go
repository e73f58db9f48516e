package supervisor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestLookPath(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, mode os.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("a/tool", 0o644)  // shadowed by a non-executable file...
	mk("b/tool", 0o755)  // ...found here, as execvp would
	mk("a/only", 0o644)  // exists nowhere executable
	mk("rel/run", 0o755) // reachable through a relative PATH entry
	if err := os.Mkdir(filepath.Join(root, "b", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	tests := []struct {
		name, file, path, dir string
		want                  string
		class                 error
	}{
		{"first executable wins", "tool", a + ":" + b, "", filepath.Join(b, "tool"), nil},
		{"only non-executable", "only", a + ":" + b, "", "", fs.ErrPermission},
		{"directory is not a program", "dir", b, "", "", fs.ErrPermission},
		{"missing", "nothing", a + ":" + b, "", "", fs.ErrNotExist},
		{"relative entry uses dir", "run", "rel", root, "rel/run", nil},
		{"slash skips PATH", "./x/y", a, "", "./x/y", nil},
		{"empty name", "", a, "", "", fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lookPath(tt.file, []string{"PATH=/nowhere", "PATH=" + tt.path}, tt.dir)
			if got != tt.want || !errors.Is(err, tt.class) || (tt.class == nil) != (err == nil) {
				t.Errorf("lookPath(%q, PATH=%q, %q) = %q, %v; want %q, %v", tt.file, tt.path, tt.dir, got, err, tt.want, tt.class)
			}
		})
	}
}

func TestLookPathDefaultPath(t *testing.T) {
	got, err := lookPath("sh", []string{"HOME=/"}, "")
	if err != nil || filepath.Base(got) != "sh" {
		t.Errorf("lookPath(sh) without PATH = %q, %v; want a sh from %s", got, err, defaultPath)
	}
}
