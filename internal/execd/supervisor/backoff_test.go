package supervisor

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	b := newServerBackoff()
	steps := []struct {
		uptime, want time.Duration
	}{
		{0, 100 * ms},
		{ms, 200 * ms},
		{ms, 400 * ms},
		{ms, 800 * ms},
		{ms, 1600 * ms},
		{ms, 3200 * ms},
		{ms, 5 * time.Second},
		{ms, 5 * time.Second},
		{9 * time.Second, 5 * time.Second},
		{10 * time.Second, 100 * ms}, // stayed up long enough: start over
		{ms, 200 * ms},
	}
	for i, s := range steps {
		if got := b.delay(s.uptime); got != s.want {
			t.Fatalf("step %d: delay(%v) = %v; want %v", i, s.uptime, got, s.want)
		}
	}
}
