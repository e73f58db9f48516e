package vault

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
)

// Store holds one sandbox's vault. The zero value is not usable; call
// NewStore. All methods are safe for concurrent use; Match never blocks on
// writers.
type Store struct {
	mu  sync.Mutex // serializes writers
	rev int64      // last revision handed out; survives Delete so revisions stay monotonic
	cur atomic.Pointer[snapshot]
}

// NewStore returns an empty store (no vault created yet).
func NewStore() *Store { return &Store{} }

// Create creates the vault. It fails with ErrAlreadyExists when one exists
// and ErrInvalid when the content does not validate.
func (s *Store) Create(req CreateRequest) (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Load() != nil {
		return State{}, fmt.Errorf("create: %w", ErrAlreadyExists)
	}
	snap, err := build(s.rev+1, req.Credentials, req.Bindings, nil, nil)
	if err != nil {
		return State{}, fmt.Errorf("create: %w", err)
	}
	s.rev++
	s.cur.Store(snap)
	return snap.state(), nil
}

// Get returns the sanitized state, or ErrNotFound when no vault exists.
func (s *Store) Get() (State, error) {
	snap, err := s.load()
	if err != nil {
		return State{}, err
	}
	return snap.state(), nil
}

// Delete removes the vault; ErrNotFound when there is none (upstream
// answers 404 there too).
func (s *Store) Delete() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Swap(nil) == nil {
		return ErrNotFound
	}
	s.rev++
	return nil
}

// Patch applies deletes, replaces and adds to credentials and bindings and
// validates the result as a whole. It fails with ErrNotFound when no vault
// exists, ErrConflict when ExpectedRevision is stale and ErrInvalid when the
// patch or its result does not validate. A failed patch changes nothing.
func (s *Store) Patch(req PatchRequest) (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, err := s.load()
	if err != nil {
		return State{}, err
	}
	if req.ExpectedRevision != nil && *req.ExpectedRevision != old.revision {
		return State{}, fmt.Errorf("patch: %w: expected revision %d, current revision is %d", ErrConflict, *req.ExpectedRevision, old.revision)
	}
	creds := make([]Credential, 0, len(old.credentials))
	for _, c := range old.credentials {
		creds = append(creds, Credential{Name: c.name, Source: CredentialSource{Type: c.source, Value: c.value}})
	}
	binds := make([]CredentialBinding, 0, len(old.bindings))
	for _, b := range old.bindings {
		binds = append(binds, CredentialBinding{Name: b.name, Match: b.match, Auth: b.auth})
	}
	var p problems
	changed := make(map[string]bool)
	ops := 0
	if c := req.Credentials; c != nil {
		ops += len(c.Add) + len(c.Replace) + len(c.Delete)
		creds = applyOps(&p, "credentials", creds, c.Add, c.Replace, c.Delete, func(c Credential) string { return c.Name }, "c/", changed)
	}
	if b := req.Bindings; b != nil {
		ops += len(b.Add) + len(b.Replace) + len(b.Delete)
		binds = applyOps(&p, "bindings", binds, b.Add, b.Replace, b.Delete, func(b CredentialBinding) string { return b.Name }, "b/", changed)
	}
	if ops == 0 {
		p.addf("patch has no operations")
	}
	if err := p.err(); err != nil {
		return State{}, fmt.Errorf("patch: %w", err)
	}
	snap, err := build(s.rev+1, creds, binds, old, changed)
	if err != nil {
		return State{}, fmt.Errorf("patch: %w", err)
	}
	s.rev++
	s.cur.Store(snap)
	return snap.state(), nil
}

// applyOps applies delete, replace, add (in that order) to items by name.
// Each name may be touched once per patch.
func applyOps[T any](p *problems, kind string, items, add, replace []T, del []string, name func(T) string, tag string, changed map[string]bool) []T {
	seen := make(map[string]string)
	touch := func(op, n string) bool {
		if prev, ok := seen[n]; ok {
			p.addf("%s: %q appears in both %s and %s", kind, n, prev, op)
			return false
		}
		seen[n] = op
		return true
	}
	index := func(n string) int {
		for i, it := range items {
			if name(it) == n {
				return i
			}
		}
		return -1
	}
	for _, n := range del {
		if !touch("delete", n) {
			continue
		}
		i := index(n)
		if i < 0 {
			p.addf("%s.delete: %q does not exist", kind, n)
			continue
		}
		items = append(items[:i], items[i+1:]...)
	}
	for _, it := range replace {
		n := name(it)
		if !touch("replace", n) {
			continue
		}
		i := index(n)
		if i < 0 {
			p.addf("%s.replace: %q does not exist", kind, n)
			continue
		}
		items[i] = it
		changed[tag+n] = true
	}
	for _, it := range add {
		n := name(it)
		if !touch("add", n) {
			continue
		}
		if index(n) >= 0 {
			p.addf("%s.add: %q already exists", kind, n)
			continue
		}
		items = append(items, it)
		changed[tag+n] = true
	}
	return items
}

// Credentials lists credential metadata.
func (s *Store) Credentials() (CredentialList, error) {
	snap, err := s.load()
	if err != nil {
		return CredentialList{}, err
	}
	st := snap.state()
	return CredentialList{Revision: st.Revision, Credentials: st.Credentials}, nil
}

// Credential returns one credential's metadata, or ErrNotFound.
func (s *Store) Credential(name string) (CredentialMetadata, error) {
	snap, err := s.load()
	if err != nil {
		return CredentialMetadata{}, err
	}
	c, ok := snap.credential(name)
	if !ok {
		return CredentialMetadata{}, fmt.Errorf("credential %q: %w", name, ErrNotFound)
	}
	return c.metadata(), nil
}

// Bindings lists binding metadata.
func (s *Store) Bindings() (BindingList, error) {
	snap, err := s.load()
	if err != nil {
		return BindingList{}, err
	}
	st := snap.state()
	return BindingList{Revision: st.Revision, Bindings: st.Bindings}, nil
}

// Binding returns one binding's metadata, or ErrNotFound.
func (s *Store) Binding(name string) (CredentialBindingMetadata, error) {
	snap, err := s.load()
	if err != nil {
		return CredentialBindingMetadata{}, err
	}
	b, ok := snap.binding(name)
	if !ok {
		return CredentialBindingMetadata{}, fmt.Errorf("binding %q: %w", name, ErrNotFound)
	}
	return b.metadata(), nil
}

// Match returns what to do to a request (headers to set, placeholders to
// replace), and true, when exactly one binding matches it; otherwise nil
// and false. host is compared without case or trailing dot; method and path
// are compared as given (path without query). The returned plan belongs to
// the caller.
func (s *Store) Match(scheme, host string, port int, method, path string) (*inject.Plan, bool) {
	snap := s.cur.Load()
	if snap == nil {
		return nil, false
	}
	scheme = strings.ToLower(scheme)
	host = hostname.Canonical(host)
	found := -1
	for i := range snap.bindings {
		if matches(&snap.bindings[i].match, scheme, host, port, method, path) {
			if found >= 0 {
				return nil, false // validation forbids this; stay safe anyway
			}
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return snap.plans[found].Clone(), true
}

// MayMatch reports whether some request with this scheme to host and port,
// whatever its method and path, could match a binding. Hosts compare as in
// Match. The proxies intercept only connections for which it is true, so it
// reflects the vault when a connection opens: a binding added later applies
// to later connections.
func (s *Store) MayMatch(scheme, host string, port int) bool {
	snap := s.cur.Load()
	if snap == nil {
		return false
	}
	host = hostname.Canonical(host)
	for i := range snap.bindings {
		if matchesDest(&snap.bindings[i].match, strings.ToLower(scheme), host, port) {
			return true
		}
	}
	return false
}

// MayMatchPort reports whether some binding covers requests with this
// scheme on this port, to any host. The proxies do not even read a
// connection's first bytes when it is false: they pass it through at once.
func (s *Store) MayMatchPort(scheme string, port int) bool {
	snap := s.cur.Load()
	if snap == nil {
		return false
	}
	scheme = strings.ToLower(scheme)
	for i := range snap.bindings {
		m := &snap.bindings[i].match
		if slices.Contains(m.Schemes, scheme) && slices.Contains(m.Ports, port) {
			return true
		}
	}
	return false
}

func (s *Store) load() (*snapshot, error) {
	snap := s.cur.Load()
	if snap == nil {
		return nil, fmt.Errorf("credential vault: %w", ErrNotFound)
	}
	return snap, nil
}

func (c credEntry) metadata() CredentialMetadata {
	return CredentialMetadata{Name: c.name, SourceType: c.source, Revision: c.revision}
}

func (b bindEntry) metadata() CredentialBindingMetadata {
	m := RequestMatch{
		Schemes: slices.Clone(b.match.Schemes),
		Ports:   slices.Clone(b.match.Ports),
		Hosts:   slices.Clone(b.match.Hosts),
		Methods: slices.Clone(b.match.Methods),
		Paths:   slices.Clone(b.match.Paths),
	}
	return CredentialBindingMetadata{
		Name:     b.name,
		Revision: b.revision,
		Match:    &m,
		Auth:     &AuthMetadata{Type: b.auth.Type, Name: b.auth.Name},
	}
}

func (s *snapshot) state() State {
	st := State{
		Revision:    s.revision,
		Credentials: make([]CredentialMetadata, 0, len(s.credentials)),
		Bindings:    make([]CredentialBindingMetadata, 0, len(s.bindings)),
	}
	for _, c := range s.credentials {
		st.Credentials = append(st.Credentials, c.metadata())
	}
	for _, b := range s.bindings {
		st.Bindings = append(st.Bindings, b.metadata())
	}
	return st
}
