package vault

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
)

// credEntry is a stored credential.
type credEntry struct {
	name     string
	source   string
	value    Secret
	revision int64
}

// bindEntry is a stored binding: the normalized match and auth as given, plus
// the headers it injects.
type bindEntry struct {
	name     string
	match    RequestMatch // normalized, defaults filled
	auth     Auth
	refs     []injectRef
	subs     []substRef
	revision int64
}

// snapshot is one immutable version of the vault. Writers build a new one and
// swap it in; Match reads the current one without locking.
type snapshot struct {
	revision    int64
	credentials []credEntry // sorted by name
	bindings    []bindEntry // sorted by name
	byCred      map[string]int
	// plans holds, per binding index, the ready-made injection plan.
	plans []*inject.Plan
}

// build validates credentials and bindings as a whole and returns the new
// snapshot. prev supplies the revision of entries that did not change; changed
// names get rev.
func build(rev int64, creds []Credential, binds []CredentialBinding, prev *snapshot, changed map[string]bool) (*snapshot, error) {
	var p problems
	if len(creds) > maxItems || len(binds) > maxItems {
		p.addf("a vault holds at most %d credentials and %d bindings", maxItems, maxItems)
		return nil, p.err()
	}
	s := &snapshot{revision: rev, byCred: make(map[string]int)}
	known := make(map[string]bool)
	for i, c := range creds {
		where := fmt.Sprintf("credentials[%d] %q", i, c.Name)
		validateCredential(&p, where, c)
		if known[c.Name] {
			p.addf("%s: duplicate credential name", where)
			continue
		}
		known[c.Name] = true
		s.credentials = append(s.credentials, credEntry{name: c.Name, source: c.Source.Type, value: c.Source.Value, revision: rev})
	}
	names := make(map[string]bool)
	for i, b := range binds {
		where := fmt.Sprintf("bindings[%d] %q", i, b.Name)
		if !validName(b.Name) {
			p.addf("%s: name must be 1-%d letters, digits, '.', '_' or '-', starting with a letter or digit", where, maxNameLen)
		}
		if names[b.Name] {
			p.addf("%s: duplicate binding name", where)
			continue
		}
		names[b.Name] = true
		m := normalizeMatch(&p, where, b.Match)
		refs := validateAuth(&p, where, b.Auth, known)
		subs := validateSubstitutions(&p, where, b.Auth.Substitutions, known)
		s.bindings = append(s.bindings, bindEntry{name: b.Name, match: m, auth: b.Auth, refs: refs, subs: subs, revision: rev})
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	for i := range s.bindings {
		for j := i + 1; j < len(s.bindings); j++ {
			if why, ok := overlap(&s.bindings[i].match, &s.bindings[j].match); ok {
				p.addf("bindings %q and %q are ambiguous: both match %s", s.bindings[i].name, s.bindings[j].name, why)
			}
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	slices.SortFunc(s.credentials, func(a, b credEntry) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(s.bindings, func(a, b bindEntry) int { return strings.Compare(a.name, b.name) })
	if prev != nil {
		for i := range s.credentials {
			c := &s.credentials[i]
			if old, ok := prev.credential(c.name); ok && !changed["c/"+c.name] {
				c.revision = old.revision
			}
		}
		for i := range s.bindings {
			b := &s.bindings[i]
			if old, ok := prev.binding(b.name); ok && !changed["b/"+b.name] {
				b.revision = old.revision
			}
		}
	}
	for i, c := range s.credentials {
		s.byCred[c.name] = i
	}
	s.plans = make([]*inject.Plan, len(s.bindings))
	for i, b := range s.bindings {
		value := func(cred string) string { return string(s.credentials[s.byCred[cred]].value) }
		pl := &inject.Plan{Headers: make(http.Header, len(b.refs))}
		for _, r := range b.refs {
			pl.Headers[r.header] = []string{r.prefix + value(r.credential)}
		}
		for _, sr := range b.subs {
			pl.Substitutions = append(pl.Substitutions, inject.Substitution{Placeholder: sr.placeholder, Value: value(sr.credential), In: sr.in})
		}
		s.plans[i] = pl
	}
	return s, nil
}

func (s *snapshot) credential(name string) (credEntry, bool) {
	i, ok := slices.BinarySearchFunc(s.credentials, name, func(c credEntry, n string) int { return strings.Compare(c.name, n) })
	if !ok {
		return credEntry{}, false
	}
	return s.credentials[i], true
}

func (s *snapshot) binding(name string) (bindEntry, bool) {
	i, ok := slices.BinarySearchFunc(s.bindings, name, func(b bindEntry, n string) int { return strings.Compare(b.name, n) })
	if !ok {
		return bindEntry{}, false
	}
	return s.bindings[i], true
}

// hostMatches reports whether pattern (normalized) matches host (normalized).
// "*.d" matches any name under d, not d itself.
func hostMatches(pattern, host string) bool {
	if d, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+d)
	}
	return pattern == host
}

// pathMatches reports whether pattern matches path: exactly, or as a prefix
// when pattern ends in '*'.
func pathMatches(pattern, path string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(path, prefix)
	}
	return pattern == path
}

// matches reports whether the request (normalized) is selected by m.
func matches(m *RequestMatch, scheme, host string, port int, method, path string) bool {
	return matchesDest(m, scheme, host, port) && slices.Contains(m.Methods, method) &&
		slices.ContainsFunc(m.Paths, func(p string) bool { return pathMatches(p, path) })
}

// matchesDest reports whether m selects requests with this scheme to this
// (normalized) host and port, for some method and path.
func matchesDest(m *RequestMatch, scheme, host string, port int) bool {
	return slices.Contains(m.Schemes, scheme) && slices.Contains(m.Ports, port) &&
		slices.ContainsFunc(m.Hosts, func(p string) bool { return hostMatches(p, host) })
}

// overlap reports whether some request could match both a and b, and names
// one such request for the error message.
func overlap(a, b *RequestMatch) (string, bool) {
	scheme, ok := common(a.Schemes, b.Schemes, func(x, y string) bool { return x == y })
	if !ok {
		return "", false
	}
	port := 0
	for _, p := range a.Ports {
		if slices.Contains(b.Ports, p) {
			port = p
			break
		}
	}
	if port == 0 {
		return "", false
	}
	method, ok := common(a.Methods, b.Methods, func(x, y string) bool { return x == y })
	if !ok {
		return "", false
	}
	host, ok := common(a.Hosts, b.Hosts, hostsOverlap)
	if !ok {
		return "", false
	}
	path, ok := common(a.Paths, b.Paths, pathsOverlap)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%s %s://%s:%d%s", method, scheme, host, port, path), true
}

func common(a, b []string, eq func(x, y string) bool) (string, bool) {
	for _, x := range a {
		for _, y := range b {
			if eq(x, y) {
				return x, true
			}
		}
	}
	return "", false
}

func hostsOverlap(x, y string) bool {
	dx, wx := strings.CutPrefix(x, "*.")
	dy, wy := strings.CutPrefix(y, "*.")
	switch {
	case wx && wy:
		return dx == dy || strings.HasSuffix(dx, "."+dy) || strings.HasSuffix(dy, "."+dx)
	case wx:
		return hostMatches(x, y)
	case wy:
		return hostMatches(y, x)
	}
	return x == y
}

func pathsOverlap(x, y string) bool {
	px, gx := strings.CutSuffix(x, "*")
	py, gy := strings.CutSuffix(y, "*")
	switch {
	case gx && gy:
		return strings.HasPrefix(px, py) || strings.HasPrefix(py, px)
	case gx:
		return strings.HasPrefix(y, px)
	case gy:
		return strings.HasPrefix(x, py)
	}
	return x == y
}
