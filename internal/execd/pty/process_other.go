//go:build !linux

package pty

import (
	"errors"
	"syscall"
)

// supported reports whether this platform runs terminal sessions; Create
// answers 501 NOT_SUPPORTED where it does not.
const supported = false

var errUnsupported = errors.New("terminal sessions are supported on Linux only")

// Signals without a portable definition; zero means unknown.
const (
	sigUSR1, sigUSR2, sigWINCH, sigCONT, sigSTOP, sigTSTP syscall.Signal = 0, 0, 0, 0, 0, 0
)

func startProcess(procSpec) (*process, error)      { return nil, errUnsupported }
func (p *process) resize(rows, cols uint16) error  { return errUnsupported }
func (p *process) signal(sig syscall.Signal) error { return errUnsupported }
func (p *process) kill()                           {}
