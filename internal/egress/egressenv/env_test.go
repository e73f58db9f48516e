package egressenv

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func getenvOf(vars []string) func(string) string {
	m := map[string]string{}
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// TestRoundTrip: every field the driver writes comes back as written, and
// every field of Env has a variable (a new field that Encode forgets
// fails here, since the full value sets every field).
func TestRoundTrip(t *testing.T) {
	n := 12
	full := Env{
		SandboxID: "sb-1", Mode: ModeDNSNft, Token: "tok", Rules: `{"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"}]}`,
		PolicyFile: "/var/egress/policy.json", MaxRules: &n, Listen: ":18080", DNSAddr: "127.0.0.1:15353",
		DNSUpstreams: []string{"10.0.0.2", "[fd00::1]:54"}, DNSUpstreamTimeout: 1500 * time.Millisecond,
		RulesDir: "/var/egress/rules", AlwaysReload: time.Minute, DenyWebhook: "https://hooks.test/deny",
		BlockDoH: true, DoHBlocklist: []netip.Prefix{netip.MustParsePrefix("1.1.1.1/32"), netip.MustParsePrefix("2606:4700::/32")},
		APIAllow:        []netip.Addr{netip.MustParseAddr("172.17.0.1"), netip.MustParseAddr("fd00::1")},
		CredentialProxy: true, TLSProxyPort: 18081, HTTPProxyPort: 18082, CAFile: "/run/ca.pem",
		UpstreamCAFile: "/etc/up.pem", StartMarker: "/run/started", AllowMetadata: true, LogLevel: "debug",
	}
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the full value leaves %s zero: set it", v.Type().Field(i).Name)
		}
	}
	zero := 0
	for _, e := range []Env{full, {}, {Mode: ModeDNS, MaxRules: &zero}} {
		vars := e.Encode()
		got, err := Decode(getenvOf(vars))
		if err != nil {
			t.Fatalf("Decode(%q): %v", vars, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("round trip of %+v:\n vars %q\n got  %+v", e, vars, got)
		}
	}
	if got := len(full.Encode()); got != len(Vars) {
		t.Errorf("the full value encodes %d variables; the contract has %d", got, len(Vars))
	}
}

func TestDecodeErrorsNameTheVariable(t *testing.T) {
	for name, val := range map[string]string{
		VarMode: "iptables", VarMaxRules: "-1", VarDNSUpstreamTimeout: "soon", VarAlwaysReload: "0",
		VarDenyWebhook: "ftp://x", VarBlockDoH: "perhaps", VarDoHBlocklist: "1.1.1.1,dns.test",
		VarAPIAllow: "10.0.0.0/8", VarCredentialProxy: "2", VarTLSProxyPort: "0", VarHTTPProxyPort: "70000",
		VarAllowMetadata: "yes please",
	} {
		_, err := Decode(getenvOf([]string{name + "=" + val}))
		if err == nil || !strings.Contains(err.Error(), name+":") {
			t.Errorf("%s=%q: err = %v; want an error naming it", name, val, err)
		}
	}
	e, err := Decode(getenvOf([]string{VarTLSProxyPort + "=18091", VarDNSUpstreamTimeout + "=5", VarDoHBlocklist + "=8.8.8.8 9.9.9.0/24"}))
	if err != nil || e.TLSProxyPort != 18091 || e.DNSUpstreamTimeout != 5*time.Second || len(e.DoHBlocklist) != 2 || e.DoHBlocklist[0].Bits() != 32 {
		t.Errorf("Decode = %+v, %v", e, err)
	}
}

// TestDocumented: docs/egress.md lists every variable of the contract.
func TestDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "egress.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Vars {
		if !strings.Contains(string(b), "| `"+v+"` |") {
			t.Errorf("docs/egress.md has no table row for %s", v)
		}
	}
}
