package serverconfig

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

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
	onKube := c.Runtime.Type == RuntimeKubernetes
	switch c.Runtime.Type {
	case RuntimeDocker, RuntimeKubernetes:
	case "":
		problems = append(problems, fmt.Sprintf("runtime.type is required: set it to %q or %q", RuntimeDocker, RuntimeKubernetes))
	default:
		bad("runtime.type", c.Runtime.Type, fmt.Sprintf("want %q or %q", RuntimeDocker, RuntimeKubernetes))
	}
	if v := c.Runtime.ExecdImage; onKube && (v == "" || strings.ContainsAny(v, " \t")) {
		bad("runtime.execd_image", v, "want an image reference")
	}

	// [docker] or [kubernetes]: only the table of the runtime in use
	// (the other one is refused by Load when the file sets it).
	var w, p []string
	if onKube {
		w, p = validateKubernetes(&c.Kubernetes)
	} else {
		w, p = validateDocker(&c.Docker)
	}
	warnings, problems = append(warnings, w...), append(problems, p...)

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
	case "gvisor", "kata", "firecracker":
		switch {
		case onKube && sr.K8sRuntimeClass == "":
			problems = append(problems, fmt.Sprintf("secure_runtime.type = %q needs secure_runtime.k8s_runtime_class (the RuntimeClass sandbox pods run with, e.g. %q) for the Kubernetes runtime", sr.Type, map[string]string{"gvisor": "gvisor", "kata": "kata-qemu", "firecracker": "kata-fc"}[sr.Type]))
		case onKube:
		case sr.Type == "firecracker":
			bad("secure_runtime.type", sr.Type, "firecracker is only available with runtime.type = \"kubernetes\"")
		case sr.DockerRuntime == "":
			problems = append(problems, fmt.Sprintf("secure_runtime.type = %q needs secure_runtime.docker_runtime (the OCI runtime registered with Docker, e.g. %q) for the Docker runtime", sr.Type, map[string]string{"gvisor": "runsc", "kata": "kata-runtime"}[sr.Type]))
		}
	default:
		bad("secure_runtime.type", sr.Type, "want \"\", \"gvisor\", \"kata\" or \"firecracker\"")
	}
	if v := sr.K8sRuntimeClass; v != "" && len(validation.IsDNS1123Subdomain(v)) > 0 {
		bad("secure_runtime.k8s_runtime_class", v, "want a RuntimeClass name (lower case letters, digits, '-' and '.')")
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
		if onKube {
			bad("ingress.mode", c.Ingress.Mode, "the ingress gateway is not supported yet; use \"direct\"")
		} else {
			bad("ingress.mode", c.Ingress.Mode, "gateway mode is only valid with runtime.type = \"kubernetes\"")
		}
	default:
		bad("ingress.mode", c.Ingress.Mode, "want \"direct\" or \"gateway\"")
	}
	return warnings, problems
}

// validateDocker checks the [docker] table.
func validateDocker(d *Docker) (warnings, problems []string) {
	bad := func(key string, value any, want string) {
		problems = append(problems, fmt.Sprintf("%s = %s: %s", key, quote(value), want))
	}
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

// validateKubernetes checks the [kubernetes] table, normalising
// enumerations and the bursts in place.
func validateKubernetes(k *Kubernetes) (warnings, problems []string) {
	bad := func(key string, value any, want string) {
		problems = append(problems, fmt.Sprintf("kubernetes.%s = %s: %s", key, quote(value), want))
	}
	if p := k.KubeconfigPath; p != "" {
		if fi, err := os.Stat(p); err != nil {
			bad("kubeconfig_path", p, fmt.Sprintf("want a kubeconfig file: %v", err))
		} else if fi.IsDir() {
			bad("kubeconfig_path", p, "want a kubeconfig file, not a directory")
		}
	}
	if len(validation.IsDNS1123Label(k.Namespace)) > 0 {
		bad("namespace", k.Namespace, "want a namespace name (1-63 lower case letters, digits and '-')")
	}
	if v := k.ServiceAccount; v != "" && len(validation.IsDNS1123Subdomain(v)) > 0 {
		bad("service_account", v, "want \"\" (the namespace's default) or a ServiceAccount name")
	}
	switch strings.ToLower(k.WorkloadProvider) {
	case WorkloadBatchSandbox, "":
		k.WorkloadProvider = WorkloadBatchSandbox
	case "agent-sandbox":
		bad("workload_provider", k.WorkloadProvider, "the agent-sandbox provider is not supported; sandboxes are BatchSandbox resources of the OpenSandbox operator: use \"batchsandbox\"")
	default:
		bad("workload_provider", k.WorkloadProvider, "want \"batchsandbox\"")
	}
	if p := k.BatchSandboxTemplateFile; p != "" {
		if _, err := LoadBatchSandboxTemplate(p); err != nil {
			bad("batchsandbox_template_file", p, err.Error())
		}
	}
	switch strings.ToLower(k.ImagePullPolicy) {
	case "always":
		k.ImagePullPolicy = "Always"
	case "ifnotpresent":
		k.ImagePullPolicy = "IfNotPresent"
	case "never":
		k.ImagePullPolicy = "Never"
	default:
		bad("image_pull_policy", k.ImagePullPolicy, "want \"Always\", \"IfNotPresent\" or \"Never\"")
	}
	for _, s := range []struct {
		key   string
		value int
	}{
		{"sandbox_create_timeout_seconds", k.SandboxCreateTimeoutSeconds},
		{"snapshot_create_timeout_seconds", k.SnapshotCreateTimeoutSeconds},
		{"informer_resync_seconds", k.InformerResyncSeconds},
		{"informer_watch_timeout_seconds", k.InformerWatchTimeoutSeconds},
	} {
		if s.value <= 0 {
			bad(s.key, s.value, "want a positive number of seconds")
		}
	}
	if v := k.SandboxCreatePollIntervalSeconds; !(v > 0) || math.IsInf(v, 0) {
		bad("sandbox_create_poll_interval_seconds", v, "want a positive number of seconds")
	}
	if !k.InformerEnabled {
		bad("informer_enabled", false, "the Kubernetes runtime always reads sandboxes from an informer cache (it needs list and watch on BatchSandboxes); remove the key or set it to true")
	}
	for _, r := range []struct {
		name  string
		qps   float64
		burst *int
	}{
		{"read", k.ReadQPS, &k.ReadBurst},
		{"write", k.WriteQPS, &k.WriteBurst},
	} {
		switch {
		case !(r.qps >= 0) || math.IsInf(r.qps, 0):
			bad(r.name+"_qps", r.qps, "want 0 (unlimited) or a positive number of requests per second")
		case *r.burst < 0:
			bad(r.name+"_burst", *r.burst, "want 0 (the qps rounded up) or more")
		case r.qps == 0 && *r.burst > 0:
			warnings = append(warnings, fmt.Sprintf("kubernetes.%s_burst = %d has no effect: %s_qps = 0 means unlimited", r.name, *r.burst, r.name))
		case r.qps > 0 && *r.burst == 0:
			*r.burst = int(math.Max(1, math.Ceil(r.qps)))
		}
	}
	limits := checkResources(k.ExecdInitResources.Limits, "execd_init_resources.limits", bad)
	requests := checkResources(k.ExecdInitResources.Requests, "execd_init_resources.requests", bad)
	for _, name := range slices.Sorted(maps.Keys(requests)) {
		if l, ok := limits[name]; ok && l.Cmp(requests[name]) < 0 {
			bad("execd_init_resources.requests."+name, k.ExecdInitResources.Requests[name],
				fmt.Sprintf("want at most the limit %q", k.ExecdInitResources.Limits[name]))
		}
	}
	return warnings, problems
}

// checkResources parses a map of resource name to Kubernetes quantity,
// reporting bad names and quantities; it returns the good ones.
func checkResources(m map[string]string, key string, bad func(key string, value any, want string)) map[string]resource.Quantity {
	good := map[string]resource.Quantity{}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := m[name]
		if len(validation.IsQualifiedName(name)) > 0 {
			bad(key, name, "want a resource name such as \"cpu\", \"memory\" or \"ephemeral-storage\"")
			continue
		}
		q, err := resource.ParseQuantity(v)
		switch {
		case err != nil:
			bad(key+"."+name, v, "want a Kubernetes quantity such as \"100m\" or \"64Mi\"")
		case q.Sign() < 0:
			bad(key+"."+name, v, "want a quantity of 0 or more")
		default:
			good[name] = q
		}
	}
	return good
}
