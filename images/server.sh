#!/usr/bin/env bash
# Builds opensandbox/server:latest, the lifecycle server in a container
# (deploy/compose.yaml, the Helm chart), from bin/ with no registry and no
# base image, as scripts/kube/static-images.sh builds the controller's: a
# tree of static files imported with `docker import`.
#
#   images/server.sh            build it when its recipe or a binary changed
#   images/server.sh --force    build it anyway
#   images/server.sh --hash     print the recipe hash
#
# The image holds, all static:
#   /usr/local/bin/opensandbox-server  the entrypoint
#   /usr/local/bin/execd               found next to the server; the Docker
#                                      driver copies it into each sandbox
#                                      through the engine API (execd_copy)
#   /usr/local/bin/egress              the sidecar binary; the driver builds
#                                      the sidecar image through the API
#   /bin/busybox                       only for the HEALTHCHECK (wget)
#   /etc/opensandbox/config.toml       a default config for the Docker
#                                      runtime against the host's engine
#                                      (SANDBOX_CONFIG_PATH points at it)
#   /etc/ssl/certs/ca-certificates.crt this machine's CA bundle
# and /var/lib/opensandbox, a VOLUME, for the store.
#
# The recipe hash covers this script and the sha256 of every file copied in;
# the image carries it as the label io.opensandbox.recipe, and a run that
# finds it on opensandbox/server:latest builds nothing. BIN (default bin)
# is where the binaries are (make server execd egress).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SELF=images/server.sh
BIN=${BIN:-bin}
REF=opensandbox/server:latest
BUSYBOX=${BUSYBOX:-/bin/busybox}
CA=/etc/ssl/certs/ca-certificates.crt

die() {
	echo "images/server.sh: $*" >&2
	exit 1
}

# The default config: the Docker runtime against the engine behind the
# mounted /var/run/docker.sock. execd_copy because the server's execd path
# is inside this container and not on the engine's host, so it cannot be
# bind-mounted into sandboxes. host_ip 127.0.0.1 is reachable from the
# server only when it shares the host's network (network_mode: host, as
# deploy/compose.yaml does); see docs/deploy.md.
config() {
	cat <<-'EOF'
		# opensandbox/server's built-in config (images/server.sh). Mount your own
		# over /etc/opensandbox/config.toml, or point SANDBOX_CONFIG_PATH elsewhere.
		# The API key comes from OPENSANDBOX_SERVER_API_KEY.
		[server]
		host = "0.0.0.0"
		port = 8080

		[runtime]
		type = "docker"
		execd_path = "/usr/local/bin/execd"

		[docker]
		network_mode = "bridge"
		host_ip = "127.0.0.1"
		execd_copy = true

		[store]
		path = "/var/lib/opensandbox/opensandbox.db"

		[egress]
		egress_path = "/usr/local/bin/egress"
	EOF
}

files=("$BIN/opensandbox-server" "$BIN/execd" "$BIN/egress")
for f in "${files[@]}"; do
	[ -x "$f" ] || die "$f is missing: build it first (make server execd egress)"
done
[ -x "$BUSYBOX" ] || die "$BUSYBOX is missing: install busybox-static (make deps)"

hash=$({
	cat "$SELF"
	for f in "${files[@]}" "$BUSYBOX"; do sha256sum <"$f"; done
	if [ -s "$CA" ]; then sha256sum <"$CA"; fi
} | sha256sum | cut -c1-16)

if [ "${1:-}" = --hash ]; then
	echo "$hash"
	exit 0
fi
command -v docker >/dev/null || die "docker is not installed (make deps)"
have=$(docker image inspect -f '{{index .Config.Labels "io.opensandbox.recipe"}}' "$REF" 2>/dev/null || true)
if [ "$have" = "$hash" ] && [ "${1:-}" != --force ]; then
	echo "$REF is up to date (recipe $hash)"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
install -d -m 0755 "$tmp/usr/local/bin" "$tmp/bin" "$tmp/etc/opensandbox" "$tmp/etc/ssl/certs" \
	"$tmp/var/lib/opensandbox" "$tmp/root"
install -d -m 1777 "$tmp/tmp"
for f in "${files[@]}"; do install -m 0755 "$f" "$tmp/usr/local/bin/"; done
install -m 0755 "$BUSYBOX" "$tmp/bin/busybox"
config >"$tmp/etc/opensandbox/config.toml"
chmod 0644 "$tmp/etc/opensandbox/config.toml"
if [ -s "$CA" ]; then install -m 0644 "$CA" "$tmp/etc/ssl/certs/"; fi
printf 'root:x:0:0:root:/root:/bin/busybox\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$tmp/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$tmp/etc/group"

# The health check asks /health on OPENSANDBOX_HEALTH_URL (default the
# default port on loopback); -Y off: never through a proxy.
# shellcheck disable=SC2016 # expanded by the image's shell
health='exec /bin/busybox wget -q -Y off -O /dev/null "${OPENSANDBOX_HEALTH_URL:-http://127.0.0.1:8080/health}"'
tar -C "$tmp" --numeric-owner --owner=0 --group=0 -cf - . |
	docker import \
		--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
		--change 'ENV HOME=/root' \
		--change 'ENV SANDBOX_CONFIG_PATH=/etc/opensandbox/config.toml' \
		--change 'EXPOSE 8080' \
		--change 'VOLUME /var/lib/opensandbox' \
		--change "HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD [\"/bin/busybox\", \"sh\", \"-c\", \"${health//\"/\\\"}\"]" \
		--change 'ENTRYPOINT ["/usr/local/bin/opensandbox-server"]' \
		--change "LABEL io.opensandbox.image=opensandbox/server io.opensandbox.recipe=$hash" \
		- "opensandbox/server:$hash" >/dev/null
# Smoke check before latest moves: the binaries start in the image (a
# dynamically linked busybox or server would not).
for argv in "/bin/busybox true" "/usr/local/bin/opensandbox-server --help" "/bin/busybox test -x /usr/local/bin/execd -a -x /usr/local/bin/egress"; do
	# shellcheck disable=SC2086 # argv is split on purpose
	docker run --rm --network none --label io.opensandbox.test=image-check --entrypoint ${argv%% *} \
		"opensandbox/server:$hash" ${argv#* } >/dev/null 2>&1 ||
		{ docker rmi "opensandbox/server:$hash" >/dev/null 2>&1; die "check failed in the new image: $argv"; }
done
docker tag "opensandbox/server:$hash" "$REF"
# Older recipes' images have served their turn (a new binary is a new recipe).
docker images --format '{{.Repository}}:{{.Tag}}' opensandbox/server |
	grep -v -e ":latest\$" -e ":$hash\$" | xargs -r docker rmi >/dev/null 2>&1 || true
echo "images/server.sh: built $REF (recipe $hash)"
