package e2e

import (
	"fmt"
	osexec "os/exec"
	"testing"
)

// testMetadataIP stands for the cloud metadata address. It exists only in
// the world namespace the test builds; no packet goes to the real one.
const testMetadataIP = "169.254.169.254"

// TestEgressSidecarNetnsMetadata: the sidecar drops the sandbox's packets
// to link-local metadata addresses in both modes, even when the policy
// allows them, unless OPENSANDBOX_EGRESS_ALLOW_METADATA lets the policy
// decide. The metadata address is served in the test's world namespace,
// and the sandbox reaches it before the sidecar starts (the control).
func TestEgressSidecarNetnsMetadata(t *testing.T) {
	for _, tc := range []struct {
		name, mode, policy, allowMetadata string
		reached                           bool
	}{
		{"dns mode, allow-all policy", "dns", `{"defaultAction":"allow"}`, "", false},
		{"dns+nft, an allow rule for the address", "dns+nft", fmt.Sprintf(`{"defaultAction":"deny","egress":[{"action":"allow","target":%q}]}`, testMetadataIP), "", false},
		{"dns+nft, allow 0.0.0.0/0", "dns+nft", `{"defaultAction":"deny","egress":[{"action":"allow","target":"0.0.0.0/0"}]}`, "", false},
		{"allow_metadata lets the policy decide", "dns+nft", fmt.Sprintf(`{"defaultAction":"deny","egress":[{"action":"allow","target":%q}]}`, testMetadataIP), "true", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newEgressNet(t)
			ipCmd := func(args ...string) {
				t.Helper()
				if out, err := osexec.Command("ip", args...).CombinedOutput(); err != nil {
					t.Fatalf("ip %v: %v: %s", args, err, out)
				}
			}
			// The world holds the address; the sandbox routes it there.
			ipCmd("-n", n.WorldName, "addr", "add", testMetadataIP+"/32", "dev", "lo")
			ipCmd("-n", n.SandboxName, "route", "add", testMetadataIP+"/32", "via", n.ip(2))
			port := n.serveHTTP(t, testMetadataIP, n.ip(3))
			n.mustConnect(t, testMetadataIP, port) // control: routed and served

			env := map[string]string{
				"OPENSANDBOX_EGRESS_MODE":         tc.mode,
				"OPENSANDBOX_EGRESS_RULES":        tc.policy,
				"OPENSANDBOX_EGRESS_DNS_UPSTREAM": n.ip(2),
				"OPENSANDBOX_EGRESS_RULES_DIR":    t.TempDir(),
			}
			if tc.allowMetadata != "" {
				env["OPENSANDBOX_EGRESS_ALLOW_METADATA"] = tc.allowMetadata
			}
			n.startSidecar(t, env)
			if tc.reached {
				n.mustConnect(t, testMetadataIP, port)
			} else {
				n.mustBeDropped(t, testMetadataIP, port)
			}
			if tc.mode == "dns" {
				n.mustConnect(t, n.ip(3), port) // only the metadata range is dropped
			}
		})
	}
}
