package grammar

import (
	"fmt"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// invalidError is a grammar violation: its message is only the problem
// (front ends show it to callers as it is), and it matches
// runtime.ErrInvalid so drivers and services classify it.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }

// Is makes errors.Is(err, runtime.ErrInvalid) hold.
func (e *invalidError) Is(target error) bool { return target == runtime.ErrInvalid }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}
