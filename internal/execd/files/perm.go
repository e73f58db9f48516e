package files

import (
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"sort"
	"strconv"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// permBits are the mode bits FileInfo.Mode reports and Permission sets.
const permBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// specialBits maps the wire's setuid/setgid/sticky digits to fs.FileMode.
var specialBits = []struct {
	wire uint32
	mode fs.FileMode
}{
	{0o4000, fs.ModeSetuid},
	{0o2000, fs.ModeSetgid},
	{0o1000, fs.ModeSticky},
}

// modeToWire writes the permission bits of m as octal digits read as a
// decimal number: 0o4755 becomes 4755.
func modeToWire(m fs.FileMode) int {
	bits := uint32(m.Perm())
	for _, b := range specialBits {
		if m&b.mode != 0 {
			bits |= b.wire
		}
	}
	v, _ := strconv.Atoi(strconv.FormatUint(uint64(bits), 8))
	return v
}

// modeFromWire parses the octal-digits-as-decimal form: 755 is 0o755. At
// most four digits, each 0-7; the fourth is setuid/setgid/sticky.
func modeFromWire(v int) (fs.FileMode, error) {
	if v < 0 || v > 7777 {
		return 0, fmt.Errorf("mode %d: want 1 to 4 octal digits (0-7777)", v)
	}
	bits, err := strconv.ParseUint(strconv.Itoa(v), 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %d: every digit must be 0-7", v)
	}
	m := fs.FileMode(bits & 0o777)
	for _, b := range specialBits {
		if uint32(bits)&b.wire != 0 {
			m |= b.mode
		}
	}
	return m, nil
}

// permSpec is a validated Permission: what to change on a path.
type permSpec struct {
	mode     fs.FileMode
	setMode  bool
	uid, gid int // -1 leaves it unchanged
}

// permSpec validates p. A zero mode leaves the mode unchanged. Errors are
// 400s with the given code whose message starts with what.
func (n *names) permSpec(p sandbox.Permission, code, what string) (permSpec, error) {
	ps := permSpec{uid: -1, gid: -1}
	if p.Mode != 0 {
		m, err := modeFromWire(p.Mode)
		if err != nil {
			return ps, apierror.BadRequest(code, "%s: %v", what, err)
		}
		ps.mode, ps.setMode = m, true
	}
	if p.Owner != "" {
		id, err := n.uid(p.Owner)
		if err != nil {
			return ps, apierror.BadRequest(code, "%s: owner %q: %v", what, p.Owner, err)
		}
		ps.uid = id
	}
	if p.Group != "" {
		id, err := n.gid(p.Group)
		if err != nil {
			return ps, apierror.BadRequest(code, "%s: group %q: %v", what, p.Group, err)
		}
		ps.gid = id
	}
	return ps, nil
}

// apply changes owner and group first, then the mode: on Linux chown
// clears setuid/setgid, so the mode must come last. Symlinks are followed.
func (ps permSpec) apply(path string) error {
	if ps.uid >= 0 || ps.gid >= 0 {
		if err := os.Chown(path, ps.uid, ps.gid); err != nil {
			return err
		}
	}
	if ps.setMode {
		if err := os.Chmod(path, ps.mode); err != nil {
			return err
		}
	}
	return nil
}

// Chmod serves POST /files/permissions: a JSON map of path to Permission.
// Every entry is validated, and every path must exist, before any change;
// a zero or absent mode leaves the mode as it is.
func (h *Handler) Chmod(w http.ResponseWriter, r *http.Request) {
	if err := h.chmod(w, r); err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) chmod(w http.ResponseWriter, r *http.Request) error {
	jobs, err := h.decodePermJobs(w, r, "permission for %q")
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if _, err := os.Stat(j.abs); err != nil {
			return fsError(err, "stat", j.abs)
		}
	}
	for _, j := range jobs {
		if err := j.ps.apply(j.abs); err != nil {
			return fsError(err, "change permissions of", j.abs)
		}
	}
	return nil
}

// permJob is one validated entry of a path -> Permission request.
type permJob struct {
	abs string
	ps  permSpec
}

// decodePermJobs reads a JSON map of path to Permission and validates
// every entry (path and permission) before the caller changes anything.
// what names an entry in error messages, with %q for its path.
func (h *Handler) decodePermJobs(w http.ResponseWriter, r *http.Request, what string) ([]permJob, error) {
	var req map[string]sandbox.Permission
	if err := apierror.DecodeJSON(w, r, h.maxJSON, &req); err != nil {
		return nil, err
	}
	n := newNames()
	jobs := make([]permJob, 0, len(req))
	for _, p := range sortedKeys(req) {
		abs, err := h.resolve(p)
		if err != nil {
			return nil, err
		}
		ps, err := n.permSpec(req[p], apierror.CodeInvalidRequestBody, fmt.Sprintf(what, p))
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, permJob{abs, ps})
	}
	return jobs, nil
}

// sortedKeys returns the keys of m in lexical order, so that multi-path
// requests act and fail deterministically.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
