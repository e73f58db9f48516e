package files

import (
	"net/http"
	"os"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Info serves GET /files/info?path=a&path=b: a map from each path, as the
// client wrote it, to its FileInfo. Symlinks are described, not followed.
// Any missing path fails the whole request with 404.
func (h *Handler) Info(w http.ResponseWriter, r *http.Request) {
	paths, err := h.queryPaths(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	n := newNames()
	out := make(map[string]sandbox.FileInfo, len(paths))
	for _, p := range paths {
		fi, err := os.Lstat(p.abs)
		if err != nil {
			apierror.Write(w, r, fsError(err, "stat", p.abs))
			return
		}
		out[p.raw] = fileInfo(n, p.abs, fi)
	}
	apierror.WriteJSON(w, http.StatusOK, out)
}

// Remove serves DELETE /files?path=...: it removes files, symlinks and
// other non-directory entries. Missing paths are skipped; a directory fails
// the request with 400 IS_DIRECTORY before anything is removed.
func (h *Handler) Remove(w http.ResponseWriter, r *http.Request) {
	if err := h.remove(r); err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) remove(r *http.Request) error {
	paths, err := h.queryPaths(r)
	if err != nil {
		return err
	}
	for _, p := range paths {
		fi, err := os.Lstat(p.abs)
		if err != nil {
			if notExist(err) {
				continue
			}
			return fsError(err, "stat", p.abs)
		}
		if fi.IsDir() {
			return apierror.BadRequest(apierror.CodeIsDirectory,
				"remove %q: is a directory; use DELETE /directories to remove directories", p.abs)
		}
	}
	for _, p := range paths {
		if err := os.Remove(p.abs); err != nil && !notExist(err) {
			return fsError(err, "remove", p.abs)
		}
	}
	return nil
}
