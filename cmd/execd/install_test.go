package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestInstallCopiesItself runs the test binary's own install path: the
// copy must be byte-identical to the running executable and executable.
func TestInstallCopiesItself(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "opt", "opensandbox")
	if err := install(dir); err != nil {
		t.Fatalf("install: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "execd")
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatalf("reading the installed copy: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("installed copy differs from the executable (%d vs %d bytes)", len(got), len(want))
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode = %v, want 0755", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("install left %d entries in %s, want only execd", len(entries), dir)
	}
	// A second install over an existing copy (a restarted init container)
	// replaces it.
	if err := install(dir); err != nil {
		t.Fatalf("second install: %v", err)
	}
	// The installed copy is a real program: run it (the test binary) and
	// check it starts.
	out, err := exec.Command(dst, "-test.run=^$").CombinedOutput()
	if err != nil {
		t.Fatalf("running the installed copy: %v\n%s", err, out)
	}
}

func TestInstallReportsAnUnwritableDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := install(filepath.Join(file, "sub"))
	if err == nil {
		t.Fatal("install under a regular file succeeded")
	}
	t.Log(err)
}
