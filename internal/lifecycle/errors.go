package lifecycle

import (
	"errors"
	"fmt"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Kinds of lifecycle failures. Each wraps the runtime error class it
// belongs to, so errors.Is(err, runtime.ErrConflict) holds for an
// ErrNotRenewable too.
var (
	// ErrSnapshotNotFound: no snapshot record of that id.
	ErrSnapshotNotFound = fmt.Errorf("snapshot not found: %w", runtime.ErrNotFound)
	// ErrInvalidArgument: a value breaks a rule of the core (metadata
	// label rules, for instance).
	ErrInvalidArgument = fmt.Errorf("invalid argument: %w", runtime.ErrInvalid)
	// ErrInvalidExpiration: a renewal time in the past or beyond the
	// maximum timeout.
	ErrInvalidExpiration = fmt.Errorf("invalid expiration: %w", runtime.ErrInvalid)
	// ErrNotRenewable: the sandbox was created without expiry.
	ErrNotRenewable = fmt.Errorf("sandbox does not expire: %w", runtime.ErrConflict)
	// ErrSandboxState: the sandbox is in a state the operation does not
	// accept (a snapshot of a stopped sandbox).
	ErrSandboxState = fmt.Errorf("sandbox in the wrong state: %w", runtime.ErrConflict)
	// ErrSnapshotNotReady: a restore from a snapshot that is not Ready.
	ErrSnapshotNotReady = fmt.Errorf("snapshot not ready: %w", runtime.ErrConflict)
	// ErrSnapshotBusy: a delete of a snapshot still being captured.
	ErrSnapshotBusy = fmt.Errorf("snapshot being captured: %w", runtime.ErrConflict)
	// ErrSnapshotInUse: a delete of a snapshot sandboxes still use.
	ErrSnapshotInUse = fmt.Errorf("snapshot in use: %w", runtime.ErrConflict)
)

// Error is a failure of a lifecycle rule: Kind is one of the Err* kinds
// above, Message says what happened in words fit for the caller, Cause is
// the underlying error, if any.
type Error struct {
	Kind    error
	Message string
	Cause   error
}

func (e *Error) Error() string { return e.Message }

// Is matches the error's kind and the runtime class the kind wraps.
func (e *Error) Is(target error) bool { return errors.Is(e.Kind, target) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

func newError(kind, cause error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...), Cause: cause}
}
