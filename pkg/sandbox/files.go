package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
)

// Modes in this file use execd's form: permission bits written as octal
// digits and read as a decimal number, so 644 means rw-r--r--.

// WriteOptions set the owner and mode of a written file.
type WriteOptions struct {
	// Mode in octal digits read as decimal (644, 755); 0 gives a new file
	// 644 and keeps the mode of a replaced one.
	Mode int
	// Owner and Group are names or numeric ids; empty leaves them alone.
	Owner, Group string
}

// OpenOptions select a byte range for Open. The zero value reads the whole
// file.
type OpenOptions struct {
	// Offset is the first byte to read.
	Offset int64
	// Length is the number of bytes to read; 0 reads to the end.
	Length int64
}

// ReadFile returns the content of the file at path.
func (s *Sandbox) ReadFile(ctx context.Context, path string) ([]byte, error) {
	rc, err := s.Open(ctx, path, OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// Open streams the file at path (or the byte range of opts) without
// buffering it. The caller must close the reader; ctx bounds the whole
// read.
func (s *Sandbox) Open(ctx context.Context, path string, opts OpenOptions) (io.ReadCloser, error) {
	if opts.Offset < 0 || opts.Length < 0 {
		return nil, fmt.Errorf("open %s: negative offset or length", path)
	}
	cl := s.execdCall(http.MethodGet, "/files/download")
	cl.query = url.Values{"path": {path}}
	cl.stream = true
	cl.header.Set("Accept", "application/octet-stream")
	ranged := opts.Offset > 0 || opts.Length > 0
	if ranged {
		r := "bytes=" + strconv.FormatInt(opts.Offset, 10) + "-"
		if opts.Length > 0 {
			r += strconv.FormatInt(opts.Offset+opts.Length-1, 10)
		}
		cl.header.Set("Range", r)
	}
	resp, err := s.c.send(ctx, cl)
	if err != nil {
		return nil, wrap(err, "open %s", path)
	}
	if ranged && resp.StatusCode != http.StatusPartialContent {
		// The range was ignored: skip and cut on this side.
		if _, err := io.CopyN(io.Discard, resp.Body, opts.Offset); err != nil && !errors.Is(err, io.EOF) {
			resp.Body.Close()
			return nil, wrap(err, "open %s", path)
		}
		if opts.Length > 0 {
			return struct {
				io.Reader
				io.Closer
			}{io.LimitReader(resp.Body, opts.Length), resp.Body}, nil
		}
	}
	return resp.Body, nil
}

// Download copies the file at path to w and returns the bytes copied.
func (s *Sandbox) Download(ctx context.Context, path string, w io.Writer) (int64, error) {
	rc, err := s.Open(ctx, path, OpenOptions{})
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.Copy(w, rc)
	if err != nil {
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		return n, fmt.Errorf("download %s: %w", path, err)
	}
	return n, nil
}

// WriteFile writes data to the file at path, creating parent directories.
func (s *Sandbox) WriteFile(ctx context.Context, path string, data []byte, opts WriteOptions) error {
	return s.Upload(ctx, path, bytes.NewReader(data), opts)
}

// Upload streams r into the file at path as a multipart upload, never
// holding the whole content in memory. Parent directories are created; the
// file appears only once everything arrived. Uploads are not retried.
func (s *Sandbox) Upload(ctx context.Context, path string, r io.Reader, opts WriteOptions) error {
	meta, err := json.Marshal(FileMetadata{Path: path, Owner: opts.Owner, Group: opts.Group, Mode: opts.Mode})
	if err != nil {
		return fmt.Errorf("upload %s: %w", path, err)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(writeUpload(mw, meta, path, r))
	}()
	cl := s.execdCall(http.MethodPost, "/files/upload")
	cl.raw = pr
	cl.contentType = mw.FormDataContentType()
	cl.stream = true // no request timeout: ctx bounds the transfer
	resp, err := s.c.send(ctx, cl)
	// Whatever happened, stop the writer and wait for it: no goroutine
	// outlives the call.
	pr.CloseWithError(errors.New("upload request ended"))
	<-done
	if err != nil {
		return wrap(err, "upload %s", path)
	}
	closeBody(resp.Body)
	return nil
}

func writeUpload(mw *multipart.Writer, meta []byte, name string, r io.Reader) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
	h.Set("Content-Type", "application/json")
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := part.Write(meta); err != nil {
		return err
	}
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", multipart.FileContentDisposition("file", path.Base(name)))
	h.Set("Content-Type", "application/octet-stream")
	if part, err = mw.CreatePart(h); err != nil {
		return err
	}
	if _, err := io.Copy(part, r); err != nil {
		return err
	}
	return mw.Close()
}

// Stat returns the FileInfo of each path, keyed as execd reports it (the
// cleaned absolute path). Symlinks are described, not followed; any missing
// path is an error (IsNotFound).
func (s *Sandbox) Stat(ctx context.Context, paths ...string) (map[string]FileInfo, error) {
	cl := s.execdCall(http.MethodGet, "/files/info")
	cl.query = url.Values{"path": paths}
	out := map[string]FileInfo{}
	_, err := s.c.do(ctx, cl, &out)
	return out, wrap(err, "stat %v", paths)
}

// ListDir returns the entries below path down to depth levels (depth <= 0
// means 1), the root excluded, each directory's contents right after it.
func (s *Sandbox) ListDir(ctx context.Context, path string, depth int) ([]FileInfo, error) {
	if depth <= 0 {
		depth = 1
	}
	cl := s.execdCall(http.MethodGet, "/directories/list")
	cl.query = url.Values{"path": {path}, "depth": {strconv.Itoa(depth)}}
	var out []FileInfo
	_, err := s.c.do(ctx, cl, &out)
	return out, wrap(err, "list %s", path)
}

// Search returns every non-directory below dir, at any depth, whose base
// name matches the glob pattern ("" matches all).
func (s *Sandbox) Search(ctx context.Context, dir, pattern string) ([]FileInfo, error) {
	cl := s.execdCall(http.MethodGet, "/files/search")
	cl.query = url.Values{"path": {dir}}
	if pattern != "" {
		cl.query.Set("pattern", pattern)
	}
	var out []FileInfo
	_, err := s.c.do(ctx, cl, &out)
	return out, wrap(err, "search %s for %q", dir, pattern)
}

// Move renames each item's Src to its Dest, in order.
func (s *Sandbox) Move(ctx context.Context, items ...RenameFileItem) error {
	cl := s.execdCall(http.MethodPost, "/files/mv")
	cl.body = items
	_, err := s.c.do(ctx, cl, nil)
	return wrap(err, "move")
}

// Remove deletes files (not directories; see RemoveDirs). Missing paths
// are skipped.
func (s *Sandbox) Remove(ctx context.Context, paths ...string) error {
	cl := s.execdCall(http.MethodDelete, "/files")
	cl.query = url.Values{"path": paths}
	_, err := s.c.do(ctx, cl, nil)
	return wrap(err, "remove %v", paths)
}

// RemoveDirs deletes directories recursively (rm -rf). Missing paths are
// fine.
func (s *Sandbox) RemoveDirs(ctx context.Context, paths ...string) error {
	cl := s.execdCall(http.MethodDelete, "/directories")
	cl.query = url.Values{"path": paths}
	_, err := s.c.do(ctx, cl, nil)
	return wrap(err, "remove directories %v", paths)
}

// Mkdir creates directory path and its parents (mkdir -p), the new leaf
// with p's owner, group and mode (Mode 0 means 755).
func (s *Sandbox) Mkdir(ctx context.Context, path string, p Permission) error {
	if p.Mode == 0 {
		p.Mode = 755
	}
	cl := s.execdCall(http.MethodPost, "/directories")
	cl.body = map[string]Permission{path: p}
	_, err := s.c.do(ctx, cl, nil)
	return wrap(err, "mkdir %s", path)
}

// Chmod sets the owner, group and mode of path; empty names and Mode 0
// leave those alone.
func (s *Sandbox) Chmod(ctx context.Context, path string, p Permission) error {
	cl := s.execdCall(http.MethodPost, "/files/permissions")
	cl.body = map[string]Permission{path: p}
	_, err := s.c.do(ctx, cl, nil)
	return wrap(err, "chmod %s", path)
}

// Replace replaces every occurrence of old with new in the file at path and
// returns how many it replaced.
func (s *Sandbox) Replace(ctx context.Context, path, old, new string) (int, error) {
	cl := s.execdCall(http.MethodPost, "/files/replace")
	cl.query = url.Values{"verbose": {"true"}}
	cl.body = map[string]ReplaceFileContentItem{path: {Old: old, New: new}}
	var out map[string]ReplaceFileContentResult
	if _, err := s.c.do(ctx, cl, &out); err != nil {
		return 0, wrap(err, "replace in %s", path)
	}
	n := 0
	for _, r := range out { // one entry, keyed by the cleaned path
		n += r.ReplacedCount
	}
	return n, nil
}
