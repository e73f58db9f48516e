package policy

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse. An accepted policy survives
// its own wire form (what /policy answers and the persister writes):
// parsed again, it has the same rules and decides names and addresses the
// same way. Deciding never panics. The seeds run with the unit tests.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		``,
		`{}`,
		`{"defaultAction":"deny"}`,
		`{"defaultAction":"allow","egress":[{"action":"deny","target":"*.evil.test"}]}`,
		`{"defaultAction":"deny","egress":[{"action":"allow","target":"10.1.0.5"},{"action":"deny","target":"10.1.0.0/24"},{"action":"allow","target":"pypi.org"},{"action":"allow","target":"2001:db8::/32"}]}`,
		`{"defaultAction":"deny","egress":[{"action":"allow","target":"*"}]}`,
		`{"defaultAction":"deny","egress":[{"action":"allow","target":"EXAMPLE.com."},{"action":"allow","target":"xn--bcher-kva.test"}]}`,
		`{"defaultAction":"sometimes"}`,
		`{"defaultAction":"deny","egress":[{"action":"allow","target":"a..b"}],"extra":1}`,
		`{"defaultAction":"deny","egress":[{"action":"allow","target":"10.0.0.0/33"}]}`,
	} {
		f.Add([]byte(s), "pypi.org", "10.1.0.5")
	}
	f.Fuzz(func(t *testing.T, data []byte, host, ip string) {
		p, err := Parse(data, Options{MaxRules: 64})
		if err != nil {
			return
		}
		wire, err := json.Marshal(p.Wire())
		if err != nil {
			t.Fatalf("marshal the wire form: %v", err)
		}
		q, err := Parse(wire, Options{MaxRules: 64})
		if err != nil {
			t.Fatalf("the wire form %s of an accepted policy is refused: %v", wire, err)
		}
		if p.DefaultAction() != q.DefaultAction() || !reflect.DeepEqual(p.Rules(), q.Rules()) {
			t.Fatalf("round trip changed the policy:\n%+v %+v\n%+v %+v", p.DefaultAction(), p.Rules(), q.DefaultAction(), q.Rules())
		}
		if a, b := p.Decide(host), q.Decide(host); a != b {
			t.Fatalf("Decide(%q) = %s, after the round trip %s", host, a, b)
		}
		if addr, err := netip.ParseAddr(ip); err == nil {
			a1, r1 := p.DecideIP(addr)
			a2, r2 := q.DecideIP(addr)
			if a1 != a2 || r1 != r2 {
				t.Fatalf("DecideIP(%s) = %s/%v, after the round trip %s/%v", addr, a1, r1, a2, r2)
			}
		}
	})
}
