package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrNotReady is wrapped by the errors of Create, Connect, Resume and
// WaitSnapshot when a sandbox (or snapshot) does not become ready: it ended
// Failed or Terminated, or the ready timeout passed. The error text carries
// the last state and reason seen.
var ErrNotReady = errors.New("sandbox not ready")

// APIError is a non-2xx reply of the lifecycle server or of execd.
//
// Code and Message come from the {"code","message"} body both servers send;
// for execd's 401 body {"error": "..."} Message is that text and Code is
// empty; for any other body Message is the body text (at most 64 KiB).
// RequestID is the X-Request-ID reply header, when present.
type APIError struct {
	StatusCode int
	Code       string
	Message    string
	RequestID  string
}

// Error returns "opensandbox: <status> <code>: <message> (request <id>)",
// leaving out the parts that are empty.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "opensandbox: %d", e.StatusCode)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	} else if e.Code == "" {
		b.WriteString(" " + http.StatusText(e.StatusCode))
	}
	if e.RequestID != "" {
		b.WriteString(" (request " + e.RequestID + ")")
	}
	return b.String()
}

// IsNotFound reports whether err is (or wraps) an APIError with status 404.
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err is (or wraps) an APIError with status 409,
// such as a sandbox in the wrong state for the operation.
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

// IsUnauthorized reports whether err is (or wraps) an APIError with status
// 401: a missing or wrong API key or execd access token.
func IsUnauthorized(err error) bool { return hasStatus(err, http.StatusUnauthorized) }

func hasStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == status
}

// parseAPIError builds the APIError of a reply from its (capped) body.
func parseAPIError(status int, h http.Header, body []byte) *APIError {
	e := &APIError{StatusCode: status, RequestID: h.Get(RequestIDHeader)}
	var shaped struct {
		ErrorResponse
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &shaped) == nil {
		switch {
		case shaped.Code != "" || shaped.Message != "":
			e.Code, e.Message = shaped.Code, shaped.Message
			return e
		case shaped.Error != "":
			e.Message = shaped.Error
			return e
		}
	}
	e.Message = strings.TrimSpace(string(body))
	return e
}
