package files

import (
	"io/fs"
	"net/http"
	"os"
	"strconv"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// ListDir serves GET /directories/list?path=&depth=1: the entries below
// path up to depth levels (default 1; 0 gives an empty list), the root
// excluded, in pre-order with names in lexical order. Symlinks are listed
// as such and never descended into; a path that is itself a symlink is
// rejected.
func (h *Handler) ListDir(w http.ResponseWriter, r *http.Request) {
	out, err := h.listDir(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) listDir(r *http.Request) ([]sandbox.FileInfo, error) {
	root, err := h.queryPath(r)
	if err != nil {
		return nil, err
	}
	depth := 1
	if q := r.URL.Query(); q.Has("depth") {
		depth, err = strconv.Atoi(q.Get("depth"))
		if err != nil || depth < 0 {
			return nil, apierror.BadRequest(apierror.CodeInvalidQuery,
				"depth %q: want a non-negative integer", q.Get("depth"))
		}
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, fsError(err, "list", root)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, apierror.BadRequest(apierror.CodeInvalidPath,
			"list %q: is a symbolic link; pass the directory it points to", root)
	}
	if !fi.IsDir() {
		return nil, apierror.BadRequest(apierror.CodeNotDirectory, "list %q: not a directory", root)
	}
	out := []sandbox.FileInfo{}
	if depth == 0 {
		return out, nil
	}
	ctx := r.Context()
	n := newNames()
	err = h.walk(ctx, root, depth, func(abs string, d fs.DirEntry) error {
		if efi, ok := h.entryInfo(ctx, abs, d); ok {
			out = append(out, fileInfo(n, abs, efi))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// defaultDirMode is the mode of a created directory whose request has none.
const defaultDirMode = 0o755

// MakeDirs serves POST /directories: a JSON map of path to Permission,
// created like mkdir -p. A new leaf gets the requested mode (default 755),
// set explicitly so the umask does not apply, and the requested owner and
// group; an existing directory only gets what the request states (a
// non-zero mode, an owner, a group). An existing non-directory is a 409.
func (h *Handler) MakeDirs(w http.ResponseWriter, r *http.Request) {
	if err := h.makeDirs(w, r); err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) makeDirs(w http.ResponseWriter, r *http.Request) error {
	jobs, err := h.decodePermJobs(w, r, "directory %q")
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if err := makeDir(j.abs, j.ps); err != nil {
			return err
		}
	}
	return nil
}

func makeDir(abs string, ps permSpec) error {
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return apierror.New(http.StatusConflict, apierror.CodeFileExists,
			"create directory %q: a non-directory entry exists at that path", abs)
	case err == nil:
		// Existing directory: apply only what was asked for.
	case notExist(err):
		if err := os.MkdirAll(abs, defaultDirMode); err != nil {
			if isNotDirErr(err) {
				return apierror.New(http.StatusConflict, apierror.CodeFileExists,
					"create directory %q: a parent component exists and is not a directory", abs)
			}
			return fsError(err, "create directory", abs)
		}
		if !ps.setMode {
			ps.mode, ps.setMode = defaultDirMode, true
		}
	default:
		return fsError(err, "create directory", abs)
	}
	if err := ps.apply(abs); err != nil {
		return fsError(err, "set permissions of directory", abs)
	}
	return nil
}

// RemoveDirs serves DELETE /directories?path=...: each path is removed with
// everything below it (rm -rf; a file or symlink at the path is removed
// too). Missing paths are fine; "/" is refused before anything is removed.
func (h *Handler) RemoveDirs(w http.ResponseWriter, r *http.Request) {
	if err := h.removeDirs(r); err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) removeDirs(r *http.Request) error {
	paths, err := h.queryPaths(r)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if isRoot(p.abs) {
			return apierror.BadRequest(apierror.CodeInvalidPath, "refusing to remove the root directory (path %q)", p.raw)
		}
	}
	for _, p := range paths {
		if _, err := os.Lstat(p.abs); notExist(err) {
			continue
		}
		if err := h.removeAll(p.abs); err != nil {
			return fsError(err, "remove directory", p.abs)
		}
	}
	return nil
}
