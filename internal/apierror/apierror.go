// Package apierror is the error vocabulary of the project's HTTP APIs: an
// Error carries the HTTP status, a stable machine code and a message safe to
// show the caller, plus an optional internal cause that is only logged.
// Write is the one place such errors become {code, message} responses.
package apierror

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// Stable codes shared with the upstream execd contract.
const (
	CodeInvalidRequestBody  = "INVALID_REQUEST_BODY"
	CodeMissingQuery        = "MISSING_QUERY"
	CodeRuntimeError        = "RUNTIME_ERROR"
	CodeInvalidFile         = "INVALID_FILE"
	CodeInvalidFileContent  = "INVALID_FILE_CONTENT"
	CodeInvalidFileMetadata = "INVALID_FILE_METADATA"
	CodeFileNotFound        = "FILE_NOT_FOUND"
	CodeUnknown             = "UNKNOWN"
	CodeContextNotFound     = "CONTEXT_NOT_FOUND"
	CodeNotSupported        = "NOT_SUPPORTED"
)

// Codes of our own, for conditions the upstream contract has no code for.
const (
	CodeInvalidPath      = "INVALID_PATH"
	CodeInvalidRange     = "INVALID_RANGE"
	CodeCommandNotFound  = "COMMAND_NOT_FOUND"
	CodeSessionNotFound  = "SESSION_NOT_FOUND"
	CodeNotRunning       = "NOT_RUNNING"
	CodeConflict         = "CONFLICT"
	CodeFileExists       = "FILE_EXISTS"
	CodePermissionDenied = "PERMISSION_DENIED"
	CodeBadGateway       = "BAD_GATEWAY"
	CodeRequestTooLarge  = "REQUEST_TOO_LARGE"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeRouteNotFound    = "NOT_FOUND"
	CodeInternal         = "INTERNAL_ERROR"
	CodeServiceDraining  = "SHUTTING_DOWN"
	CodeInvalidPort      = "INVALID_PORT"
	CodeInvalidQuery     = "INVALID_QUERY"
	CodeIsDirectory      = "IS_DIRECTORY"
	CodeNotDirectory     = "NOT_DIRECTORY"
	CodeAlreadyConnected = "ALREADY_CONNECTED" // a PTY session already has a WebSocket client

	// Lifecycle server codes (listed, with their statuses, in api/lifecycle.yaml).
	CodeMissingAPIKey         = "MISSING_API_KEY"
	CodeInvalidAPIKey         = "INVALID_API_KEY"
	CodeInvalidRequest        = "INVALID_REQUEST"
	CodeInvalidMetadataFormat = "INVALID_METADATA_FORMAT"
	CodeSandboxNotFound       = "SANDBOX_NOT_FOUND"
	CodeSnapshotNotFound      = "SNAPSHOT_NOT_FOUND"
	CodeSandboxNotRunning     = "SANDBOX_NOT_RUNNING"
	CodeSandboxNotPaused      = "SANDBOX_NOT_PAUSED"
	CodeInvalidExpiration     = "INVALID_EXPIRATION"
	CodeInvalidState          = "INVALID_STATE"
	CodeAPINotSupported       = "API_NOT_SUPPORTED"
	CodeImagePullFailed       = "IMAGE_PULL_FAILED"
	CodeDiskLimitUnsupported  = "DISK_LIMIT_NOT_SUPPORTED"
	CodeSandboxStartFailed    = "SANDBOX_START_FAILED"
	CodeHostPathNotAllowed    = "HOST_PATH_NOT_ALLOWED"
	CodeVolumeNotFound        = "VOLUME_NOT_FOUND"
	CodeRuntimeUnavailable    = "RUNTIME_UNAVAILABLE"

	// Pool codes: upstream's KUBERNETES::POOL_* without the prefix.
	CodePoolNotFound      = "POOL_NOT_FOUND"
	CodePoolAlreadyExists = "POOL_ALREADY_EXISTS"
	CodePoolAPIError      = "POOL_API_ERROR"
	CodePoolNotSupported  = "POOL_NOT_SUPPORTED"
)

// Error is an API error. Message reaches the client; Cause is only logged.
type Error struct {
	Status  int
	Code    string
	Message string
	Cause   error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// New returns an Error with a formatted message.
func New(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error whose cause is err.
func Wrap(err error, status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...), Cause: err}
}

// BadRequest is shorthand for a 400 with the given code.
func BadRequest(code, format string, args ...any) *Error {
	return New(http.StatusBadRequest, code, format, args...)
}

// NotFound is shorthand for a 404 with the given code.
func NotFound(code, format string, args ...any) *Error {
	return New(http.StatusNotFound, code, format, args...)
}

// Write sends err as a {code, message} JSON reply. Errors that are not an
// *Error become a 500 whose message hides the internal detail.
func Write(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Cause: err}
	}
	level := slog.LevelDebug
	// 501 says what the server does not offer, not that it failed.
	if e.Status >= 500 && e.Status != http.StatusNotImplemented {
		level = slog.LevelWarn
	}
	{
		slog.LogAttrs(r.Context(), level, "request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", e.Status), slog.String("code", e.Code), slog.Any("err", err))
	}
	WriteJSON(w, e.Status, struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{e.Code, e.Message})
}

// WriteJSON sends v as a JSON reply with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"code":"INTERNAL_ERROR","message":"encoding reply"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// DecodeJSON reads a JSON body of at most limit bytes into v. Unknown fields
// are accepted (clients of newer contract versions may send them); a
// malformed or oversized body is an INVALID_REQUEST_BODY error.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		if e := bodyReadError(err, limit); e != nil {
			return e
		}
		return Wrap(err, http.StatusBadRequest, CodeInvalidRequestBody, "invalid JSON body: %v", err)
	}
	// The body must end after the value. More cannot tell the end from a
	// failed read (a client that stalls before its declared end); Token can.
	if _, err := dec.Token(); err != io.EOF {
		if e := bodyReadError(err, limit); e != nil {
			return e
		}
		return BadRequest(CodeInvalidRequestBody, "invalid JSON body: trailing data after the JSON value")
	}
	return nil
}

// bodyReadError is the error for a body read that failed for its size or
// its slowness, nil for any other failure.
func bodyReadError(err error, limit int64) *Error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return New(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "request body exceeds %d bytes", limit)
	}
	return BodyTimeout(err)
}
