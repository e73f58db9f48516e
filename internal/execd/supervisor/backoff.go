package supervisor

import "time"

// Server restart policy: the first restart waits restartInitial, each further
// one twice as long up to restartMax; a server that stayed up for restartReset
// starts again from restartInitial.
const (
	restartInitial = 100 * time.Millisecond
	restartMax     = 5 * time.Second
	restartReset   = 10 * time.Second
)

// backoff computes restart delays. The zero value is not usable; see
// newServerBackoff.
type backoff struct {
	initial, max, resetAfter time.Duration
	next                     time.Duration
}

func newServerBackoff() backoff {
	return backoff{initial: restartInitial, max: restartMax, resetAfter: restartReset}
}

// delay returns how long to wait before restarting a process that ran for
// uptime before it exited, and advances the backoff.
func (b *backoff) delay(uptime time.Duration) time.Duration {
	if b.next == 0 || uptime >= b.resetAfter {
		b.next = b.initial
	}
	d := b.next
	b.next = min(2*b.next, b.max)
	return d
}
