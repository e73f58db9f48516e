#!/usr/bin/env bash
# Brings up the single-node test cluster (`make cluster`): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy and kubelet built by
# scripts/kube/build.sh, a containerd instance of its own (Docker's is never
# touched), a CNI bridge, and a local OCI registry holding our images. State
# and logs live under /var/lib/opensandbox/kube (OSB_KUBE_STATE). Idempotent:
# a cluster that is already up is only checked. Waits until the node is Ready
# and the default ServiceAccount exists; the last line printed is the admin
# kubeconfig's path. Anything that cannot start stops the script with what
# failed, why, and the end of that component's log. docs/kubernetes.md
# ("The test cluster") describes the result.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" = 0 ] || kube_die "must run as root (it starts a kubelet, a containerd and a bridge)"
mkdir -p "$KUBE_STATE"
exec 8>"$KUBE_STATE/.lock"
flock 8 # one up/down at a time; started components never inherit fd 8

# ---------------------------------------------------------------- prerequisites
need_cmd() { command -v "$1" >/dev/null || kube_die "$1 is not installed ($2)"; }
need_cmd go "it builds the cluster's binaries"
need_cmd openssl "it makes the cluster's certificates"
need_cmd iptables "it opens the FORWARD chain for the pod bridge"
need_cmd nft "kube-proxy runs in nftables mode"
need_cmd ip "iproute2 makes the pod bridge"
need_cmd curl "it checks the registry's health"
need_cmd docker "our images come from the local Docker build: run make deps images"
apt_install() {
	kube_log "installing $* with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 ||
		{ apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends "$@" >/dev/null; } ||
		kube_die "apt-get install $* failed"
}
# containerd and runc come with docker.io (make deps); the CNI plugins do not.
for c in containerd ctr containerd-shim-runc-v2 runc; do
	command -v "$c" >/dev/null || { apt_install containerd runc; break; }
done
[ -x "$KUBE_CNI_BIN/bridge" ] && [ -x "$KUBE_CNI_BIN/host-local" ] && [ -x "$KUBE_CNI_BIN/loopback" ] ||
	apt_install containernetworking-plugins
[ -x "$KUBE_CNI_BIN/bridge" ] || kube_die "containernetworking-plugins did not install $KUBE_CNI_BIN/bridge"
docker info >/dev/null 2>&1 || kube_die "the Docker engine is not running (make deps starts it); our images come from it"
# cgroup v1 (this machine, CI) or v2: the kubelet and runc use the cgroupfs driver either way.
for c in cpu cpuacct cpuset memory pids; do
	[ -d "/sys/fs/cgroup/$c" ] || [ -f /sys/fs/cgroup/cgroup.controllers ] ||
		kube_die "the $c cgroup controller is not mounted under /sys/fs/cgroup; the kubelet needs it"
done

BIN=$(bash "$KUBE_SCRIPTS/assets.sh") || kube_die "the cluster's binaries could not be built (scripts/kube/build.sh)"
mkdir -p "$KUBE_REPO/bin"
ln -sfn "$BIN/kubectl" "$KUBE_REPO/bin/kubectl"
kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# Our images: pushed to the registry (pods may name 127.0.0.1:PORT/...) and
# imported into the node under their plain names (pods may name
# opensandbox/base:latest with imagePullPolicy IfNotPresent). A marker holds
# the Docker image id last imported, so an unchanged image is not re-imported.
# It runs on every start, also when the cluster is already up: an image
# rebuilt since (a new controller or execd) must reach the node.
sync_images() {
	local arch img id marker out images
	arch=$(go env GOARCH)
	images=${OSB_KUBE_IMAGES:-opensandbox/base:latest opensandbox/code-interpreter:latest}
	mkdir -p "$KUBE_STATE/images"
	for img in $images; do
		id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null) || {
			case $img in
			opensandbox/base:*) kube_die "the image $img is not in Docker: run make images" ;;
			*) kube_log "skipping $img: not in Docker (make images builds it)" && continue ;;
			esac
		}
		marker=$KUBE_STATE/images/$(printf '%s' "$img" | tr '/:' '__')
		if [ "$(cat "$marker.pushed" 2>/dev/null)" != "$id" ] ||
			! curl -fsS -o /dev/null "http://$KUBE_REGISTRY/v2/${img%:*}/manifests/${img##*:}" \
				-H 'Accept: application/vnd.docker.distribution.manifest.v2+json'; then
			kube_log "pushing $img to $KUBE_REGISTRY"
			docker tag "$img" "$KUBE_REGISTRY/$img"
			out=$(docker push "$KUBE_REGISTRY/$img" 2>&1) || {
				docker rmi "$KUBE_REGISTRY/$img" >/dev/null 2>&1 || true
				kube_log_tail registry
				kube_die "docker push $KUBE_REGISTRY/$img failed: $(printf '%s' "$out" | tail -n3)"
			}
			docker rmi "$KUBE_REGISTRY/$img" >/dev/null # only the extra tag goes
			printf '%s\n' "$id" >"$marker.pushed"
		fi
		if [ "$(cat "$marker.imported" 2>/dev/null)" != "$id" ] ||
			! kube_ctr images check "name==docker.io/$img" 2>/dev/null | grep -q complete; then
			kube_log "importing $img into the node's containerd"
			docker save "$img" | kube_ctr images import --platform "linux/$arch" - >/dev/null ||
				kube_die "importing $img into containerd failed (docker save | ctr images import)"
			printf '%s\n' "$id" >"$marker.imported"
		fi
	done
}

# ---------------------------------------------------------------- already up?
node_ready() {
	[ "$(kubectl get node "$KUBE_NODE_NAME" --request-timeout=5s \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
all_running() {
	local c
	for c in "${KUBE_COMPONENTS[@]}"; do kube_pid "$c" >/dev/null || return 1; done
}
cluster_up() {
	all_running && [ -f "$KUBE_STATE/cluster.env" ] &&
		[ "$(kubectl get --raw /readyz --request-timeout=5s 2>/dev/null)" = ok ] && node_ready &&
		kubectl get serviceaccount default -n default --request-timeout=5s >/dev/null 2>&1
}
if cluster_up; then
	sync_images
	kube_log "the cluster is already up ($(kubectl version -o json 2>/dev/null | grep -m1 gitVersion | tr -d ' ",' | cut -d: -f2), node $KUBE_NODE_NAME Ready)"
	printf '%s\n' "$KUBECONFIG_ADMIN"
	exit 0
fi
# Something is left of an earlier run (stopped, crashed, or half started):
# clear it so the start below begins from a known state.
if [ -d "$KUBE_RUN" ] || ip link show "$KUBE_BRIDGE" >/dev/null 2>&1; then
	kube_log "clearing what is left of an earlier cluster (scripts/kube/down.sh)"
	flock -u 8
	bash "$KUBE_SCRIPTS/down.sh" >&2 || kube_die "scripts/kube/down.sh could not clear the earlier cluster"
	flock 8
fi

start=$SECONDS
# listening PORT: some socket listens on PORT (any address). Read from
# /proc/net/tcp{,6}, so nothing beyond the kernel is needed.
listening() {
	local hex
	hex=$(printf '%04X' "$1")
	awk -v p=":$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}
for p in "$KUBE_NODE_IP:$KUBE_API_PORT" "127.0.0.1:$KUBE_ETCD_CLIENT_PORT" "127.0.0.1:$KUBE_ETCD_PEER_PORT" \
	"$KUBE_REGISTRY" "$KUBE_NODE_IP:10250" "127.0.0.1:10248" "127.0.0.1:10249" "127.0.0.1:10256" \
	"127.0.0.1:10257" "127.0.0.1:10259"; do
	if listening "${p##*:}"; then
		kube_die "port ${p##*:} (wanted at $p) is already taken by another program; free it or, for the registry, set OSB_KUBE_REGISTRY_PORT"
	fi
done

mkdir -p "$KUBE_LOGS" "$KUBE_RUN" "$KUBE_PKI"
# The previous run's logs stay readable in logs.prev.
if compgen -G "$KUBE_LOGS/*.log" >/dev/null; then
	rm -rf "$KUBE_STATE/logs.prev" && mv "$KUBE_LOGS" "$KUBE_STATE/logs.prev" && mkdir -p "$KUBE_LOGS"
fi

# Record what down.sh must put back: the sysctls the kubelet sets and which
# of the host paths it insists on already existed.
if [ ! -f "$KUBE_RUN/sysctl.saved" ]; then
	for s in "${KUBE_SYSCTLS[@]}"; do printf '%s=%s\n' "$s" "$(sysctl -n "$s")"; done >"$KUBE_RUN/sysctl.saved.tmp"
	mv "$KUBE_RUN/sysctl.saved.tmp" "$KUBE_RUN/sysctl.saved"
fi
if [ ! -f "$KUBE_RUN/iptables-chains.before" ]; then
	for tool in iptables ip6tables; do
		command -v "$tool" >/dev/null || continue
		for table in mangle nat filter; do
			for chain in "${KUBE_IPTABLES_CHAINS[@]}"; do
				! "$tool" -t "$table" -S "$chain" >/dev/null 2>&1 || printf '%s %s %s\n' "$tool" "$table" "$chain"
			done
		done
	done >"$KUBE_RUN/iptables-chains.before"
fi
if [ ! -f "$KUBE_RUN/host-paths.created" ]; then
	for p in "${KUBE_HOST_PATHS[@]}"; do [ -e "$p" ] || printf '%s\n' "$p"; done >"$KUBE_RUN/host-paths.created"
fi

# ---------------------------------------------------------------- certificates
# openssl rather than a Go program: it is on every Debian machine, there is
# nothing to compile, and the commands below read as the list of identities
# the cluster has. EC P-256 keys: fast to make, accepted everywhere here
# (including service-account token signing, ES256).
pki() { # pki NAME SUBJECT [SAN] [EXTENDED-KEY-USAGE]: key + certificate signed by the cluster CA
	local name=$1 subj=$2 san=${3:-} eku=${4:-clientAuth}
	[ -s "$KUBE_PKI/$name.crt" ] && return 0
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$KUBE_PKI/$name.key" 2>/dev/null
	openssl req -new -key "$KUBE_PKI/$name.key" -subj "$subj" -out "$KUBE_PKI/$name.csr"
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$eku"
		[ -z "$san" ] || echo "subjectAltName=$san"
	} >"$KUBE_PKI/$name.ext"
	openssl x509 -req -in "$KUBE_PKI/$name.csr" -CA "$KUBE_PKI/ca.crt" -CAkey "$KUBE_PKI/ca.key" \
		-CAcreateserial -days 3650 -sha256 -extfile "$KUBE_PKI/$name.ext" -out "$KUBE_PKI/$name.crt" 2>/dev/null
	rm -f "$KUBE_PKI/$name.csr" "$KUBE_PKI/$name.ext"
}
(
	umask 077
	if [ ! -s "$KUBE_PKI/ca.crt" ]; then
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$KUBE_PKI/ca.key" 2>/dev/null
		openssl req -x509 -new -key "$KUBE_PKI/ca.key" -subj "/CN=opensandbox-test-cluster-ca" -days 3650 -sha256 \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
			-out "$KUBE_PKI/ca.crt"
	fi
	pki apiserver "/CN=kube-apiserver" \
		"DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:$KUBE_API_SERVICE_IP,IP:$KUBE_NODE_IP,IP:127.0.0.1" \
		serverAuth
	pki apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	pki admin "/O=system:masters/CN=kubernetes-admin"
	pki controller-manager "/CN=system:kube-controller-manager"
	pki scheduler "/CN=system:kube-scheduler"
	pki kube-proxy "/CN=system:kube-proxy"
	pki kubelet-client "/O=system:nodes/CN=system:node:$KUBE_NODE_NAME"
	pki kubelet "/CN=$KUBE_NODE_NAME" "DNS:$KUBE_NODE_NAME,IP:$KUBE_NODE_IP" serverAuth
	if [ ! -s "$KUBE_PKI/sa.pub" ]; then
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$KUBE_PKI/sa.key" 2>/dev/null
		openssl pkey -in "$KUBE_PKI/sa.key" -pubout -out "$KUBE_PKI/sa.pub"
	fi
) || kube_die "making the certificates under $KUBE_PKI failed (openssl)"

kubeconfig() { # kubeconfig NAME USER CERT
	local f=$KUBE_STATE/$1.kubeconfig
	cat >"$f.tmp" <<EOK
apiVersion: v1
kind: Config
clusters:
- name: opensandbox
  cluster:
    server: https://$KUBE_NODE_IP:$KUBE_API_PORT
    certificate-authority-data: $(base64 -w0 "$KUBE_PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$KUBE_PKI/$3.crt")
    client-key-data: $(base64 -w0 "$KUBE_PKI/$3.key")
contexts:
- name: opensandbox
  context: {cluster: opensandbox, user: $2, namespace: default}
current-context: opensandbox
EOK
	chmod 600 "$f.tmp" && mv "$f.tmp" "$f"
}
kubeconfig admin kubernetes-admin admin
kubeconfig controller-manager system:kube-controller-manager controller-manager
kubeconfig scheduler system:kube-scheduler scheduler
kubeconfig kube-proxy system:kube-proxy kube-proxy
kubeconfig kubelet "system:node:$KUBE_NODE_NAME" kubelet-client

# ---------------------------------------------------------------- processes
# start NAME BINARY ARGS...: runs a component in a session of its own (it
# outlives this script and make), logging to logs/NAME.log.
start() {
	local name=$1
	shift
	printf '%s\n' "$1" >"$KUBE_RUN/$name.argv0"
	setsid "$@" </dev/null >>"$KUBE_LOGS/$name.log" 2>&1 8>&- &
	printf '%s\n' "$!" >"$KUBE_RUN/$name.pid"
}
# ready NAME TIMEOUT WHAT COMMAND...: waits for COMMAND; fails naming the
# component and showing its log when it exits or the deadline passes.
ready() {
	local name=$1 timeout=$2 what=$3 deadline
	shift 3
	deadline=$((SECONDS + timeout))
	until "$@" >/dev/null 2>&1; do
		if ! kube_pid "$name" >/dev/null; then
			kube_log_tail "$name" 40
			kube_die "$name exited before $what (log: $KUBE_LOGS/$name.log; make cluster-down clears what started)"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			kube_log_tail "$name" 40
			kube_die "$name: $what did not happen within ${timeout}s (log: $KUBE_LOGS/$name.log; make cluster-down clears what started)"
		fi
		sleep 0.2
	done
}

# ---------------------------------------------------------------- network
# The bridge is made here, with its address, before anything binds to it;
# the CNI bridge plugin adopts it (it finds its gateway address already set).
ip link add "$KUBE_BRIDGE" type bridge 2>/dev/null || ip link show "$KUBE_BRIDGE" >/dev/null ||
	kube_die "cannot create the bridge $KUBE_BRIDGE"
ip addr replace "$KUBE_NODE_IP/${KUBE_POD_SUBNET#*/}" dev "$KUBE_BRIDGE"
ip link set "$KUBE_BRIDGE" up
# Docker sets the FORWARD policy to DROP, and with bridge-nf-call-iptables on
# even traffic between two pods on the bridge passes that chain.
for dir in -i -o; do
	iptables -C FORWARD "$dir" "$KUBE_BRIDGE" -m comment --comment "$KUBE_RULE_COMMENT" -j ACCEPT 2>/dev/null ||
		iptables -I FORWARD 1 "$dir" "$KUBE_BRIDGE" -m comment --comment "$KUBE_RULE_COMMENT" -j ACCEPT ||
		kube_die "cannot add the FORWARD ACCEPT rule for $KUBE_BRIDGE (iptables)"
done

mkdir -p "$KUBE_STATE/cni/net.d" "$KUBE_STATE/cni/ipam"
# host-local's routes must include the default route, or pods have none.
# No ipMasq: pods talk to the host and to each other, and this machine has
# nowhere else to reach; without it the plugin adds no per-pod NAT rules.
cat >"$KUBE_STATE/cni/net.d/10-$KUBE_CNI_NETWORK.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$KUBE_CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$KUBE_BRIDGE",
      "isGateway": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$KUBE_POD_SUBNET", "gateway": "$KUBE_NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$KUBE_STATE/cni/ipam"
      }
    }
  ]
}
EOF

# ---------------------------------------------------------------- etcd
# Plain HTTP on loopback: only the apiserver on this host talks to it.
# --unsafe-no-fsync: the data is thrown away with the cluster, and without
# fsync a shared, busy disk does not slow every API write.
start etcd "$BIN/etcd" --name default --data-dir "$KUBE_STATE/etcd" \
	--listen-client-urls "http://127.0.0.1:$KUBE_ETCD_CLIENT_PORT" \
	--advertise-client-urls "http://127.0.0.1:$KUBE_ETCD_CLIENT_PORT" \
	--listen-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
	--initial-advertise-peer-urls "http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
	--initial-cluster "default=http://127.0.0.1:$KUBE_ETCD_PEER_PORT" \
	--unsafe-no-fsync --log-level warn
ready etcd 60 "answering /health" curl -fsS "http://127.0.0.1:$KUBE_ETCD_CLIENT_PORT/health"

# ---------------------------------------------------------------- apiserver
start kube-apiserver "$BIN/kube-apiserver" \
	--bind-address "$KUBE_NODE_IP" --advertise-address "$KUBE_NODE_IP" --secure-port "$KUBE_API_PORT" \
	--etcd-servers "http://127.0.0.1:$KUBE_ETCD_CLIENT_PORT" \
	--service-cluster-ip-range "$KUBE_SERVICE_SUBNET" \
	--client-ca-file "$KUBE_PKI/ca.crt" \
	--tls-cert-file "$KUBE_PKI/apiserver.crt" --tls-private-key-file "$KUBE_PKI/apiserver.key" \
	--kubelet-client-certificate "$KUBE_PKI/apiserver-kubelet-client.crt" \
	--kubelet-client-key "$KUBE_PKI/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority "$KUBE_PKI/ca.crt" \
	--kubelet-preferred-address-types InternalIP \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$KUBE_PKI/sa.pub" \
	--service-account-signing-key-file "$KUBE_PKI/sa.key" \
	--authorization-mode Node,RBAC \
	--enable-admission-plugins NodeRestriction \
	--allow-privileged=true \
	--profiling=false
ready kube-apiserver 120 "answering /readyz" bash -c '[ "$("$0" --kubeconfig "$1" get --raw /readyz --request-timeout=5s)" = ok ]' \
	"$BIN/kubectl" "$KUBECONFIG_ADMIN"

# ---------------------------------------------------------------- containerd
# A pause image of our own, built around our pause program, named after its
# content so a new program means a new image.
pause_tag=$(sha256sum "$BIN/pause" | cut -c1-12)
PAUSE_IMAGE=docker.io/opensandbox/kube-pause:$pause_tag
arch=$(go env GOARCH)
build_pause_image() { # build_pause_image OUT.tar: an OCI image layout, one layer holding /pause
	local work out=$1 layer config manifest ls cs ms
	work=$(mktemp -d)
	mkdir -p "$work/root" "$work/oci/blobs/sha256"
	install -m 0755 "$BIN/pause" "$work/root/pause"
	tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$work/root" -cf "$work/layer.tar" pause
	layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
	ls=$(stat -c %s "$work/layer.tar")
	mv "$work/layer.tar" "$work/oci/blobs/sha256/$layer"
	printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$arch" "$layer" >"$work/config.json"
	config=$(sha256sum "$work/config.json" | cut -d' ' -f1)
	cs=$(stat -c %s "$work/config.json")
	mv "$work/config.json" "$work/oci/blobs/sha256/$config"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
		"$config" "$cs" "$layer" "$ls" >"$work/manifest.json"
	manifest=$(sha256sum "$work/manifest.json" | cut -d' ' -f1)
	ms=$(stat -c %s "$work/manifest.json")
	mv "$work/manifest.json" "$work/oci/blobs/sha256/$manifest"
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$manifest" "$ms" "$arch" "$PAUSE_IMAGE" "$pause_tag" >"$work/oci/index.json"
	printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
	tar -C "$work/oci" -cf "$out" oci-layout index.json blobs
	rm -rf "$work"
}

mkdir -p "$KUBE_STATE/containerd/certs.d/$KUBE_REGISTRY"
# The local registry speaks plain HTTP on loopback.
cat >"$KUBE_STATE/containerd/certs.d/$KUBE_REGISTRY/hosts.toml" <<EOF
server = "http://$KUBE_REGISTRY"

[host."http://$KUBE_REGISTRY"]
  capabilities = ["pull", "resolve", "push"]
EOF
# Everything of this containerd is its own: root, state, sockets, the runc
# root and the opt directory, so Docker's containerd is never touched.
# restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so runc cannot
# lower the pause container's oom_score_adj to -998 and every sandbox would
# fail ("can't get final child's PID from pipe: EOF"); this keeps requested
# scores at or above containerd's own.
cat >"$KUBE_STATE/containerd/config.toml" <<EOF
version = 2
root = "$KUBE_STATE/containerd/root"
state = "$KUBE_STATE/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$KUBE_CONTAINERD_SOCK"

[ttrpc]
  address = "$KUBE_STATE/containerd/containerd.sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$KUBE_STATE/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  max_container_log_line_size = 65536

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$KUBE_STATE/containerd/runc"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$KUBE_CNI_BIN"
    conf_dir = "$KUBE_STATE/cni/net.d"
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$KUBE_STATE/containerd/certs.d"
EOF
start containerd containerd --config "$KUBE_STATE/containerd/config.toml" --log-level warn
ready containerd 60 "answering on $KUBE_CONTAINERD_SOCK" kube_ctr version
if ! kube_ctr images check "name==$PAUSE_IMAGE" 2>/dev/null | grep -q complete; then
	build_pause_image "$KUBE_STATE/containerd/pause.tar"
	kube_ctr images import --platform "linux/$arch" "$KUBE_STATE/containerd/pause.tar" >/dev/null ||
		kube_die "importing the pause image $PAUSE_IMAGE into containerd failed"
	rm -f "$KUBE_STATE/containerd/pause.tar"
fi

# ---------------------------------------------------------------- registry
mkdir -p "$KUBE_STATE/registry/data"
cat >"$KUBE_STATE/registry/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $KUBE_STATE/registry/data
  delete:
    enabled: true
http:
  addr: $KUBE_REGISTRY
EOF
export OTEL_TRACES_EXPORTER=none # no tracing collector to export to
start registry "$BIN/registry" serve "$KUBE_STATE/registry/config.yml"
ready registry 30 "answering http://$KUBE_REGISTRY/v2/" curl -fsS "http://$KUBE_REGISTRY/v2/"

sync_images

# ---------------------------------------------------------------- control plane
mkdir -p "$KUBE_STATE/plugins/volume/exec"
start kube-controller-manager "$BIN/kube-controller-manager" \
	--kubeconfig "$KUBE_STATE/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$KUBE_STATE/controller-manager.kubeconfig" \
	--authorization-kubeconfig "$KUBE_STATE/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port 10257 \
	--leader-elect=false \
	--use-service-account-credentials \
	--service-account-private-key-file "$KUBE_PKI/sa.key" \
	--root-ca-file "$KUBE_PKI/ca.crt" \
	--cluster-signing-cert-file "$KUBE_PKI/ca.crt" --cluster-signing-key-file "$KUBE_PKI/ca.key" \
	--service-cluster-ip-range "$KUBE_SERVICE_SUBNET" \
	--cluster-name opensandbox \
	--flex-volume-plugin-dir "$KUBE_STATE/plugins/volume/exec" \
	--kube-api-qps 100 --kube-api-burst 200 \
	--profiling=false

cat >"$KUBE_STATE/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $KUBE_STATE/scheduler.kubeconfig
  qps: 100
  burst: 200
leaderElection:
  leaderElect: false
EOF
start kube-scheduler "$BIN/kube-scheduler" --config "$KUBE_STATE/scheduler.yaml" \
	--authentication-kubeconfig "$KUBE_STATE/scheduler.kubeconfig" \
	--authorization-kubeconfig "$KUBE_STATE/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port 10259

# nftables mode; the conntrack values are zero so kube-proxy leaves the host's
# conntrack sysctls alone, and node ports open only on the node address.
cat >"$KUBE_STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: $KUBE_NODE_NAME
clusterCIDR: $KUBE_POD_SUBNET
nodePortAddresses: ["$KUBE_NODE_IP/32"]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection:
  kubeconfig: $KUBE_STATE/kube-proxy.kubeconfig
  qps: 50
  burst: 100
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
EOF
start kube-proxy "$BIN/kube-proxy" --config "$KUBE_STATE/kube-proxy.yaml"

# ---------------------------------------------------------------- kubelet
# cgroupDriver cgroupfs: PID 1 is not systemd here (and runc above uses
# cgroupfs too). failCgroupV1 false: this machine and CI have cgroup v1; a
# 1.34 kubelet only warns about it (1.35 would refuse to start). failSwapOn
# false: a test machine may have swap. imageGC at 100 %: our images are
# imported, not pullable from anywhere, so the kubelet must never delete
# them. The eviction thresholds are low because the disk is shared with
# everything else on the machine; podLogsDir and volumePluginDir keep the
# kubelet's files under the state directory.
cat >"$KUBE_STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $KUBE_NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $KUBE_PKI/ca.crt
authorization:
  mode: Webhook
tlsCertFile: $KUBE_PKI/kubelet.crt
tlsPrivateKeyFile: $KUBE_PKI/kubelet.key
containerRuntimeEndpoint: unix://$KUBE_CONTAINERD_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
podLogsDir: $KUBE_STATE/pod-logs
volumePluginDir: $KUBE_STATE/plugins/volume/exec
maxPods: 250
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
kubeAPIQPS: 100
kubeAPIBurst: 200
EOF
start kubelet "$BIN/kubelet" --config "$KUBE_STATE/kubelet.yaml" \
	--kubeconfig "$KUBE_STATE/kubelet.kubeconfig" \
	--root-dir "$KUBE_STATE/kubelet" \
	--node-ip "$KUBE_NODE_IP" --hostname-override "$KUBE_NODE_NAME"

ready kube-controller-manager 60 "answering /healthz" curl -fsSk https://127.0.0.1:10257/healthz
ready kube-scheduler 60 "answering /healthz" curl -fsSk https://127.0.0.1:10259/healthz
ready kube-proxy 60 "answering /healthz" curl -fsS http://127.0.0.1:10256/healthz
ready kubelet 120 "reporting node $KUBE_NODE_NAME Ready" node_ready
ready kube-controller-manager 60 "creating the default ServiceAccount" \
	"$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" get serviceaccount default -n default

cat >"$KUBE_STATE/cluster.env.tmp" <<EOF
# The running test cluster (scripts/kube/up.sh); sourceable by sh.
KUBECONFIG=$KUBECONFIG_ADMIN
OSB_KUBE_REGISTRY=$KUBE_REGISTRY
OSB_KUBE_NODE_NAME=$KUBE_NODE_NAME
OSB_KUBE_NODE_IP=$KUBE_NODE_IP
OSB_KUBE_CONTAINERD_SOCK=$KUBE_CONTAINERD_SOCK
OSB_KUBE_BIN=$BIN
EOF
mv "$KUBE_STATE/cluster.env.tmp" "$KUBE_STATE/cluster.env"
kube_log "cluster up in $((SECONDS - start)) s: Kubernetes $KUBE_VERSION, node $KUBE_NODE_NAME ($KUBE_NODE_IP), registry $KUBE_REGISTRY, logs in $KUBE_LOGS"
printf '%s\n' "$KUBECONFIG_ADMIN"
