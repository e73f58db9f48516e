package pty

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// exitDrain bounds how long output is still read after the process exits.
// Normally every stream ends at once (the last writer is gone); children
// left running in the background may hold a stream open, and they are cut
// off after this much time.
const exitDrain = 200 * time.Millisecond

// Initial terminal size, until the client sends a resize.
const (
	defaultRows = 24
	defaultCols = 80
)

// procSpec describes the process of a session.
type procSpec struct {
	argv []string
	env  []string
	dir  string
	tty  bool
}

// procOutput is a stream the process writes to and the channel byte its
// output is sent under.
type procOutput struct {
	ch byte
	f  *os.File
}

// process is a started session process and the parent's ends of its stdio.
type process struct {
	cmd     *exec.Cmd
	tty     bool
	master  *os.File // terminal master; nil on pipes
	stdin   *os.File // the master, or the write end of the stdin pipe
	outputs []procOutput
	files   []*os.File // every parent end, closed after exit
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// writeStdin writes b to the process within timeout.
func (p *process) writeStdin(b []byte, timeout time.Duration) error {
	if err := p.stdin.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("write stdin: %w", err)
	}
	if _, err := p.stdin.Write(b); err != nil {
		return fmt.Errorf("write stdin: %w", err)
	}
	return nil
}

// drain sets the exitDrain deadline on every output stream.
func (p *process) drain() {
	deadline := time.Now().Add(exitDrain)
	for _, o := range p.outputs {
		o.f.SetReadDeadline(deadline)
	}
}

// close releases the parent's ends of the process stdio.
func (p *process) close() {
	closeFiles(p.files...)
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
