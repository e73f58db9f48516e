package proc

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// Identity is the user a process runs as and the environment that goes
// with it (HOME, USER, LOGNAME) when the user is known.
type Identity struct {
	Credential *syscall.Credential
	Env        map[string]string
}

// ErrGIDWithoutUID is returned when a gid is requested without a uid.
var ErrGIDWithoutUID = errors.New("gid requires uid")

// LookupIdentity resolves the credential for uid and gid. A nil uid means
// "run as execd's own user" and returns a zero Identity. When gid is nil the
// user's primary group (from the passwd database) is used, else gid = uid.
// Supplementary groups are those of the user when it is known.
func LookupIdentity(uid, gid *uint32) (Identity, error) {
	if uid == nil {
		if gid != nil {
			return Identity{}, ErrGIDWithoutUID
		}
		return Identity{}, nil
	}
	cred := &syscall.Credential{Uid: *uid, Gid: *uid}
	env := map[string]string{}
	u, err := user.LookupId(strconv.FormatUint(uint64(*uid), 10))
	if err == nil {
		if g, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
			cred.Gid = uint32(g)
		}
		if ids, err := u.GroupIds(); err == nil {
			for _, s := range ids {
				if g, err := strconv.ParseUint(s, 10, 32); err == nil {
					cred.Groups = append(cred.Groups, uint32(g))
				}
			}
		}
		env["HOME"] = u.HomeDir
		env["USER"] = u.Username
		env["LOGNAME"] = u.Username
	}
	if gid != nil {
		cred.Gid = *gid
		cred.Groups = nil
	}
	if os.Geteuid() != 0 {
		if cred.Uid != uint32(os.Geteuid()) {
			return Identity{}, fmt.Errorf("running as uid %d requires execd to run as root", cred.Uid)
		}
		// Only root may call setgroups; keep the current groups.
		cred.NoSetGroups = true
	}
	return Identity{Credential: cred, Env: env}, nil
}
