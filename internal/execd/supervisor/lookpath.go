package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// defaultPath is searched when the entrypoint's environment has no PATH, as a
// shell or container runtime would.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// lookPath resolves the entrypoint's argv[0] the way execvp does, but in the
// PATH of env rather than execd's own, and with relative entries taken
// relative to dir (the entrypoint's working directory). A name containing a
// slash is returned unchanged: execve reports what is wrong with it.
//
// The error wraps fs.ErrNotExist when nothing was found and fs.ErrPermission
// when only non-executable candidates were.
func lookPath(file string, env []string, dir string) (string, error) {
	if file == "" {
		return "", fmt.Errorf("empty program name: %w", fs.ErrNotExist)
	}
	if strings.Contains(file, "/") {
		return file, nil
	}
	path, ok := lookupVar(env, "PATH")
	if !ok {
		path = defaultPath
	}
	denied := false
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		candidate := d + "/" + file
		onDisk := candidate
		if !filepath.IsAbs(onDisk) && dir != "" {
			onDisk = filepath.Join(dir, onDisk)
		}
		fi, err := os.Stat(onDisk)
		switch {
		case errors.Is(err, fs.ErrPermission):
			denied = true
		case err != nil:
			// Missing, or a PATH entry that is not a directory: keep looking.
		case fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0:
			return candidate, nil
		default:
			denied = true
		}
	}
	if denied {
		return "", fmt.Errorf("%q is in PATH %q but not executable: %w", file, path, fs.ErrPermission)
	}
	return "", fmt.Errorf("%q not found in PATH %q: %w", file, path, fs.ErrNotExist)
}

// startFailureCode is the exit code for an entrypoint that could not be
// started because of err: 127 when it does not exist, 126 otherwise.
func startFailureCode(err error) int {
	if errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitNotExecutable
}
