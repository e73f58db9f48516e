package lifecycle

import (
	"testing"
	"time"
)

func TestExpiryDue(t *testing.T) {
	x := newExpiry()
	now := time.Now()
	x.set("a", now.Add(-time.Second))
	x.set("b", now.Add(time.Minute))
	x.set("c", now)
	x.setIfAbsent("b", now.Add(-time.Hour)) // ignored: b has a deadline
	x.set("d", now.Add(time.Second))
	x.cancel("d")
	ids, next := x.due(now)
	if len(ids) != 2 || !next.Equal(now.Add(time.Minute)) {
		t.Errorf("due(now) = %v, next %v; want [a c] and now+1m", ids, next)
	}
	if ids, next := x.due(now); len(ids) != 0 || next.IsZero() {
		t.Errorf("second due(now) = %v, %v; want nothing due and b pending", ids, next)
	}
}
