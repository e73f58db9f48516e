package nft

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/netnstest"
)

// TestGuardMetadata programs the host-side metadata guard in a namespace
// the test made and reads the ruleset back with the nft command: per
// bridge, a forward and an input chain drop what enters from that bridge
// for 169.254.0.0/16 and fd00:ec2::254; installing twice changes nothing,
// and removing one bridge's guard leaves the other's.
func TestGuardMetadata(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft command to read the ruleset back")
	}
	pair := netnstest.New(t)
	list := func() string {
		t.Helper()
		out, err := exec.Command("ip", "netns", "exec", pair.WorldName, "nft", "list", "ruleset").CombinedOutput()
		if err != nil {
			t.Fatalf("nft list ruleset: %v: %s", err, out)
		}
		return string(out)
	}
	for range 2 { // idempotent
		for _, br := range []string{"br-0123456789ab", "docker0"} {
			if err := GuardMetadata(pair.World, br); err != nil {
				t.Fatalf("GuardMetadata(%s): %v", br, err)
			}
		}
	}
	rs := list()
	for _, br := range []string{"br-0123456789ab", "docker0"} {
		for _, hook := range []string{"forward", "input"} {
			chain := "chain " + hook + "-" + br + " {"
			i := strings.Index(rs, chain)
			if i < 0 {
				t.Fatalf("no %q in\n%s", chain, rs)
			}
			body := rs[i : i+strings.Index(rs[i:], "}")]
			if !strings.Contains(body, "type filter hook "+hook+" priority filter; policy accept;") {
				t.Errorf("%s: wrong hook or policy:\n%s", chain, body)
			}
			for _, want := range []string{
				`iifname "` + br + `" ip daddr 169.254.0.0/16 counter packets 0 bytes 0 drop`,
				`iifname "` + br + `" ip6 daddr fd00:ec2::254 counter packets 0 bytes 0 drop`,
			} {
				if strings.Count(body, want) != 1 {
					t.Errorf("%s: want exactly one %q:\n%s", chain, want, body)
				}
			}
		}
	}
	if err := UnguardMetadata(pair.World, "docker0"); err != nil {
		t.Fatal(err)
	}
	if rs := list(); strings.Contains(rs, "docker0") || !strings.Contains(rs, "forward-br-0123456789ab") {
		t.Fatalf("after removing docker0's guard:\n%s", rs)
	}
	if err := UnguardMetadata(pair.World, "br-0123456789ab"); err != nil {
		t.Fatal(err)
	}
	if err := UnguardMetadata(pair.World, "br-0123456789ab"); err != nil {
		t.Fatalf("removing a removed guard: %v", err)
	}
	if rs := list(); strings.Contains(rs, MetadataTable) {
		t.Fatalf("the table is left after its last guard was removed:\n%s", rs)
	}
	if err := GuardMetadata(pair.World, "a-name-far-too-long-for-an-interface"); err == nil {
		t.Error("an overlong interface name was accepted")
	}
}
