package server

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/lifecycle"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// classCodes names the error codes one operation uses for the runtime
// error classes; empty fields fall back to the defaults of codeFor.
type classCodes struct {
	notFound, invalid, conflict, other string
	// showOther exposes the message of an unclassified error (for create
	// failures, whose engine message is what the caller needs).
	showOther bool
}

// Operation-specific codes.
var (
	sandboxCodes  = classCodes{notFound: apierror.CodeSandboxNotFound}
	snapshotCodes = classCodes{notFound: apierror.CodeSnapshotNotFound}
	// runningCodes are for operations that need a running sandbox.
	runningCodes = classCodes{notFound: apierror.CodeSandboxNotFound, conflict: apierror.CodeSandboxNotRunning}
)

// statusFor is the one place a runtime error class becomes an HTTP
// status. Errors of no class are 500.
func statusFor(err error) int {
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, runtime.ErrInvalid), errors.Is(err, runtime.ErrNotSupported):
		return http.StatusBadRequest
	case errors.Is(err, runtime.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, runtime.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// codeFor is the code that goes with err's class, as named by c.
func codeFor(err error, c classCodes) string {
	pick := func(code, fallback string) string {
		if code != "" {
			return code
		}
		return fallback
	}
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return pick(c.notFound, apierror.CodeRouteNotFound)
	case errors.Is(err, runtime.ErrNotSupported):
		return apierror.CodeAPINotSupported
	case errors.Is(err, runtime.ErrHostPathNotAllowed):
		return apierror.CodeHostPathNotAllowed
	case errors.Is(err, runtime.ErrInvalid):
		return pick(c.invalid, apierror.CodeInvalidRequest)
	case errors.Is(err, runtime.ErrConflict):
		return pick(c.conflict, apierror.CodeInvalidState)
	case errors.Is(err, runtime.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return apierror.CodeRuntimeUnavailable
	}
	return pick(c.other, apierror.CodeInternal)
}

// fromRuntime turns an error of the runtime or the store about subject
// (such as `sandbox "abc"`) into an API error. Not-found errors say which
// subject is missing; other classified errors keep the driver's message;
// unclassified ones hide it unless c.showOther, and are logged with their
// cause when written.
func fromRuntime(err error, c classCodes, subject string) *apierror.Error {
	var ae *apierror.Error
	if errors.As(err, &ae) {
		return ae
	}
	if le := fromLifecycle(err); le != nil {
		return le
	}
	status, code := statusFor(err), codeFor(err, c)
	msg := err.Error()
	switch {
	case status == http.StatusNotFound && subject != "":
		msg = subject + " not found"
	case status == http.StatusServiceUnavailable:
		msg = "the container engine is unavailable; try again later"
	case status == http.StatusInternalServerError && !c.showOther:
		msg = "internal error"
	}
	return &apierror.Error{Status: status, Code: code, Message: msg, Cause: err}
}

// writeError sends err as {code, message}. Server-side failures are logged
// with their cause on the request's logger (which carries the request id);
// apierror.Write does the rest.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apierror.Error
	if !errors.As(err, &ae) {
		ae = fromRuntime(err, classCodes{}, "")
	}
	s.countFailure(r, ae)
	if serverFault(ae.Status) && r.Context().Err() == nil { // a gone client's failures are not the server's
		s.reqLog(r).Warn("request failed", "method", r.Method, "path", r.URL.Path,
			"status", ae.Status, "code", ae.Code, "err", err)
	}
	apierror.Write(w, r, ae)
}

// serverFault reports statuses that say the server or its engine failed:
// 5xx but 501, which says what the server does not offer (pools on Docker).
func serverFault(status int) bool {
	return status >= 500 && status != http.StatusNotImplemented
}

// decodeJSON reads a JSON body of at most maxJSONBody bytes into v; a
// malformed body is 400 INVALID_REQUEST, an oversized one 413. With
// optional, an empty body leaves v alone.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	err := apierror.DecodeJSON(w, r, maxJSONBody, v)
	if err == nil {
		return nil
	}
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		return err
	}
	if errors.Is(ae.Cause, io.EOF) {
		if optional {
			return nil
		}
		return apierror.BadRequest(apierror.CodeInvalidRequest, "the request body is empty; a JSON object is required")
	}
	return &apierror.Error{Status: ae.Status, Code: apierror.CodeInvalidRequest, Message: ae.Message, Cause: ae.Cause}
}

// badRequest is a 400 INVALID_REQUEST.
func badRequest(format string, args ...any) *apierror.Error {
	return apierror.BadRequest(apierror.CodeInvalidRequest, format, args...)
}

// notSupported is a 400 API_NOT_SUPPORTED.
func notSupported(format string, args ...any) *apierror.Error {
	return apierror.BadRequest(apierror.CodeAPINotSupported, format, args...)
}

// lifecycleCodes are the status and code of each lifecycle.Error kind.
var lifecycleCodes = []struct {
	kind   error
	status int
	code   string
}{
	{lifecycle.ErrSnapshotNotFound, http.StatusNotFound, apierror.CodeSnapshotNotFound},
	{lifecycle.ErrInvalidArgument, http.StatusBadRequest, apierror.CodeInvalidRequest},
	{lifecycle.ErrInvalidExpiration, http.StatusBadRequest, apierror.CodeInvalidExpiration},
	{lifecycle.ErrNotRenewable, http.StatusConflict, apierror.CodeInvalidExpiration},
	{lifecycle.ErrSandboxState, http.StatusConflict, apierror.CodeInvalidState},
	{lifecycle.ErrSnapshotNotReady, http.StatusConflict, apierror.CodeInvalidState},
	{lifecycle.ErrSnapshotBusy, http.StatusConflict, apierror.CodeInvalidState},
	{lifecycle.ErrSnapshotInUse, http.StatusConflict, apierror.CodeInvalidState},
}

// fromLifecycle maps a *lifecycle.Error to its status and code with the
// lifecycle's message, or returns nil for other errors.
func fromLifecycle(err error) *apierror.Error {
	var le *lifecycle.Error
	if !errors.As(err, &le) {
		return nil
	}
	for _, m := range lifecycleCodes {
		if errors.Is(le.Kind, m.kind) {
			return &apierror.Error{Status: m.status, Code: m.code, Message: le.Message, Cause: err}
		}
	}
	return nil
}
