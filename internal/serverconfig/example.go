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
// ("docker" or "k8s") with every default written out. The file passes
// Load as it is. The "k8s" example is a working Docker configuration
// whose Kubernetes sections are commented out, since Kubernetes support
// is not there yet.
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
	var b strings.Builder
	switch kind {
	case ExampleDocker:
		b.WriteString(dockerHeader)
	case ExampleKubernetes:
		b.WriteString(kubernetesHeader)
	default:
		return "", fmt.Errorf("unknown example %q: want %q or %q", kind, ExampleDocker, ExampleKubernetes)
	}
	b.WriteString(strings.Replace(commonBody, "@API_KEY_LINE@", keyLine, 1))
	if kind == ExampleKubernetes {
		b.WriteString(kubernetesTail)
	}
	return b.String(), nil
}

const dockerHeader = `# opensandbox-server configuration (Docker runtime).
# Every value below is the default unless marked otherwise; delete what you
# do not change. Reference: docs/configuration.md.
`

const kubernetesHeader = `# opensandbox-server configuration, Kubernetes flavour.
#
# Kubernetes support is coming but not there yet: today the server runs
# sandboxes on Docker only and refuses runtime.type = "kubernetes". This
# file is therefore a working Docker configuration; the commented sections
# at the end show the Kubernetes settings, so they can be prepared now.
# Reference: docs/configuration.md.
`

const commonBody = `
[server]
host = "0.0.0.0"                 # listen address
port = 8080                      # listen port
# Clients send this key in the OPEN-SANDBOX-API-KEY header. Without a key
# the server refuses to start unless run with --insecure. The environment
# variable OPENSANDBOX_SERVER_API_KEY overrides it.
@API_KEY_LINE@
# Public host name or IP put into the endpoint URLs handed to clients
# (default: the address sandbox ports are published on, docker.host_ip).
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

[runtime]
type = "docker"                  # required; "kubernetes" is not supported yet
# The execd binary placed in every sandbox. Default: "execd" next to the
# opensandbox-server executable, else the one found in PATH.
# execd_path = "/usr/local/bin/execd"

[docker]
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

[storage]
allowed_host_paths = []          # absolute host directories sandboxes may mount; [] = none
volume_default_size = "1Gi"
default_disk_limit = ""          # disk limit of sandboxes that ask for none, e.g. "10Gi"; "" = none

[store]
type = "bbolt"
path = "~/.opensandbox/opensandbox.db"

[secure_runtime]
# "" = plain containers; "gvisor" or "kata" need docker_runtime, the OCI
# runtime registered with the engine (e.g. "runsc" or "kata-runtime").
type = ""
docker_runtime = ""
k8s_runtime_class = ""

[egress]
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

[ingress]
mode = "direct"                  # "gateway" only with Kubernetes

[debug]
# A second listener with Go's pprof profiles and /metrics, no API key.
enabled = false
address = "127.0.0.1:6060"       # keep it on loopback
`

const kubernetesTail = `
# --- Kubernetes (coming; leave commented out until supported) ---
#
# [runtime]
# type = "kubernetes"
#
# [kubernetes]
# kubeconfig_path = "~/.kube/config"    # omit inside the cluster
# namespace = "opensandbox"
# service_account = ""
# workload_provider = "batchsandbox"    # or "agent-sandbox"
# batchsandbox_template_file = ""
# image_pull_policy = "IfNotPresent"
# sandbox_create_timeout_seconds = 60
# sandbox_create_poll_interval_seconds = 1.0
# snapshot_create_timeout_seconds = 900
# informer_enabled = true
# informer_resync_seconds = 300
# informer_watch_timeout_seconds = 60
#
# [agent_sandbox]                       # with workload_provider = "agent-sandbox"
# template_file = ""
# shutdown_policy = "Delete"            # or "Retain"
# ingress_enabled = true
#
# [ingress]
# mode = "gateway"
# [ingress.gateway]
# address = "*.sandbox.example.com"     # no scheme; "*." for wildcard hosts
# route.mode = "wildcard"               # "wildcard", "uri" or "header"
#
# [secure_runtime]
# type = "gvisor"                       # "gvisor", "kata" or "firecracker"
# k8s_runtime_class = "gvisor"          # e.g. "gvisor", "kata-qemu", "kata-fc"
`
