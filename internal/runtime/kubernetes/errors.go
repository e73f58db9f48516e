package kubernetes

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubeerr"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// classOf maps an API error onto a runtime error class, or nil when none
// fits (an internal failure).
func classOf(err error) error { return kubeerr.Class(err) }

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
