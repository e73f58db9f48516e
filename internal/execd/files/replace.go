package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Replace serves POST /files/replace[?verbose=true]: a JSON map of path to
// {old, new}; every occurrence of old is replaced. All entries are checked
// (non-empty old, an existing regular file) before any file changes. Each
// changed file is rewritten through a temporary file in its directory and
// renamed into place, keeping its mode and owner; a symlink is resolved
// and its target rewritten. Files without a match are left untouched.
// With verbose=true the reply maps each path to its replacedCount.
func (h *Handler) Replace(w http.ResponseWriter, r *http.Request) {
	out, verbose, err := h.replace(w, r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if !verbose {
		w.WriteHeader(http.StatusOK)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) replace(w http.ResponseWriter, r *http.Request) (map[string]sandbox.ReplaceFileContentResult, bool, error) {
	verbose := false
	if v := r.URL.Query().Get("verbose"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, false, apierror.BadRequest(apierror.CodeInvalidQuery, "verbose %q: want true or false", v)
		}
		verbose = b
	}
	var req map[string]sandbox.ReplaceFileContentItem
	if err := apierror.DecodeJSON(w, r, h.maxJSON, &req); err != nil {
		return nil, false, err
	}
	type job struct {
		raw, real string
		item      sandbox.ReplaceFileContentItem
	}
	jobs := make([]job, 0, len(req))
	for _, p := range sortedKeys(req) {
		abs, err := h.resolve(p)
		if err != nil {
			return nil, false, err
		}
		it := req[p]
		if it.Old == "" {
			return nil, false, apierror.BadRequest(apierror.CodeInvalidRequestBody, "replace in %q: old must not be empty", abs)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, false, fsError(err, "replace in", abs)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return nil, false, fsError(err, "replace in", abs)
		}
		if fi.IsDir() {
			return nil, false, apierror.BadRequest(apierror.CodeIsDirectory, "replace in %q: is a directory", abs)
		}
		if !fi.Mode().IsRegular() {
			return nil, false, apierror.BadRequest(apierror.CodeInvalidFile, "replace in %q: not a regular file", abs)
		}
		jobs = append(jobs, job{p, real, it})
	}
	// First count, writing nothing: a request whose result would grow
	// the files by more than the cap fails before any file changes.
	ctx := r.Context()
	var growth int64
	counts := make([]int, len(jobs))
	for i, j := range jobs {
		n, err := countInFile(ctx, j.real, []byte(j.item.Old))
		if err != nil {
			return nil, false, replaceError(err, j.real)
		}
		counts[i] = n
		growth += int64(n) * int64(len(j.item.New)-len(j.item.Old))
		if growth > h.maxGrow {
			return nil, false, apierror.New(http.StatusRequestEntityTooLarge, codeResultTooLarge,
				"replace: the files would grow by more than %d bytes (the limit of one request) at %q; nothing was changed", h.maxGrow, j.raw)
		}
	}
	out := make(map[string]sandbox.ReplaceFileContentResult, len(jobs))
	budget := h.maxGrow
	for i, j := range jobs {
		if counts[i] == 0 {
			out[j.raw] = sandbox.ReplaceFileContentResult{}
			continue
		}
		n, grown, err := replaceInFile(ctx, j.real, []byte(j.item.Old), []byte(j.item.New), budget)
		if err != nil {
			return nil, false, replaceError(err, j.real)
		}
		budget -= grown
		out[j.raw] = sandbox.ReplaceFileContentResult{ReplacedCount: n}
	}
	return out, verbose, nil
}

// codeResultTooLarge: /files/replace would grow files beyond the cap.
const codeResultTooLarge = "RESULT_TOO_LARGE"

// codeCanceled: the client went away or the request's deadline passed
// while execd worked on it.
const codeCanceled = "REQUEST_CANCELED"

var errGrowth = errors.New("the file would grow beyond the limit")

func replaceError(err error, path string) error {
	switch {
	case errors.Is(err, errGrowth):
		// The file grew between the count and the rewrite; it is intact.
		return apierror.Wrap(err, http.StatusRequestEntityTooLarge, codeResultTooLarge, "replace in %q: the file would grow beyond the limit of one request; it was not changed", path)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apierror.Wrap(err, http.StatusRequestTimeout, codeCanceled, "replace in %q: request canceled; the file was not changed", path)
	}
	return fsError(err, "replace in", path)
}

// countInFile returns how many replacements of old path would get.
func countInFile(ctx context.Context, path string, old []byte) (int, error) {
	in, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	return streamReplace(ctx, io.Discard, in, old, nil)
}

// replaceInFile streams path through a temporary file beside it, replacing
// every non-overlapping occurrence of old (leftmost first, as
// strings.ReplaceAll does), and returns the count and how many bytes the
// file grew. A file that would grow by more than maxGrowth is left as it
// was (errGrowth), as is one whose request ends (ctx). When nothing
// matched the file is not touched.
func replaceInFile(ctx context.Context, path string, old, repl []byte, maxGrowth int64) (int, int64, error) {
	in, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".osb-replace-*")
	if err != nil {
		return 0, 0, err
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	lw := &limitedWriter{w: tmp, left: fi.Size() + max(maxGrowth, 0)}
	n, err := streamReplace(ctx, lw, in, old, repl)
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, nil
	}
	if err := tmp.Close(); err != nil {
		return 0, 0, err
	}
	if err := preserveOwner(tmp.Name(), fi, os.Chown); err != nil {
		return 0, 0, fmt.Errorf("keeping owner: %w", err)
	}
	if err := os.Chmod(tmp.Name(), fi.Mode()&permBits); err != nil {
		return 0, 0, fmt.Errorf("keeping mode: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, 0, err
	}
	committed = true
	return n, lw.written - fi.Size(), nil
}

// limitedWriter fails with errGrowth instead of writing more than left bytes.
type limitedWriter struct {
	w       io.Writer
	left    int64
	written int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, errGrowth
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	l.written += int64(n)
	return n, err
}

// replaceChunk is how much of the source streamReplace reads at a time.
const replaceChunk = 64 << 10

// streamReplace copies src to dst replacing old with repl and returns the
// number of replacements. Memory use is bounded by replaceChunk+len(old):
// after each read, all but the last len(old)-1 unmatched bytes are
// written, since no match can start earlier without ending inside the
// buffer, where bytes.Index would have found it.
//
// It stops with ctx's error when ctx ends, checked before every chunk.
func streamReplace(ctx context.Context, dst io.Writer, src io.Reader, old, repl []byte) (int, error) {
	if len(old) == 0 {
		return 0, errors.New("streamReplace: empty pattern")
	}
	buf := make([]byte, 0, replaceChunk+len(old))
	count := 0
	eof := false
	for !eof {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, err := io.ReadFull(src, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			eof = true
		case err != nil:
			return 0, err
		}
		start := 0
		for {
			i := bytes.Index(buf[start:], old)
			if i < 0 {
				break
			}
			if _, err := dst.Write(buf[start : start+i]); err != nil {
				return 0, err
			}
			if _, err := dst.Write(repl); err != nil {
				return 0, err
			}
			count++
			start += i + len(old)
		}
		keep := 0
		if !eof {
			keep = min(len(old)-1, len(buf)-start)
		}
		if _, err := dst.Write(buf[start : len(buf)-keep]); err != nil {
			return 0, err
		}
		buf = append(buf[:0], buf[len(buf)-keep:]...)
	}
	return count, nil
}
