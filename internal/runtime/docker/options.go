package docker

import (
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"

	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Options configure a Runtime. Zero values select the documented defaults.
type Options struct {
	// Client talks to the engine; nil builds one from the environment
	// (DOCKER_HOST, DOCKER_CERT_PATH, ...) with API version negotiation.
	Client *client.Client
	// ExecdPath is the host path of the static execd binary (required).
	ExecdPath string
	// NetworkMode is "bridge" (default), "host", or the name of an
	// existing user-defined network of the bridge driver, which sandboxes
	// join as they join the bridge (ports published on HostIP).
	NetworkMode string
	// IsolateSandboxes, in bridge mode, attaches sandboxes to
	// BridgeNetwork, a network New creates when missing with
	// inter-container communication off, instead of the engine's default
	// bridge, where containers reach each other. nil means true.
	IsolateSandboxes *bool
	// BridgeNetwork names that network; default DefaultBridgeNetwork.
	BridgeNetwork string
	// OrphanGrace is how old an egress sidecar whose sandbox container is
	// missing must be before New removes it (younger ones may belong to
	// a create in progress on another server); 0 means
	// DefaultOrphanGrace.
	OrphanGrace time.Duration
	// HostIP is the host address ports are published on and that Address
	// reports; default "127.0.0.1".
	HostIP string
	// PublishedPortRange ("20000-32767") is where the engine picks the
	// host ports it publishes sandbox ports on; "" lets it pick from the
	// kernel's ephemeral range, where, while dockerd restarts, any
	// outgoing connection may take a port a live-restored sandbox needs.
	PublishedPortRange string
	// DropCapabilities are removed from every container; nil selects
	// DefaultDropCapabilities, an empty non-nil slice drops nothing.
	DropCapabilities []string
	// NoNewPrivileges sets no-new-privileges; nil means true.
	NoNewPrivileges *bool
	// SeccompProfile is "" for the engine's default profile, the path of
	// a JSON profile, or "unconfined".
	SeccompProfile string
	// AppArmorProfile is the AppArmor profile name; "" = engine default.
	AppArmorProfile string
	// IsolatedExecution says which sandboxes may use execd's isolated
	// sessions (the /v1/isolated API): IsolationOff (""), the default,
	// none; IsolationOnRequest those created with the extension
	// sandbox.ExtIsolatedExecution; IsolationAlways every sandbox. Such
	// a sandbox starts with CAP_SYS_ADMIN, which execd uses once at start
	// (see internal/execd/isolation.Bootstrap) and drops before anything
	// else runs; the engine's default seccomp profile then admits the
	// namespace system calls sessions need (unshare, clone with namespace
	// flags, mount, setns). See docs/isolation.md.
	IsolatedExecution string
	// PidsLimit caps the processes of a sandbox; 0 means 1024 (see docs/configuration.md), <0 no limit.
	PidsLimit int64
	// Runtime is the OCI runtime name (runc, runsc, kata-runtime...);
	// "" = engine default. New fails if the engine does not know it.
	Runtime string
	// EgressImage is the egress sidecar image; "" builds one from
	// EgressPath on first use.
	EgressImage string
	// EgressPath is the host path of the static egress binary; with
	// neither it nor EgressImage, network policies are not supported.
	EgressPath string
	// EgressMode is the sidecar's enforcement mode: "dns+nft" (default)
	// or "dns" (names only).
	EgressMode string
	// EgressDisableIPv6 turns IPv6 off in sandboxes with a sidecar.
	EgressDisableIPv6 bool
	// EgressDNSUpstreams are the resolvers the sidecar forwards allowed
	// names to (IP or IP:port); empty uses the sidecar's resolv.conf.
	EgressDNSUpstreams []string
	// EgressUpstreamCAFile is a host PEM file of extra CAs the credential
	// proxy trusts for origins.
	EgressUpstreamCAFile string
	// EgressDenyWebhook is passed to the sidecar: a URL told of each
	// denied name.
	EgressDenyWebhook string
	// EgressBlockDoH and EgressDoHBlocklist are passed to the sidecar
	// (port-443 blocking of DNS-over-HTTPS resolvers).
	EgressBlockDoH     bool
	EgressDoHBlocklist []string
	// EgressAllowMetadata lets network policies allow link-local
	// metadata addresses, which sidecars otherwise always drop.
	EgressAllowMetadata bool
	// AllowMetadata leaves out the host's nftables table that drops
	// packets from the sandbox bridge to link-local metadata addresses
	// (see metadataGuard).
	AllowMetadata bool
	// WarmNetworks is how many network holders (netns.go) are kept
	// started ahead of creates, so that a sandbox without a network
	// policy joins a network namespace that is already set up; 0 means
	// DefaultWarmNetworks, <0 none. The pool fills while Run runs. Not
	// in host network mode, nor with an OCI runtime whose network stack
	// is not the host kernel's.
	WarmNetworks int
	// ExecdCopy copies execd into each container through the API (for a
	// remote engine) instead of bind-mounting ExecdPath read-only.
	ExecdCopy bool
	// StartTimeout bounds how long Create waits for execd to answer
	// /ping; default 30s.
	StartTimeout time.Duration
	// AllowedHostPaths are the absolute host directories that host
	// volumes (runtime.Volume.HostPath, with its SubPath) must lie under,
	// after cleaning and, as far as the path exists on this machine,
	// resolving symlinks; empty refuses every host volume. A refused
	// volume fails Create with runtime.ErrHostPathNotAllowed.
	AllowedHostPaths []string
	// Labels are added to every container, volume and snapshot image the
	// runtime creates, and List and Get only see containers carrying
	// all of them (several servers or test runs can share one engine).
	Labels map[string]string
	// InstanceID, when set, scopes the runtime to one server instance:
	// it is put as the label opensandbox.io/instance on every container,
	// volume and snapshot image the runtime creates, and Get, List,
	// Delete, Address, Pause, Resume and Sweep only see objects carrying
	// it. Servers with different instance ids share an engine without
	// seeing each other's sandboxes. It must be a DNS-1123 label.
	InstanceID string
	// Logger receives driver logs; nil uses slog.Default().
	Logger *slog.Logger
}

// DefaultDropCapabilities are dropped when Options.DropCapabilities is nil.
var DefaultDropCapabilities = []string{
	"AUDIT_WRITE", "MKNOD", "NET_ADMIN", "NET_RAW", "SYS_ADMIN",
	"SYS_MODULE", "SYS_PTRACE", "SYS_TIME", "SYS_TTY_CONFIG",
}

const (
	defaultPidsLimit    = 1024
	defaultStartTimeout = 30 * time.Second
	networkBridge       = "bridge"
	networkHost         = "host"
	seccompUnconfined   = "unconfined"
)

// Values of Options.IsolatedExecution.
const (
	IsolationOff       = ""
	IsolationOnRequest = "on-request"
	IsolationAlways    = "always"
)

// Runtime is the Docker driver. It is safe for concurrent use.
type Runtime struct {
	cli  *client.Client
	opts Options
	log  *slog.Logger
	// securityOpt is computed once from the options.
	securityOpt []string
	// execdTar holds the tar stream CopyToContainer sends (ExecdCopy only).
	execdTar []byte
	// arch is the CPU architecture of the engine's host, in the API's
	// names (amd64, arm64).
	arch string
	// network is "host", "bridge" or the name of the user-defined network
	// sandboxes join (see setupNetwork); containers name the latter by
	// the id checkNetwork validated.
	network string
	// netMu guards networkID: the id of the network named network as
	// last validated (see checkNetwork); empty in host mode and on the
	// default bridge, which need no check.
	netMu     sync.Mutex
	networkID string
	// http reaches execd inside sandboxes; it never uses a proxy.
	http *http.Client
	// creating holds the ids of sandboxes this runtime is creating, whose
	// sidecar may exist before their container: never orphans.
	creating sync.Map
	// netns keeps network holders ready; nil when there are none.
	netns *netPool
	// egressRef caches the sidecar image built from EgressPath.
	egressMu  sync.Mutex
	egressRef string
	// diskMu guards the remembered answer of CheckDiskLimit.
	diskMu      sync.Mutex
	diskChecked bool
	diskErr     error
}

var (
	_ runtime.Runtime          = (*Runtime)(nil)
	_ runtime.DiskLimitChecker = (*Runtime)(nil)
)

// New checks the options and the engine and returns a Runtime. It fails
// with runtime.ErrUnavailable when the engine does not answer and with
// runtime.ErrInvalid for a bad option (execd missing or not static, an
// OCI runtime the engine does not know, an unreadable seccomp profile, a
// sandbox network that is missing or, when managed, lets containers
// reach each other).
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if opts.Client == nil {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation(), CountEngineRequests())
		if err != nil {
			return nil, classErr(runtime.ErrUnavailable, err, "docker: connect to engine")
		}
		opts.Client = cli
	}
	r := &Runtime{
		cli:  opts.Client,
		opts: opts,
		log:  opts.Logger.With("runtime", "docker"),
		http: &http.Client{Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			DialContext:       (&net.Dialer{Timeout: time.Second}).DialContext,
		}},
	}
	if _, err := r.cli.Ping(ctx); err != nil {
		if classOf(err) == nil {
			return nil, classErr(runtime.ErrUnavailable, err, "docker: ping engine")
		}
		return nil, engineErr(err, "docker: ping engine")
	}
	// The client negotiates the API version lazily on its first request
	// and writes its version field without a lock; concurrent first
	// requests race. Negotiate once here, before the Runtime is shared.
	r.cli.NegotiateAPIVersion(ctx)
	if err := checkStatic(opts.ExecdPath); err != nil {
		return nil, err
	}
	if opts.EgressPath != "" && opts.EgressImage == "" {
		if err := checkStatic(opts.EgressPath); err != nil {
			return nil, err
		}
	}
	var err error
	if r.securityOpt, err = securityOptions(opts); err != nil {
		return nil, err
	}
	if opts.Runtime != "" {
		info, err := r.cli.Info(ctx)
		if err != nil {
			return nil, engineErr(err, "docker: read engine info")
		}
		if _, ok := info.Runtimes[opts.Runtime]; !ok {
			known := slices.Sorted(maps.Keys(info.Runtimes))
			return nil, fmt.Errorf("docker: OCI runtime %q is not configured in the engine (it knows %s): %w",
				opts.Runtime, strings.Join(known, ", "), runtime.ErrInvalid)
		}
	}
	if err := r.readEngineArch(ctx); err != nil {
		return nil, err
	}
	if opts.ExecdCopy {
		if r.execdTar, err = execdArchive(opts.ExecdPath); err != nil {
			return nil, err
		}
	}
	if err := r.setupNetwork(ctx); err != nil {
		return nil, err
	}
	r.removeOrphanSidecars(ctx)
	if opts.WarmNetworks > 0 && r.network != networkHost && kernelNetworking(opts.Runtime) {
		r.netns = newNetPool(r, opts.WarmNetworks)
	}
	return r, nil
}

func (o *Options) setDefaults() error {
	if o.ExecdPath == "" {
		return fmt.Errorf("docker: ExecdPath is required: %w", runtime.ErrInvalid)
	}
	abs, err := filepath.Abs(o.ExecdPath)
	if err != nil {
		return fmt.Errorf("docker: execd path %s: %w", o.ExecdPath, runtime.ErrInvalid)
	}
	o.ExecdPath = abs
	switch o.NetworkMode {
	case "":
		o.NetworkMode = networkBridge
	case networkBridge, networkHost:
	default:
		if !userNetworkName(o.NetworkMode) {
			return fmt.Errorf("docker: network mode %q: want bridge, host or the name of a user-defined network: %w", o.NetworkMode, runtime.ErrInvalid)
		}
	}
	if o.WarmNetworks == 0 {
		o.WarmNetworks = DefaultWarmNetworks
	}
	if o.IsolateSandboxes == nil {
		yes := true
		o.IsolateSandboxes = &yes
	}
	if o.BridgeNetwork == "" {
		o.BridgeNetwork = DefaultBridgeNetwork
	}
	if !userNetworkName(o.BridgeNetwork) {
		return fmt.Errorf("docker: bridge network %q: want the name of a user-defined network (not bridge, host or none): %w", o.BridgeNetwork, runtime.ErrInvalid)
	}
	if o.HostIP == "" {
		o.HostIP = "127.0.0.1"
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = DefaultOrphanGrace
	}
	if o.PublishedPortRange != "" {
		lo, hi, err := nat.ParsePortRange(o.PublishedPortRange)
		if err != nil || !strings.Contains(o.PublishedPortRange, "-") || lo == 0 || hi > 65535 {
			return fmt.Errorf("docker: published port range %q: want LOW-HIGH within 1-65535: %w", o.PublishedPortRange, runtime.ErrInvalid)
		}
	}
	if net.ParseIP(o.HostIP) == nil {
		return fmt.Errorf("docker: host IP %q is not an IP address: %w", o.HostIP, runtime.ErrInvalid)
	}
	if o.DropCapabilities == nil {
		o.DropCapabilities = DefaultDropCapabilities
	}
	o.DropCapabilities = slices.Clone(o.DropCapabilities)
	if o.NoNewPrivileges == nil {
		yes := true
		o.NoNewPrivileges = &yes
	}
	switch o.IsolatedExecution {
	case IsolationOff, IsolationOnRequest, IsolationAlways:
	default:
		return fmt.Errorf("docker: isolated execution %q: want %q, %q or empty: %w", o.IsolatedExecution, IsolationOnRequest, IsolationAlways, runtime.ErrInvalid)
	}
	if o.PidsLimit == 0 {
		o.PidsLimit = defaultPidsLimit
	}
	if o.EgressMode == "" {
		o.EgressMode = sandbox.EgressEnforcementDNSNft
	}
	if o.EgressMode != sandbox.EgressEnforcementDNS && o.EgressMode != sandbox.EgressEnforcementDNSNft {
		return fmt.Errorf("docker: egress mode %q: want dns or dns+nft: %w", o.EgressMode, runtime.ErrInvalid)
	}
	if o.EgressPath != "" {
		abs, err := filepath.Abs(o.EgressPath)
		if err != nil {
			return fmt.Errorf("docker: egress path %s: %w", o.EgressPath, runtime.ErrInvalid)
		}
		o.EgressPath = abs
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = defaultStartTimeout
	}
	roots := make([]string, 0, len(o.AllowedHostPaths))
	for _, p := range o.AllowedHostPaths {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("docker: allowed host path %q is not absolute: %w", p, runtime.ErrInvalid)
		}
		roots = append(roots, filepath.Clean(p))
	}
	o.AllowedHostPaths = roots
	o.Labels = maps.Clone(o.Labels)
	for k := range o.Labels {
		if strings.HasPrefix(k, labelPrefix) {
			return fmt.Errorf("docker: label %q uses the reserved prefix %s: %w", k, labelPrefix, runtime.ErrInvalid)
		}
	}
	if o.InstanceID != "" {
		if err := grammar.CheckInstanceID(o.InstanceID); err != nil {
			return fmt.Errorf("docker: %w", err)
		}
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[labelInstance] = o.InstanceID
	}
	return nil
}

// securityOptions builds the SecurityOpt list shared by every container.
func securityOptions(o Options) ([]string, error) {
	var so []string
	if *o.NoNewPrivileges {
		so = append(so, "no-new-privileges:true")
	}
	switch o.SeccompProfile {
	case "":
	case seccompUnconfined:
		so = append(so, "seccomp=unconfined")
	default:
		b, err := os.ReadFile(o.SeccompProfile)
		if err != nil {
			return nil, fmt.Errorf("docker: seccomp profile: %w: %w", runtime.ErrInvalid, err)
		}
		if !json.Valid(b) {
			return nil, fmt.Errorf("docker: seccomp profile %s is not JSON: %w", o.SeccompProfile, runtime.ErrInvalid)
		}
		so = append(so, "seccomp="+string(b))
	}
	if o.AppArmorProfile != "" {
		so = append(so, "apparmor="+o.AppArmorProfile)
	}
	return so, nil
}

// checkStatic verifies path is an executable, statically linked ELF file
// (it must run in any image, whatever libc the image has).
func checkStatic(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("docker: execd binary: %w: %w", runtime.ErrInvalid, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("docker: execd binary %s is not an executable file: %w", path, runtime.ErrInvalid)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("docker: execd binary %s is not an ELF executable: %w: %w", path, runtime.ErrInvalid, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("docker: execd binary %s is dynamically linked; build it with CGO_ENABLED=0: %w", path, runtime.ErrInvalid)
		}
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("docker: execd binary %s is not an executable: %w", path, runtime.ErrInvalid)
	}
	return nil
}
