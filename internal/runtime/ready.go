package runtime

import "context"

// Pinger is implemented by runtimes that can tell cheaply whether their
// engine answers; the server's readiness route asks it.
type Pinger interface {
	// Ping returns nil when the engine answers, and an error wrapping
	// ErrUnavailable when it cannot be reached or is not serving.
	Ping(ctx context.Context) error
}
