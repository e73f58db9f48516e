package pty

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"golang.org/x/sys/unix"
)

// supported reports whether this platform runs terminal sessions.
const supported = true

var errUnsupported = errors.New("terminal sessions are not supported on this platform")

// Signals named in frames.go that not every platform has.
const (
	sigUSR1  = unix.SIGUSR1
	sigUSR2  = unix.SIGUSR2
	sigWINCH = unix.SIGWINCH
	sigCONT  = unix.SIGCONT
	sigSTOP  = unix.SIGSTOP
	sigTSTP  = unix.SIGTSTP
)

// startProcess starts spec in a new session (and so a new process group),
// on a fresh pseudo-terminal that becomes its controlling terminal, or on
// three pipes.
func startProcess(spec procSpec) (*process, error) {
	cmd := exec.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Env, cmd.Dir = spec.env, spec.dir
	if spec.tty {
		return startTTY(cmd)
	}
	return startPipes(cmd)
}

func startTTY(cmd *exec.Cmd) (*process, error) {
	master, slave, err := openPTY()
	if err != nil {
		return nil, err
	}
	defer slave.Close() // the child has its own copy once started
	if err := setWinsize(master, defaultRows, defaultCols); err != nil {
		master.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		master.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	proc.PreferAsOOMVictim(cmd.Process.Pid)
	return &process{
		cmd:     cmd,
		tty:     true,
		master:  master,
		stdin:   master,
		outputs: []procOutput{{chanStdout, master}},
		files:   []*os.File{master},
	}, nil
}

// openPTY opens a terminal pair. The master is opened non-blocking so that
// Go's poller serves it: reads and writes honour deadlines and Close
// interrupts a pending read. (Calling Fd on it would undo that.)
func openPTY() (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		unix.Close(mfd)
		return nil, nil, fmt.Errorf("get pty number: %w", err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(mfd)
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(mfd)
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(uintptr(sfd), name), nil
}

func startPipes(cmd *exec.Cmd) (*process, error) {
	var ends [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < len(ends); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeFiles(ends[:i]...)
			return nil, fmt.Errorf("create pipe: %w", err)
		}
		ends[i], ends[i+1] = r, w
	}
	inR, inW, outR, outW, errR, errW := ends[0], ends[1], ends[2], ends[3], ends[4], ends[5]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err := cmd.Start()
	closeFiles(inR, outW, errW)
	if err != nil {
		closeFiles(inW, outR, errR)
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	proc.PreferAsOOMVictim(cmd.Process.Pid)
	return &process{
		cmd:     cmd,
		stdin:   inW,
		outputs: []procOutput{{chanStdout, outR}, {chanStderr, errR}},
		files:   []*os.File{inW, outR, errR},
	}, nil
}

// control runs op on the raw descriptor of f without taking it out of
// non-blocking mode.
func control(f *os.File, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = op(int(fd)) }); err != nil {
		return err
	}
	return opErr
}

func setWinsize(f *os.File, rows, cols uint16) error {
	err := control(f, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
	if err != nil {
		return fmt.Errorf("set terminal size %dx%d: %w", cols, rows, err)
	}
	return nil
}

// resize sets the terminal size; on pipes it does nothing.
func (p *process) resize(rows, cols uint16) error {
	if !p.tty {
		return nil
	}
	return setWinsize(p.master, rows, cols)
}

// signal delivers sig the way a keyboard would: on a terminal to its
// foreground process group (the job the user is running under an
// interactive shell), otherwise to the process group of the session.
func (p *process) signal(sig syscall.Signal) error {
	pgid := p.pid()
	if p.tty {
		var fg int
		err := control(p.master, func(fd int) (err error) {
			fg, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
			return err
		})
		if err == nil && fg > 0 {
			pgid = fg
		}
	}
	if err := unix.Kill(-pgid, sig); err != nil {
		return fmt.Errorf("send %v to process group %d: %w", sig, pgid, err)
	}
	return nil
}

// kill sends SIGKILL to the process group and to every other process of
// the session (jobs an interactive shell put in groups of their own).
// Processes that started a session of their own are out of reach.
func (p *process) kill() {
	sid := p.pid()
	_ = unix.Kill(-sid, unix.SIGKILL)
	for _, pid := range sessionMembers(sid) {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

// sessionMembers lists the live processes whose session id is sid.
func sessionMembers(sid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := proc.ReadStat(pid); ok && st.Session == sid {
			pids = append(pids, pid)
		}
	}
	return pids
}
