package files

import (
	"errors"
	"os/user"
	"strconv"
)

// names resolves user and group ids to names and back, caching each answer
// for the life of one request: without cgo every os/user lookup re-reads
// /etc/passwd or /etc/group, which a listing of many files must not repeat.
// A names is not safe for concurrent use.
type names struct {
	users, groups    map[uint32]string
	uids, gids       map[string]int
	uidErrs, gidErrs map[string]error
}

func newNames() *names {
	return &names{
		users:   map[uint32]string{},
		groups:  map[uint32]string{},
		uids:    map[string]int{},
		gids:    map[string]int{},
		uidErrs: map[string]error{},
		gidErrs: map[string]error{},
	}
}

// userName returns the name of uid, or the uid in decimal if it has none.
func (n *names) userName(uid uint32) string {
	if s, ok := n.users[uid]; ok {
		return s
	}
	id := strconv.FormatUint(uint64(uid), 10)
	s := id
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		s = u.Username
	}
	n.users[uid] = s
	return s
}

// groupName returns the name of gid, or the gid in decimal if it has none.
func (n *names) groupName(gid uint32) string {
	if s, ok := n.groups[gid]; ok {
		return s
	}
	id := strconv.FormatUint(uint64(gid), 10)
	s := id
	if g, err := user.LookupGroupId(id); err == nil && g.Name != "" {
		s = g.Name
	}
	n.groups[gid] = s
	return s
}

// errUnknownUser and errUnknownGroup report an owner or group that is
// neither a known name nor a numeric id.
var (
	errUnknownUser  = errors.New("unknown user")
	errUnknownGroup = errors.New("unknown group")
)

// uid resolves an owner given as a user name or a numeric id. A name wins
// over a number, as with chown(1).
func (n *names) uid(owner string) (int, error) {
	if id, ok := n.uids[owner]; ok {
		return id, nil
	}
	if err, ok := n.uidErrs[owner]; ok {
		return 0, err
	}
	id, err := lookupID(owner, func(s string) (string, error) {
		u, err := user.Lookup(s)
		if err != nil {
			return "", err
		}
		return u.Uid, nil
	}, errUnknownUser)
	if err != nil {
		n.uidErrs[owner] = err
		return 0, err
	}
	n.uids[owner] = id
	return id, nil
}

// gid resolves a group given as a group name or a numeric id.
func (n *names) gid(group string) (int, error) {
	if id, ok := n.gids[group]; ok {
		return id, nil
	}
	if err, ok := n.gidErrs[group]; ok {
		return 0, err
	}
	id, err := lookupID(group, func(s string) (string, error) {
		g, err := user.LookupGroup(s)
		if err != nil {
			return "", err
		}
		return g.Gid, nil
	}, errUnknownGroup)
	if err != nil {
		n.gidErrs[group] = err
		return 0, err
	}
	n.gids[group] = id
	return id, nil
}

// lookupID tries byName first and falls back to parsing s as a number.
func lookupID(s string, byName func(string) (string, error), unknown error) (int, error) {
	if idStr, err := byName(s); err == nil {
		if id, perr := parseID(idStr); perr == nil {
			return id, nil
		}
	}
	if id, err := parseID(s); err == nil {
		return id, nil
	}
	return 0, unknown
}

// parseID parses a non-negative 32-bit id other than the reserved -1.
func parseID(s string) (int, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, err
	}
	if v == 1<<32-1 {
		return 0, strconv.ErrRange
	}
	return int(v), nil
}
