package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func mustParse(t *testing.T, js string) *Policy {
	t.Helper()
	p, err := Parse([]byte(js), Options{MaxRules: DefaultMaxRules})
	if err != nil {
		t.Fatalf("Parse(%s): %v", js, err)
	}
	return p
}

func TestParseAction(t *testing.T) {
	tests := []struct {
		in      string
		want    Action
		wantErr bool
	}{
		{"allow", Allow, false},
		{" ALLOW ", Allow, false},
		{"Deny", Deny, false},
		{"", Deny, false},
		{"  ", Deny, false},
		{"drop", "", true},
		{"allowed", "", true},
	}
	for _, tc := range tests {
		got, err := ParseAction(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseAction(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseAction(%q) error %v does not wrap ErrInvalid", tc.in, err)
		}
	}
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in     string
		kind   Kind
		want   string
		prefix string // for IP and CIDR
		errSub string // non-empty: an error mentioning this is expected
	}{
		{in: "example.com", kind: KindDomain, want: "example.com"},
		{in: " Example.COM. ", kind: KindDomain, want: "example.com"},
		{in: "localhost", kind: KindDomain, want: "localhost"},
		{in: "_acme-challenge.example.com", kind: KindDomain, want: "_acme-challenge.example.com"},
		{in: "*.Example.com.", kind: KindWildcard, want: "*.example.com"},
		{in: "*.com", kind: KindWildcard, want: "*.com"},
		{in: "1.2.3.4", kind: KindIP, want: "1.2.3.4", prefix: "1.2.3.4/32"},
		{in: "2001:DB8::1", kind: KindIP, want: "2001:db8::1", prefix: "2001:db8::1/128"},
		{in: "::ffff:10.1.2.3", kind: KindIP, want: "10.1.2.3", prefix: "10.1.2.3/32"},
		{in: "10.0.0.0/8", kind: KindCIDR, want: "10.0.0.0/8", prefix: "10.0.0.0/8"},
		{in: "10.1.2.3/8", kind: KindCIDR, want: "10.0.0.0/8", prefix: "10.0.0.0/8"},
		{in: "2001:db8::/32", kind: KindCIDR, want: "2001:db8::/32", prefix: "2001:db8::/32"},
		{in: "::ffff:10.0.0.0/104", kind: KindCIDR, want: "10.0.0.0/8", prefix: "10.0.0.0/8"},
		{in: "", errSub: "empty target"},
		{in: "   ", errSub: "empty target"},
		{in: "*", errSub: "leading"},
		{in: "*.", errSub: "leading"},
		{in: ".", errSub: "empty domain"},
		{in: "a.*.com", errSub: "leading"},
		{in: "*foo.com", errSub: "leading"},
		{in: "https://example.com", errSub: "CIDR"},
		{in: "example.com:443", errSub: "':'"},
		{in: "exa mple.com", errSub: "' '"},
		{in: "a..b", errSub: "empty label"},
		{in: "example.com..", errSub: "empty label"},
		{in: "-a.com", errSub: "'-'"},
		{in: "a-.com", errSub: "'-'"},
		{in: strings.Repeat("a", 64) + ".com", errSub: "63"},
		{in: strings.Repeat("a.", 127) + "com", errSub: "253"},
		{in: "10.0.0.0/33", errSub: "CIDR"},
		{in: "fe80::1%eth0", errSub: "zoned"},
	}
	for _, tc := range tests {
		kind, got, prefix, err := ParseTarget(tc.in)
		if tc.errSub != "" {
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.errSub) {
				t.Errorf("ParseTarget(%q) error = %v; want ErrInvalid mentioning %q", tc.in, err, tc.errSub)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", tc.in, err)
			continue
		}
		if kind != tc.kind || got != tc.want {
			t.Errorf("ParseTarget(%q) = %v %q; want %v %q", tc.in, kind, got, tc.kind, tc.want)
		}
		if tc.prefix != "" && prefix.String() != tc.prefix {
			t.Errorf("ParseTarget(%q) prefix = %v; want %s", tc.in, prefix, tc.prefix)
		}
	}
}

func TestParseEmptyIsDenyAll(t *testing.T) {
	for _, body := range []string{"", "  \n", "null", "{}", `{"egress":[]}`} {
		p := mustParse(t, body)
		if p.DefaultAction() != Deny || len(p.Rules()) != 0 || p.Mode() != sandbox.EgressModeDenyAll {
			t.Errorf("Parse(%q) = default %q, %d rules, mode %s; want deny, 0, deny_all", body, p.DefaultAction(), len(p.Rules()), p.Mode())
		}
		if got := p.Decide("example.com"); got != Deny {
			t.Errorf("Parse(%q).Decide(example.com) = %s, want deny", body, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, body string
		want       error
		sub        string
	}{
		{"not json", `{`, ErrInvalid, "JSON"},
		{"array", `[]`, ErrInvalid, "JSON"},
		{"trailing data", `{} {}`, ErrInvalid, "after"},
		{"bad default", `{"defaultAction":"maybe"}`, ErrInvalid, "defaultAction"},
		{"bad action", `{"egress":[{"action":"drop","target":"a.com"}]}`, ErrInvalid, "egress[0]"},
		{"empty target", `{"egress":[{"action":"allow","target":"a.com"},{"action":"allow","target":""}]}`, ErrInvalid, "egress[1]: "},
		{"too many", `{"egress":[{"target":"a.com"},{"target":"b.com"},{"target":"c.com"}]}`, ErrTooManyRules, "limit is 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.body), Options{MaxRules: 2})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.sub) {
				t.Errorf("Parse(%s) error = %v; want %v mentioning %q", tc.body, err, tc.want, tc.sub)
			}
		})
	}
	if _, err := Parse([]byte(`{"egress":[{"target":"a.com"},{"target":"b.com"},{"target":"c.com"}]}`), Options{}); err != nil {
		t.Errorf("Parse with MaxRules 0 (no cap): %v", err)
	}
}

func TestNormalizedActionsAndWire(t *testing.T) {
	p := mustParse(t, `{"defaultAction":" Allow ","egress":[{"action":"","target":"Bad.COM."},{"action":"ALLOW","target":"10.1.0.0/16"}]}`)
	got := p.Wire()
	want := sandbox.NetworkPolicy{DefaultAction: "allow", Egress: []sandbox.NetworkRule{
		{Action: "deny", Target: "bad.com"}, {Action: "allow", Target: "10.1.0.0/16"}}}
	if got.DefaultAction != want.DefaultAction || len(got.Egress) != 2 || got.Egress[0] != want.Egress[0] || got.Egress[1] != want.Egress[1] {
		t.Errorf("Wire() = %+v; want %+v", got, want)
	}
	if n := len(DenyAll(Options{}).Wire().Egress); n != 0 {
		t.Errorf("DenyAll().Wire() has %d rules", n)
	}
}

func TestMode(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{}`, sandbox.EgressModeDenyAll},
		{`{"defaultAction":"deny"}`, sandbox.EgressModeDenyAll},
		{`{"defaultAction":"allow"}`, sandbox.EgressModeAllowAll},
		{`{"defaultAction":"allow","egress":[{"action":"deny","target":"a.com"}]}`, sandbox.EgressModeEnforcing},
		{`{"egress":[{"action":"allow","target":"a.com"}]}`, sandbox.EgressModeEnforcing},
	}
	for _, tc := range tests {
		if got := mustParse(t, tc.body).Mode(); got != tc.want {
			t.Errorf("Parse(%s).Mode() = %s, want %s", tc.body, got, tc.want)
		}
	}
}

func TestDecide(t *testing.T) {
	p := mustParse(t, `{"defaultAction":"deny","egress":[
		{"action":"deny","target":"secret.example.com"},
		{"action":"allow","target":"*.example.com"},
		{"action":"allow","target":"PyPI.org"},
		{"action":"deny","target":"*.pypi.org"},
		{"action":"allow","target":"files.pypi.org"},
		{"action":"allow","target":"*.a.b.c"},
		{"action":"deny","target":"*.b.c"},
		{"action":"deny","target":"*.y.z"},
		{"action":"allow","target":"*.x.y.z"},
		{"action":"allow","target":"10.0.0.0/8"}
	]}`)
	tests := []struct {
		host string
		want Action
	}{
		{"secret.example.com", Deny}, // earlier exact deny beats later wildcard
		{"api.example.com", Allow},   // wildcard
		{"a.b.example.com", Allow},   // wildcard, deeper
		{"example.com", Deny},        // wildcard does not match the apex
		{"API.Example.COM.", Allow},  // case and trailing dot
		{"pypi.org", Allow},          // exact, target was mixed case
		{"pypi.org.", Allow},         // trailing dot
		{"files.pypi.org", Deny},     // earlier wildcard beats later exact
		{"x.pypi.org", Deny},         // wildcard
		{"q.a.b.c", Allow},           // earlier, more specific wildcard
		{"q.b.c", Deny},              // only the later wildcard
		{"q.x.y.z", Deny},            // earlier, less specific wildcard wins
		{"notexample.com", Deny},     // suffix must be on a label boundary
		{"unknown.org", Deny},        // default
		{"10.2.3.4", Allow},          // IP literal uses the IP rules
		{"11.2.3.4", Deny},           // IP literal, no rule: default
		{"", Deny},                   // nonsense: default
	}
	for _, tc := range tests {
		if got := p.Decide(tc.host); got != tc.want {
			t.Errorf("Decide(%q) = %s, want %s", tc.host, got, tc.want)
		}
	}
	allow := mustParse(t, `{"defaultAction":"allow","egress":[{"action":"deny","target":"*.evil.com"}]}`)
	for host, want := range map[string]Action{"evil.com": Allow, "a.evil.com": Deny, "good.com": Allow} {
		if got := allow.Decide(host); got != want {
			t.Errorf("default allow: Decide(%q) = %s, want %s", host, got, want)
		}
	}
}

func TestDecideIP(t *testing.T) {
	p := mustParse(t, `{"defaultAction":"allow","egress":[
		{"action":"allow","target":"10.1.2.3"},
		{"action":"deny","target":"10.0.0.0/8"},
		{"action":"allow","target":"10.0.0.0/8"},
		{"action":"deny","target":"2001:db8::/32"},
		{"action":"deny","target":"example.com"}
	]}`)
	tests := []struct {
		ip      string
		want    Action
		matched bool
	}{
		{"10.1.2.3", Allow, true},       // exact IP before the CIDR
		{"10.9.9.9", Deny, true},        // first of two equal CIDRs
		{"::ffff:10.9.9.9", Deny, true}, // mapped address counts as IPv4
		{"2001:db8:1::5", Deny, true},   // IPv6 CIDR
		{"2001:db9::5", Allow, false},   // outside: default
		{"192.168.1.1", Allow, false},   // default
		{"fe80::1%eth0", Allow, false},  // zone ignored, no rule
	}
	for _, tc := range tests {
		got, matched := p.DecideIP(netip.MustParseAddr(tc.ip))
		if got != tc.want || matched != tc.matched {
			t.Errorf("DecideIP(%s) = %s, %v; want %s, %v", tc.ip, got, matched, tc.want, tc.matched)
		}
	}
}

func rulesOf(p *Policy) string {
	var b []string
	for _, r := range p.Rules() {
		b = append(b, string(r.Action)+":"+r.Target)
	}
	return strings.Join(b, " ")
}

func TestPatch(t *testing.T) {
	base := mustParse(t, `{"defaultAction":"allow","egress":[
		{"action":"allow","target":"a.com"},{"action":"deny","target":"b.com"},{"action":"allow","target":"c.com"}]}`)
	tests := []struct {
		name string
		in   []sandbox.NetworkRule
		want string
	}{
		{"new rule goes first", []sandbox.NetworkRule{{Action: "deny", Target: "d.com"}},
			"deny:d.com allow:a.com deny:b.com allow:c.com"},
		{"same target overridden and moved first", []sandbox.NetworkRule{{Action: "allow", Target: "B.com."}},
			"allow:b.com allow:a.com allow:c.com"},
		{"duplicates in payload: first wins", []sandbox.NetworkRule{{Action: "allow", Target: "x.com"}, {Action: "deny", Target: "X.COM"}},
			"allow:x.com allow:a.com deny:b.com allow:c.com"},
		{"payload order kept", []sandbox.NetworkRule{{Action: "deny", Target: "c.com"}, {Action: "", Target: "*.e.com"}, {Action: "allow", Target: "1.2.3.4"}},
			"deny:c.com deny:*.e.com allow:1.2.3.4 allow:a.com deny:b.com"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := base.Patch(tc.in)
			if err != nil {
				t.Fatalf("Patch: %v", err)
			}
			if s := rulesOf(got); s != tc.want {
				t.Errorf("Patch rules = %s; want %s", s, tc.want)
			}
			if got.DefaultAction() != Allow {
				t.Errorf("Patch changed defaultAction to %s", got.DefaultAction())
			}
		})
	}
	if rulesOf(base) != "allow:a.com deny:b.com allow:c.com" {
		t.Errorf("Patch mutated the original policy: %s", rulesOf(base))
	}
	if p, _ := base.Patch([]sandbox.NetworkRule{{Action: "deny", Target: "a.com"}}); p.Decide("a.com") != Deny {
		t.Error("patched rule not enforced by Decide")
	}
	if _, err := base.Patch([]sandbox.NetworkRule{{Action: "allow", Target: ""}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Patch with empty target: error %v, want ErrInvalid", err)
	}
	capped, err := New(&sandbox.NetworkPolicy{Egress: []sandbox.NetworkRule{{Target: "a.com"}, {Target: "b.com"}}}, Options{MaxRules: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := capped.Patch([]sandbox.NetworkRule{{Target: "c.com"}}); !errors.Is(err, ErrTooManyRules) {
		t.Errorf("Patch over the cap: error %v, want ErrTooManyRules", err)
	}
	if _, err := capped.Patch([]sandbox.NetworkRule{{Action: "allow", Target: "a.com"}}); err != nil {
		t.Errorf("Patch replacing a rule at the cap: %v", err)
	}
}

func TestWithout(t *testing.T) {
	base := mustParse(t, `{"defaultAction":"allow","egress":[
		{"action":"allow","target":"a.com"},{"action":"deny","target":"*.b.com"},{"action":"deny","target":"10.0.0.0/8"}]}`)
	tests := []struct {
		name    string
		targets []string
		want    string
	}{
		{"exact", []string{"a.com"}, "deny:*.b.com deny:10.0.0.0/8"},
		{"normalized", []string{" A.COM. ", "*.B.com"}, "deny:10.0.0.0/8"},
		{"cidr canonical form", []string{"10.1.1.1/8"}, "allow:a.com deny:*.b.com"},
		{"unknown ignored", []string{"zzz.com", "not a target"}, "allow:a.com deny:*.b.com deny:10.0.0.0/8"},
		{"all", []string{"a.com", "*.b.com", "10.0.0.0/8"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := base.Without(tc.targets)
			if s := rulesOf(got); s != tc.want {
				t.Errorf("Without(%q) rules = %q; want %q", tc.targets, s, tc.want)
			}
			if got.DefaultAction() != Allow {
				t.Errorf("Without changed defaultAction to %s", got.DefaultAction())
			}
		})
	}
	if m := base.Without([]string{"a.com", "*.b.com", "10.0.0.0/8"}).Mode(); m != sandbox.EgressModeAllowAll {
		t.Errorf("mode after removing every rule = %s, want allow_all", m)
	}
}
