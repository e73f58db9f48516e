package serverconfig

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/grammar"
)

var (
	capabilityRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	networkRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]+$`)
)

// validate checks every value, normalising a few in place (lower-case
// enumerations, cleaned paths). It returns warnings for the log and
// problems that stop the server, each naming the key and its value.
func validate(c *Config) (warnings, problems []string) {
	bad := func(key string, value any, want string) {
		problems = append(problems, fmt.Sprintf("%s = %s: %s", key, quote(value), want))
	}

	// [server]
	if c.Server.Host == "" || strings.ContainsAny(c.Server.Host, " \t/") {
		bad("server.host", c.Server.Host, "want an IP address or host name to listen on")
	}
	if c.Server.Port < 1 || c.Server.Port > 65535 {
		bad("server.port", c.Server.Port, "want 1-65535")
	}
	if strings.TrimSpace(c.Server.APIKey) != c.Server.APIKey {
		problems = append(problems, "server.api_key (or "+EnvAPIKey+") starts or ends with white space")
	}
	if e := c.Server.EIP; e != "" && (strings.ContainsAny(e, "/ \t?#[]@") || strings.Contains(e, ":") && net.ParseIP(e) == nil) {
		bad("server.eip", e, "want a host name or IP address, without scheme, port or path")
	}
	maxT, minT := c.Server.MaxSandboxTimeoutSeconds, c.Server.MinSandboxTimeoutSeconds
	switch {
	case maxT < 0 || (maxT > 0 && maxT < MinMaxTimeoutSeconds):
		bad("server.max_sandbox_timeout_seconds", maxT, fmt.Sprintf("want 0 (no limit) or at least %d", MinMaxTimeoutSeconds))
	case maxT > 0 && minT > maxT:
		bad("server.min_sandbox_timeout_seconds", minT, fmt.Sprintf("want at most server.max_sandbox_timeout_seconds (%d)", maxT))
	}
	switch {
	case minT < 1:
		bad("server.min_sandbox_timeout_seconds", minT, "want at least 1")
	case minT < DefaultMinTimeoutSeconds:
		warnings = append(warnings, fmt.Sprintf("server.min_sandbox_timeout_seconds = %d is below %d: meant for tests only", minT, DefaultMinTimeoutSeconds))
	}

	if id := c.Server.InstanceID; id != "" && grammar.CheckInstanceID(id) != nil {
		bad("server.instance_id", id, "want 1-63 lower case letters, digits and '-', starting and ending with a letter or digit")
	}
	if !c.Server.ProxyRequiresAPIKey {
		warnings = append(warnings, "server.proxy_requires_api_key = false: anyone who knows a sandbox id reaches its ports, execd included, through the server proxy")
	}

	// [debug]
	if c.Debug.Enabled {
		if host, port, err := net.SplitHostPort(c.Debug.Address); err != nil || port == "" {
			bad("debug.address", c.Debug.Address, "want host:port")
		} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			warnings = append(warnings, fmt.Sprintf("debug.address = %q is not a loopback address: profiles and metrics are served there without the API key", c.Debug.Address))
		}
	}

	// [log]
	if _, ok := parseLevel(c.Log.Level); !ok {
		bad("log.level", c.Log.Level, "want debug, info, warn or error")
	}
	c.Log.Level = strings.ToLower(c.Log.Level)

	// [runtime]
	switch c.Runtime.Type {
	case RuntimeDocker:
	case "":
		problems = append(problems, fmt.Sprintf("runtime.type is required: set it to %q", RuntimeDocker))
	case RuntimeKubernetes:
		bad("runtime.type", c.Runtime.Type, fmt.Sprintf("the Kubernetes runtime is not supported yet; use %q", RuntimeDocker))
	default:
		bad("runtime.type", c.Runtime.Type, fmt.Sprintf("want %q", RuntimeDocker))
	}

	// [docker]
	d := &c.Docker
	switch {
	case d.NetworkMode == NetworkBridge:
		if !d.IsolateSandboxes {
			warnings = append(warnings, "docker.isolate_sandboxes = false: sandboxes share the engine's default bridge and can reach each other")
		}
	case d.NetworkMode == NetworkHost:
		warnings = append(warnings, "docker.network_mode = \"host\": sandboxes share the host's network and can reach every service on it")
	case !userNetworkName(d.NetworkMode):
		bad("docker.network_mode", d.NetworkMode, fmt.Sprintf("want %q, %q or the name of a user-defined bridge network", NetworkBridge, NetworkHost))
	}
	if !userNetworkName(d.BridgeNetwork) {
		bad("docker.bridge_network", d.BridgeNetwork, "want the name of a user-defined network (letters, digits, '_', '.', '-'; not bridge, host or none)")
	}
	if ip := net.ParseIP(d.HostIP); ip == nil {
		bad("docker.host_ip", d.HostIP, "want an IP address")
	} else if ip.IsUnspecified() && d.NetworkMode != NetworkHost {
		warnings = append(warnings, fmt.Sprintf("docker.host_ip = %q publishes sandbox ports on every interface of this host", d.HostIP))
	}
	if d.PublishedPortRange != "" {
		if !portRange(d.PublishedPortRange) {
			bad("docker.published_port_range", d.PublishedPortRange, "want LOW-HIGH within 1-65535, or \"\" to let Docker pick")
		}
	}
	if d.APITimeoutSeconds <= 0 {
		bad("docker.api_timeout", d.APITimeoutSeconds, "want a positive number of seconds")
	}
	for i, name := range d.DropCapabilities {
		if !capabilityRE.MatchString(name) {
			bad(fmt.Sprintf("docker.drop_capabilities[%d]", i), name, "want a capability name such as NET_RAW")
		}
	}
	if d.PidsLimit < 0 {
		bad("docker.pids_limit", d.PidsLimit, "want 0 (no limit) or more")
	}
	if d.WarmNetworks < 0 || d.WarmNetworks > 64 {
		bad("docker.warm_networks", d.WarmNetworks, "want 0 (none) to 64")
	}
	switch d.IsolatedExecution {
	case "", "off", "on-request", "always":
	default:
		bad("docker.isolated_execution", d.IsolatedExecution, `want "off", "on-request" or "always"`)
	}

	// [storage]
	for i, p := range c.Storage.AllowedHostPaths {
		if !filepath.IsAbs(p) {
			bad(fmt.Sprintf("storage.allowed_host_paths[%d]", i), p, "want an absolute path")
			continue
		}
		c.Storage.AllowedHostPaths[i] = filepath.Clean(p)
	}
	if v := c.Storage.VolumeDefaultSize; !positiveQuantity(v) {
		bad("storage.volume_default_size", v, "want a positive size such as \"1Gi\" or \"500Mi\"")
	}
	if v := c.Storage.DefaultDiskLimit; v != "" && !positiveQuantity(v) {
		bad("storage.default_disk_limit", v, "want \"\" (no default) or a size of at least 16Mi such as \"10Gi\"")
	}

	// [store]
	if c.Store.Type != StoreBbolt {
		bad("store.type", c.Store.Type, fmt.Sprintf("the only supported store is %q", StoreBbolt))
	}
	if c.Store.Path == "" {
		bad("store.path", c.Store.Path, "want a file path")
	}

	// [secure_runtime]
	sr := &c.SecureRuntime
	switch sr.Type {
	case "":
		if sr.DockerRuntime != "" || sr.K8sRuntimeClass != "" {
			problems = append(problems, fmt.Sprintf("secure_runtime.type is empty but docker_runtime = %q and k8s_runtime_class = %q are set: set a type (gvisor, kata) or remove the runtime names", sr.DockerRuntime, sr.K8sRuntimeClass))
		}
	case "gvisor", "kata":
		if c.Runtime.Type == RuntimeDocker && sr.DockerRuntime == "" {
			problems = append(problems, fmt.Sprintf("secure_runtime.type = %q needs secure_runtime.docker_runtime (the OCI runtime registered with Docker, e.g. %q) for the Docker runtime", sr.Type, map[string]string{"gvisor": "runsc", "kata": "kata-runtime"}[sr.Type]))
		}
	case "firecracker":
		if c.Runtime.Type == RuntimeDocker {
			bad("secure_runtime.type", sr.Type, "firecracker is only available with runtime.type = \"kubernetes\"")
		}
	default:
		bad("secure_runtime.type", sr.Type, "want \"\", \"gvisor\", \"kata\" or \"firecracker\"")
	}
	if strings.ContainsAny(sr.DockerRuntime, " \t/") {
		bad("secure_runtime.docker_runtime", sr.DockerRuntime, "want an OCI runtime name such as \"runsc\"")
	}

	// [egress]
	switch c.Egress.Mode {
	case "dns", "dns+nft":
	default:
		bad("egress.mode", c.Egress.Mode, "want \"dns\" or \"dns+nft\"")
	}
	if strings.ContainsAny(c.Egress.Image, " \t") {
		bad("egress.image", c.Egress.Image, "want an image reference")
	}
	if w := c.Egress.DenyWebhook; w != "" {
		if u, err := url.Parse(w); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("egress.deny_webhook", w, "want an http or https URL")
		}
	}
	for _, d := range c.Egress.DoHBlocklist {
		if _, err := netip.ParsePrefix(d); err != nil {
			if _, err := netip.ParseAddr(d); err != nil {
				bad("egress.doh_blocklist", d, "want an IP or CIDR")
			}
		}
	}
	for _, u := range c.Egress.DNSUpstream {
		if _, err := netip.ParseAddr(u); err != nil {
			if _, err := netip.ParseAddrPort(u); err != nil {
				bad("egress.dns_upstream", u, "want IP or IP:port")
			}
		}
	}

	// [ingress]
	switch c.Ingress.Mode {
	case "direct":
	case "gateway":
		if c.Runtime.Type != RuntimeKubernetes {
			bad("ingress.mode", c.Ingress.Mode, "gateway mode is only valid with runtime.type = \"kubernetes\"")
		}
	default:
		bad("ingress.mode", c.Ingress.Mode, "want \"direct\" or \"gateway\"")
	}
	return warnings, problems
}

// positiveQuantity reports whether v is a size such as "1Gi" greater than
// zero, in the grammar resourceLimits use.
func positiveQuantity(v string) bool {
	n, err := grammar.ParseMemory(v)
	return err == nil && n > 0
}

func quote(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// userNetworkName reports whether s can name a user-defined Docker
// network: not one of the engine's own networks nor another container's
// namespace ("container:<id>").
func userNetworkName(s string) bool {
	switch s {
	case NetworkBridge, NetworkHost, "none", "default":
		return false
	}
	return networkRE.MatchString(s)
}

// portRange reports whether s is "LOW-HIGH" with 1 <= LOW <= HIGH <= 65535.
func portRange(s string) bool {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return false
	}
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	return err1 == nil && err2 == nil && lo >= 1 && lo <= hi && hi <= 65535
}
