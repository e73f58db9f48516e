package kubeerr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestClass(t *testing.T) {
	gr := schema.GroupResource{Group: "sandbox.opensandbox.io", Resource: "pools"}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"nil", nil, nil},
		{"not found", apierrors.NewNotFound(gr, "p"), runtime.ErrNotFound},
		{"exists", apierrors.NewAlreadyExists(gr, "p"), runtime.ErrConflict},
		{"conflict", apierrors.NewConflict(gr, "p", errors.New("rv")), runtime.ErrConflict},
		{"invalid", apierrors.NewBadRequest("bad"), runtime.ErrInvalid},
		{"unavailable", apierrors.NewServiceUnavailable("down"), runtime.ErrUnavailable},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), runtime.ErrUnavailable},
		{"network", fmt.Errorf("get: %w", &net.OpError{Op: "dial", Err: errors.New("refused")}), runtime.ErrUnavailable},
		{"forbidden", apierrors.NewForbidden(gr, "p", errors.New("rbac")), nil},
		{"already classified", fmt.Errorf("x: %w", runtime.ErrConflict), nil},
		{"caller's context", context.Canceled, nil},
	} {
		if got := Class(tc.err); got != tc.want {
			t.Errorf("%s: Class = %v, want %v", tc.name, got, tc.want)
		}
	}
}
