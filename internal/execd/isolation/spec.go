package isolation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// initSpec is everything the session's init needs to build the session; it
// travels to the init as JSON in an environment variable.
type initSpec struct {
	ID        string   `json:"id"`
	Profile   string   `json:"profile"`
	Base      string   `json:"base"`    // execd's private isolation directory, never mounted into a session
	Root      string   `json:"root"`    // empty directory the new root is built on
	Scratch   string   `json:"scratch"` // empty directory for the overlay's upper layer
	Workspace string   `json:"workspace"`
	Mode      string   `json:"mode"`
	Binds     []bind   `json:"binds,omitempty"`
	ShareNet  bool     `json:"share_net"`
	Userns    bool     `json:"userns"` // uid_mode userns: identity is a mapping, not setuid
	UID       uint32   `json:"uid"`
	GID       uint32   `json:"gid"`
	Hostname  string   `json:"hostname"`
	Env       []string `json:"env"`
	// Probe makes the init stop after the namespaces and mounts are set
	// up, reporting success, instead of serving.
	Probe bool `json:"probe,omitempty"`
}

type bind struct {
	Source string `json:"source"`
	Dest   string `json:"dest"`
	RO     bool   `json:"ro"`
}

// systemDirs are mounted read-only into every session (those that exist;
// symbolic links such as /bin -> usr/bin on merged-/usr systems are copied
// as links). balancedDirs are added by the balanced profile: where images
// install language runtimes and tools.
var (
	systemDirs   = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}
	balancedDirs = []string{"/opt", "/srv", "/var/lib", "/var/cache"}
)

// reservedDests are paths a bind or workspace may not cover: the session's
// own /proc, /dev and /tmp and the root itself.
var reservedDests = []string{"/proc", "/dev"}

// reservedSources may not be mounted into a session from the sandbox:
// its kernel interfaces and execd's isolation state (the proc anchor would
// show the sandbox's processes).
var reservedSources = []string{"/proc", "/dev", "/sys", "/run/opensandbox"}

// cleanAbs returns p cleaned when it is absolute and not "/", else an error
// naming what.
func cleanAbs(what, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s must not be empty", what)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%s %q contains a NUL byte", what, p)
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s %q must be an absolute path", what, p)
	}
	c := filepath.Clean(p)
	if c == "/" {
		return "", fmt.Errorf("%s must not be the root directory", what)
	}
	for _, r := range reservedDests {
		if c == r || strings.HasPrefix(c, r+"/") {
			return "", fmt.Errorf("%s %q is inside %s, which the session gets on its own", what, p, r)
		}
	}
	return c, nil
}

// checkSource checks the directory or file a session would mount, after
// resolving symbolic links (the mount follows them): not a kernel
// interface, not execd's private isolation directory base, not on a proc
// or sysfs filesystem wherever that is mounted.
func checkSource(what, p, base string) error {
	real := resolveExisting(p)
	for _, r := range reservedSources {
		if within(real, r) {
			return fmt.Errorf("%s %q is inside %s, which a session may not mount", what, p, r)
		}
	}
	if within(real, base) || within(base, real) {
		return fmt.Errorf("%s %q overlaps execd's private isolation directory", what, p)
	}
	existing := real
	for {
		if _, err := os.Stat(existing); err == nil || existing == "/" {
			break
		}
		existing = filepath.Dir(existing)
	}
	if pseudoFS(existing) {
		return fmt.Errorf("%s %q is on a kernel pseudo filesystem", what, p)
	}
	return nil
}

// checkOpened checks real, the path the kernel gives for the directory or
// file the session's init opened to mount as p, with the rules of
// checkSource and, when writable, of checkPrivate. real has no symbolic
// link left to resolve: it is what will be mounted.
func checkOpened(what, p, real, base string, writable bool) error {
	for _, r := range reservedSources {
		if within(real, r) {
			return fmt.Errorf("%s %q is %s, inside %s, which a session may not mount", what, p, real, r)
		}
	}
	if within(real, base) || within(base, real) {
		return fmt.Errorf("%s %q is %s, which overlaps execd's private isolation directory", what, p, real)
	}
	if writable {
		for _, d := range append(append([]string(nil), systemDirs...), balancedDirs...) {
			if within(real, d) {
				return fmt.Errorf("%s %q is %s, inside %s, which every session sees read-only", what, p, real, d)
			}
		}
	}
	return nil
}

// checkPrivate refuses a writable path (a workspace, an extra_writable or a
// writable bind) inside the system directories, which every session sees
// read-only: other sessions would see what this one writes there.
func checkPrivate(what, p string) error {
	real := resolveExisting(p)
	for _, d := range append(append([]string(nil), systemDirs...), balancedDirs...) {
		if within(real, d) {
			return fmt.Errorf("%s %q is inside %s, which every session sees read-only: what this session writes there would be visible to the others", what, p, d)
		}
	}
	return nil
}

// resolveExisting resolves the symbolic links of the longest existing
// prefix of the absolute path p (the rest does not exist yet).
func resolveExisting(p string) string {
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if dir == "/" {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
