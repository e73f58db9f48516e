package docker

import (
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/egress/sidecar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// TestSidecarEnvContract: what the driver writes into the sidecar's
// environment is what the sidecar reads back, through the one contract.
func TestSidecarEnvContract(t *testing.T) {
	r := &Runtime{opts: Options{
		EgressMode: "dns+nft", EgressDenyWebhook: "https://hooks.test/deny", EgressDNSUpstreams: []string{"10.0.0.2", "10.0.0.3:5353"},
		EgressBlockDoH: true, EgressDoHBlocklist: []string{"1.1.1.1", "8.8.8.0/24"}, EgressUpstreamCAFile: "/etc/host-ca.pem",
		EgressAllowMetadata: true,
	}}
	spec := runtime.Spec{ID: "sb-1", Egress: &runtime.Egress{Policy: []byte(`{"defaultAction":"deny"}`), Token: "tok", CredentialProxy: true}}
	env, err := r.sidecarEnv(spec)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	cfg, err := sidecar.FromEnv(func(k string) string { return m[k] })
	if err != nil {
		t.Fatalf("the sidecar refuses the driver's environment %q: %v", env, err)
	}
	if cfg.SandboxID != "sb-1" || cfg.Mode != "dns+nft" || cfg.Token != "tok" || string(cfg.Policy) != `{"defaultAction":"deny"}` ||
		!cfg.CredentialProxy || cfg.CAFile != egressCAInSidecar || cfg.StartMarker != egressStartMarker ||
		cfg.DenyWebhook != "https://hooks.test/deny" || len(cfg.DNSUpstreams) != 2 || !cfg.BlockDoH || len(cfg.DoHBlocklist) != 2 ||
		cfg.DoHBlocklist[0].String() != "1.1.1.1/32" || cfg.UpstreamCAFile != egressUpstreamCA || !cfg.AllowMetadata {
		t.Fatalf("sidecar config from the driver's environment = %+v", cfg)
	}
	r.opts.EgressDoHBlocklist = []string{"not-an-ip"}
	if _, err := r.sidecarEnv(spec); err == nil {
		t.Error("a bad DoH blocklist entry was written")
	}
}

// TestHashTag: only the tags the driver builds are pruned, never
// opensandbox/egress:latest (make kube-images) or another repo's.
func TestHashTag(t *testing.T) {
	for tag, want := range map[string]bool{
		egressRepo + ":0123456789abcdef":     true,
		egressRepo + ":latest":               false,
		egressRepo + ":v1.1.0":               false,
		egressRepo + ":0123456789ABCDEF":     false,
		egressRepo + ":0123456789abcde":      false,
		"opensandbox/other:0123456789abcdef": false,
	} {
		if got := hashTag(tag, egressRepo); got != want {
			t.Errorf("hashTag(%q) = %v, want %v", tag, got, want)
		}
	}
}
