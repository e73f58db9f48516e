package files

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

func TestFSError(t *testing.T) {
	pathErr := func(errno syscall.Errno) error {
		return fmt.Errorf("wrapped: %w", &os.PathError{Op: "open", Path: "/x", Err: errno})
	}
	tests := []struct {
		err    error
		status int
		code   string
		reason string
	}{
		{pathErr(syscall.ENOENT), http.StatusNotFound, apierror.CodeFileNotFound, "no such file"},
		{pathErr(syscall.ENOTDIR), http.StatusNotFound, apierror.CodeFileNotFound, "not a directory"},
		{pathErr(syscall.EACCES), http.StatusForbidden, apierror.CodePermissionDenied, "permission denied"},
		{pathErr(syscall.EPERM), http.StatusForbidden, apierror.CodePermissionDenied, "permission denied"},
		{pathErr(syscall.EROFS), http.StatusForbidden, apierror.CodePermissionDenied, "read-only"},
		{pathErr(syscall.EISDIR), http.StatusBadRequest, apierror.CodeIsDirectory, "is a directory"},
		{pathErr(syscall.ENOTEMPTY), http.StatusConflict, apierror.CodeConflict, "not empty"},
		{pathErr(syscall.EEXIST), http.StatusConflict, apierror.CodeFileExists, "exists"},
		{pathErr(syscall.ENAMETOOLONG), http.StatusBadRequest, apierror.CodeInvalidPath, "too long"},
		{pathErr(syscall.ELOOP), http.StatusBadRequest, apierror.CodeInvalidPath, "symbolic links"},
		{pathErr(syscall.EINVAL), http.StatusBadRequest, apierror.CodeInvalidPath, "invalid argument"},
		{pathErr(syscall.ENOSPC), http.StatusInsufficientStorage, codeNoSpace, "no space left"},
		{pathErr(syscall.EDQUOT), http.StatusInsufficientStorage, codeNoSpace, "no space left"},
		{pathErr(syscall.EXDEV), http.StatusBadRequest, apierror.CodeInvalidPath, "across filesystems"},
		{pathErr(syscall.ETXTBSY), http.StatusConflict, apierror.CodeConflict, "text file busy"},
		{pathErr(syscall.EMLINK), http.StatusConflict, apierror.CodeConflict, "too many links"},
		{pathErr(syscall.ENXIO), http.StatusBadRequest, apierror.CodeInvalidFile, "not a regular file"},
		{pathErr(syscall.ENODEV), http.StatusBadRequest, apierror.CodeInvalidFile, "not a regular file"},
		{pathErr(syscall.EOPNOTSUPP), http.StatusBadRequest, apierror.CodeNotSupported, "not supported"},
		{pathErr(syscall.EFBIG), http.StatusRequestEntityTooLarge, apierror.CodeRequestTooLarge, "too large"},
		{pathErr(syscall.EIO), http.StatusInternalServerError, apierror.CodeRuntimeError, "input/output error"},
		{errors.New("opaque"), http.StatusInternalServerError, apierror.CodeRuntimeError, "unexpected error"},
	}
	for _, tt := range tests {
		err := fsError(tt.err, "frob", "/some/path")
		var ae *apierror.Error
		if !errors.As(err, &ae) {
			t.Fatalf("fsError(%v) = %T, want *apierror.Error", tt.err, err)
		}
		if ae.Status != tt.status || ae.Code != tt.code || !strings.Contains(ae.Message, tt.reason) ||
			!strings.Contains(ae.Message, `frob "/some/path"`) {
			t.Errorf("fsError(%v) = %d %s %q; want %d %s naming op, path and %q",
				tt.err, ae.Status, ae.Code, ae.Message, tt.status, tt.code, tt.reason)
		}
		if !errors.Is(err, tt.err) {
			t.Errorf("fsError(%v) lost its cause", tt.err)
		}
	}
	// An API error passes through untouched.
	in := apierror.BadRequest(apierror.CodeInvalidFile, "x")
	if got := fsError(in, "op", "/p"); got != error(in) {
		t.Errorf("fsError(apierror) = %v, want it unchanged", got)
	}
	if !notExist(pathErr(syscall.ENOTDIR)) || !notExist(fs.ErrNotExist) || notExist(pathErr(syscall.EACCES)) {
		t.Errorf("notExist: want true for ENOENT/ENOTDIR, false for EACCES")
	}
}
