package files

import (
	"errors"
	"io/fs"
	"net/http"
	"syscall"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// fsError turns a filesystem error from operation op on path into an API
// error, classifying it by errno class, never by message text. The message
// names the operation, the path and the reason; err stays as the cause.
func fsError(err error, op, path string) error {
	var ae *apierror.Error
	if errors.As(err, &ae) {
		return err
	}
	status, code, reason := classify(err)
	return apierror.Wrap(err, status, code, "%s %q: %s", op, path, reason)
}

// classify maps an OS error to an HTTP status, an API code and a short reason.
func classify(err error) (status int, code, reason string) {
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		return http.StatusNotFound, apierror.CodeFileNotFound, "not found (a parent component is not a directory)"
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound, apierror.CodeFileNotFound, "no such file or directory"
	case errors.Is(err, syscall.EROFS):
		return http.StatusForbidden, apierror.CodePermissionDenied, "read-only file system"
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden, apierror.CodePermissionDenied, "permission denied"
	case errors.Is(err, syscall.EISDIR):
		return http.StatusBadRequest, apierror.CodeIsDirectory, "is a directory"
	case errors.Is(err, syscall.ENOTEMPTY):
		return http.StatusConflict, apierror.CodeConflict, "directory not empty"
	case errors.Is(err, fs.ErrExist):
		return http.StatusConflict, apierror.CodeFileExists, "already exists"
	case errors.Is(err, syscall.ENAMETOOLONG):
		return http.StatusBadRequest, apierror.CodeInvalidPath, "file name too long"
	case errors.Is(err, syscall.ELOOP):
		return http.StatusBadRequest, apierror.CodeInvalidPath, "too many levels of symbolic links"
	case errors.Is(err, syscall.EINVAL):
		return http.StatusBadRequest, apierror.CodeInvalidPath, "invalid argument (e.g. moving a directory into itself)"
	case errors.Is(err, syscall.EBUSY):
		return http.StatusConflict, apierror.CodeConflict, "device or resource busy"
	case errors.Is(err, syscall.ETXTBSY):
		return http.StatusConflict, apierror.CodeConflict, "text file busy (a running program)"
	case errors.Is(err, syscall.EMLINK):
		return http.StatusConflict, apierror.CodeConflict, "too many links"
	case errors.Is(err, syscall.EXDEV):
		return http.StatusBadRequest, apierror.CodeInvalidPath, "not possible across filesystems"
	case errors.Is(err, syscall.ENXIO), errors.Is(err, syscall.ENODEV), errors.Is(err, syscall.ESPIPE):
		return http.StatusBadRequest, apierror.CodeInvalidFile, "not a regular file (a device, socket or pipe)"
	case errors.Is(err, syscall.EOPNOTSUPP):
		return http.StatusBadRequest, apierror.CodeNotSupported, "operation not supported by this filesystem"
	case errors.Is(err, syscall.EFBIG):
		return http.StatusRequestEntityTooLarge, apierror.CodeRequestTooLarge, "file too large"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusInsufficientStorage, codeNoSpace, "no space left on device"
	}
	reason = "unexpected error"
	var errno syscall.Errno
	if errors.As(err, &errno) {
		reason = errno.Error()
	}
	return http.StatusInternalServerError, apierror.CodeRuntimeError, reason
}

// notExist reports whether err means the path does not exist, counting a
// non-directory parent component as absence.
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// isNotDirErr reports whether err is ENOTDIR.
func isNotDirErr(err error) bool {
	return errors.Is(err, syscall.ENOTDIR)
}

// codeNoSpace: the filesystem (or the sandbox's disk quota) is full.
const codeNoSpace = "NO_SPACE"
