package sidecar

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/dnsproxy"
	"github.com/opensandbox-go/opensandbox/internal/egress/egressenv"
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
	// AllowMetadata lets the policy allow link-local metadata addresses
	// (169.254.0.0/16, fd00:ec2::254), which are otherwise dropped
	// whatever it says.
	AllowMetadata bool
	Logger        *slog.Logger
}

// FromEnv reads the configuration from environment variables through
// getenv (the contract of package egressenv). Unknown values are errors
// naming the variable.
func FromEnv(getenv func(string) string) (Config, error) {
	e, err := egressenv.Decode(getenv)
	errs := []error{err}
	c := Config{
		SandboxID:       e.SandboxID,
		Mode:            or(e.Mode, sandbox.EgressEnforcementDNSNft),
		Token:           e.Token,
		Policy:          []byte(e.Rules),
		PolicyFile:      e.PolicyFile,
		MaxRules:        policy.DefaultMaxRules,
		Listen:          or(e.Listen, DefaultListen),
		DNSAddr:         or(e.DNSAddr, dnsproxy.DefaultAddr),
		DNSTimeout:      dnsproxy.DefaultTimeout,
		ResolvConf:      "/etc/resolv.conf",
		AlwaysReload:    DefaultAlwaysReload,
		TLSProxyAddr:    DefaultTLSProxyAddr,
		HTTPProxyAddr:   DefaultHTTPProxyAddr,
		CAFile:          or(e.CAFile, DefaultCAFile),
		UpstreamCAFile:  e.UpstreamCAFile,
		StartMarker:     e.StartMarker,
		DenyWebhook:     e.DenyWebhook,
		BlockDoH:        e.BlockDoH,
		DoHBlocklist:    e.DoHBlocklist,
		APIAllow:        e.APIAllow,
		CredentialProxy: e.CredentialProxy,
		AllowMetadata:   e.AllowMetadata,
	}
	if e.MaxRules != nil {
		c.MaxRules = *e.MaxRules
	}
	for _, u := range e.DNSUpstreams {
		if _, err := dnsproxy.ParseUpstream(u); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", egressenv.VarDNSUpstream, err))
		}
	}
	c.DNSUpstreams = e.DNSUpstreams
	if e.DNSUpstreamTimeout > 0 {
		c.DNSTimeout = e.DNSUpstreamTimeout
	}
	if e.AlwaysReload > 0 {
		c.AlwaysReload = e.AlwaysReload
	}
	dir := or(e.RulesDir, DefaultRulesDir)
	c.Always = policy.AlwaysFiles{Deny: filepath.Join(dir, "deny.always"), Allow: filepath.Join(dir, "allow.always")}
	c.LogSkip = filepath.Join(dir, "log_skip.always")
	if e.TLSProxyPort != 0 {
		c.TLSProxyAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(e.TLSProxyPort)))
	}
	if e.HTTPProxyPort != 0 {
		c.HTTPProxyAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(e.HTTPProxyPort)))
	}
	return c, errors.Join(errs...)
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
