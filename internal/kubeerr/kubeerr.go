// Package kubeerr maps errors of the Kubernetes API onto the runtime's
// error classes, for every package that talks to the API on the server's
// behalf (the kubernetes driver, its store, its pools).
package kubeerr

import (
	"context"
	"errors"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Class is the runtime error class of an API error, or nil when none fits
// (an internal failure), when err already carries a class, or when it is
// the caller's context ending.
func Class(err error) error {
	var netErr net.Error
	switch {
	case err == nil:
		return nil
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
