//go:build !linux

package supervisor

import (
	"context"
	"errors"
)

// Run is only implemented on Linux, where execd runs.
func (s *Supervisor) Run(ctx context.Context) (exitCode int, err error) {
	return exitSupervisorFailure, errors.New("supervisor: only supported on Linux")
}
