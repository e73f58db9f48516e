//go:build linux

package isolation

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Names the execd binary is re-executed under (argv[0]) to become a
// session's init (pid 1 of its namespaces) and its in-session server.
const (
	initArg0  = "execd-isolated-init"
	serveArg0 = "execd-isolated-serve"
	specEnv   = "OPENSANDBOX_ISOLATED_SPEC"
	wsEnv     = "OPENSANDBOX_ISOLATED_WORKSPACE"
)

// Inherited descriptors of the init: the server's listening socket and the
// pipe the init reports readiness on.
const (
	fdListener = 3
	fdReady    = 4
)

// RunHelper runs the helper role named by args[0], if it is one, and
// returns its exit code with ok true; execd's main calls it first.
func RunHelper(args []string) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch filepath.Base(args[0]) {
	case initArg0:
		return runInit(), true
	case serveArg0:
		return runServe(), true
	}
	return 0, false
}

// runInit builds the session's filesystem inside the fresh namespaces,
// drops privileges, starts the in-session server and reaps every process
// of the session until the server exits.
func runInit() int {
	syscall.CloseOnExec(fdReady) // the session's server must not hold it
	ready := os.NewFile(fdReady, "ready")
	fail := func(err error) int {
		fmt.Fprintf(ready, "error: %v\n", err)
		ready.Close()
		return 1
	}
	var spec initSpec
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &spec); err != nil {
		return fail(fmt.Errorf("read session spec: %w", err))
	}
	os.Unsetenv(specEnv)
	// Until the new root is in place, other processes of the sandbox must
	// not reach this one's mount tree through /proc/<pid>/root.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if err := buildRoot(&spec); err != nil {
		return fail(err)
	}
	if err := dropPrivileges(&spec); err != nil {
		return fail(fmt.Errorf("drop privileges: %w", err))
	}
	if spec.Probe {
		fmt.Fprintln(ready, "ok")
		ready.Close()
		return 0
	}
	srv := exec.Command("/proc/self/exe")
	srv.Args = []string{serveArg0}
	srv.Env = append(append([]string(nil), spec.Env...), wsEnv+"="+spec.Workspace)
	srv.Dir = spec.Workspace
	srv.ExtraFiles = []*os.File{os.NewFile(fdListener, "listener")}
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		return fail(fmt.Errorf("start the session server: %w", err))
	}
	fmt.Fprintln(ready, "ok")
	ready.Close()
	// As pid 1 of the session, reap everything, including orphans that
	// the server's commands leave behind; end with the server.
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 1
		}
		if pid == srv.Process.Pid {
			return ws.ExitStatus()
		}
	}
}

// buildRoot assembles the session's root on spec.Root and enters it.
func buildRoot(spec *initSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := spec.Root
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mount the session root: %w", err)
	}
	dirs := append([]string(nil), systemDirs...)
	if spec.Profile == profileBalanced {
		dirs = append(dirs, balancedDirs...)
	}
	for _, d := range dirs {
		if err := mountSystem(root, d); err != nil {
			return err
		}
	}
	if err := mountTmpfs(root, "/tmp", "mode=1777"); err != nil {
		return err
	}
	if err := mountDev(root, spec); err != nil {
		return err
	}
	if err := mountProc(root); err != nil {
		return err
	}
	if err := mountWorkspace(root, spec); err != nil {
		return err
	}
	// Shallow destinations first, so that a bind inside another lands on top.
	binds := append([]bind(nil), spec.Binds...)
	sort.SliceStable(binds, func(i, j int) bool {
		return strings.Count(binds[i].Dest, "/") < strings.Count(binds[j].Dest, "/")
	})
	for _, b := range binds {
		f, err := openSource("bind source", b.Source, spec.Base, !b.RO, true)
		if err != nil {
			return err
		}
		err = bindInto(root, fdPath(f), b.Dest, b.RO)
		f.Close()
		if err != nil {
			return err
		}
	}
	if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if !spec.ShareNet {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bring up lo: %w", err)
		}
	}
	return enterRoot(root)
}

// mountSystem mounts host directory d read-only at root+d, or copies it
// when it is a symbolic link; a missing d is skipped.
func mountSystem(root, d string) error {
	fi, err := os.Lstat(d)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", d, err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(d)
		if err != nil {
			return fmt.Errorf("read link %s: %w", d, err)
		}
		if err := os.MkdirAll(filepath.Dir(root+d), 0o755); err != nil {
			return err
		}
		return os.Symlink(target, root+d)
	}
	if !fi.IsDir() {
		return nil
	}
	return bindInto(root, d, d, true)
}

// bindInto bind-mounts src (with everything mounted below it) at root+dest,
// read-only when ro; nosuid and nodev always. The copy of src is made and
// restricted detached (open_tree, mount_setattr) and then attached onto
// the mount point opened by mountPoint, so no path is looked up twice.
func bindInto(root, src, dest string, ro bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("bind source %s: %w", src, err)
	}
	target, err := mountPoint(root, dest, fi.IsDir())
	if err != nil {
		return err
	}
	defer target.Close()
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dest, err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if ro {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("restrict the mount of %s: %w", dest, err)
	}
	if err := unix.MoveMount(tree, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dest, err)
	}
	return nil
}

// mountPoint creates dest below root when it is missing (a directory, or
// an empty file when dir is false) and opens it, following no symbolic
// link on the way: a destination inside the workspace or inside another
// bind is in a directory that a session sharing it may write, and a link
// there (relative, so resolving inside the new root) would carry the
// mount elsewhere, onto the session's /etc for instance. Mounts met on the
// way are entered, as a path lookup does.
func mountPoint(root, dest string, dir bool) (*os.File, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the session root: %w", err)
	}
	parts := strings.Split(strings.Trim(dest, "/"), "/")
	for i, name := range parts {
		last := i == len(parts)-1
		switch {
		case !last || dir:
			err = unix.Mkdirat(fd, name, 0o755)
		default:
			var f int
			f, err = unix.Openat(fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(f)
			}
		}
		if err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return nil, fmt.Errorf("create mount point %s: %w", dest, err)
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("open mount point %s: %w", dest, err)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("mount point %s: %w", dest, err)
		}
		switch typ := st.Mode & unix.S_IFMT; {
		case typ == unix.S_IFLNK:
			unix.Close(fd)
			return nil, fmt.Errorf("mount point %s: %s is a symbolic link", dest, "/"+strings.Join(parts[:i+1], "/"))
		case (!last || dir) && typ != unix.S_IFDIR:
			unix.Close(fd)
			return nil, fmt.Errorf("mount point %s: %s is not a directory", dest, "/"+strings.Join(parts[:i+1], "/"))
		}
	}
	return os.NewFile(uintptr(fd), root+dest), nil
}

func touch(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func mountTmpfs(root, dest, opts string) error {
	if err := os.MkdirAll(root+dest, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", root+dest, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dest, err)
	}
	return nil
}

// mountDev gives the session a /dev of its own: the harmless character
// devices of the sandbox, a private devpts and shm.
func mountDev(root string, spec *initSpec) error {
	dev := root + "/dev"
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if _, err := os.Stat("/dev/" + name); err != nil {
			continue
		}
		if err := touch(dev + "/" + name); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+name, dev+"/"+name, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", name, err)
		}
	}
	os.Mkdir(dev+"/pts", 0o755)
	if err := unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	for link, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, dev+"/"+link); err != nil {
			return err
		}
	}
	return mountTmpfs(root, "/dev/shm", "mode=1777")
}

// mountProc mounts a proc of the session's own pid namespace, read-only:
// the session's processes are root-owned on the host in setpriv mode, and
// root may write files such as /proc/sysrq-trigger that no capability
// guards.
func mountProc(root string) error {
	p := root + "/proc"
	if err := os.MkdirAll(p, 0o555); err != nil {
		return err
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY)
	if err := unix.Mount("proc", p, "proc", flags, ""); err != nil {
		return fmt.Errorf("mount /proc for the session's pid namespace: %w", err)
	}
	return nil
}

// mountWorkspace mounts the workspace at its own path: itself (rw), itself
// read-only (ro), or an overlay whose upper layer lives in the init's
// private scratch (overlay), so that writes vanish with the session.
func mountWorkspace(root string, spec *initSpec) error {
	ws := spec.Workspace
	// The probe's workspace is inside execd's private directory, which
	// may be under /dev/shm or /run: only its mount is tried.
	f, err := openSource("workspace", ws, spec.Base, true, !spec.Probe)
	if err != nil {
		return err
	}
	defer f.Close()
	src := fdPath(f)
	switch spec.Mode {
	case modeRW:
		return bindInto(root, src, ws, false)
	case modeRO:
		return bindInto(root, src, ws, true)
	}
	if err := unix.Mount("tmpfs", spec.Scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return fmt.Errorf("mount overlay scratch: %w", err)
	}
	upper, work := spec.Scratch+"/upper", spec.Scratch+"/work"
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	// The upper layer's root takes the workspace's owner and mode, so that
	// a non-root session user may write where it could write before.
	if fi, err := os.Stat(src); err == nil {
		st := fi.Sys().(*syscall.Stat_t)
		os.Chown(upper, int(st.Uid), int(st.Gid))
		os.Chmod(upper, fi.Mode().Perm())
	}
	target, err := mountPoint(root, ws, true)
	if err != nil {
		return err
	}
	defer target.Close()
	opts := "lowerdir=" + src + ",upperdir=" + upper + ",workdir=" + work + ",userxattr"
	if err := unix.Mount("overlay", fdPath(target), "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", ws, err)
	}
	return nil
}

// openSource opens p, a workspace or bind source the session asked for, to
// mount what was opened rather than the path: the path was checked when
// the session was asked for, but whoever can write one of its directories
// (another session whose workspace holds it) may have swapped a component
// for a symbolic link since — to execd's isolation directory, where every
// session's server socket is, or to /proc. What was opened is checked
// again here (checkOpened, and its filesystem), and the mount goes through
// the descriptor (fdPath), so no later swap changes it.
func openSource(what, p, base string, writable, check bool) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	real, err := os.Readlink(fdPath(f))
	if err == nil && check {
		err = checkOpened(what, p, real, base, writable)
	}
	if err == nil && check {
		var st unix.Statfs_t
		if err = unix.Fstatfs(fd, &st); err == nil && (st.Type == unix.PROC_SUPER_MAGIC || st.Type == unix.SYSFS_MAGIC) {
			err = fmt.Errorf("%s %q is on a kernel pseudo filesystem", what, p)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// fdPath names the object f refers to: mounting from it mounts that object
// whatever its path leads to now.
func fdPath(f *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
}

// loopbackUp sets lo up in the session's own network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// enterRoot moves root over / and chroots into it, the way switch_root
// does (Docker's seccomp profile refuses pivot_root). The sandbox's own
// tree stays below, unreachable by any path: ".." from the new root leads
// back into it, and only CAP_SYS_ADMIN in the session's user namespace,
// which no session keeps, could unmount it. The bare root itself becomes
// read-only.
func enterRoot(root string) error {
	if err := os.Chdir(root); err != nil {
		return err
	}
	if err := unix.Mount(root, "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move the session root over /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot into the session root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make the session root read-only: %w", err)
	}
	return nil
}

// Capabilities the balanced profile keeps inside the session's user
// namespace (never CAP_SYS_ADMIN, which would let it remount /proc
// writable); strict keeps none.
var balancedCaps = []uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID, unix.CAP_KILL,
	unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT,
}

// dropPrivileges sets no_new_privs, shrinks the capability bounding set to
// the profile's and switches to the session's identity, on every thread.
func dropPrivileges(spec *initSpec) error {
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		return fmt.Errorf("set no_new_privs: %w", e)
	}
	keep := map[uintptr]bool{}
	if spec.Profile == profileBalanced {
		for _, c := range balancedCaps {
			keep[c] = true
		}
	}
	last := uintptr(unix.CAP_LAST_CAP)
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = uintptr(n)
		}
	}
	for c := uintptr(0); c <= last; c++ {
		if keep[c] {
			continue
		}
		if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); e != 0 {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, e)
		}
	}
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); e != 0 {
		return fmt.Errorf("clear ambient capabilities: %w", e)
	}
	if !spec.Userns {
		if err := syscall.Setgroups([]int{int(spec.GID)}); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setgid(int(spec.GID)); err != nil {
			return fmt.Errorf("setgid %d: %w", spec.GID, err)
		}
		if err := syscall.Setuid(int(spec.UID)); err != nil {
			return fmt.Errorf("setuid %d: %w", spec.UID, err)
		}
	}
	// What is left of the permitted, effective and inheritable sets is
	// cut to the kept capabilities too.
	var mask [2]uint32
	for c := range keep {
		mask[c/32] |= 1 << (c % 32)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: mask[0], Permitted: mask[0], Inheritable: 0},
		{Effective: mask[1], Permitted: mask[1], Inheritable: 0},
	}
	if !spec.Userns && spec.UID != 0 {
		data = [2]unix.CapUserData{} // setuid to non-root already cleared them
	}
	_, _, e := syscall.AllThreadsSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	if e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	// A change of credentials clears the parent-death signal execd set.
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); e != 0 {
		return fmt.Errorf("set the parent-death signal: %w", e)
	}
	return nil
}
