package docker

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// classOf maps an engine error onto a runtime error class, or nil when
// none fits (an internal engine failure).
func classOf(err error) error {
	switch {
	case errors.Is(err, runtime.ErrNotFound), errors.Is(err, runtime.ErrInvalid),
		errors.Is(err, runtime.ErrConflict), errors.Is(err, runtime.ErrNotSupported),
		errors.Is(err, runtime.ErrUnavailable):
		return nil // already classified
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil
	case client.IsErrConnectionFailed(err), cerrdefs.IsUnavailable(err):
		return runtime.ErrUnavailable
	case cerrdefs.IsNotFound(err):
		return runtime.ErrNotFound
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		return runtime.ErrConflict
	case cerrdefs.IsInvalidArgument(err):
		return runtime.ErrInvalid
	case cerrdefs.IsNotImplemented(err):
		return runtime.ErrNotSupported
	}
	return nil
}

// engineErr wraps an engine error with context and its class.
func engineErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	if class := classOf(err); class != nil {
		return fmt.Errorf("%s: %w", msg, runtime.Classify(class, err))
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// classErr wraps err (any error) as the given class with context.
func classErr(class, err error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), runtime.Classify(class, err))
}
