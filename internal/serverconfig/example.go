package serverconfig

import (
	"fmt"
	"strconv"
	"strings"
)

// Example kinds.
const (
	ExampleDocker     = "docker"
	ExampleKubernetes = "k8s"
)

// Example returns a commented configuration file of the given kind
// ("docker" or "k8s": runtime.type "docker" or "kubernetes") with every
// default written out. The file passes Load as it is.
func Example(kind string) (string, error) {
	return ExampleWithAPIKey(kind, "")
}

// ExampleWithAPIKey is Example with server.api_key set to apiKey (left
// commented out when apiKey is empty).
func ExampleWithAPIKey(kind, apiKey string) (string, error) {
	keyLine := `# api_key = "a-long-random-string"`
	if apiKey != "" {
		keyLine = "api_key = " + strconv.Quote(apiKey)
	}
	var parts []string
	switch kind {
	case ExampleDocker:
		parts = []string{dockerHeader, serverLogBody, dockerRuntimeBody, dockerBody, storageStoreBody, dockerSecureBody, egressBody, dockerIngressBody, debugBody}
	case ExampleKubernetes:
		parts = []string{kubernetesHeader, serverLogBody, kubernetesRuntimeBody, kubernetesBody, storageStoreBody, kubernetesSecureBody, egressBody, kubernetesIngressBody, debugBody}
	default:
		return "", fmt.Errorf("unknown example %q: want %q or %q", kind, ExampleDocker, ExampleKubernetes)
	}
	return strings.Replace(strings.Join(parts, ""), "@API_KEY_LINE@", keyLine, 1), nil
}

const dockerHeader = `# opensandbox-server configuration (Docker runtime).
# Every value below is the default unless marked otherwise; delete what you
# do not change. Reference: docs/configuration.md.
`

const kubernetesHeader = `# opensandbox-server configuration (Kubernetes runtime). Sandboxes are
# BatchSandbox resources of the OpenSandbox operator, which must run in the
# cluster (docs/kubernetes.md).
# Every value below is the default unless marked otherwise; delete what you
# do not change. Reference: docs/configuration.md.
`

const serverLogBody = `
[server]
host = "0.0.0.0"                 # listen address
port = 8080                      # listen port
# Clients send this key in the OPEN-SANDBOX-API-KEY header. Without a key
# the server refuses to start unless run with --insecure. The environment
# variable OPENSANDBOX_SERVER_API_KEY overrides it.
@API_KEY_LINE@
# Public host name or IP put into the endpoint URLs handed to clients
# (default: the address sandbox ports are reached at: docker.host_ip on
# Docker, the pod IP on Kubernetes).
# eip = "sandbox.example.com"
max_sandbox_timeout_seconds = 0  # longest sandbox timeout; 0 = no limit, else >= 60
min_sandbox_timeout_seconds = 60 # shortest sandbox timeout (below 60 only for tests)
# Scopes this server's sandboxes on a shared engine; "" = an id generated
# once and kept in the store. Two servers with separate stores never
# share one: the second refuses to start.
instance_id = ""

# The proxy route /sandboxes/{id}/proxy/{port}/... needs the API key too;
# false opens it to anyone who knows a sandbox id (upstream's behaviour).
proxy_requires_api_key = true

[log]
level = "info"                   # debug, info, warn or error
file_path = ""                   # "" = stderr

`

const dockerRuntimeBody = `[runtime]
type = "docker"                  # required: "docker" or "kubernetes"
# The execd binary placed in every sandbox. Default: "execd" next to the
# opensandbox-server executable, else the one found in PATH.
# execd_path = "/usr/local/bin/execd"

`

const dockerBody = `[docker]
# The engine is found through DOCKER_HOST like the docker CLI finds it.
network_mode = "bridge"          # "bridge" (own network per sandbox), "host", or a user-defined bridge network
isolate_sandboxes = true         # bridge mode: sandboxes join bridge_network, which drops direct packets between
                                 # containers; not traffic through the host (ports on a non-loopback host_ip, the
                                 # server's proxy route). Firewall rules for docker0 do not cover its br-<id> bridge
bridge_network = "opensandbox"   # created at start when missing; never removed
block_metadata = true            # drop sandbox packets to link-local metadata addresses (host nftables)
host_ip = "127.0.0.1"            # host address sandbox ports are published on
published_port_range = "20000-32767" # host ports they are published on (below the kernel's ephemeral range)
api_timeout = 180                # seconds the engine may take to answer a request
drop_capabilities = ["AUDIT_WRITE", "MKNOD", "NET_ADMIN", "NET_RAW", "SYS_ADMIN", "SYS_MODULE", "SYS_PTRACE", "SYS_TIME", "SYS_TTY_CONFIG"]
no_new_privileges = true
apparmor_profile = ""            # "" = the engine's default
seccomp_profile = ""             # "" = the engine's default
pids_limit = 1024                # 0 = no limit
warm_networks = 2                # network namespaces started ahead of creates; 0 = none
execd_copy = false               # copy execd in through the engine API instead of a read-only mount

`

const storageStoreBody = `[storage]
allowed_host_paths = []          # absolute host directories sandboxes may mount; [] = none
volume_default_size = "1Gi"
default_disk_limit = ""          # disk limit of sandboxes that ask for none, e.g. "10Gi"; "" = none

[store]
type = "bbolt"
path = "~/.opensandbox/opensandbox.db"

`

const dockerSecureBody = `[secure_runtime]
# "" = plain containers; "gvisor" or "kata" need docker_runtime, the OCI
# runtime registered with the engine (e.g. "runsc" or "kata-runtime").
type = ""
docker_runtime = ""
k8s_runtime_class = ""

`

const egressBody = `[egress]
# The sidecar that enforces network policies and runs the credential vault.
# With image = "" the server builds a local image from the egress binary
# (egress_path, default: next to opensandbox-server).
image = ""
# egress_path = "/usr/local/bin/egress"
mode = "dns+nft"                 # or "dns" (names only: any IP address stays reachable)
disable_ipv6 = true
# dns_upstream = ["10.0.0.2"]    # resolvers for allowed names; unset = the engine's
upstream_ca_file = ""            # extra CAs the credential proxy trusts for origins
deny_webhook = ""                # http(s) URL told of each denied name
allow_metadata = false           # true: policies may allow link-local metadata addresses
block_doh_443 = false            # drop 443 to doh_blocklist (all 443 when the list is empty)
# doh_blocklist = ["1.1.1.1", "8.8.8.8"]

`

const dockerIngressBody = `[ingress]
mode = "direct"                  # "gateway" only with Kubernetes

`

const debugBody = `[debug]
# A second listener with Go's pprof profiles and /metrics, no API key.
enabled = false
address = "127.0.0.1:6060"       # keep it on loopback
`

const kubernetesRuntimeBody = `[runtime]
type = "kubernetes"              # required: "docker" or "kubernetes"
# The image an init container of every sandbox pod copies execd from.
execd_image = "opensandbox/execd:latest"

`

const kubernetesBody = `[kubernetes]
# Credentials: kubeconfig_path, else $KUBECONFIG, else the in-cluster
# service account of the server's pod. Outside the cluster with KUBECONFIG
# unset, name your kubeconfig here, e.g. "~/.kube/config".
kubeconfig_path = ""
namespace = "default"            # where sandbox resources are created
service_account = ""             # ServiceAccount of sandbox pods; "" = the namespace's default
workload_provider = "batchsandbox" # the only provider ("agent-sandbox" is refused)
batchsandbox_template_file = ""  # a BatchSandbox YAML every sandbox starts from (tolerations, node selectors...)
image_pull_policy = "IfNotPresent" # of sandbox containers: Always, IfNotPresent or Never
sandbox_create_timeout_seconds = 60 # a create waits this long for the pod to run and execd to answer
snapshot_create_timeout_seconds = 900
informer_enabled = true          # reads come from a watch-fed cache (false is refused)
informer_resync_seconds = 300
informer_watch_timeout_seconds = 60
read_qps = 0.0                   # client-side rate limits to the API server; 0 = unlimited
read_burst = 0                   # 0 = the qps rounded up
write_qps = 0.0
write_burst = 0

[kubernetes.execd_init_resources]
# Requests and limits of the init container that copies execd; none by default.
# requests = { cpu = "50m", memory = "64Mi" }
# limits = { cpu = "100m", memory = "128Mi" }

`

const kubernetesSecureBody = `[secure_runtime]
# "" = plain containers; "gvisor", "kata" or "firecracker" need
# k8s_runtime_class, the RuntimeClass sandbox pods run with (e.g. "gvisor",
# "kata-qemu", "kata-fc").
type = ""
k8s_runtime_class = ""

`

const kubernetesIngressBody = `[ingress]
mode = "direct"                  # the only mode for now ("gateway" is not supported yet)

`
