//go:build linux

package isolation

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// start runs the init of a session described by spec with the listening
// socket ln (nil for a probe) and returns once the session is set up, or
// with the reason it could not be.
func (m *Manager) start(ctx context.Context, spec initSpec, ln *os.File) (*exec.Cmd, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("ready pipe: %w", err)
	}
	defer readyR.Close()
	if ln == nil {
		if ln, err = os.Open(os.DevNull); err != nil {
			readyW.Close()
			return nil, err
		}
		defer ln.Close()
	}
	cmd := exec.Command(m.opts.Exe)
	cmd.Args = []string{initArg0}
	cmd.Env = []string{specEnv + "=" + string(js)}
	cmd.ExtraFiles = []*os.File{ln, readyW}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = sysProcAttr(spec)
	err = cmd.Start()
	readyW.Close()
	if err != nil {
		return nil, fmt.Errorf("create the session's namespaces: %w", err)
	}
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(readyR).ReadString('\n')
		got <- answer{strings.TrimSpace(line), err}
	}()
	timer := time.NewTimer(m.opts.ReadyTimeout)
	defer timer.Stop()
	var (
		a        answer
		received bool
		failure  error
	)
	select {
	case a = <-got:
		received = true
	case <-timer.C:
		failure = fmt.Errorf("session setup took longer than %v", m.opts.ReadyTimeout)
	case <-ctx.Done():
		failure = ctx.Err()
	}
	if received && a.line == "ok" {
		return cmd, nil
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !received {
		readyR.Close() // unblocks the reader, which the answer never reached
		<-got
		return nil, failure
	}
	if msg, ok := strings.CutPrefix(a.line, "error: "); ok {
		return nil, errors.New(msg)
	}
	return nil, fmt.Errorf("session init exited during setup (%v)", cmd.ProcessState)
}

// sysProcAttr gives the init fresh namespaces. In setpriv mode the user
// namespace maps every id to itself, so that the session's uid and gid
// are the real ones and files keep their owners; in userns mode only the
// session's uid and gid exist, mapped to execd's.
func sysProcAttr(spec initSpec) *syscall.SysProcAttr {
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if !spec.ShareNet {
		flags |= unix.CLONE_NEWNET
	}
	// Pdeathsig: a session must not outlive the execd that owns it (a
	// restarted execd would not know it). The server locks no OS thread,
	// so the forking thread lives as long as the process.
	a := &syscall.SysProcAttr{Cloneflags: flags, Setsid: true, Pdeathsig: syscall.SIGKILL}
	if spec.Userns {
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: int(spec.UID), HostID: os.Geteuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: int(spec.GID), HostID: os.Getegid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
		// The init is not root in its namespace, so execve would drop
		// the capabilities its setup needs; ambient ones survive it.
		a.AmbientCaps = setupCaps
	} else {
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		a.GidMappingsEnableSetgroups = true
	}
	return a
}

// setupCaps are what the init needs to build the session.
var setupCaps = []uintptr{
	unix.CAP_SYS_ADMIN, unix.CAP_SYS_CHROOT, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP,
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID, unix.CAP_KILL,
	unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_NET_BIND_SERVICE,
}

// probe finds out whether sessions can be built here by building one of
// each uid mode around an empty workspace.
func (m *Manager) probe() sandbox.IsolatedCapabilities {
	caps := sandbox.IsolatedCapabilities{Isolator: "linux-namespaces", Version: kernelRelease()}
	base, err := m.scratch()
	if err != nil {
		caps.Message = err.Error()
		return caps
	}
	try := func(userns bool) error {
		dir, err := os.MkdirTemp(base, "probe-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		spec := initSpec{
			ID: "probe", Profile: profileStrict, Mode: modeOverlay, Probe: true, Userns: userns,
			Root: filepath.Join(dir, "root"), Scratch: filepath.Join(dir, "scratch"), Workspace: filepath.Join(dir, "ws"),
			UID: uint32(os.Geteuid()), GID: uint32(os.Getegid()), Hostname: "isolated-probe",
		}
		for _, d := range []string{spec.Root, spec.Scratch, spec.Workspace} {
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.ReadyTimeout)
		defer cancel()
		cmd, err := m.start(ctx, spec, nil)
		if err != nil {
			return err
		}
		return cmd.Wait()
	}
	var msgs []string
	if os.Geteuid() == 0 {
		if err := try(false); err != nil {
			msgs = append(msgs, "setpriv: "+err.Error())
		} else {
			caps.SetprivAvailable = true
		}
	} else {
		msgs = append(msgs, "setpriv: execd is not root")
	}
	if err := try(true); err != nil {
		msgs = append(msgs, "userns: "+err.Error())
	} else {
		caps.UsernsAvailable = true
	}
	caps.Available = caps.SetprivAvailable || caps.UsernsAvailable
	if !caps.Available {
		caps.Message = strings.Join(msgs, "; ") + hint()
	} else if len(msgs) > 0 {
		caps.Message = strings.Join(msgs, "; ")
	}
	m.log.Info("isolated execution probed", "available", caps.Available, "setpriv", caps.SetprivAvailable, "userns", caps.UsernsAvailable, "message", caps.Message)
	return caps
}

// hint says what usually fixes an unavailable isolator in a sandbox.
func hint() string {
	return " (inside a Docker sandbox this needs a sandbox created with isolated execution enabled; see docs/isolation.md)"
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return "linux " + unix.ByteSliceToString(u.Release[:])
}

// pseudoFS reports whether p is on proc or sysfs.
func pseudoFS(p string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return true // refuse what cannot be checked
	}
	return st.Type == unix.PROC_SUPER_MAGIC || st.Type == unix.SYSFS_MAGIC
}

// mkdirChecked creates the directory real, a path whose symbolic links were
// resolved when it was checked, and its missing parents, like os.MkdirAll
// but one component at a time through descriptors and following no link:
// a component swapped for a link since (by whoever can write its parent,
// such as a session sharing it) stops it, so that execd, as root, never
// creates a directory where such a link points.
func mkdirChecked(real string) error {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	walked := ""
	for _, name := range strings.Split(strings.Trim(real, "/"), "/") {
		walked += "/" + name
		if err := unix.Mkdirat(fd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return fmt.Errorf("create %s: %w", walked, err)
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("open %s: %w", walked, err)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			unix.Close(fd)
			return fmt.Errorf("%s is a symbolic link now", walked)
		default:
			unix.Close(fd)
			return fmt.Errorf("%s is not a directory", walked)
		}
	}
	return unix.Close(fd)
}
