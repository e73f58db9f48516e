package files

import (
	"net/http"
	"path/filepath"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// resolve validates a client-supplied path and returns it absolute and
// cleaned: relative paths are joined to the handler's base directory.
func (h *Handler) resolve(p string) (string, error) {
	if p == "" {
		return "", apierror.BadRequest(apierror.CodeInvalidPath, "path must not be empty")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", apierror.BadRequest(apierror.CodeInvalidPath, "path %q contains a NUL byte", p)
	}
	if !filepath.IsAbs(p) {
		return filepath.Join(h.base, p), nil
	}
	return filepath.Clean(p), nil
}

// resolved is one client path and its absolute form.
type resolved struct {
	raw string // as the client sent it
	abs string
}

// queryPaths returns every "path" query value, resolved. Without any it
// fails with MISSING_QUERY.
func (h *Handler) queryPaths(r *http.Request) ([]resolved, error) {
	raw := r.URL.Query()["path"]
	if len(raw) == 0 {
		return nil, apierror.BadRequest(apierror.CodeMissingQuery, "missing query parameter \"path\"")
	}
	out := make([]resolved, 0, len(raw))
	for _, p := range raw {
		abs, err := h.resolve(p)
		if err != nil {
			return nil, err
		}
		out = append(out, resolved{raw: p, abs: abs})
	}
	return out, nil
}

// queryPath returns the single "path" query value, resolved.
func (h *Handler) queryPath(r *http.Request) (string, error) {
	q := r.URL.Query()
	if !q.Has("path") {
		return "", apierror.BadRequest(apierror.CodeMissingQuery, "missing query parameter \"path\"")
	}
	return h.resolve(q.Get("path"))
}

// isRoot reports whether abs is the filesystem root.
func isRoot(abs string) bool {
	return abs == string(filepath.Separator)
}
