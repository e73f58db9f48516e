package osbcli

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// spinnerDelay is how long a wait lasts before the spinner shows: quick
// operations print nothing.
const spinnerDelay = 300 * time.Millisecond

// spinner animates a message on a terminal while something slow runs.
// Stop clears the line and waits for the animation goroutine to end, so
// nothing is written after it returns.
type spinner struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startSpinner shows msg on w after spinnerDelay; when enabled is false
// (stderr is not a terminal) it does nothing.
func startSpinner(w io.Writer, enabled bool, msg string) *spinner {
	s := &spinner{stop: make(chan struct{}), done: make(chan struct{})}
	if !enabled {
		close(s.done)
		return s
	}
	go s.loop(w, msg)
	return s
}

func (s *spinner) loop(w io.Writer, msg string) {
	defer close(s.done)
	delay := time.NewTimer(spinnerDelay)
	defer delay.Stop()
	select {
	case <-s.stop:
		return
	case <-delay.C:
	}
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for i := 0; ; i++ {
		fmt.Fprintf(w, "\r%s %s (%ds)", frames[i%len(frames)], msg, int(time.Since(start).Seconds()))
		select {
		case <-s.stop:
			fmt.Fprint(w, "\r\x1b[K")
			return
		case <-tick.C:
		}
	}
}

// Stop ends the animation and clears its line; safe to call twice.
func (s *spinner) Stop() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// spin starts a spinner on the app's stderr when it is a terminal.
func (a *app) spin(msg string) *spinner {
	return startSpinner(a.io.err, a.stderrIsTerminal(), msg)
}
