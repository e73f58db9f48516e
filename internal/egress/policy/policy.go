package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// DefaultMaxRules is the rule cap the sidecar uses unless configured.
const DefaultMaxRules = 4096

// Options are the limits a Policy is built with; a Policy keeps them so
// that Patch enforces the same limits.
type Options struct {
	// MaxRules caps the number of user rules; 0 means no cap.
	MaxRules int
}

// Policy is a compiled, immutable egress policy. The zero value is not
// usable; build one with New, Parse or DenyAll. A *Policy is safe for
// concurrent use.
type Policy struct {
	opts          Options
	defaultAction Action
	rules         []Rule
	user          matcher
	always        *Always // nil: none
}

// DenyAll returns the policy that denies everything.
func DenyAll(opts Options) *Policy {
	return &Policy{opts: opts, defaultAction: Deny}
}

// New validates and compiles np. A nil np is the deny-all policy.
// Errors wrap ErrInvalid or ErrTooManyRules.
func New(np *sandbox.NetworkPolicy, opts Options) (*Policy, error) {
	if np == nil {
		return DenyAll(opts), nil
	}
	def, err := ParseAction(np.DefaultAction)
	if err != nil {
		return nil, fmt.Errorf("defaultAction: %w", err)
	}
	rules, err := parseRules(np.Egress)
	if err != nil {
		return nil, err
	}
	return build(def, rules, opts)
}

// Parse decodes a JSON NetworkPolicy and compiles it. An empty body,
// "null" and "{}" all give the deny-all policy.
func Parse(data []byte, opts Options) (*Policy, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return DenyAll(opts), nil
	}
	var np *sandbox.NetworkPolicy
	if err := decodeJSON(data, &np); err != nil {
		return nil, fmt.Errorf("%w: policy is not a JSON NetworkPolicy: %w", ErrInvalid, err)
	}
	return New(np, opts)
}

// ParseRules validates wire rules, keeping their order.
func ParseRules(in []sandbox.NetworkRule) ([]Rule, error) { return parseRules(in) }

func parseRules(in []sandbox.NetworkRule) ([]Rule, error) {
	rules := make([]Rule, 0, len(in))
	for i, r := range in {
		a, err := ParseAction(r.Action)
		if err != nil {
			return nil, fmt.Errorf("egress[%d]: %w", i, err)
		}
		kind, target, prefix, err := ParseTarget(r.Target)
		if err != nil {
			return nil, fmt.Errorf("egress[%d]: %w", i, err)
		}
		rules = append(rules, Rule{Action: a, Target: target, Kind: kind, Prefix: prefix})
	}
	return rules, nil
}

func build(def Action, rules []Rule, opts Options) (*Policy, error) {
	if opts.MaxRules > 0 && len(rules) > opts.MaxRules {
		return nil, fmt.Errorf("%w: %d rules, the limit is %d", ErrTooManyRules, len(rules), opts.MaxRules)
	}
	return &Policy{opts: opts, defaultAction: def, rules: rules, user: compile(rules)}, nil
}

// decodeJSON decodes exactly one JSON value.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// DefaultAction is the action for traffic no rule matches.
func (p *Policy) DefaultAction() Action { return p.defaultAction }

// Rules returns a copy of the user rules in evaluation order.
func (p *Policy) Rules() []Rule { return append([]Rule(nil), p.rules...) }

// Always returns the always-rules the policy was combined with (nil when
// none).
func (p *Policy) Always() *Always { return p.always }

// Options returns the limits the policy was built with.
func (p *Policy) Options() Options { return p.opts }

// Mode is the derived mode reported by the API: allow_all or deny_all
// when there are no user rules, enforcing otherwise.
func (p *Policy) Mode() string {
	switch {
	case len(p.rules) > 0:
		return sandbox.EgressModeEnforcing
	case p.defaultAction == Allow:
		return sandbox.EgressModeAllowAll
	default:
		return sandbox.EgressModeDenyAll
	}
}

// Wire returns the user policy in wire form, with defaultAction always
// set and targets in canonical form.
func (p *Policy) Wire() *sandbox.NetworkPolicy {
	np := &sandbox.NetworkPolicy{DefaultAction: string(p.defaultAction)}
	for _, r := range p.rules {
		np.Egress = append(np.Egress, sandbox.NetworkRule{Action: string(r.Action), Target: r.Target})
	}
	return np
}

// Decide returns the action for a DNS name (case-insensitive, trailing
// dot ignored). An IP literal is decided like DecideIP, falling back to
// the default action.
func (p *Policy) Decide(host string) Action {
	if a, err := netip.ParseAddr(host); err == nil {
		act, _ := p.DecideIP(a)
		return act
	}
	name := hostname.Canonical(host)
	if p.always != nil {
		if _, ok := p.always.deny.matchName(name); ok {
			return Deny
		}
		if _, ok := p.always.allow.matchName(name); ok {
			return Allow
		}
	}
	if a, ok := p.user.matchName(name); ok {
		return a
	}
	return p.defaultAction
}

// DecideIP returns the action for an address under the IP and CIDR rules
// and whether any rule matched; when none did it returns the default
// action and false. IPv4-mapped IPv6 addresses count as IPv4.
func (p *Policy) DecideIP(ip netip.Addr) (Action, bool) {
	ip = ip.Unmap().WithZone("")
	if p.always != nil {
		if _, ok := p.always.deny.matchIP(ip); ok {
			return Deny, true
		}
		if _, ok := p.always.allow.matchIP(ip); ok {
			return Allow, true
		}
	}
	if a, ok := p.user.matchIP(ip); ok {
		return a, true
	}
	return p.defaultAction, false
}

// Patch returns the policy with rules merged in: incoming rules come
// first and replace existing rules with the same target; among incoming
// rules with the same target the first wins; the default action is kept.
func (p *Policy) Patch(in []sandbox.NetworkRule) (*Policy, error) {
	incoming, err := parseRules(in)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(incoming))
	merged := make([]Rule, 0, len(incoming)+len(p.rules))
	for _, r := range incoming {
		if !seen[r.Target] {
			seen[r.Target] = true
			merged = append(merged, r)
		}
	}
	for _, r := range p.rules {
		if !seen[r.Target] {
			merged = append(merged, r)
		}
	}
	return p.rebuild(merged)
}

// Without returns the policy minus the rules whose target is one of
// targets (compared in canonical form); unknown targets are ignored and
// the default action is kept.
func (p *Policy) Without(targets []string) *Policy {
	drop := make(map[string]bool, len(targets))
	for _, t := range targets {
		drop[normalizeTarget(t)] = true
	}
	kept := make([]Rule, 0, len(p.rules))
	for _, r := range p.rules {
		if !drop[r.Target] {
			kept = append(kept, r)
		}
	}
	q, err := p.rebuild(kept)
	if err != nil { // cannot happen: fewer rules than an accepted policy
		panic(err)
	}
	return q
}

func (p *Policy) rebuild(rules []Rule) (*Policy, error) {
	q, err := build(p.defaultAction, rules, p.opts)
	if err != nil {
		return nil, err
	}
	q.always = p.always
	return q, nil
}

// WithAlways returns a copy of the policy combined with a (nil: none).
func (p *Policy) WithAlways(a *Always) *Policy {
	q := *p
	q.always = a
	return &q
}

// matcher is a compiled rule list: names are found through maps holding
// each target's first rule index, so the earliest matching rule wins.
type matcher struct {
	actions []Action       // by rule index
	exact   map[string]int // name -> first index
	wild    map[string]int // suffix of "*.suffix" -> first index
	ips     []int          // indexes of IP and CIDR rules, in order
	prefix  []netip.Prefix // by position in ips
}

func compile(rules []Rule) matcher {
	m := matcher{actions: make([]Action, len(rules))}
	for i, r := range rules {
		m.actions[i] = r.Action
		switch r.Kind {
		case KindDomain:
			if m.exact == nil {
				m.exact = map[string]int{}
			}
			if _, dup := m.exact[r.Target]; !dup {
				m.exact[r.Target] = i
			}
		case KindWildcard:
			if m.wild == nil {
				m.wild = map[string]int{}
			}
			suffix := strings.TrimPrefix(r.Target, "*.")
			if _, dup := m.wild[suffix]; !dup {
				m.wild[suffix] = i
			}
		case KindIP, KindCIDR:
			m.ips = append(m.ips, i)
			m.prefix = append(m.prefix, r.Prefix)
		}
	}
	return m
}

// matchName matches a canonical name against the domain rules.
func (m *matcher) matchName(name string) (Action, bool) {
	best := -1
	if i, ok := m.exact[name]; ok {
		best = i
	}
	if len(m.wild) > 0 {
		// Every proper suffix of name: "a.b.c" -> "b.c", "c".
		for rest := name; ; {
			dot := strings.IndexByte(rest, '.')
			if dot < 0 {
				break
			}
			rest = rest[dot+1:]
			if i, ok := m.wild[rest]; ok && (best < 0 || i < best) {
				best = i
			}
		}
	}
	if best < 0 {
		return "", false
	}
	return m.actions[best], true
}

// matchIP returns the action of the first IP or CIDR rule containing ip.
func (m *matcher) matchIP(ip netip.Addr) (Action, bool) {
	for k, pfx := range m.prefix {
		if pfx.Contains(ip) {
			return m.actions[m.ips[k]], true
		}
	}
	return "", false
}
