package osbcli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// exitCodeError ends osb with a code and no message: the remote command
// already said what happened.
type exitCodeError int

func (e exitCodeError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageError is a command line osb could not make sense of (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// hintError carries advice printed under the error.
type hintError struct {
	err  error
	hint string
}

func (e hintError) Error() string { return e.err.Error() }
func (e hintError) Unwrap() error { return e.err }

func withHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	return hintError{err: err, hint: hint}
}

// API error codes the hints key on.
const (
	codeSandboxNotFound = "SANDBOX_NOT_FOUND"
	codeNotRunning      = "SANDBOX_NOT_RUNNING"
	codeNotSupported    = "API_NOT_SUPPORTED"
	codeSessionNotFound = "SESSION_NOT_FOUND"
	codeCommandNotFound = "COMMAND_NOT_FOUND"
)

// describe turns an error into the message, hint and exit code osb
// prints and returns.
func (a *app) describe(err error) (msg, hint string, code int) {
	msg, code = err.Error(), 1
	var ue usageError
	if errors.As(err, &ue) {
		code = 2
		hint = "see: osb --help, or osb <command> --help"
	}
	var he hintError
	if errors.As(err, &he) {
		hint = he.hint
	}
	var ae *sandbox.APIError
	switch {
	case hint != "":
	case errors.Is(err, context.Canceled):
		msg = "interrupted"
		code = 130
	case sandbox.IsUnauthorized(err):
		hint = "check --api-key / OPEN_SANDBOX_API_KEY (or api_key in " + a.configPath() + ")"
	case isConnectionError(err):
		hint = fmt.Sprintf("is opensandbox-server running at %s? (set --domain / OPEN_SANDBOX_DOMAIN)", a.settings.Domain)
	case errors.As(err, &ae) && ae.Code == codeSandboxNotFound:
		hint = "list sandboxes with: osb sandbox list"
	case errors.As(err, &ae) && ae.Code == codeNotRunning:
		hint = "check its state with: osb sandbox get <id> (a paused sandbox resumes with: osb sandbox resume <id>)"
	case errors.As(err, &ae) && ae.Code == codeNotSupported:
		hint = "this server does not offer that feature yet"
	case errors.As(err, &ae) && ae.Code == codeSessionNotFound:
		hint = "create a session with: osb command session create <id>"
	case errors.As(err, &ae) && ae.Code == codeCommandNotFound:
		hint = "start a background command with: osb command run -d <id> -- <cmd>"
	case errors.Is(err, sandbox.ErrNotReady):
		hint = "inspect it with: osb devops summary <id>"
	}
	return strings.TrimSpace(msg), hint, code
}

// isConnectionError reports whether err means the server could not be
// reached at all.
func isConnectionError(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
