package procenv

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestEnviron(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "env")
	os.WriteFile(file, []byte(`# comment
A=1
export B="two $A"
C='lit $A'
D=${A}x

BROKEN
`), 0o600)
	b := Builder{EnvFile: file, Base: []string{"A=0", "KEEP=k"}}
	got, err := b.Environ(map[string]string{"E": "e", "KEEP": "override"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"A=1", "KEEP=override", "B=two 1", "C=lit $A", "D=1x", "E=e"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Environ = %q, want %q", got, want)
	}
	if _, err := b.Environ(map[string]string{"BAD=NAME": "x"}); err == nil {
		t.Error("Environ accepted a name with '='")
	}
	if _, err := (Builder{EnvFile: filepath.Join(dir, "missing")}).Environ(nil); err != nil {
		t.Errorf("a missing env file must be fine, got %v", err)
	}
}

func TestResolveDir(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HOME=" + dir, "W=" + dir}
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"~", dir},
		{"$W", dir},
		{"${W}/.", dir},
	} {
		got, err := ResolveDir(tt.in, env)
		if err != nil || got != tt.want {
			t.Errorf("ResolveDir(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	for _, bad := range []string{"/does/not/exist", file} {
		if _, err := ResolveDir(bad, env); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ResolveDir(%q) error = %v, want one naming the path", bad, err)
		}
	}
}

func TestMkdirScratchFallsBack(t *testing.T) {
	// TMPDIR names a directory that does not exist, as in an image
	// without /tmp: the next candidate is used.
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	dir, err := MkdirScratch("scratch-test-")
	if err != nil {
		t.Fatalf("MkdirScratch: %v", err)
	}
	defer os.RemoveAll(dir)
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("scratch dir %s: %v %v, want a 0700 directory", dir, st.Mode(), err)
	}
	if strings.HasPrefix(dir, os.Getenv("TMPDIR")) {
		t.Errorf("scratch dir %s is under the missing TMPDIR", dir)
	}
}
