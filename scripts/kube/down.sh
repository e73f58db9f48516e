#!/usr/bin/env bash
# Removes the test cluster (`make cluster-down`): deletes every pod (so the
# kubelet tears their sandboxes and networks down properly), stops all
# components, removes leftover containers, network namespaces and mounts,
# the bridge, the FORWARD rules and kube-proxy's nftables tables, restores the
# sysctls the kubelet changed and removes the host paths the cluster created.
# Docker is left alone. The cluster's data (etcd, kubelet, pod logs) goes;
# the certificates, the images in the node's containerd and the registry's
# storage stay, so the next start is quick. --purge removes the whole state
# directory too. Safe to run when nothing is up.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

purge=false
case ${1:-} in
--purge) purge=true ;;
"") ;;
*) kube_die "usage: down.sh [--purge]" ;;
esac
[ "$(id -u)" = 0 ] || kube_die "must run as root"
[ -d "$KUBE_STATE" ] || exit 0
exec 8>"$KUBE_STATE/.lock"
flock 8
start=$SECONDS

# stop NAME: SIGTERM, up to 20 s to exit, then SIGKILL.
stop() {
	local name=$1 pid
	pid=$(kube_pid "$name") || { rm -f "$KUBE_RUN/$name.pid"; return 0; }
	kill -TERM "$pid" 2>/dev/null || true
	if ! kube_wait 20 bash -c '! kill -0 "$0" 2>/dev/null' "$pid"; then
		kube_log "$name (pid $pid) did not stop on SIGTERM within 20 s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		kube_wait 10 bash -c '! kill -0 "$0" 2>/dev/null' "$pid" || kube_log "$name (pid $pid) survived SIGKILL"
	fi
	rm -f "$KUBE_RUN/$name.pid"
}

# The binaries this cluster was started from (also when it only half started).
bin=$(dirname "$(cat "$KUBE_RUN/kube-apiserver.argv0" 2>/dev/null || echo .)")
kubectl_bin=$bin/kubectl
task_count() { kube_ctr tasks ls -q 2>/dev/null | grep -c . || true; }

# 1. Pods first, while the kubelet runs: it stops each sandbox through the
# CRI, which runs the CNI DEL that releases the pod's address and veth. With
# the scheduler and controller-manager stopped nothing comes back.
if kube_pid kube-apiserver >/dev/null && kube_pid kubelet >/dev/null && [ -x "$kubectl_bin" ]; then
	stop kube-scheduler
	stop kube-controller-manager
	if "$kubectl_bin" --kubeconfig "$KUBECONFIG_ADMIN" delete pods --all --all-namespaces \
		--force --grace-period=0 --wait=false --request-timeout=20s >/dev/null 2>&1; then
		kube_wait 60 bash -c '[ "$(ctr --address "$0" -n k8s.io tasks ls -q 2>/dev/null | grep -c .)" = 0 ]' \
			"$KUBE_CONTAINERD_SOCK" ||
			kube_log "the kubelet left $(task_count) containers running after 60 s; removing them directly"
	fi
fi

# 2. Components, in reverse start order (containerd last but one: its
# leftovers are removed below while it still answers).
for ((i = ${#KUBE_COMPONENTS[@]} - 1; i >= 0; i--)); do
	[ "${KUBE_COMPONENTS[i]}" = containerd ] || stop "${KUBE_COMPONENTS[i]}"
done

# 3. Whatever the kubelet did not remove: kill and delete every container of
# the cluster's containerd namespace.
if kube_pid containerd >/dev/null; then
	for t in $(kube_ctr tasks ls -q 2>/dev/null); do
		kube_ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
	done
	for t in $(kube_ctr tasks ls -q 2>/dev/null); do
		kube_wait 10 bash -c '! ctr --address "$0" -n k8s.io tasks ls -q | grep -qx "$1"' "$KUBE_CONTAINERD_SOCK" "$t" || true
		kube_ctr tasks delete "$t" >/dev/null 2>&1 || kube_log "could not delete the task of container $t"
	done
	for c in $(kube_ctr containers ls -q 2>/dev/null); do
		kube_ctr containers delete "$c" >/dev/null 2>&1 || kube_log "could not delete container $c"
	done
	stop containerd
fi
rm -f "$KUBE_RUN/containerd.pid"

# 4. Network namespaces of sandboxes the kubelet did not stop: containerd
# names them cni-*; ours are the ones whose eth0 is in the pod subnet.
prefix=${KUBE_POD_SUBNET%.*}.
for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do
	if ip -n "$ns" -4 -o addr show 2>/dev/null | awk '{print $4}' | grep -q "^${prefix//./\\.}"; then
		ip netns delete "$ns" 2>/dev/null || kube_log "could not delete network namespace $ns"
	fi
done

# 5. Mounts left under the state directory (pod volumes, container rootfs).
findmnt -rn -o TARGET | awk -v p="$KUBE_STATE/" 'index($0, p) == 1' | sort -r | while read -r m; do
	umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || kube_log "could not unmount $m"
done

# 6. Network: the bridge, our FORWARD rules, kube-proxy's tables, the
# kubelet's chains.
ip link delete "$KUBE_BRIDGE" 2>/dev/null || true
for dir in -i -o; do
	while iptables -D FORWARD "$dir" "$KUBE_BRIDGE" -m comment --comment "$KUBE_RULE_COMMENT" -j ACCEPT 2>/dev/null; do :; done
done
for family in ip ip6; do
	nft delete table "$family" kube-proxy 2>/dev/null || true
done
for tool in iptables ip6tables; do
	command -v "$tool" >/dev/null || continue
	for table in mangle nat filter; do
		for chain in "${KUBE_IPTABLES_CHAINS[@]}"; do
			grep -qx "$tool $table $chain" "$KUBE_RUN/iptables-chains.before" 2>/dev/null && continue
			"$tool" -t "$table" -S "$chain" >/dev/null 2>&1 || continue
			# Rules jumping to the chain first (iptables -S quotes its output
			# for the shell, comments included).
			{ "$tool" -t "$table" -S | grep -E -- "^-A [^ ]+ (.* )?-j $chain( |\$)" || true; } | sed 's/^-A /-D /' |
				while IFS= read -r rule; do
					eval "\"\$tool\" -t \"\$table\" $rule" || kube_log "could not remove $tool -t $table $rule"
				done
			"$tool" -t "$table" -F "$chain" && "$tool" -t "$table" -X "$chain" ||
				kube_log "could not remove the $tool $table chain $chain"
		done
	done
done

# 7. Host state the kubelet changed or created.
if [ -f "$KUBE_RUN/sysctl.saved" ]; then
	while IFS= read -r kv; do
		[ -n "$kv" ] && { sysctl -q -w "$kv" >/dev/null || kube_log "could not restore sysctl $kv"; }
	done <"$KUBE_RUN/sysctl.saved"
fi
if [ -f "$KUBE_RUN/host-paths.created" ]; then
	while IFS= read -r p; do
		[ -n "$p" ] && rm -rf -- "$p"
	done <"$KUBE_RUN/host-paths.created"
fi
# Log links the kubelet made in a /var/log/containers that existed before.
if [ -d /var/log/containers ]; then
	find /var/log/containers -maxdepth 1 -type l -lname "$KUBE_STATE/*" -delete 2>/dev/null || true
fi
# libcni caches each attachment's result under /var/lib/cni even when that
# directory existed before; drop ours.
rm -f /var/lib/cni/results/"$KUBE_CNI_NETWORK"-* 2>/dev/null || true

# 8. The cluster's data.
rm -rf "$KUBE_RUN" "$KUBE_STATE/etcd" "$KUBE_STATE/kubelet" "$KUBE_STATE/pod-logs" "$KUBE_STATE/cni" \
	"$KUBE_STATE/containerd/state" "$KUBE_STATE/containerd/runc" "$KUBE_STATE/cluster.env" \
	"$KUBE_CONTAINERD_SOCK" "$KUBE_CONTAINERD_SOCK.ttrpc"
if $purge; then
	rm -rf "$KUBE_STATE"
	rm -f "$KUBE_REPO/bin/kubectl"
fi
kube_log "cluster down in $((SECONDS - start)) s$($purge && echo ", state $KUBE_STATE removed")"
