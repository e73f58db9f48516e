// Package egressenv is the egress sidecar's environment contract: the
// OPENSANDBOX_EGRESS_* variables a runtime driver writes when it starts a
// sidecar and the sidecar reads at start. Both sides use Env, so a variable
// is named, formatted and parsed in one place. It depends on the standard
// library only: it is linked into the sidecar binary.
package egressenv

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The variables of the contract.
const (
	VarSandboxID          = "OPENSANDBOX_EGRESS_SANDBOX_ID"
	VarMode               = "OPENSANDBOX_EGRESS_MODE"
	VarToken              = "OPENSANDBOX_EGRESS_TOKEN"
	VarRules              = "OPENSANDBOX_EGRESS_RULES"
	VarPolicyFile         = "OPENSANDBOX_EGRESS_POLICY_FILE"
	VarMaxRules           = "OPENSANDBOX_EGRESS_MAX_RULES"
	VarListen             = "OPENSANDBOX_EGRESS_LISTEN"
	VarDNSAddr            = "OPENSANDBOX_EGRESS_DNS_ADDR"
	VarDNSUpstream        = "OPENSANDBOX_EGRESS_DNS_UPSTREAM"
	VarDNSUpstreamTimeout = "OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT"
	VarRulesDir           = "OPENSANDBOX_EGRESS_RULES_DIR"
	VarAlwaysReload       = "OPENSANDBOX_EGRESS_ALWAYS_RELOAD"
	VarDenyWebhook        = "OPENSANDBOX_EGRESS_DENY_WEBHOOK"
	VarBlockDoH           = "OPENSANDBOX_EGRESS_BLOCK_DOH_443"
	VarDoHBlocklist       = "OPENSANDBOX_EGRESS_DOH_BLOCKLIST"
	VarAPIAllow           = "OPENSANDBOX_EGRESS_API_ALLOW"
	VarCredentialProxy    = "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT"
	VarTLSProxyPort       = "OPENSANDBOX_EGRESS_MITMPROXY_PORT"
	VarHTTPProxyPort      = "OPENSANDBOX_EGRESS_HTTP_PROXY_PORT"
	VarCAFile             = "OPENSANDBOX_EGRESS_CA_FILE"
	VarUpstreamCAFile     = "OPENSANDBOX_EGRESS_UPSTREAM_CA_FILE"
	VarStartMarker        = "OPENSANDBOX_EGRESS_START_MARKER"
	VarAllowMetadata      = "OPENSANDBOX_EGRESS_ALLOW_METADATA"
	VarLogLevel           = "OPENSANDBOX_EGRESS_LOG_LEVEL"
)

// Vars lists every variable of the contract.
var Vars = []string{
	VarSandboxID, VarMode, VarToken, VarRules, VarPolicyFile, VarMaxRules, VarListen, VarDNSAddr,
	VarDNSUpstream, VarDNSUpstreamTimeout, VarRulesDir, VarAlwaysReload, VarDenyWebhook, VarBlockDoH,
	VarDoHBlocklist, VarAPIAllow, VarCredentialProxy, VarTLSProxyPort, VarHTTPProxyPort, VarCAFile,
	VarUpstreamCAFile, VarStartMarker, VarAllowMetadata, VarLogLevel,
}

// The enforcement modes (the values of VarMode).
const (
	ModeDNS    = "dns"     // DNS filtering only
	ModeDNSNft = "dns+nft" // DNS filtering and nftables
)

// Env is the sidecar's configuration as it travels in the environment.
// A zero field is not written and, read back, means "the sidecar's
// default".
type Env struct {
	SandboxID string
	// Mode is ModeDNS or ModeDNSNft; "" is the sidecar's default.
	Mode  string
	Token string
	// Rules is the initial policy (JSON NetworkPolicy); "" is deny-all.
	Rules      string
	PolicyFile string
	// MaxRules caps user rules; nil is the sidecar's default, 0 no cap.
	MaxRules *int
	Listen   string
	DNSAddr  string
	// DNSUpstreams are resolvers, each IP or IP:port (checked by the
	// sidecar's DNS proxy, which knows the forms).
	DNSUpstreams       []string
	DNSUpstreamTimeout time.Duration
	RulesDir           string
	AlwaysReload       time.Duration
	// DenyWebhook is an http or https URL.
	DenyWebhook string
	BlockDoH    bool
	// DoHBlocklist are IPs (one-address prefixes) and CIDRs.
	DoHBlocklist []netip.Prefix
	APIAllow     []netip.Addr
	// CredentialProxy turns on the vault's transparent proxies.
	CredentialProxy bool
	TLSProxyPort    uint16
	HTTPProxyPort   uint16
	CAFile          string
	UpstreamCAFile  string
	StartMarker     string
	// AllowMetadata lets the policy allow link-local metadata addresses,
	// which are otherwise dropped whatever it says.
	AllowMetadata bool
	LogLevel      string
}

// Encode returns the variables of e as NAME=value, for a container's
// environment. Zero fields are left out.
func (e Env) Encode() []string {
	var out []string
	put := func(name, v string) {
		if v != "" {
			out = append(out, name+"="+v)
		}
	}
	flag := func(name string, b bool) {
		if b {
			put(name, "true")
		}
	}
	dur := func(name string, d time.Duration) {
		if d > 0 {
			put(name, d.String())
		}
	}
	port := func(name string, p uint16) {
		if p != 0 {
			put(name, strconv.Itoa(int(p)))
		}
	}
	put(VarSandboxID, e.SandboxID)
	put(VarMode, e.Mode)
	put(VarToken, e.Token)
	put(VarRules, e.Rules)
	put(VarPolicyFile, e.PolicyFile)
	if e.MaxRules != nil {
		put(VarMaxRules, strconv.Itoa(*e.MaxRules))
	}
	put(VarListen, e.Listen)
	put(VarDNSAddr, e.DNSAddr)
	put(VarDNSUpstream, strings.Join(e.DNSUpstreams, ","))
	dur(VarDNSUpstreamTimeout, e.DNSUpstreamTimeout)
	put(VarRulesDir, e.RulesDir)
	dur(VarAlwaysReload, e.AlwaysReload)
	put(VarDenyWebhook, e.DenyWebhook)
	flag(VarBlockDoH, e.BlockDoH)
	put(VarDoHBlocklist, joinStrings(e.DoHBlocklist))
	put(VarAPIAllow, joinStrings(e.APIAllow))
	flag(VarCredentialProxy, e.CredentialProxy)
	port(VarTLSProxyPort, e.TLSProxyPort)
	port(VarHTTPProxyPort, e.HTTPProxyPort)
	put(VarCAFile, e.CAFile)
	put(VarUpstreamCAFile, e.UpstreamCAFile)
	put(VarStartMarker, e.StartMarker)
	flag(VarAllowMetadata, e.AllowMetadata)
	put(VarLogLevel, e.LogLevel)
	return out
}

// Decode reads the variables through getenv. Every malformed value is
// reported, each error naming its variable.
func Decode(getenv func(string) string) (Env, error) {
	e := Env{
		SandboxID:      getenv(VarSandboxID),
		Mode:           strings.TrimSpace(getenv(VarMode)),
		Token:          getenv(VarToken),
		Rules:          getenv(VarRules),
		PolicyFile:     getenv(VarPolicyFile),
		Listen:         getenv(VarListen),
		DNSAddr:        getenv(VarDNSAddr),
		RulesDir:       getenv(VarRulesDir),
		DenyWebhook:    getenv(VarDenyWebhook),
		CAFile:         getenv(VarCAFile),
		UpstreamCAFile: getenv(VarUpstreamCAFile),
		StartMarker:    getenv(VarStartMarker),
		LogLevel:       getenv(VarLogLevel),
	}
	var errs []error
	bad := func(name string, err error) { errs = append(errs, fmt.Errorf("%s: %w", name, err)) }
	if e.Mode != "" && e.Mode != ModeDNS && e.Mode != ModeDNSNft {
		bad(VarMode, fmt.Errorf("%q is not %q or %q", e.Mode, ModeDNS, ModeDNSNft))
	}
	if v := getenv(VarMaxRules); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			bad(VarMaxRules, fmt.Errorf("%q is not a count", v))
		} else {
			e.MaxRules = &n
		}
	}
	e.DNSUpstreams = fields(getenv(VarDNSUpstream))
	duration := func(name string) time.Duration {
		v := getenv(name)
		if v == "" {
			return 0
		}
		d, err := parseSeconds(v)
		if err != nil {
			bad(name, err)
		}
		return d
	}
	e.DNSUpstreamTimeout = duration(VarDNSUpstreamTimeout)
	e.AlwaysReload = duration(VarAlwaysReload)
	if v := e.DenyWebhook; v != "" {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(VarDenyWebhook, fmt.Errorf("%q is not an http or https URL", v))
		}
	}
	boolean := func(name string) bool {
		v := getenv(name)
		if v == "" {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(name, fmt.Errorf("%q is not a boolean", v))
		}
		return b
	}
	e.BlockDoH = boolean(VarBlockDoH)
	e.CredentialProxy = boolean(VarCredentialProxy)
	e.AllowMetadata = boolean(VarAllowMetadata)
	for _, f := range fields(getenv(VarDoHBlocklist)) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				bad(VarDoHBlocklist, fmt.Errorf("%q is not an IP or CIDR", f))
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		e.DoHBlocklist = append(e.DoHBlocklist, p)
	}
	for _, f := range fields(getenv(VarAPIAllow)) {
		a, err := netip.ParseAddr(f)
		if err != nil {
			bad(VarAPIAllow, fmt.Errorf("%q is not an IP address", f))
			continue
		}
		e.APIAllow = append(e.APIAllow, a)
	}
	port := func(name string) uint16 {
		v := getenv(name)
		if v == "" {
			return 0
		}
		p, err := strconv.ParseUint(v, 10, 16)
		if err != nil || p == 0 {
			bad(name, fmt.Errorf("%q is not a port", v))
		}
		return uint16(p)
	}
	e.TLSProxyPort = port(VarTLSProxyPort)
	e.HTTPProxyPort = port(VarHTTPProxyPort)
	return e, errors.Join(errs...)
}

// fields splits a list separated by commas and/or spaces; nil when empty.
func fields(v string) []string {
	f := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
	if len(f) == 0 {
		return nil
	}
	return f
}

func joinStrings[T fmt.Stringer](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
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
