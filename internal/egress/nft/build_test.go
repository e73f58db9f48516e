package nft

import (
	"net/netip"
	"testing"
	"time"
)

func TestDynamicTimeout(t *testing.T) {
	for _, tc := range []struct{ ttl, want time.Duration }{
		{0, 60 * time.Second},
		{30 * time.Second, 90 * time.Second},
		{300 * time.Second, 360 * time.Second},
		{24 * time.Hour, 360 * time.Second},
	} {
		if got := DynamicTimeout(tc.ttl); got != tc.want {
			t.Errorf("DynamicTimeout(%v) = %v; want %v", tc.ttl, got, tc.want)
		}
	}
}

func TestIntervalElements(t *testing.T) {
	ps := sortedPrefixes([]netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/24"),
		netip.MustParsePrefix("10.0.0.128/25"), // inside the first
		netip.MustParsePrefix("10.0.1.0/24"),   // adjacent: merged
		netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), // other family: skipped
	}, true)
	got := intervalElements(ps)
	want := []struct {
		key string
		end bool
	}{{"0.0.0.0", true}, {"10.0.0.0", false}, {"10.0.2.0", true}, {"192.168.1.7", false}, {"192.168.1.8", true}}
	if len(got) != len(want) {
		t.Fatalf("intervalElements = %d elements %+v; want %d", len(got), got, len(want))
	}
	for i, w := range want {
		a, _ := netip.AddrFromSlice(got[i].Key)
		if a.String() != w.key || got[i].IntervalEnd != w.end {
			t.Errorf("element %d = %s end=%v; want %s end=%v", i, a, got[i].IntervalEnd, w.key, w.end)
		}
	}
	// The whole space has no end element and no zero marker.
	all := intervalElements(sortedPrefixes([]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, true))
	if len(all) != 1 || all[0].IntervalEnd {
		t.Fatalf("intervalElements(0.0.0.0/0) = %+v; want one start element", all)
	}
}
