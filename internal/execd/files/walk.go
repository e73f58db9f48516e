package files

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// walk visits the entries below dir, lexically ordered within each
// directory and each directory's descendants right after it (pre-order),
// descending at most depth levels (depth < 0: no limit). Symlinks are never
// descended into. An unreadable root is an error; an unreadable directory
// below it is logged and skipped. A cancelled ctx stops the walk.
func (h *Handler) walk(ctx context.Context, dir string, depth int, visit func(abs string, d fs.DirEntry) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fsError(err, "read directory", dir)
	}
	return h.walkEntries(ctx, dir, entries, depth, visit)
}

func (h *Handler) walkEntries(ctx context.Context, dir string, entries []fs.DirEntry, depth int, visit func(string, fs.DirEntry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, e := range entries {
		abs := filepath.Join(dir, e.Name())
		if err := visit(abs, e); err != nil {
			return err
		}
		if !e.IsDir() || depth == 1 {
			continue
		}
		children, err := os.ReadDir(abs)
		if err != nil {
			h.log.LogAttrs(ctx, slog.LevelDebug, "skipping unreadable directory",
				slog.String("path", abs), slog.Any("err", err))
			continue
		}
		if err := h.walkEntries(ctx, abs, children, depth-1, visit); err != nil {
			return err
		}
	}
	return nil
}

// entryInfo lstats a walked entry. Entries that vanished or cannot be
// examined are reported with ok == false and skipped by callers.
func (h *Handler) entryInfo(ctx context.Context, abs string, d fs.DirEntry) (fs.FileInfo, bool) {
	fi, err := d.Info()
	if err != nil {
		h.log.LogAttrs(ctx, slog.LevelDebug, "skipping entry", slog.String("path", abs), slog.Any("err", err))
		return nil, false
	}
	return fi, true
}
