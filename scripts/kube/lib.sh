# shellcheck shell=bash
# Sourced by scripts/kube/*.sh: the pinned versions, the binary cache layout
# and small helpers shared by the build, the cluster start and its teardown.

# Kubernetes v1.34 is the newest release whose kubelet still runs on cgroup v1
# without being told to (failCgroupV1 defaults to false up to 1.34; 1.35
# refuses cgroup v1 unless configured). This machine and CI have cgroup v1.
KUBE_VERSION=v1.34.12
ETCD_VERSION=v3.6.13
REGISTRY_VERSION=v3.1.2

KUBE_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KUBE_REPO=$(cd "$KUBE_SCRIPTS/../.." && pwd)
KUBE_CACHE=${OSB_KUBE_CACHE:-/var/cache/opensandbox/kube}

# What scripts/kube/build.sh puts in the cache's bin/ (the contract with the
# controller tests: KUBEBUILDER_ASSETS needs etcd, kube-apiserver, kubectl).
KUBE_BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl registry pause)

# The Go builds below never download a toolchain or read a workspace file.
export GOTOOLCHAIN=local GOWORK=off

kube_log() { printf 'kube: %s\n' "$*" >&2; }
kube_die() { printf 'kube: error: %s\n' "$*" >&2; exit 1; }

# kube_cache_dir prints the cache entry for this set of versions and the Go
# toolchain that builds them: <cache>/k8s-<v>-etcd-<v>-<go version>.
kube_cache_dir() {
	local gov
	gov=$(go env GOVERSION) || kube_die "go is not installed or not on PATH"
	printf '%s/k8s-%s-etcd-%s-%s\n' "$KUBE_CACHE" "$KUBE_VERSION" "$ETCD_VERSION" "$gov"
}

# kube_inputs_hash hashes the build modules (go.mod, go.sum, sources): a
# change to any of them (say a new registry version) invalidates the cache
# entry even though its name, which only carries the main versions, does not change.
kube_inputs_hash() {
	(cd "$KUBE_SCRIPTS/build" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 |
		LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# kube_cache_complete DIR succeeds when DIR holds every binary and was built
# from the current inputs.
kube_cache_complete() {
	local dir=$1 b
	[ -f "$dir/inputs.sha256" ] && [ "$(cat "$dir/inputs.sha256")" = "$(kube_inputs_hash)" ] || return 1
	for b in "${KUBE_BINARIES[@]}"; do
		[ -x "$dir/bin/$b" ] || return 1
	done
}

# ---- the cluster (scripts/kube/up.sh, down.sh) ----
KUBE_STATE=${OSB_KUBE_STATE:-/var/lib/opensandbox/kube}
KUBE_LOGS=$KUBE_STATE/logs
KUBE_RUN=$KUBE_STATE/run
KUBE_PKI=$KUBE_STATE/pki
KUBECONFIG_ADMIN=$KUBE_STATE/admin.kubeconfig
KUBE_NODE_NAME=opensandbox-node
# The node's address is the pod bridge's own address: loopback is not a valid
# node IP, and the host's own interfaces belong to the host, not to the test.
# The apiserver binds and advertises it, the kubelet serves on it, and pods
# reach the host through it (it is their gateway).
KUBE_BRIDGE=osbkube0
KUBE_POD_SUBNET=10.244.0.0/24
KUBE_NODE_IP=10.244.0.1
KUBE_SERVICE_SUBNET=10.96.0.0/16
KUBE_API_SERVICE_IP=10.96.0.1
KUBE_API_PORT=6443
KUBE_ETCD_CLIENT_PORT=2379
KUBE_ETCD_PEER_PORT=2380
KUBE_REGISTRY_PORT=${OSB_KUBE_REGISTRY_PORT:-5000}
KUBE_REGISTRY=127.0.0.1:$KUBE_REGISTRY_PORT
KUBE_CNI_NETWORK=osb-kube
KUBE_CNI_BIN=/usr/lib/cni
KUBE_CONTAINERD_SOCK=$KUBE_STATE/containerd/containerd.sock
# The rules this cluster adds to the host's FORWARD chain carry this comment.
KUBE_RULE_COMMENT=opensandbox-kube
# Components in start order; down.sh stops them in reverse.
KUBE_COMPONENTS=(etcd kube-apiserver containerd registry kube-controller-manager kube-scheduler kube-proxy kubelet)
# Sysctls the kubelet sets at start (its kernel defaults); down.sh restores them.
KUBE_SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops)
# iptables chains the kubelet makes (KUBE-FIREWALL with jumps from INPUT and
# OUTPUT, marker chains); down.sh removes those that did not exist before.
KUBE_IPTABLES_CHAINS=(KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT KUBE-PROXY-CANARY)
# Host paths the kubelet or libcni use whatever they are told; down.sh removes
# the ones this cluster created.
KUBE_HOST_PATHS=(/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni)

kube_ctr() { ctr --address "$KUBE_CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# kube_pid NAME prints the pid of a running component started by up.sh, or
# fails. The recorded command line must still match, so a recycled pid is
# never mistaken for the component.
kube_pid() {
	local name=$1 pid want have
	[ -f "$KUBE_RUN/$name.pid" ] || return 1
	read -r pid <"$KUBE_RUN/$name.pid" || return 1
	want=$(cat "$KUBE_RUN/$name.argv0" 2>/dev/null) || return 1
	have=$({ tr '\0' '\n' <"/proc/$pid/cmdline"; } 2>/dev/null | head -n1) || return 1
	[ -n "$have" ] && [ "$have" = "$want" ] || return 1
	printf '%s\n' "$pid"
}

# kube_log_tail NAME prints the end of a component's log to stderr.
kube_log_tail() {
	local f=$KUBE_LOGS/$1.log
	if [ -s "$f" ]; then
		printf -- '---- last lines of %s:\n' "$f" >&2
		tail -n "${2:-25}" "$f" >&2
		printf -- '----\n' >&2
	fi
}

# kube_wait TIMEOUT-SECONDS COMMAND... polls COMMAND every 0.2 s until it
# succeeds; fails when the deadline passes.
kube_wait() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.2
	done
}
