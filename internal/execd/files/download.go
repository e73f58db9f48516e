package files

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// Download serves GET /files/download?path=: the file as an attachment,
// streamed from disk (net/http can use sendfile). One "bytes=" range is
// honoured with 206 (a-b, a-, -n); an unsatisfiable one is a 416 with
// Content-Range: bytes */size; a malformed or multi-range header, or a
// Range with a non-matching If-Range, is ignored and the whole file sent.
func (h *Handler) Download(w http.ResponseWriter, r *http.Request) {
	abs, err := h.queryPath(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	lines, err := parseLineWindow(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	f, size, modified, err := openRegular(abs)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	defer f.Close()
	if lines != nil {
		h.downloadLines(w, r, f, abs, *lines)
		return
	}

	hdr := w.Header()
	hdr.Set("Accept-Ranges", "bytes")
	hdr.Set("Last-Modified", modified)
	start, length, status := int64(0), size, http.StatusOK
	if spec := r.Header.Get("Range"); spec != "" && ifRangeHolds(r, modified) {
		s, l, res := parseRange(spec, size)
		switch res {
		case rangeUnsatisfiable:
			hdr.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			apierror.Write(w, r, apierror.New(http.StatusRequestedRangeNotSatisfiable, apierror.CodeInvalidRange,
				"range %q not satisfiable for %q (%d bytes)", spec, abs, size))
			return
		case rangeOK:
			start, length, status = s, l, http.StatusPartialContent
			hdr.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s, s+l-1, size))
		}
	}
	if start > 0 {
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			apierror.Write(w, r, fsError(err, "download", abs))
			return
		}
	}
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set("Content-Disposition", contentDisposition(filepath.Base(abs)))
	hdr.Set("Content-Length", strconv.FormatInt(length, 10))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if n, err := io.CopyN(w, f, length); err != nil {
		// Headers are gone; the short body tells the client.
		h.log.LogAttrs(r.Context(), slog.LevelDebug, "download cut short",
			slog.String("path", abs), slog.Int64("sent", n), slog.Int64("want", length), slog.Any("err", err))
	}
}

// openRegular opens abs for download: it must be a regular file (symlinks
// are followed). It returns the size and Last-Modified value of the open file.
func openRegular(abs string) (*os.File, int64, string, error) {
	// Check before opening: opening a FIFO would block.
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, 0, "", fsError(err, "download", abs)
	}
	if err := wantRegular(fi.Mode().IsDir(), fi.Mode().IsRegular(), "download", abs); err != nil {
		return nil, 0, "", err
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, 0, "", fsError(err, "download", abs)
	}
	fi, err = f.Stat()
	if err == nil {
		err = wantRegular(fi.Mode().IsDir(), fi.Mode().IsRegular(), "download", abs)
	}
	if err != nil {
		f.Close()
		return nil, 0, "", fsError(err, "download", abs)
	}
	return f, fi.Size(), fi.ModTime().UTC().Format(http.TimeFormat), nil
}

// wantRegular rejects directories and other non-regular entries.
func wantRegular(isDir, isRegular bool, op, abs string) error {
	switch {
	case isDir:
		return apierror.BadRequest(apierror.CodeIsDirectory, "%s %q: is a directory", op, abs)
	case !isRegular:
		return apierror.BadRequest(apierror.CodeInvalidFile, "%s %q: not a regular file", op, abs)
	}
	return nil
}

// ifRangeHolds reports whether a Range header may be honoured: without
// If-Range always; with it only when it equals Last-Modified (there are no
// ETags, so an entity-tag validator never matches).
func ifRangeHolds(r *http.Request, modified string) bool {
	v := r.Header.Get("If-Range")
	return v == "" || v == modified
}

// contentDisposition builds an attachment header naming the file: a plain
// quoted filename when it is safe ASCII, otherwise an ASCII fallback plus
// the exact name as RFC 5987 filename* (RFC 6266).
func contentDisposition(name string) string {
	plain := true
	var fallback strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			plain = false
			fallback.WriteByte('_')
			continue
		}
		fallback.WriteByte(c)
	}
	if plain {
		return `attachment; filename="` + name + `"`
	}
	var ext strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isAttrChar(c) {
			ext.WriteByte(c)
		} else {
			fmt.Fprintf(&ext, "%%%02X", c)
		}
	}
	return `attachment; filename="` + fallback.String() + `"; filename*=UTF-8''` + ext.String()
}

// isAttrChar reports whether c may appear unescaped in an RFC 5987 value.
func isAttrChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}
