package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// installArg, followed by a directory, makes execd copy its own executable
// into that directory as "execd" and exit: the init container of a
// Kubernetes pod runs it from the opensandbox/execd image (which has no
// shell or cp) to put execd into an emptyDir the sandbox's container
// shares, so any image can run it.
const installArg = "install"

// install copies the running executable to dir/execd, mode 0755. The copy
// is written under a temporary name and renamed, so a reader never sees a
// half-written binary.
func install(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding execd's own executable: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("opening %s: %w", self, err)
	}
	defer src.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".execd-*")
	if err != nil {
		return fmt.Errorf("creating a file in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("copying execd to %s: %w", dir, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("making %s executable: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	dst := filepath.Join(dir, "execd")
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("installing %s: %w", dst, err)
	}
	return nil
}
