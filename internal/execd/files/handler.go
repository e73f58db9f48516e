// Package files serves execd's filesystem API: the /files and /directories
// endpoints (stat, remove, chmod/chown, move, search, in-place replace,
// streaming multipart upload, ranged download, listing, mkdir -p, rm -rf).
//
// Each endpoint is a method of *Handler with the http.HandlerFunc shape; the
// caller mounts them on its own route table, for example
//
//	h := files.New(files.Options{})
//	mux.HandleFunc("GET /files/info", h.Info)
//	mux.HandleFunc("POST /files/upload", h.Upload)
//
// Errors are written through apierror as {code, message}. File contents are
// streamed in both directions and never held in memory whole. The package
// must not import other execd packages: it only touches the filesystem.
package files

import (
	"log/slog"
	"os"
	"path/filepath"
)

// DefaultMaxJSONBody is the JSON body limit used when Options.MaxJSONBody is 0.
const DefaultMaxJSONBody = 8 << 20

// DefaultMaxReplaceGrowth is the growth limit used when
// Options.MaxReplaceGrowth is 0.
const DefaultMaxReplaceGrowth = 64 << 20

// Options configures a Handler. The zero value is usable.
type Options struct {
	// BaseDir is the directory relative paths resolve against; "" means the
	// working directory of the process when New is called.
	BaseDir string
	// MaxJSONBody caps JSON request bodies in bytes; 0 means DefaultMaxJSONBody.
	// It also caps the metadata parts an upload may hold pending.
	MaxJSONBody int64
	// MaxReplaceGrowth caps how many bytes one /files/replace request may
	// add to the files it rewrites, together; 0 means
	// DefaultMaxReplaceGrowth. Replacing a short string by a long one
	// multiplies a file: without a cap one request could fill the disk.
	MaxReplaceGrowth int64
	// Logger receives debug and warning records; nil means slog.Default().
	Logger *slog.Logger
}

// Handler serves the filesystem endpoints. It holds no per-request state and
// is safe for concurrent use.
type Handler struct {
	base    string
	maxJSON int64
	maxGrow int64
	log     *slog.Logger
	// rename is os.Rename and removeAll os.RemoveAll; tests replace them
	// to simulate EXDEV and to guard against removing "/".
	rename    func(oldpath, newpath string) error
	removeAll func(path string) error
}

// New returns a Handler configured by opts.
func New(opts Options) *Handler {
	h := &Handler{
		base:      opts.BaseDir,
		maxJSON:   opts.MaxJSONBody,
		maxGrow:   opts.MaxReplaceGrowth,
		log:       opts.Logger,
		rename:    os.Rename,
		removeAll: os.RemoveAll,
	}
	if h.base == "" {
		if wd, err := os.Getwd(); err == nil {
			h.base = wd
		} else {
			h.base = string(filepath.Separator)
		}
	}
	if abs, err := filepath.Abs(h.base); err == nil {
		h.base = abs
	}
	if h.maxJSON <= 0 {
		h.maxJSON = DefaultMaxJSONBody
	}
	if h.maxGrow <= 0 {
		h.maxGrow = DefaultMaxReplaceGrowth
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h
}
