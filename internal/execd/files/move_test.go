package files

import (
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestMove(t *testing.T) {
	e := newEnv(t)
	a := e.write("a.txt", "A", 0o600)
	e.write("dir/x", "X", 0o644)
	e.mkdir("dest")
	over := e.write("dest/over.txt", "old", 0o644)

	rep := e.do("POST", "/files/mv", []sandbox.RenameFileItem{
		{Src: "a.txt", Dest: "dest/a2.txt"},
		{Src: "dest/a2.txt", Dest: over}, // chains see earlier moves; replaces a file
		{Src: "dir", Dest: "dest/dir2"},
		{Src: over, Dest: over}, // no-op
	})
	wantOK(t, "POST /files/mv", rep)
	if got := readFile(t, over); got != "A" {
		t.Errorf("after mv, %s = %q, want %q", over, got, "A")
	}
	if got := modeOf(t, over); got != 0o600 {
		t.Errorf("after mv, mode = %v, want 0600 kept", got)
	}
	if got := readFile(t, filepath.Join(e.dir, "dest/dir2/x")); got != "X" {
		t.Errorf("after mv dir, dest/dir2/x = %q, want X", got)
	}
	for _, p := range []string{a, filepath.Join(e.dir, "dir")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("after mv, source %s still exists (%v)", p, err)
		}
	}
}

func TestMoveErrors(t *testing.T) {
	e := newEnv(t)
	f := e.write("f", "f", 0o644)
	e.write("g", "g", 0o644)
	e.write("full/x", "x", 0o644)
	e.mkdir("empty")
	tests := []struct {
		name   string
		body   any
		status int
		code   string
		frag   string
	}{
		{"missing src", []sandbox.RenameFileItem{{Src: "nope", Dest: "x"}}, 404, apierror.CodeFileNotFound, filepath.Join(e.dir, "nope")},
		{"missing target dir", []sandbox.RenameFileItem{{Src: f, Dest: "no/such/dir/f"}}, 404, apierror.CodeFileNotFound, "target directory"},
		{"target parent is a file", []sandbox.RenameFileItem{{Src: "g", Dest: "f/g"}}, 400, apierror.CodeNotDirectory, f},
		{"file onto a directory", []sandbox.RenameFileItem{{Src: "g", Dest: "full"}}, 409, apierror.CodeFileExists, "full"},
		{"dir onto a directory", []sandbox.RenameFileItem{{Src: "empty", Dest: "full"}}, 409, apierror.CodeFileExists, "already exists"},
		{"dir into itself", []sandbox.RenameFileItem{{Src: "full", Dest: "full/x2"}}, 400, apierror.CodeInvalidPath, "invalid argument"},
		{"empty src", []sandbox.RenameFileItem{{Src: "", Dest: "x"}}, 400, apierror.CodeInvalidPath, "item 0"},
		{"NUL dest", []sandbox.RenameFileItem{{Src: "f", Dest: "x\x00"}}, 400, apierror.CodeInvalidPath, "NUL"},
		{"not an array", `{"src":"f"}`, 400, apierror.CodeInvalidRequestBody, "JSON"},
	}
	for _, tt := range tests {
		wantErr(t, "mv "+tt.name, e.do("POST", "/files/mv", tt.body), tt.status, tt.code, tt.frag)
	}
	if got := readFile(t, f); got != "f" {
		t.Errorf("after failed moves, %s = %q, want untouched", f, got)
	}
}

// TestMoveCrossDevice forces EXDEV to exercise the copy-and-remove path.
func TestMoveCrossDevice(t *testing.T) {
	e := newEnv(t)
	calls := 0
	e.h.rename = func(oldpath, newpath string) error {
		calls++
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EXDEV}
	}
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	f := e.write("src/run.sh", "#!/bin/sh\necho hi\n", 0o751|fs.ModeSetuid)
	e.write("src/tree/deep/leaf", "leaf", 0o600)
	if err := os.Chmod(filepath.Join(e.dir, "src/tree"), 0o710); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("deep/leaf", filepath.Join(e.dir, "src/tree/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	e.mkdir("dst")

	rep := e.do("POST", "/files/mv", []sandbox.RenameFileItem{
		{Src: f, Dest: "dst/run.sh"},
		{Src: "src/tree", Dest: "dst/tree"},
	})
	wantOK(t, "POST /files/mv (EXDEV)", rep)
	if calls != 2 {
		t.Errorf("rename called %d times, want 2", calls)
	}
	moved := filepath.Join(e.dir, "dst/run.sh")
	if got := readFile(t, moved); got != "#!/bin/sh\necho hi\n" {
		t.Errorf("copied file content = %q", got)
	}
	if got := modeOf(t, moved); got != 0o751|fs.ModeSetuid {
		t.Errorf("copied file mode = %v, want setuid|0751", got)
	}
	if fi, _ := os.Stat(moved); !fi.ModTime().Equal(mtime) {
		t.Errorf("copied file mtime = %v, want %v", fi.ModTime(), mtime)
	}
	if got := readFile(t, filepath.Join(e.dir, "dst/tree/deep/leaf")); got != "leaf" {
		t.Errorf("copied tree leaf = %q, want leaf", got)
	}
	if got := modeOf(t, filepath.Join(e.dir, "dst/tree")); got != 0o710 {
		t.Errorf("copied dir mode = %v, want 0710", got)
	}
	if target, err := os.Readlink(filepath.Join(e.dir, "dst/tree/link")); err != nil || target != "deep/leaf" {
		t.Errorf("copied symlink = %q, %v; want deep/leaf", target, err)
	}
	for _, p := range []string{f, filepath.Join(e.dir, "src/tree")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("after cross-device move, source %s still exists (%v)", p, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(e.dir, "dst"))
	if len(entries) != 2 {
		t.Errorf("dst holds %d entries, want 2 (no temporaries): %v", len(entries), entries)
	}

	// A directory onto an existing path is refused without touching either.
	e.write("src2/x", "x", 0o644)
	rep = e.do("POST", "/files/mv", []sandbox.RenameFileItem{{Src: "src2", Dest: "dst/tree"}})
	wantErr(t, "mv dir over existing (EXDEV)", rep, http.StatusConflict, apierror.CodeFileExists, "dst/tree")

	// A FIFO cannot be copied.
	fifo := filepath.Join(e.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	rep = e.do("POST", "/files/mv", []sandbox.RenameFileItem{{Src: fifo, Dest: "dst/fifo"}})
	wantErr(t, "mv fifo (EXDEV)", rep, http.StatusBadRequest, apierror.CodeInvalidFile, fmt.Sprintf("%q", fifo))
	if _, err := os.Lstat(fifo); err != nil {
		t.Errorf("failed cross-device move removed the source: %v", err)
	}
}

// TestMoveRealCrossDevice moves a file from the test directory to /dev/shm
// when that is a different filesystem, so the kernel itself says EXDEV.
func TestMoveRealCrossDevice(t *testing.T) {
	e := newEnv(t)
	shm, err := os.MkdirTemp("/dev/shm", "files-test-")
	if err != nil {
		t.Skipf("no writable /dev/shm: %v", err)
	}
	defer os.RemoveAll(shm)
	a, _ := os.Stat(e.dir)
	b, _ := os.Stat(shm)
	if a.Sys().(*syscall.Stat_t).Dev == b.Sys().(*syscall.Stat_t).Dev {
		t.Skip("/dev/shm is on the same filesystem as the test directory")
	}
	src := e.write("x.sh", "payload", 0o711)
	dst := filepath.Join(shm, "x.sh")
	wantOK(t, "POST /files/mv across devices", e.do("POST", "/files/mv", []sandbox.RenameFileItem{{Src: src, Dest: dst}}))
	if got := readFile(t, dst); got != "payload" {
		t.Errorf("moved file = %q, want payload", got)
	}
	if got := modeOf(t, dst); got != 0o711 {
		t.Errorf("moved file mode = %v, want 0711", got)
	}
	if _, err := os.Lstat(src); !os.IsNotExist(err) {
		t.Errorf("source still exists after cross-device move (%v)", err)
	}
}

// Moving a file of a kernel pseudo-filesystem is the caller's mistake, not
// execd's: /proc/self/mem across filesystems used to fail with EIO and 500.
func TestMovePseudoFilesystem(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ src, dst string }{
		{"/proc/self/mem", filepath.Join(e.dir, "mem")},
		{"/proc/self/status", filepath.Join(e.dir, "status")},
		{"/sys/kernel/mm", filepath.Join(e.dir, "mm")},
	} {
		r := e.do("POST", "/files/mv", []sandbox.RenameFileItem{{Src: tc.src, Dest: tc.dst}})
		wantErr(t, "mv "+tc.src, r, http.StatusBadRequest, apierror.CodeInvalidFile, "pseudo-filesystem")
		if _, err := os.Lstat(tc.dst); !os.IsNotExist(err) {
			t.Errorf("mv %s left %s behind (%v)", tc.src, tc.dst, err)
		}
	}
	// And into one: dest on /proc.
	src := filepath.Join(e.dir, "f")
	os.WriteFile(src, []byte("x"), 0o644)
	r := e.do("POST", "/files/mv", []sandbox.RenameFileItem{{Src: src, Dest: "/proc/self/f"}})
	wantErr(t, "mv into /proc", r, http.StatusBadRequest, apierror.CodeInvalidFile, "pseudo-filesystem")
}
