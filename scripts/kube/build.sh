#!/usr/bin/env bash
# Builds the test cluster's binaries from the Go module proxy into the cache
#   ${OSB_KUBE_CACHE:-/var/cache/opensandbox/kube}/k8s-<v>-etcd-<v>-<go>/bin/
# (etcd kube-apiserver kube-controller-manager kube-scheduler kubelet
# kube-proxy kubectl registry pause), static (CGO_ENABLED=0) with their
# version strings set. Idempotent: a complete entry is left alone. Concurrent
# runs serialise on a lock; the entry appears by one rename of a finished
# build, so an interrupted build never leaves a half-filled cache behind.
# A cold build takes about ten minutes on two cores (most of it compiling).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v go >/dev/null || kube_die "go is not installed or not on PATH"
command -v flock >/dev/null || kube_die "flock (util-linux) is not installed"
mkdir -p "$KUBE_CACHE"
dest=$(kube_cache_dir)

exec 9>"$KUBE_CACHE/.build.lock"
if ! flock -n 9; then
	kube_log "another build holds $KUBE_CACHE/.build.lock; waiting for it"
	flock 9
fi
if kube_cache_complete "$dest"; then
	exit 0
fi

tmp=$(mktemp -d "$KUBE_CACHE/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
start=$(date +%s)
kube_log "building Kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, registry $REGISTRY_VERSION and pause into $dest (about ten minutes when cold)"

gobuild() { # gobuild MODULE-DIR LDFLAGS PACKAGE...
	local dir=$1 ldflags=$2
	shift 2
	(cd "$KUBE_SCRIPTS/build/$dir" &&
		CGO_ENABLED=0 go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w $ldflags" -o "$tmp/bin/" "$@")
}

# Version strings: without them every component reports v0.0.0-master and
# the kubelet and kubectl version-skew checks misbehave. The module proxy does
# not carry a commit id, so gitCommit stays empty; the build date is the
# release's tag time, which keeps the build reproducible.
minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
kube_date=$(cd "$KUBE_SCRIPTS/build/kubernetes" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
kube_ldflags=
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	kube_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$kube_date"
done
gobuild kubernetes "$kube_ldflags" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
	k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl
# etcd's own build stamps the git commit here; record the release instead.
gobuild etcd "-X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" .
gobuild registry "-X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" \
	github.com/distribution/distribution/v3/cmd/registry
gobuild pause "" .

# Every binary must start and say which version it is before it is cached.
check() { # check BINARY EXPECTED ARGS...
	local bin=$1 want=$2 out
	shift 2
	out=$("$tmp/bin/$bin" "$@" 2>&1) || kube_die "$bin $* failed: $out"
	case $out in *"$want"*) ;; *) kube_die "$bin $* reports '$out', expected it to mention $want" ;; esac
}
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
	check "$b" "$KUBE_VERSION" --version
done
check kubectl "$KUBE_VERSION" version --client
check etcd "${ETCD_VERSION#v}" --version
check registry "$REGISTRY_VERSION" --version
for b in "${KUBE_BINARIES[@]}"; do
	[ -x "$tmp/bin/$b" ] || kube_die "the build did not produce $b"
done

kube_inputs_hash >"$tmp/inputs.sha256"
chmod 755 "$tmp" # mktemp made it 0700
if [ -e "$dest" ]; then # built from older inputs: swap it out
	old=$(mktemp -d "$KUBE_CACHE/.old.XXXXXX")
	mv -T "$dest" "$old/entry"
	mv -T "$tmp" "$dest"
	rm -rf "$old"
else
	mv -T "$tmp" "$dest"
fi
trap - EXIT
kube_log "built $(du -sh "$dest/bin" | cut -f1) of binaries in $(($(date +%s) - start)) s: $dest/bin"
