package lifecycle

import (
	"errors"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// TestErrorKindsKeepRuntimeClasses checks that every lifecycle error kind
// is also the runtime class a front end maps, and that an *Error keeps
// its message and cause.
func TestErrorKindsKeepRuntimeClasses(t *testing.T) {
	classes := map[error]error{
		ErrSnapshotNotFound:  runtime.ErrNotFound,
		ErrInvalidArgument:   runtime.ErrInvalid,
		ErrInvalidExpiration: runtime.ErrInvalid,
		ErrNotRenewable:      runtime.ErrConflict,
		ErrSandboxState:      runtime.ErrConflict,
		ErrSnapshotNotReady:  runtime.ErrConflict,
		ErrSnapshotBusy:      runtime.ErrConflict,
		ErrSnapshotInUse:     runtime.ErrConflict,
	}
	cause := errors.New("engine said no")
	for kind, class := range classes {
		err := error(newError(kind, cause, "sandbox %q: %s", "x", "why"))
		if !errors.Is(err, kind) || !errors.Is(err, class) {
			t.Errorf("%v: errors.Is kind=%v class=%v, want both", kind, errors.Is(err, kind), errors.Is(err, class))
		}
		if !errors.Is(err, cause) || err.Error() != `sandbox "x": why` {
			t.Errorf("%v: message %q / cause lost", kind, err)
		}
		for _, other := range []error{runtime.ErrNotFound, runtime.ErrInvalid, runtime.ErrConflict} {
			if other != class && errors.Is(err, other) {
				t.Errorf("%v also matches %v", kind, other)
			}
		}
	}
}
