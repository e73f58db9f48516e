// Package serverconfig reads the lifecycle server's TOML configuration
// (by default ~/.sandbox.toml), applies defaults and environment
// overrides, and validates it. The file format is the upstream
// OpenSandbox server's, so an upstream file keeps working: keys we do not
// implement are accepted with a warning when they are harmless, and
// rejected with a clear error when honouring them silently would be wrong
// (for example Kubernetes settings under the Docker runtime).
//
// It only describes settings: building the runtime, the store and the
// HTTP server from them is the job of cmd/opensandbox-server. It must not
// import the server, the store or any runtime driver.
//
//	cfg, warnings, err := serverconfig.Load("", os.Getenv)
package serverconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Environment variables read by Load.
const (
	// EnvConfigPath names the config file when Load gets no path.
	EnvConfigPath = "SANDBOX_CONFIG_PATH"
	// EnvAPIKey, when non-empty, replaces server.api_key.
	EnvAPIKey = "OPENSANDBOX_SERVER_API_KEY"
	// EnvInsecure=YES lets the server start without an API key.
	EnvInsecure = "OPENSANDBOX_INSECURE_SERVER"
)

// Supported values.
const (
	RuntimeDocker     = "docker"
	RuntimeKubernetes = "kubernetes"
	NetworkBridge     = "bridge"
	NetworkHost       = "host"
	StoreBbolt        = "bbolt"
)

// Config is the whole configuration. Zero values are not defaults: use
// Defaults or Load.
type Config struct {
	Server        Server        `toml:"server"`
	Log           Log           `toml:"log"`
	Runtime       Runtime       `toml:"runtime"`
	Docker        Docker        `toml:"docker"`
	Kubernetes    Kubernetes    `toml:"kubernetes"`
	Storage       Storage       `toml:"storage"`
	Store         Store         `toml:"store"`
	SecureRuntime SecureRuntime `toml:"secure_runtime"`
	Egress        Egress        `toml:"egress"`
	Ingress       Ingress       `toml:"ingress"`
	Debug         Debug         `toml:"debug"`

	// Path is the file the configuration was read from; "" when there was
	// no file at the default path and only defaults apply.
	Path string `toml:"-"`
	// Insecure is set by OPENSANDBOX_INSECURE_SERVER=YES: the server may
	// start without an API key.
	Insecure bool `toml:"-"`
}

// Server is the [server] table.
type Server struct {
	Host string `toml:"host"` // host: listen address; default "0.0.0.0"
	Port int    `toml:"port"` // port: listen port, 1-65535; default 8080
	// api_key: the key clients send in the OPEN-SANDBOX-API-KEY header;
	// default none (the server then refuses to start unless insecure).
	// OPENSANDBOX_SERVER_API_KEY replaces it when set.
	APIKey string `toml:"api_key"`
	// eip: the public host (name or IP; no scheme, port or path) put
	// into the endpoint and proxy URLs the server hands out; default ""
	// = the address sandbox ports are published on (docker.host_ip) for
	// direct endpoints and the request's host for proxied ones.
	EIP string `toml:"eip"`
	// max_sandbox_timeout_seconds: the longest timeout a sandbox may be
	// created or renewed with, in seconds; default 0 = no limit, else ≥ 60.
	MaxSandboxTimeoutSeconds int64 `toml:"max_sandbox_timeout_seconds"`
	// min_sandbox_timeout_seconds: the shortest timeout, in seconds;
	// default 60. Values 1-59 are for tests and log a warning.
	MinSandboxTimeoutSeconds int64 `toml:"min_sandbox_timeout_seconds"`
	// instance_id: the label value that scopes this server's sandboxes
	// on a shared engine (a DNS-1123 label: 1-63 lower case letters,
	// digits and '-'); default "" = the identity of the store, generated
	// once and kept in it. Servers on one engine only see sandboxes with
	// their own instance id; an explicit id is claimed on the engine for
	// this server's store, and a server with another store refuses it.
	InstanceID string `toml:"instance_id"`

	// proxy_requires_api_key: the server proxy route
	// (/sandboxes/{id}/proxy/{port}/...) needs the API key like every
	// other route; default true. false restores upstream's open proxy,
	// where knowing a sandbox id is enough (logged as a warning at start).
	ProxyRequiresAPIKey bool `toml:"proxy_requires_api_key"`
}

// Addr is the host:port the server listens on.
func (s Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// MaxSandboxTimeout is max_sandbox_timeout_seconds as a duration; 0 = no limit.
func (s Server) MaxSandboxTimeout() time.Duration {
	return time.Duration(s.MaxSandboxTimeoutSeconds) * time.Second
}

// MinSandboxTimeout is min_sandbox_timeout_seconds as a duration.
func (s Server) MinSandboxTimeout() time.Duration {
	return time.Duration(s.MinSandboxTimeoutSeconds) * time.Second
}

// Log is the [log] table.
type Log struct {
	// level: debug, info, warn or error (any case; "warning" and
	// "critical" are accepted as upstream spells them); default "info".
	Level string `toml:"level"`
	// file_path: append logs to this file (parent created 0700, file
	// 0600); default "" = stderr. "~/" is expanded.
	FilePath string `toml:"file_path"`
	// file_enabled: upstream's switch for file_path; when false logs go
	// to stderr whatever file_path says, when true with no file_path they
	// go to ~/logs/opensandbox/server.log. Default: unset = file_path decides.
	FileEnabled *bool `toml:"file_enabled"`
}

// SlogLevel is Level as a slog level (info when Level is not valid).
func (l Log) SlogLevel() slog.Level {
	lvl, _ := parseLevel(l.Level)
	return lvl
}

func parseLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, true
	case "info", "":
		return slog.LevelInfo, true
	case "warn", "warning":
		return slog.LevelWarn, true
	case "error", "critical":
		return slog.LevelError, true
	}
	return slog.LevelInfo, false
}

// Runtime is the [runtime] table.
type Runtime struct {
	// type: the engine that runs sandboxes; required in a config file:
	// "docker" or "kubernetes". Default "docker" only when there is no
	// file at the default path.
	Type string `toml:"type"`
	// execd_path: the execd binary put into every sandbox on Docker;
	// default "" = "execd" next to the opensandbox-server executable,
	// else found in PATH. "~/" is expanded. Not used on Kubernetes (a
	// warning when set there).
	ExecdPath string `toml:"execd_path"`
	// execd_image: on Kubernetes, the image an init container copies
	// execd from into each sandbox pod; default "opensandbox/execd:latest".
	// Ignored with a warning on Docker, which mounts or copies execd_path.
	ExecdImage string `toml:"execd_image"`
}

// Docker is the [docker] table: how sandboxes are run on the Docker
// engine. The engine itself is found through DOCKER_HOST (and
// DOCKER_CERT_PATH, DOCKER_TLS_VERIFY, DOCKER_API_VERSION) as the docker
// CLI does.
type Docker struct {
	// network_mode: "bridge" (default; each sandbox has its own network
	// namespace and published ports), "host" (sandboxes share the host's
	// network; upstream's default), or the name of an existing
	// user-defined bridge network, which sandboxes join as in bridge mode.
	NetworkMode string `toml:"network_mode"`
	// isolate_sandboxes: in bridge mode, put sandboxes on bridge_network,
	// a network the server creates with inter-container communication
	// off, instead of the engine's default bridge, where sandboxes reach
	// each other. Default true.
	IsolateSandboxes bool `toml:"isolate_sandboxes"`
	// bridge_network: the name of that network; default "opensandbox".
	// An existing network of this name must have the bridge driver and
	// inter-container communication off.
	BridgeNetwork string `toml:"bridge_network"`
	// block_metadata: drop packets from the sandbox network's bridge to
	// link-local addresses (169.254.0.0/16, fd00:ec2::254: cloud metadata
	// services) with an nftables table of the server's on the host;
	// default true.
	BlockMetadata bool `toml:"block_metadata"`
	// host_ip: the host address bridge-mode ports are published on;
	// default "127.0.0.1" (only this machine, and the server's proxy,
	// reach sandbox ports directly).
	HostIP string `toml:"host_ip"`
	// published_port_range: the host ports ("LOW-HIGH") sandbox ports
	// are published on; default "20000-32767", below Linux's ephemeral
	// range, so that no outgoing connection holds one while dockerd
	// restarts and live-restore maps them again. "" lets Docker pick.
	PublishedPortRange string `toml:"published_port_range"`
	// api_timeout: how long, in seconds, the engine may take to answer
	// one API request (streams may then run longer); default 180.
	APITimeoutSeconds int `toml:"api_timeout"`
	// drop_capabilities: Linux capabilities removed from every sandbox;
	// default AUDIT_WRITE MKNOD NET_ADMIN NET_RAW SYS_ADMIN SYS_MODULE
	// SYS_PTRACE SYS_TIME SYS_TTY_CONFIG; [] drops none.
	DropCapabilities []string `toml:"drop_capabilities"`
	// apparmor_profile: AppArmor profile of sandboxes; default "" = the
	// engine's default.
	AppArmorProfile string `toml:"apparmor_profile"`
	// no_new_privileges: forbid privilege gain through setuid binaries;
	// default true.
	NoNewPrivileges bool `toml:"no_new_privileges"`
	// seccomp_profile: "" (default) = the engine's default profile,
	// "unconfined" = none, else the path of a JSON profile file, read
	// at start. "~/" is expanded.
	SeccompProfile string `toml:"seccomp_profile"`
	// isolated_execution: which sandboxes may use execd's isolated
	// sessions (/v1/isolated, upstream OSEP-0013): "off" (default),
	// "on-request" (those created with the extension
	// opensandbox.io/isolated-execution = "true") or "always". Such
	// sandboxes start with CAP_SYS_ADMIN, which execd uses once and drops
	// before anything else runs, and the engine's default seccomp profile
	// admits namespace system calls (unshare, mount, setns) to their
	// processes. See docs/isolation.md for the trade-off.
	IsolatedExecution string `toml:"isolated_execution"`
	// pids_limit: most processes a sandbox may have; default 1024, 0 = no limit.
	PidsLimit int64 `toml:"pids_limit"`
	// warm_networks: network namespaces (small holder containers with the
	// ports published) kept started ahead of creates, so a sandbox
	// without a network policy starts without waiting for its network;
	// default 2, 0 = none.
	WarmNetworks int `toml:"warm_networks"`
	// execd_copy: copy execd into each sandbox through the engine API
	// instead of bind-mounting it read-only; needed when the engine runs
	// on another machine than the server. Default false.
	ExecdCopy bool `toml:"execd_copy"`
}

// Kubernetes is the [kubernetes] table: how sandboxes are run as
// BatchSandbox resources of the OpenSandbox operator. Only valid with
// runtime.type = "kubernetes". Credentials come from kubeconfig_path,
// else the KUBECONFIG environment variable, else the pod's in-cluster
// service account; loading them is the runtime driver's job.
type Kubernetes struct {
	// kubeconfig_path: the kubeconfig file to use; default "" =
	// $KUBECONFIG, else in-cluster credentials. "~/" is expanded; the
	// file must exist.
	KubeconfigPath string `toml:"kubeconfig_path"`
	// namespace: where sandboxes (BatchSandboxes, pods, their secrets and
	// PVCs) are created; a DNS-1123 label; default "default".
	Namespace string `toml:"namespace"`
	// service_account: the ServiceAccount sandbox pods run as; default
	// "" = the namespace's default one.
	ServiceAccount string `toml:"service_account"`
	// workload_provider: the resource sandboxes are made of: only
	// "batchsandbox" (the default); upstream's "agent-sandbox" is refused.
	WorkloadProvider string `toml:"workload_provider"`
	// batchsandbox_template_file: a BatchSandbox YAML whose metadata and
	// spec every sandbox's resource starts from (tolerations, node
	// selectors, labels...); default "" = none. "~/" is expanded; the file
	// must exist and parse (checked at start, see LoadBatchSandboxTemplate).
	BatchSandboxTemplateFile string `toml:"batchsandbox_template_file"`
	// image_pull_policy: of sandbox containers: "Always", "IfNotPresent"
	// (default) or "Never" (any case; normalised).
	ImagePullPolicy string `toml:"image_pull_policy"`
	// sandbox_create_timeout_seconds: how long a create waits for the pod
	// to run and execd to answer; default 60, positive.
	SandboxCreateTimeoutSeconds int `toml:"sandbox_create_timeout_seconds"`
	// sandbox_create_poll_interval_seconds: upstream's polling interval
	// while a create waits; accepted (positive) and ignored with a
	// warning: the runtime watches the resource instead of polling.
	SandboxCreatePollIntervalSeconds float64 `toml:"sandbox_create_poll_interval_seconds"`
	// snapshot_create_timeout_seconds: how long a snapshot may take to
	// become ready before it is marked failed; default 900, positive.
	SnapshotCreateTimeoutSeconds int `toml:"snapshot_create_timeout_seconds"`
	// informer_enabled: serve reads from an informer cache; default true.
	// false is refused: the runtime has no uncached read path.
	InformerEnabled bool `toml:"informer_enabled"`
	// informer_resync_seconds: full resync period of the informer cache;
	// default 300, positive.
	InformerResyncSeconds int `toml:"informer_resync_seconds"`
	// informer_watch_timeout_seconds: how long one watch request of the
	// informer lasts before it is renewed; default 60, positive.
	InformerWatchTimeoutSeconds int `toml:"informer_watch_timeout_seconds"`
	// read_qps, read_burst: client-side rate limit of reads (get, list,
	// watch) to the API server; write_qps, write_burst: of writes
	// (create, update, patch, delete). qps 0 = unlimited (the default);
	// burst 0 with a positive qps = qps rounded up (at least 1), which
	// Load writes into the field.
	ReadQPS    float64 `toml:"read_qps"`
	ReadBurst  int     `toml:"read_burst"`
	WriteQPS   float64 `toml:"write_qps"`
	WriteBurst int     `toml:"write_burst"`
	// execd_init_resources: requests and limits of the init container
	// that copies execd into the pod, as Kubernetes quantities; default
	// none.
	ExecdInitResources ExecdInitResources `toml:"execd_init_resources"`
}

// ExecdInitResources is [kubernetes.execd_init_resources]: resource name
// (cpu, memory, ephemeral-storage...) to quantity ("100m", "64Mi").
type ExecdInitResources struct {
	Limits   map[string]string `toml:"limits"`
	Requests map[string]string `toml:"requests"`
}

// Requirements is r as a container's resources (nil lists when empty).
// Load has validated the quantities, so an error only comes from a
// Config that Load did not make.
func (r ExecdInitResources) Requirements() (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	var err error
	if out.Limits, err = resourceList("limits", r.Limits); err != nil {
		return corev1.ResourceRequirements{}, err
	}
	if out.Requests, err = resourceList("requests", r.Requests); err != nil {
		return corev1.ResourceRequirements{}, err
	}
	return out, nil
}

func resourceList(what string, m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	l := make(corev1.ResourceList, len(m))
	for name, v := range m {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("kubernetes.execd_init_resources.%s.%s = %q: %w", what, name, v, err)
		}
		l[corev1.ResourceName(name)] = q
	}
	return l, nil
}

// CreateTimeout is sandbox_create_timeout_seconds as a duration.
func (k Kubernetes) CreateTimeout() time.Duration {
	return time.Duration(k.SandboxCreateTimeoutSeconds) * time.Second
}

// SnapshotTimeout is snapshot_create_timeout_seconds as a duration.
func (k Kubernetes) SnapshotTimeout() time.Duration {
	return time.Duration(k.SnapshotCreateTimeoutSeconds) * time.Second
}

// InformerResync is informer_resync_seconds as a duration.
func (k Kubernetes) InformerResync() time.Duration {
	return time.Duration(k.InformerResyncSeconds) * time.Second
}

// InformerWatchTimeout is informer_watch_timeout_seconds as a duration.
func (k Kubernetes) InformerWatchTimeout() time.Duration {
	return time.Duration(k.InformerWatchTimeoutSeconds) * time.Second
}

// APITimeout is api_timeout as a duration.
func (d Docker) APITimeout() time.Duration {
	return time.Duration(d.APITimeoutSeconds) * time.Second
}

// Storage is the [storage] table.
type Storage struct {
	// allowed_host_paths: absolute host directories that sandboxes may
	// bind-mount (a path and everything under it); default [] = host
	// mounts are rejected.
	AllowedHostPaths []string `toml:"allowed_host_paths"`
	// volume_default_size: size of volumes created without one, as a
	// Kubernetes quantity (e.g. "1Gi", "500Mi"); default "1Gi". Docker
	// volumes have no size, so it only matters on Kubernetes.
	VolumeDefaultSize string `toml:"volume_default_size"`
	// default_disk_limit: the disk limit of sandboxes created without
	// resourceLimits.ephemeral-storage, as a Kubernetes quantity of at
	// least 16Mi (e.g. "10Gi"); default "" = none. When the engine cannot
	// enforce disk limits, the server warns at start and such creates
	// fail rather than run unlimited (see docs/server.md#disk-limits).
	DefaultDiskLimit string `toml:"default_disk_limit"`
}

// Store is the [store] table: the embedded file for snapshot records and
// metadata overrides.
type Store struct {
	// type: "bbolt", the only supported store; default "bbolt".
	Type string `toml:"type"`
	// path: the store file; default ~/.opensandbox/opensandbox.db. "~/"
	// is expanded.
	Path string `toml:"path"`
}

// SecureRuntime is the [secure_runtime] table: a stronger isolation
// boundary than plain containers.
type SecureRuntime struct {
	// type: "" (plain containers; default), "gvisor", "kata" or
	// "firecracker" (Kubernetes only).
	Type string `toml:"type"`
	// docker_runtime: the OCI runtime name registered with the Docker
	// engine (e.g. "runsc", "kata-runtime"); required for gvisor and kata
	// with the Docker runtime, not used on Kubernetes. Default "".
	DockerRuntime string `toml:"docker_runtime"`
	// k8s_runtime_class: the RuntimeClass sandbox pods get as
	// runtimeClassName (e.g. "gvisor", "kata-qemu", "kata-fc"); required
	// for every type with the Kubernetes runtime, not used on Docker.
	// Default "".
	K8sRuntimeClass string `toml:"k8s_runtime_class"`
}

// Egress is the [egress] table: the sidecar that enforces network
// policies and runs the credential vault.
type Egress struct {
	// image: the egress sidecar image; default "" = built locally from
	// egress_path.
	Image string `toml:"image"`
	// egress_path: the static egress binary the local sidecar image is
	// made from; default "" = "egress" next to the opensandbox-server
	// executable, else found in PATH.
	EgressPath string `toml:"egress_path"`
	// dns_upstream: resolvers the sidecar forwards allowed names to (IP
	// or IP:port); default [] = the resolvers Docker gives containers.
	DNSUpstream []string `toml:"dns_upstream"`
	// upstream_ca_file: a PEM file of extra CAs the credential proxy
	// trusts for origins (private services); default "".
	UpstreamCAFile string `toml:"upstream_ca_file"`
	// deny_webhook: an http(s) URL the sidecar POSTs each denied name to
	// ({hostname, timestamp, source, sandboxId}); default "" = none.
	DenyWebhook string `toml:"deny_webhook"`
	// block_doh_443: drop port 443 to doh_blocklist (DNS-over-HTTPS
	// resolvers), or all of port 443 when the list is empty; default false.
	BlockDoH443 bool `toml:"block_doh_443"`
	// doh_blocklist: IPs or CIDRs of DNS-over-HTTPS resolvers.
	DoHBlocklist []string `toml:"doh_blocklist"`
	// mode: "dns+nft" (default: DNS filtering plus nftables, so only
	// listed IPs/CIDRs and addresses of allowed names are reachable) or
	// "dns" (DNS filtering only: a sandbox may still connect to any IP
	// address it knows).
	Mode string `toml:"mode"`
	// disable_ipv6: turn IPv6 off in sandboxes with a network policy;
	// default true.
	DisableIPv6 bool `toml:"disable_ipv6"`
	// allow_metadata: let network policies allow link-local metadata
	// addresses (169.254.0.0/16, fd00:ec2::254); default false: the
	// sidecar drops them whatever the policy says.
	AllowMetadata bool `toml:"allow_metadata"`
}

// Ingress is the [ingress] table.
type Ingress struct {
	// mode: "direct" (default; clients reach endpoints the server hands
	// out). Upstream's "gateway" is refused: on Docker it is Kubernetes
	// only, and on Kubernetes the gateway is not supported yet.
	Mode string `toml:"mode"`
}

// Debug is the [debug] table: an opt-in second listener for profiling.
type Debug struct {
	// enabled: serve Go's pprof profiles (/debug/pprof/) and the metrics
	// (/metrics) on address, without the API key; default false.
	Enabled bool `toml:"enabled"`
	// address: host:port of that listener; default "127.0.0.1:6060"
	// (this machine only). Anything else is logged as a warning: the
	// profiles reveal memory contents and cost CPU.
	Address string `toml:"address"`
}

// Default values.
const (
	DefaultHost              = "0.0.0.0"
	DefaultPort              = 8080
	DefaultMinTimeoutSeconds = 60
	DefaultLogLevel          = "info"
	DefaultNetworkMode       = NetworkBridge
	DefaultHostIP            = "127.0.0.1"
	DefaultPublishedPorts    = "20000-32767"
	DefaultBridgeNetwork     = "opensandbox"
	DefaultAPITimeoutSeconds = 180
	DefaultPidsLimit         = 1024
	DefaultWarmNetworks      = 2
	DefaultVolumeSize        = "1Gi"
	DefaultEgressMode        = "dns+nft"
	DefaultIngressMode       = "direct"
	DefaultDebugAddress      = "127.0.0.1:6060"
	DefaultExecdImage        = "opensandbox/execd:latest"
	DefaultNamespace         = "default"
	WorkloadBatchSandbox     = "batchsandbox"
	DefaultImagePullPolicy   = "IfNotPresent"
	DefaultCreateTimeout     = 60
	DefaultPollInterval      = 1.0
	DefaultSnapshotTimeout   = 900
	DefaultInformerResync    = 300
	DefaultWatchTimeout      = 60
	// DefaultConfigFile is the config file under the home directory.
	DefaultConfigFile = ".sandbox.toml"
	// MinMaxTimeoutSeconds is the smallest max_sandbox_timeout_seconds.
	MinMaxTimeoutSeconds = 60
)

// DefaultDropCapabilities returns the capabilities dropped by default (a
// new slice each call).
func DefaultDropCapabilities() []string {
	return []string{"AUDIT_WRITE", "MKNOD", "NET_ADMIN", "NET_RAW", "SYS_ADMIN", "SYS_MODULE", "SYS_PTRACE", "SYS_TIME", "SYS_TTY_CONFIG"}
}

// Defaults returns every default; home is the user's home directory (for
// the store path). Runtime.Type is left empty: a config file must set it.
func Defaults(home string) Config {
	return Config{
		Server: Server{
			Host:                     DefaultHost,
			Port:                     DefaultPort,
			MinSandboxTimeoutSeconds: DefaultMinTimeoutSeconds,
			ProxyRequiresAPIKey:      true,
		},
		Log:     Log{Level: DefaultLogLevel},
		Runtime: Runtime{ExecdImage: DefaultExecdImage},
		Docker: Docker{
			NetworkMode:        DefaultNetworkMode,
			IsolateSandboxes:   true,
			BridgeNetwork:      DefaultBridgeNetwork,
			BlockMetadata:      true,
			HostIP:             DefaultHostIP,
			PublishedPortRange: DefaultPublishedPorts,
			APITimeoutSeconds:  DefaultAPITimeoutSeconds,
			DropCapabilities:   DefaultDropCapabilities(),
			NoNewPrivileges:    true,
			PidsLimit:          DefaultPidsLimit,
			WarmNetworks:       DefaultWarmNetworks,
		},
		Kubernetes: Kubernetes{
			Namespace:                        DefaultNamespace,
			WorkloadProvider:                 WorkloadBatchSandbox,
			ImagePullPolicy:                  DefaultImagePullPolicy,
			SandboxCreateTimeoutSeconds:      DefaultCreateTimeout,
			SandboxCreatePollIntervalSeconds: DefaultPollInterval,
			SnapshotCreateTimeoutSeconds:     DefaultSnapshotTimeout,
			InformerEnabled:                  true,
			InformerResyncSeconds:            DefaultInformerResync,
			InformerWatchTimeoutSeconds:      DefaultWatchTimeout,
		},
		Storage: Storage{AllowedHostPaths: []string{}, VolumeDefaultSize: DefaultVolumeSize},
		Store:   Store{Type: StoreBbolt, Path: defaultStorePath(home)},
		Egress:  Egress{Mode: DefaultEgressMode, DisableIPv6: true},
		Ingress: Ingress{Mode: DefaultIngressMode},
		Debug:   Debug{Address: DefaultDebugAddress},
	}
}

// ErrNoAPIKey is returned (wrapped) by RequireAPIKey.
var ErrNoAPIKey = errors.New("no API key configured")

// RequireAPIKey returns an error telling how to set a key when none is
// configured, unless insecure (the --insecure flag) or c.Insecure
// (OPENSANDBOX_INSECURE_SERVER=YES) allows running without one.
func (c Config) RequireAPIKey(insecure bool) error {
	if c.Server.APIKey != "" || insecure || c.Insecure {
		return nil
	}
	where := "~/" + DefaultConfigFile + " (opensandbox-server init-config writes one with a fresh key)"
	if c.Path != "" {
		where = c.Path
	}
	return fmt.Errorf("%w: set api_key in the [server] table of %s or the %s environment variable; "+
		"to accept requests without a key (local development only) start with --insecure or %s=YES",
		ErrNoAPIKey, where, EnvAPIKey, EnvInsecure)
}
