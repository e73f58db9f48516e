package files

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// copyMove moves src (described by fi) to dst across filesystems: it copies
// into a temporary name beside dst, renames that into place and only then
// removes src. A failed copy leaves neither the temporary nor a partial dst.
func copyMove(src, dst string, fi fs.FileInfo) error {
	dir := filepath.Dir(dst)
	if fi.IsDir() {
		if _, err := os.Lstat(dst); err == nil {
			return fmt.Errorf("copy directory across filesystems: %w", fs.ErrExist)
		}
		tmp, err := os.MkdirTemp(dir, ".osb-move-*")
		if err != nil {
			return err
		}
		if err := copyTree(src, tmp, fi); err != nil {
			os.RemoveAll(tmp)
			return err
		}
		if err := os.Rename(tmp, dst); err != nil {
			os.RemoveAll(tmp)
			return err
		}
		return os.RemoveAll(src)
	}
	tmp := tempName(dir, ".osb-move-")
	if err := copyEntry(src, tmp, fi); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Remove(src)
}

// copyTree copies the children of directory src into the existing
// directory dst, then gives dst the mode, owner and times of src.
func copyTree(src, dst string, fi fs.FileInfo) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		cfi, err := e.Info()
		if err != nil {
			return err
		}
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if cfi.IsDir() {
			if err := os.Mkdir(d, 0o700); err != nil {
				return err
			}
			err = copyTree(s, d, cfi)
		} else {
			err = copyEntry(s, d, cfi)
		}
		if err != nil {
			return err
		}
	}
	return preserve(dst, fi)
}

// copyEntry copies a regular file or a symlink src to the new path dst.
func copyEntry(src, dst string, fi fs.FileInfo) error {
	switch {
	case fi.Mode().IsRegular():
		return copyFile(src, dst, fi)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
		return preserveOwner(dst, fi, os.Lchown)
	default:
		return apierror.BadRequest(apierror.CodeInvalidFile,
			"cannot copy %q across filesystems: not a regular file, directory or symlink", src)
	}
}

func copyFile(src, dst string, fi fs.FileInfo) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return preserve(dst, fi)
}

// preserve gives path the owner, mode and modification time of fi.
func preserve(path string, fi fs.FileInfo) error {
	if err := preserveOwner(path, fi, os.Chown); err != nil {
		return err
	}
	if err := os.Chmod(path, fi.Mode()&permBits); err != nil {
		return err
	}
	return os.Chtimes(path, fi.ModTime(), fi.ModTime())
}

// preserveOwner copies the owner and group of fi to path. An unprivileged
// daemon cannot give files away, so EPERM leaves the new file ours.
func preserveOwner(path string, fi fs.FileInfo, chown func(string, int, int) error) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	err := chown(path, int(st.Uid), int(st.Gid))
	if err != nil && errors.Is(err, fs.ErrPermission) {
		return nil
	}
	return err
}

// tempName returns an unused-looking name in dir for a temporary entry.
func tempName(dir, prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return filepath.Join(dir, prefix+hex.EncodeToString(b[:]))
}
