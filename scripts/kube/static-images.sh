#!/usr/bin/env bash
# Builds the images of our static Go binaries that run in the test cluster's
# pods (the controller, execd for init containers, ...) from bin/, with no
# registry and no base image: each image is a tar of one binary plus the CA
# bundle, imported with `docker import`. scripts/kube/up.sh then pushes them
# to the local registry and imports them into the node's containerd.
#
#   scripts/kube/static-images.sh [--list]
#
# IMAGES below is the table: "image-ref binary entrypoint-json". An image is
# rebuilt only when its binary changed (the tag's label carries the binary's
# sha256). --list prints the image refs, for OSB_KUBE_IMAGES.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN=${BIN:-bin}

# image-ref | binary in $BIN | entrypoint (JSON array)
IMAGES=(
	'opensandbox/execd:latest|execd|["/execd"]'
	'opensandbox/egress:latest|egress|["/egress"]'
	'opensandbox/controller:latest|opensandbox-controller|["/opensandbox-controller"]'
	'opensandbox/task-executor:latest|task-executor|["/task-executor"]'
	'opensandbox/image-committer:latest|image-committer|["/image-committer"]'
)
# Images built elsewhere that the cluster needs as well: --list names them
# (so up.sh pushes and imports them), this script does not build them.
# opensandbox/server comes from images/server.sh (make images).
LISTED_ONLY=(opensandbox/server:latest)

if [ "${1:-}" = --list ]; then
	for row in "${IMAGES[@]}"; do printf '%s\n' "${row%%|*}"; done
	printf '%s\n' "${LISTED_ONLY[@]}"
	exit 0
fi

command -v docker >/dev/null || { echo "static-images: docker is not installed (make deps)" >&2; exit 1; }
for row in "${IMAGES[@]}"; do
	IFS='|' read -r ref bin entry <<<"$row"
	path=$BIN/$bin
	[ -x "$path" ] || { echo "static-images: $path is missing: build it first (make build)" >&2; exit 1; }
	sum=$(sha256sum "$path" | cut -c1-64)
	have=$(docker image inspect -f '{{index .Config.Labels "io.opensandbox.binary-sha256"}}' "$ref" 2>/dev/null || true)
	[ "$have" = "$sum" ] && continue
	tmp=$(mktemp -d)
	install -m 0755 "$path" "$tmp/$bin"
	mkdir -p "$tmp/etc/ssl/certs" "$tmp/tmp"
	chmod 1777 "$tmp/tmp"
	if [ -s /etc/ssl/certs/ca-certificates.crt ]; then cp /etc/ssl/certs/ca-certificates.crt "$tmp/etc/ssl/certs/"; fi
	tar -C "$tmp" --numeric-owner --owner=0 --group=0 -cf - . |
		docker import --change "ENTRYPOINT $entry" \
			--change "LABEL io.opensandbox.image=${ref%%:*} io.opensandbox.binary-sha256=$sum" - "$ref" >/dev/null
	rm -rf "$tmp"
	echo "static-images: built $ref from $path"
done
