package sidecar

import (
	"net/netip"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
)

func TestLearnedKeepsWhatTheNewPolicyAllows(t *testing.T) {
	l := newLearned()
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	l.add("api.example", []netip.Addr{a}, 120*time.Second)
	l.add("cdn.example", []netip.Addr{a, b}, 60*time.Second)
	l.add("old.example", []netip.Addr{c}, 10*time.Second)
	now = now.Add(20 * time.Second) // old.example's entry has expired

	p, err := policy.Parse([]byte(`{"defaultAction":"deny","egress":[{"action":"allow","target":"api.example"},{"action":"allow","target":"old.example"}]}`), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := l.keep(p)
	if len(got) != 1 || got[0].Addr != a || got[0].Timeout != 100*time.Second {
		t.Fatalf("keep = %+v; want only %s (via api.example) with 100s left", got, a)
	}
	if _, ok := l.byAddr[c]; ok {
		t.Fatal("expired entry not pruned")
	}
}
