#!/usr/bin/env bash
# Prints the directory holding the test cluster's binaries, building them
# first when the cache lacks them (scripts/kube/build.sh; progress goes to
# stderr). Made for controller-runtime's envtest:
#   KUBEBUILDER_ASSETS=$(bash scripts/kube/assets.sh) go test ./internal/controller/...
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

dir=$(kube_cache_dir)
if ! kube_cache_complete "$dir"; then
	bash "$KUBE_SCRIPTS/build.sh" >&2
	kube_cache_complete "$dir" || kube_die "scripts/kube/build.sh finished but $dir is incomplete"
fi
printf '%s\n' "$dir/bin"
