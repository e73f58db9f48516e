package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// classOf maps an API error onto a runtime error class, or nil when none
// fits (an internal failure).
func classOf(err error) error {
	var netErr net.Error
	switch {
	case errors.Is(err, runtime.ErrNotFound), errors.Is(err, runtime.ErrInvalid),
		errors.Is(err, runtime.ErrConflict), errors.Is(err, runtime.ErrNotSupported),
		errors.Is(err, runtime.ErrUnavailable):
		return nil // already classified
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil
	case apierrors.IsNotFound(err), apierrors.IsGone(err):
		return runtime.ErrNotFound
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return runtime.ErrConflict
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		return runtime.ErrInvalid
	case apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err):
		return runtime.ErrNotSupported
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return runtime.ErrUnavailable
	case errors.As(err, &netErr):
		return runtime.ErrUnavailable
	}
	return nil
}

// apiErr wraps an API error with context and its class.
func apiErr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	if class := classOf(err); class != nil {
		return fmt.Errorf("%s: %w", msg, runtime.Classify(class, err))
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// classErr is an error of class with context.
func classErr(class error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), class)
}

// preconditionUID deletes only the object with that UID.
func preconditionUID(uid types.UID) client.DeleteOption {
	return client.Preconditions{UID: &uid}
}
