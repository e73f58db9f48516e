package files

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Move serves POST /files/mv: a JSON array of {src, dest}, applied in
// order. dest is the new path, never a directory to move into: an existing
// file there is replaced, an existing directory is a 409 FILE_EXISTS. A
// missing src or a missing target directory is a 404; a target "directory"
// that is a file is a 400 NOT_DIRECTORY. Across filesystems (EXDEV) the
// entry is copied beside dest (mode, owner and mtime kept), renamed into
// place, and only then is the source removed. Items before a failing one
// stay moved.
func (h *Handler) Move(w http.ResponseWriter, r *http.Request) {
	if err := h.move(w, r); err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) move(w http.ResponseWriter, r *http.Request) error {
	var req []sandbox.RenameFileItem
	if err := apierror.DecodeJSON(w, r, h.maxJSON, &req); err != nil {
		return err
	}
	type job struct{ src, dst string }
	jobs := make([]job, 0, len(req))
	for i, it := range req {
		if it.Src == "" || it.Dest == "" {
			return apierror.BadRequest(apierror.CodeInvalidPath, "move item %d: src and dest must both be non-empty", i)
		}
		src, err := h.resolve(it.Src)
		if err != nil {
			return err
		}
		dst, err := h.resolve(it.Dest)
		if err != nil {
			return err
		}
		jobs = append(jobs, job{src, dst})
	}
	for _, j := range jobs {
		if err := h.moveOne(j.src, j.dst); err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) moveOne(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return fsError(err, "move: source", src)
	}
	for _, p := range []string{src, filepath.Dir(dst)} {
		if kind := pseudoFS(p); kind != "" {
			return apierror.BadRequest(apierror.CodeInvalidFile, "move %q to %q: %q is on the %s pseudo-filesystem, whose files cannot be moved", src, dst, p, kind)
		}
	}
	parent := filepath.Dir(dst)
	pfi, err := os.Stat(parent)
	if err != nil {
		return fsError(err, fmt.Sprintf("move %q: target directory", src), parent)
	}
	if !pfi.IsDir() {
		return apierror.BadRequest(apierror.CodeNotDirectory, "move %q: target directory %q is not a directory", src, parent)
	}
	if src == dst {
		return nil
	}
	err = h.rename(src, dst)
	if errors.Is(err, syscall.EXDEV) {
		err = copyMove(src, dst, fi)
	}
	if err != nil {
		return fsError(err, fmt.Sprintf("move %q to", src), dst)
	}
	return nil
}
