// Package policy is the egress sidecar's policy engine: it validates a
// sandbox.NetworkPolicy, compiles it into an immutable Policy that answers
// "may this name or address be reached?", merges PATCH and DELETE changes,
// loads the operator's always-deny and always-allow rule files, and holds
// the current policy in a Store that the API, the DNS proxy and the
// nftables layer share.
//
// Evaluation order: always-deny file, then always-allow file, then the
// user's rules (first match in list order wins), then the default action
// (deny when omitted).
//
//	p, err := policy.Parse(body, policy.Options{MaxRules: policy.DefaultMaxRules})
//	if err != nil { ... } // errors.Is(err, policy.ErrInvalid) or ErrTooManyRules
//	if p.Decide("pypi.org") == policy.Allow { ... }
//
// The package does no I/O besides reading the rule files and must not
// import enforcement code (dnsproxy, nft, vault, tlsproxy): they import it.
package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
)

// Action is what happens to traffic that matches a rule.
type Action string

// Actions.
const (
	Allow Action = "allow"
	Deny  Action = "deny"
)

// Errors returned by parsing and merging. Callers test them with errors.Is.
var (
	// ErrInvalid marks a malformed policy, rule, action or target.
	ErrInvalid = errors.New("invalid egress policy")
	// ErrTooManyRules marks a policy over Options.MaxRules.
	ErrTooManyRules = errors.New("too many egress rules")
)

// Kind is the kind of a rule target.
type Kind int

// Target kinds.
const (
	KindDomain   Kind = iota // exact FQDN: "example.com"
	KindWildcard             // "*.example.com": every subdomain, not the apex
	KindIP                   // one IPv4 or IPv6 address
	KindCIDR                 // an address prefix: "10.0.0.0/8"
)

func (k Kind) String() string {
	switch k {
	case KindDomain:
		return "domain"
	case KindWildcard:
		return "wildcard"
	case KindIP:
		return "ip"
	case KindCIDR:
		return "cidr"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Rule is one validated rule. Target is in canonical form: lower case
// without a trailing dot for names, netip's text form for addresses and
// masked prefixes.
type Rule struct {
	Action Action
	Target string
	Kind   Kind
	// Prefix is the address range of KindIP (a full-length prefix) and
	// KindCIDR rules; zero for names.
	Prefix netip.Prefix
}

// ParseAction normalizes an action: trimmed, lower-cased, and "" means
// deny.
func ParseAction(s string) (Action, error) {
	switch a := Action(strings.ToLower(strings.TrimSpace(s))); a {
	case "":
		return Deny, nil
	case Allow, Deny:
		return a, nil
	default:
		return "", fmt.Errorf("%w: action %q: want allow or deny", ErrInvalid, s)
	}
}

// ParseTarget validates a target and returns its kind, canonical form
// and, for addresses, its prefix.
func ParseTarget(s string) (Kind, string, netip.Prefix, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, "", netip.Prefix{}, fmt.Errorf("%w: empty target", ErrInvalid)
	}
	if strings.Contains(t, "/") {
		p, err := netip.ParsePrefix(t)
		if err != nil {
			return 0, "", netip.Prefix{}, fmt.Errorf("%w: target %q: bad CIDR: %w", ErrInvalid, s, err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		p = p.Masked()
		return KindCIDR, p.String(), p, nil
	}
	if a, err := netip.ParseAddr(t); err == nil {
		if a.Zone() != "" {
			return 0, "", netip.Prefix{}, fmt.Errorf("%w: target %q: zoned addresses are not allowed", ErrInvalid, s)
		}
		a = a.Unmap()
		return KindIP, a.String(), netip.PrefixFrom(a, a.BitLen()), nil
	}
	name := hostname.Canonical(t)
	kind := KindDomain
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		kind, name = KindWildcard, rest
	}
	if err := checkName(name); err != nil {
		return 0, "", netip.Prefix{}, fmt.Errorf("%w: target %q: %w", ErrInvalid, s, err)
	}
	if kind == KindWildcard {
		return kind, "*." + name, netip.Prefix{}, nil
	}
	return kind, name, netip.Prefix{}, nil
}

// normalizeTarget returns the canonical form of a target, or the trimmed,
// lower-cased text when it does not parse, for comparisons by target.
func normalizeTarget(s string) string {
	if _, t, _, err := ParseTarget(s); err == nil {
		return t
	}
	return hostname.Canonical(strings.TrimSpace(s))
}

// checkName validates a lower-cased DNS name without a trailing dot.
// Letters, digits, '-' and '_' are allowed ('_' appears in service names).
func checkName(name string) error {
	if name == "" {
		return errors.New("empty domain name")
	}
	if len(name) > 253 {
		return errors.New("domain name longer than 253 characters")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return errors.New("empty label")
		}
		if len(label) > 63 {
			return fmt.Errorf("label %q longer than 63 characters", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				if c == '*' {
					return errors.New("'*' is only allowed as a leading \"*.\" label")
				}
				return fmt.Errorf("character %q not allowed in a domain name", c)
			}
		}
	}
	return nil
}
