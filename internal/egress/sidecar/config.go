package sidecar

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/dnsproxy"
	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Defaults of the sidecar's listeners and files.
const (
	DefaultListen       = ":18080"
	DefaultTLSProxyAddr = "127.0.0.1:18081"
	// DefaultHTTPProxyAddr receives the sandbox's redirected port-80
	// connections when the credential proxy is on.
	DefaultHTTPProxyAddr = "127.0.0.1:18082"
	DefaultCAFile        = "/run/opensandbox/egress/ca.pem"
	DefaultRulesDir      = "/var/egress/rules"
	DefaultAlwaysReload  = 60 * time.Second
)

// Config is the sidecar's whole configuration.
type Config struct {
	// SandboxID names the CA and log lines.
	SandboxID string
	// Mode is sandbox.EgressEnforcementDNS or EgressEnforcementDNSNft.
	Mode string
	// Token, when set, guards /policy and /credential-vault.
	Token string
	// Policy is the initial policy (JSON NetworkPolicy; empty is deny-all).
	Policy []byte
	// PolicyFile, when set, persists the current policy; a valid file
	// found at start wins over Policy.
	PolicyFile string
	// MaxRules caps user rules (0: no cap).
	MaxRules int
	// Listen is the API address.
	Listen string
	// DNSAddr is where the DNS proxy listens.
	DNSAddr string
	// DNSUpstreams are the resolvers (IP or IP:port); empty reads
	// ResolvConf.
	DNSUpstreams []string
	// DNSTimeout bounds each upstream exchange.
	DNSTimeout time.Duration
	// ResolvConf is read for upstreams when DNSUpstreams is empty.
	ResolvConf string
	// Always are the operator's always-deny/allow files, re-read every
	// AlwaysReload.
	Always       policy.AlwaysFiles
	AlwaysReload time.Duration
	// LogSkip names the file of patterns whose denials are not reported
	// (re-read with the always files).
	LogSkip string
	// DenyWebhook, when set, receives a POST for each reported denial.
	DenyWebhook string
	// BlockDoH drops port 443 to DoHBlocklist, or all of port 443 when the
	// list is empty (DNS over HTTPS).
	BlockDoH     bool
	DoHBlocklist []netip.Prefix
	// APIAllow are the only non-loopback sources the API port accepts;
	// nil means the default gateways (the host on a Docker bridge).
	APIAllow []netip.Addr
	// CredentialProxy turns on the vault's transparent TLS proxy.
	CredentialProxy bool
	// TLSProxyAddr is where the TLS proxy listens (loopback).
	TLSProxyAddr string
	// HTTPProxyAddr is where the plain-HTTP proxy listens (loopback).
	HTTPProxyAddr string
	// CAFile receives the per-sandbox CA certificate (never its key).
	CAFile string
	// StartMarker, when set, is a file the sidecar creates at its first
	// start and refuses to start again when it finds. On Docker a
	// restarted container gets a new network namespace while the sandbox
	// stays in the old one, so a second start could only ever serve an
	// empty namespace; exiting at once lets the runtime report the
	// sandbox as failed. The marker lives in the container's writable
	// layer, which a restart keeps and a new container does not have.
	StartMarker string
	// UpstreamCAFile, when set, holds PEM certificates trusted for origins
	// besides the system roots.
	UpstreamCAFile string
	Logger         *slog.Logger
}

// FromEnv reads the configuration from environment variables through
// getenv. Unknown values are errors naming the variable.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		SandboxID:       getenv("OPENSANDBOX_EGRESS_SANDBOX_ID"),
		Mode:            strings.TrimSpace(getenv("OPENSANDBOX_EGRESS_MODE")),
		Token:           getenv("OPENSANDBOX_EGRESS_TOKEN"),
		Policy:          []byte(getenv("OPENSANDBOX_EGRESS_RULES")),
		PolicyFile:      getenv("OPENSANDBOX_EGRESS_POLICY_FILE"),
		MaxRules:        policy.DefaultMaxRules,
		Listen:          or(getenv("OPENSANDBOX_EGRESS_LISTEN"), DefaultListen),
		DNSAddr:         or(getenv("OPENSANDBOX_EGRESS_DNS_ADDR"), dnsproxy.DefaultAddr),
		DNSTimeout:      dnsproxy.DefaultTimeout,
		ResolvConf:      "/etc/resolv.conf",
		AlwaysReload:    DefaultAlwaysReload,
		TLSProxyAddr:    DefaultTLSProxyAddr,
		HTTPProxyAddr:   DefaultHTTPProxyAddr,
		CAFile:          or(getenv("OPENSANDBOX_EGRESS_CA_FILE"), DefaultCAFile),
		UpstreamCAFile:  getenv("OPENSANDBOX_EGRESS_UPSTREAM_CA_FILE"),
		StartMarker:     getenv("OPENSANDBOX_EGRESS_START_MARKER"),
		CredentialProxy: false,
	}
	var errs []error
	bad := func(name string, err error) { errs = append(errs, fmt.Errorf("%s: %w", name, err)) }
	if c.Mode == "" {
		c.Mode = sandbox.EgressEnforcementDNSNft
	}
	if c.Mode != sandbox.EgressEnforcementDNS && c.Mode != sandbox.EgressEnforcementDNSNft {
		bad("OPENSANDBOX_EGRESS_MODE", fmt.Errorf("%q is not %q or %q", c.Mode, sandbox.EgressEnforcementDNS, sandbox.EgressEnforcementDNSNft))
	}
	if v := getenv("OPENSANDBOX_EGRESS_MAX_RULES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			bad("OPENSANDBOX_EGRESS_MAX_RULES", fmt.Errorf("%q is not a count", v))
		}
		c.MaxRules = n
	}
	if v := getenv("OPENSANDBOX_EGRESS_DNS_UPSTREAM"); v != "" {
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			if _, err := dnsproxy.ParseUpstream(f); err != nil {
				bad("OPENSANDBOX_EGRESS_DNS_UPSTREAM", err)
			}
			c.DNSUpstreams = append(c.DNSUpstreams, f)
		}
	}
	if v := getenv("OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT"); v != "" {
		d, err := parseSeconds(v)
		if err != nil {
			bad("OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT", err)
		}
		c.DNSTimeout = d
	}
	dir := or(getenv("OPENSANDBOX_EGRESS_RULES_DIR"), DefaultRulesDir)
	c.Always = policy.AlwaysFiles{Deny: filepath.Join(dir, "deny.always"), Allow: filepath.Join(dir, "allow.always")}
	c.LogSkip = filepath.Join(dir, "log_skip.always")
	if v := getenv("OPENSANDBOX_EGRESS_DENY_WEBHOOK"); v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("OPENSANDBOX_EGRESS_DENY_WEBHOOK", fmt.Errorf("%q is not an http or https URL", v))
		}
		c.DenyWebhook = v
	}
	if v := getenv("OPENSANDBOX_EGRESS_ALWAYS_RELOAD"); v != "" {
		d, err := parseSeconds(v)
		if err != nil {
			bad("OPENSANDBOX_EGRESS_ALWAYS_RELOAD", err)
		}
		c.AlwaysReload = d
	}
	if v := getenv("OPENSANDBOX_EGRESS_BLOCK_DOH_443"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("OPENSANDBOX_EGRESS_BLOCK_DOH_443", fmt.Errorf("%q is not a boolean", v))
		}
		c.BlockDoH = b
	}
	if v := getenv("OPENSANDBOX_EGRESS_DOH_BLOCKLIST"); v != "" {
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				a, aerr := netip.ParseAddr(f)
				if aerr != nil {
					bad("OPENSANDBOX_EGRESS_DOH_BLOCKLIST", fmt.Errorf("%q is not an IP or CIDR", f))
					continue
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			c.DoHBlocklist = append(c.DoHBlocklist, p)
		}
	}
	if v := getenv("OPENSANDBOX_EGRESS_API_ALLOW"); v != "" {
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			a, err := netip.ParseAddr(f)
			if err != nil {
				bad("OPENSANDBOX_EGRESS_API_ALLOW", fmt.Errorf("%q is not an IP address", f))
				continue
			}
			c.APIAllow = append(c.APIAllow, a)
		}
	}
	if v := getenv("OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT", fmt.Errorf("%q is not a boolean", v))
		}
		c.CredentialProxy = b
	}
	if v := getenv("OPENSANDBOX_EGRESS_MITMPROXY_PORT"); v != "" {
		p, err := strconv.ParseUint(v, 10, 16)
		if err != nil || p == 0 {
			bad("OPENSANDBOX_EGRESS_MITMPROXY_PORT", fmt.Errorf("%q is not a port", v))
		}
		c.TLSProxyAddr = net.JoinHostPort("127.0.0.1", v)
	}
	if v := getenv("OPENSANDBOX_EGRESS_HTTP_PROXY_PORT"); v != "" {
		p, err := strconv.ParseUint(v, 10, 16)
		if err != nil || p == 0 {
			bad("OPENSANDBOX_EGRESS_HTTP_PROXY_PORT", fmt.Errorf("%q is not a port", v))
		}
		c.HTTPProxyAddr = net.JoinHostPort("127.0.0.1", v)
	}
	return c, errors.Join(errs...)
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// parseSeconds accepts a Go duration ("5s") or a number of seconds ("5").
func parseSeconds(v string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration", v)
	}
	return d, nil
}
