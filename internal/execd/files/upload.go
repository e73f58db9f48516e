package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Upload serves POST /files/upload, a multipart/form-data body of
// "metadata" parts (JSON FileMetadata) and "file" parts (the bytes). Each
// file part is paired with the oldest metadata part not yet paired, so
// both metadata,file,metadata,file and metadata,metadata,file,file work;
// a file part must come after its metadata. The body is streamed: each file
// goes to a temporary file in its target directory (parents created as
// needed), gets its mode and owner, and all are renamed into place only
// once the whole body has been read and checked. An error before then
// removes the temporaries and leaves every target untouched (created parent
// directories stay); a rename failing at the end leaves the files renamed
// before it in place. Without an explicit
// mode a new file gets 644 and a replaced regular file keeps its mode;
// without an owner or group a replaced file keeps its own.
func (h *Handler) Upload(w http.ResponseWriter, r *http.Request) {
	if err := h.upload(r); err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// Limits and names of the upload parser.
const (
	uploadTempPrefix  = ".osb-upload-"
	maxMetadataPart   = 64 << 10
	uploadCopyBuffer  = 64 << 10
	defaultUploadMode = 0o644
)

// pendingFile is a checked metadata part still waiting for its file part.
type pendingFile struct {
	abs  string
	ps   permSpec
	size int
}

// stagedFile is a fully written temporary file and where it goes.
type stagedFile struct {
	tmp, dst string
}

// uploader holds the state of one upload request.
type uploader struct {
	h            *Handler
	names        *names
	buf          []byte
	pending      []pendingFile
	pendingBytes int
	staged       []stagedFile
	metas, files int
}

func (h *Handler) upload(r *http.Request) error {
	mr, err := r.MultipartReader()
	if err != nil {
		return apierror.Wrap(err, http.StatusBadRequest, apierror.CodeInvalidRequestBody,
			"upload: want a multipart/form-data body: %v", err)
	}
	u := &uploader{h: h, names: newNames()}
	defer u.cleanup()
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return apierror.Wrap(err, http.StatusBadRequest, apierror.CodeInvalidRequestBody,
				"upload: malformed multipart body: %v", err)
		}
		switch part.FormName() {
		case "metadata":
			err = u.metadata(part)
		case "file":
			err = u.file(part)
		default:
			h.log.LogAttrs(r.Context(), slog.LevelDebug, "upload: ignoring part",
				slog.String("name", part.FormName()))
		}
		part.Close()
		if err != nil {
			return err
		}
	}
	return u.finish()
}

// metadata reads and checks one metadata part and queues it.
func (u *uploader) metadata(part *multipart.Part) error {
	u.metas++
	limit := min(int64(maxMetadataPart), u.h.maxJSON)
	data, err := io.ReadAll(io.LimitReader(part, limit+1))
	if err != nil {
		return apierror.Wrap(err, http.StatusBadRequest, apierror.CodeInvalidRequestBody,
			"upload: reading metadata part %d: %v", u.metas, err)
	}
	if int64(len(data)) > limit {
		return apierror.BadRequest(apierror.CodeInvalidFileMetadata,
			"upload: metadata part %d exceeds %d bytes", u.metas, limit)
	}
	md, err := decodeMetadata(data)
	if err != nil {
		return apierror.Wrap(err, http.StatusBadRequest, apierror.CodeInvalidFileMetadata,
			"upload: metadata part %d: %v", u.metas, err)
	}
	abs, err := u.h.resolve(md.Path)
	if err != nil {
		return err
	}
	ps, err := u.names.permSpec(sandbox.Permission{Owner: md.Owner, Group: md.Group, Mode: md.Mode},
		apierror.CodeInvalidFileMetadata, fmt.Sprintf("upload: metadata for %q", md.Path))
	if err != nil {
		return err
	}
	u.pendingBytes += len(data)
	if int64(u.pendingBytes) > u.h.maxJSON {
		return apierror.New(http.StatusRequestEntityTooLarge, apierror.CodeRequestTooLarge,
			"upload: metadata parts waiting for their file parts exceed %d bytes", u.h.maxJSON)
	}
	u.pending = append(u.pending, pendingFile{abs: abs, ps: ps, size: len(data)})
	return nil
}

// decodeMetadata parses the JSON of a metadata part; a path is required.
func decodeMetadata(data []byte) (sandbox.FileMetadata, error) {
	var md sandbox.FileMetadata
	if err := json.Unmarshal(data, &md); err != nil {
		return md, fmt.Errorf("invalid JSON: %w", err)
	}
	if md.Path == "" {
		return md, errors.New("path is required")
	}
	return md, nil
}

// file streams one file part into a temporary file beside its target.
func (u *uploader) file(part *multipart.Part) error {
	u.files++
	if len(u.pending) == 0 {
		if u.metas == 0 {
			return apierror.BadRequest(apierror.CodeInvalidFileMetadata,
				"upload: file part %d has no metadata part before it", u.files)
		}
		return apierror.BadRequest(apierror.CodeInvalidFile,
			"upload: more file parts than metadata parts (file part %d is unpaired)", u.files)
	}
	pf := u.pending[0]
	u.pending = u.pending[1:]
	u.pendingBytes -= pf.size

	prev, err := os.Lstat(pf.abs)
	switch {
	case err == nil && prev.IsDir():
		return apierror.BadRequest(apierror.CodeIsDirectory, "upload to %q: is a directory", pf.abs)
	case err == nil && !prev.Mode().IsRegular():
		prev = nil // a symlink or other entry is replaced, not imitated
	case err != nil && !notExist(err):
		return fsError(err, "upload to", pf.abs)
	case err != nil:
		prev = nil
	}
	dir := filepath.Dir(pf.abs)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if isNotDirErr(err) {
			return apierror.New(http.StatusConflict, apierror.CodeFileExists,
				"upload to %q: a parent component exists and is not a directory", pf.abs)
		}
		return fsError(err, "upload: create directory", dir)
	}
	tmp, err := os.CreateTemp(dir, uploadTempPrefix+"*")
	if err != nil {
		return fsError(err, "upload to", pf.abs)
	}
	u.staged = append(u.staged, stagedFile{tmp: tmp.Name(), dst: pf.abs})
	if err := u.copy(tmp, part, pf.abs); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fsError(err, "upload to", pf.abs)
	}
	if err := setUploadPerms(tmp.Name(), pf.ps, prev); err != nil {
		return fsError(err, "upload: set permissions of", pf.abs)
	}
	return nil
}

// copy moves the part's bytes to dst through one reused buffer, telling a
// broken request body apart from a failing disk.
func (u *uploader) copy(dst io.Writer, part io.Reader, target string) error {
	if u.buf == nil {
		u.buf = make([]byte, uploadCopyBuffer)
	}
	for {
		n, rerr := part.Read(u.buf)
		if n > 0 {
			if _, err := dst.Write(u.buf[:n]); err != nil {
				return fsError(err, "upload: write", target)
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return apierror.Wrap(rerr, http.StatusBadRequest, apierror.CodeInvalidRequestBody,
				"upload to %q: reading file part: %v", target, rerr)
		}
	}
}

// setUploadPerms gives the temporary file tmp its final owner and mode.
// A replaced regular file (prev) passes on its owner and group, best
// effort, and its mode unless the metadata names one; a new file gets 644.
// An owner, group or mode in the metadata always wins.
func setUploadPerms(tmp string, ps permSpec, prev fs.FileInfo) error {
	if prev != nil {
		if err := preserveOwner(tmp, prev, os.Chown); err != nil {
			return err
		}
	}
	if !ps.setMode {
		ps.mode, ps.setMode = defaultUploadMode, true
		if prev != nil {
			ps.mode = prev.Mode() & permBits
		}
	}
	return ps.apply(tmp)
}

// finish checks that every metadata part got its file, then renames the
// staged files into place in request order.
func (u *uploader) finish() error {
	switch {
	case u.metas == 0:
		return apierror.BadRequest(apierror.CodeInvalidFileMetadata, "upload: no metadata part in the request")
	case len(u.pending) > 0 && u.files == 0:
		return apierror.BadRequest(apierror.CodeInvalidFileContent,
			"upload: no file part in the request (metadata for %q has no file)", u.pending[0].abs)
	case len(u.pending) > 0:
		return apierror.BadRequest(apierror.CodeInvalidFile,
			"upload: %d metadata parts but %d file parts (metadata for %q has no file)", u.metas, u.files, u.pending[0].abs)
	}
	for i := range u.staged {
		s := &u.staged[i]
		if err := os.Rename(s.tmp, s.dst); err != nil {
			return fsError(err, "upload to", s.dst)
		}
		s.tmp = ""
	}
	return nil
}

// cleanup removes the temporary files that were not renamed into place.
func (u *uploader) cleanup() {
	for _, s := range u.staged {
		if s.tmp == "" {
			continue
		}
		if err := os.Remove(s.tmp); err != nil && !notExist(err) {
			u.h.log.Warn("upload: removing temporary file", slog.String("path", s.tmp), slog.Any("err", err))
		}
	}
}
