package supervisor

import "time"

// alarm is a one-shot timer whose channel is nil while it is not armed, so it
// can sit in a select unconditionally. It is used by one goroutine only.
type alarm struct{ t *time.Timer }

// set arms the alarm to fire after d, replacing any earlier setting.
func (a *alarm) set(d time.Duration) {
	a.stop()
	a.t = time.NewTimer(d)
}

// stop disarms the alarm.
func (a *alarm) stop() {
	if a.t != nil {
		a.t.Stop()
		a.t = nil
	}
}

// fired disarms the alarm after its channel delivered.
func (a *alarm) fired() { a.t = nil }

func (a *alarm) armed() bool { return a.t != nil }

// C is the channel to wait on; nil (never ready) when not armed.
func (a *alarm) C() <-chan time.Time {
	if a.t == nil {
		return nil
	}
	return a.t.C
}
