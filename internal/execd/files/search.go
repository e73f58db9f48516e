package files

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Search serves GET /files/search?path=&pattern=: every non-directory entry
// below path, at any depth, whose base name matches the glob pattern
// (default "**", which like "*" matches any name; "/" never matches a base
// name). Symlinked directories are not followed. The order is that of
// ListDir with unlimited depth.
func (h *Handler) Search(w http.ResponseWriter, r *http.Request) {
	out, err := h.search(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) search(r *http.Request) ([]sandbox.FileInfo, error) {
	root, err := h.queryPath(r)
	if err != nil {
		return nil, err
	}
	pattern := r.URL.Query().Get("pattern")
	if pattern == "" {
		pattern = "**"
	}
	glob := strings.ReplaceAll(pattern, "**", "*")
	if _, err := filepath.Match(glob, ""); err != nil {
		return nil, apierror.BadRequest(apierror.CodeInvalidQuery, "search pattern %q: malformed glob", pattern)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fsError(err, "search", root)
	}
	if !fi.IsDir() {
		return nil, apierror.BadRequest(apierror.CodeNotDirectory, "search %q: not a directory", root)
	}
	ctx := r.Context()
	n := newNames()
	out := []sandbox.FileInfo{}
	err = h.walk(ctx, root, -1, func(abs string, d fs.DirEntry) error {
		if d.IsDir() {
			return nil
		}
		if ok, _ := filepath.Match(glob, d.Name()); !ok {
			return nil
		}
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
