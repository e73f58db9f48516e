package files

import (
	"bytes"
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
	out := make(map[string]sandbox.ReplaceFileContentResult, len(jobs))
	for _, j := range jobs {
		n, err := replaceInFile(j.real, []byte(j.item.Old), []byte(j.item.New))
		if err != nil {
			return nil, false, fsError(err, "replace in", j.real)
		}
		out[j.raw] = sandbox.ReplaceFileContentResult{ReplacedCount: n}
	}
	return out, verbose, nil
}

// replaceInFile streams path through a temporary file beside it, replacing
// every non-overlapping occurrence of old (leftmost first, as
// strings.ReplaceAll does). When nothing matched the file is not touched.
func replaceInFile(path string, old, repl []byte) (int, error) {
	in, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".osb-replace-*")
	if err != nil {
		return 0, err
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := streamReplace(tmp, in, old, repl)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := preserveOwner(tmp.Name(), fi, os.Chown); err != nil {
		return 0, fmt.Errorf("keeping owner: %w", err)
	}
	if err := os.Chmod(tmp.Name(), fi.Mode()&permBits); err != nil {
		return 0, fmt.Errorf("keeping mode: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	committed = true
	return n, nil
}

// replaceChunk is how much of the source streamReplace reads at a time.
const replaceChunk = 64 << 10

// streamReplace copies src to dst replacing old with repl and returns the
// number of replacements. Memory use is bounded by replaceChunk+len(old):
// after each read, all but the last len(old)-1 unmatched bytes are
// written, since no match can start earlier without ending inside the
// buffer, where bytes.Index would have found it.
func streamReplace(dst io.Writer, src io.Reader, old, repl []byte) (int, error) {
	if len(old) == 0 {
		return 0, errors.New("streamReplace: empty pattern")
	}
	buf := make([]byte, 0, replaceChunk+len(old))
	count := 0
	eof := false
	for !eof {
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
