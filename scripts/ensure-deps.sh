#!/usr/bin/env bash
# Installs and starts what the test suite needs on a fresh Debian machine,
# idempotently: the Docker engine (Debian's docker.io), a static busybox
# for minimal test images, util-linux, the interpreters execd's code
# interpreter tests drive (ipykernel with matplotlib and numpy, Node.js),
# and for the environment examples a headless Chromium and a VNC stack.
# Safe to run again and again.
set -euo pipefail

need=()
command -v dockerd >/dev/null || need+=(docker.io)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v unshare >/dev/null || need+=(util-linux)
command -v make >/dev/null || need+=(make)
command -v ip >/dev/null || need+=(iproute2)
command -v mkfs.btrfs >/dev/null || need+=(btrfs-progs) # the disk-quota data root below
# deploy/compose.yaml and its e2e test: Debian's docker-compose (1.29, a few
# small Python packages) unless a compose v2 CLI plugin is already there.
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || need+=(docker-compose)
for pkg in python3-ipykernel python3-matplotlib python3-numpy node-typescript; do
	dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
command -v node >/dev/null || need+=(nodejs)
# images/build.sh fetches Node.js for some images from the npm registry.
command -v npm >/dev/null || need+=(npm)
# The environment examples and their tests: a headless Chromium on the host
# opens noVNC and VS Code through a forwarder; Xvfb, x11vnc and websockify
# serve internal/rfb's tests a real VNC server.
for pkg in chromium fonts-liberation xvfb x11vnc x11-xserver-utils websockify; do
	dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "missing packages: ${need[*]}; install them as root (apt-get install ${need[*]})" >&2
		exit 1
	fi
	echo "installing: ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Docker's live-restore keeps containers running while dockerd stops or
# restarts (an upgrade, a crash), so sandboxes survive an engine restart
# instead of all turning Failed. The key is merged into daemon.json, keeping
# every other key there. A running engine reloads the file on SIGHUP
# (live-restore is one of the keys it can change without a restart); when
# the file cannot be parsed it is left alone with a warning.
daemon_json=${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
enable_live_restore() {
	if [ "$(id -u)" != 0 ]; then
		echo "warning: not root: cannot set live-restore in $daemon_json; sandboxes will not survive a dockerd restart" >&2
		return 0
	fi
	mkdir -p "$(dirname "$daemon_json")"
	python3 - "$daemon_json" <<'PY'
import json, os, sys, tempfile
path = sys.argv[1]
try:
    with open(path) as f:
        text = f.read()
except FileNotFoundError:
    text = ""
try:
    cfg = json.loads(text) if text.strip() else {}
except ValueError as e:
    sys.exit(f"warning: {path} is not valid JSON ({e}); live-restore not set")
if not isinstance(cfg, dict):
    sys.exit(f"warning: {path} is not a JSON object; live-restore not set")
if cfg.get("live-restore") is True:
    sys.exit(0)
cfg["live-restore"] = True
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".daemon.json.")
with os.fdopen(fd, "w") as f:
    json.dump(cfg, f, indent=2)
    f.write("\n")
os.chmod(tmp, 0o644)
os.replace(tmp, path)
print(f"set live-restore in {path}")
PY
}
# Skip when the running engine has it already (maybe from a --live-restore
# flag, which dockerd refuses to see repeated in the file).
if [ "$(docker info --format '{{.LiveRestoreEnabled}}' 2>/dev/null)" != true ]; then
	enable_live_restore || true
fi

if docker info >/dev/null 2>&1 && [ "$(docker info --format '{{.LiveRestoreEnabled}}' 2>/dev/null)" != true ] && [ "$(id -u)" = 0 ]; then
	# Reload, not restart: running containers are untouched.
	if pid=$(cat /var/run/docker.pid 2>/dev/null) && kill -HUP "$pid" 2>/dev/null; then
		for _ in $(seq 1 20); do
			[ "$(docker info --format '{{.LiveRestoreEnabled}}' 2>/dev/null)" = true ] && break
			sleep 0.25
		done
	fi
	if [ "$(docker info --format '{{.LiveRestoreEnabled}}' 2>/dev/null)" != true ]; then
		echo "warning: the running dockerd did not enable live-restore on reload; it takes effect at its next start" >&2
	fi
fi

# ---- disk quotas: a btrfs data root for the dockerd this script starts ----
# Sandbox disk limits (resourceLimits.ephemeral-storage) need a Docker
# storage driver that enforces the per-container "size" option. This
# kernel has no XFS or ext4 quotas, so the data root is btrfs with simple
# quotas, in a sparse image file when the host has no btrfs to offer; see
# docs/server.md#disk-limits. Only for a dockerd started here, never over
# an existing data root nor a data-root/storage-driver set in daemon.json;
# OSB_DOCKER_DISK_QUOTA=off skips it. Idempotent: an existing image is
# mounted again, a mounted one used as it is. On failure dockerd starts
# with its defaults (disk limits then fail with DISK_LIMIT_NOT_SUPPORTED).
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QUOTA_DIR=/var/lib/opensandbox
QUOTA_IMG=$QUOTA_DIR/docker-btrfs.img
QUOTA_ROOT=$QUOTA_DIR/docker

# quota_root ARRAY appends the dockerd flags of the quota data root to ARRAY.
quota_root() {
	local -n args=$1
	if [ "${OSB_DOCKER_DISK_QUOTA:-on}" = off ]; then
		return 0
	fi
	if [ -f /etc/docker/daemon.json ] && grep -Eq '"(data-root|graph|storage-driver)"' /etc/docker/daemon.json; then
		echo "disk quotas: /etc/docker/daemon.json chooses the data root or storage driver; leaving them as they are"
		return 0
	fi
	if ! prepare_quota_root; then
		echo "disk quotas: could not prepare a btrfs data root; dockerd starts with its defaults and sandbox disk limits will be refused" >&2
		return 0
	fi
	args+=(--data-root "$QUOTA_ROOT" --storage-driver btrfs)
}

# prepare_quota_root makes QUOTA_ROOT a btrfs mount with simple quotas on.
prepare_quota_root() {
	mkdir -p "$QUOTA_ROOT"
	if ! mountpoint -q "$QUOTA_ROOT"; then
		if [ -n "$(ls -A "$QUOTA_ROOT")" ]; then
			echo "disk quotas: $QUOTA_ROOT is not empty and not a mount point; not mounting over it" >&2
			return 1
		fi
		if [ ! -f "$QUOTA_IMG" ]; then
			local avail size
			avail=$(df --output=avail -B1 "$QUOTA_DIR" | tail -1)
			size=$((avail / 4 * 3 / (1 << 30)))
			[ "$size" -gt 256 ] && size=256
			if [ "$size" -lt 4 ]; then
				echo "disk quotas: only $((avail >> 20)) MiB free under $QUOTA_DIR" >&2
				return 1
			fi
			echo "disk quotas: making a ${size} GiB sparse btrfs image $QUOTA_IMG"
			truncate -s "${size}G" "$QUOTA_IMG.tmp" && mkfs.btrfs -q "$QUOTA_IMG.tmp" >/dev/null &&
				mv "$QUOTA_IMG.tmp" "$QUOTA_IMG" || { rm -f "$QUOTA_IMG.tmp"; return 1; }
		fi
		mount -o loop,discard=async "$QUOTA_IMG" "$QUOTA_ROOT" || return 1
	fi
	if [ "$(stat -f -c %T "$QUOTA_ROOT")" != btrfs ]; then
		echo "disk quotas: $QUOTA_ROOT is mounted but not btrfs" >&2
		return 1
	fi
	local go=go
	command -v go >/dev/null || go=/usr/local/go/bin/go
	(cd "$REPO" && "$go" run ./scripts/btrfs-squota "$QUOTA_ROOT") || return 1
	# A data root whose quotas a dockerd turned on before (full quota
	# groups, which stop enforcing limits once their accounting goes
	# inconsistent) is switched to simple quotas; dockerd is not running
	# yet, and it sets each container's limit again at create.
	local mode
	mode=$(cat "/sys/fs/btrfs/$(findmnt -no UUID "$QUOTA_ROOT")/qgroups/mode" 2>/dev/null)
	if [ "$mode" = qgroup ]; then
		echo "disk quotas: $QUOTA_ROOT has full quota groups; switching to simple quotas"
		btrfs quota disable "$QUOTA_ROOT" && (cd "$REPO" && "$go" run ./scripts/btrfs-squota "$QUOTA_ROOT") || return 1
	fi
}

# keep_qgroups_exact stops the kernel from giving up on quota accounting:
# by default it marks a filesystem's qgroups inconsistent when it drops a
# subvolume whose tree is 3 or more levels deep (a big container layer), and
# while they are inconsistent quota limits are not enforced at all — a
# sandbox's disk limit silently stops working. Raising the threshold to the
# maximum tree level (8) keeps every drop accounted; qgroups already
# inconsistent are rescanned. The setting lasts until the next mount.
keep_qgroups_exact() {
	[ "$(id -u)" = 0 ] && mountpoint -q "$QUOTA_ROOT" || return 0
	local uuid q
	uuid=$(findmnt -no UUID "$QUOTA_ROOT") || return 0
	q=/sys/fs/btrfs/$uuid/qgroups
	[ -d "$q" ] || return 0
	if [ -w "$q/drop_subtree_threshold" ]; then
		echo 8 >"$q/drop_subtree_threshold" || echo "warning: could not raise $q/drop_subtree_threshold; disk limits may lapse after big deletions" >&2
	fi
	if [ "$(cat "$q/inconsistent" 2>/dev/null)" = 1 ]; then
		echo "disk quotas: qgroups of $QUOTA_ROOT are inconsistent (limits are not enforced); rescanning"
		btrfs quota rescan -w "$QUOTA_ROOT" >/dev/null || echo "warning: btrfs quota rescan of $QUOTA_ROOT failed; sandbox disk limits are not enforced" >&2
	fi
}

if ! docker info >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ]; then
		echo "the Docker engine is not running; start it (sudo dockerd) or run as root" >&2
		exit 1
	fi
	echo "starting dockerd"
	dockerd_args=()
	quota_root dockerd_args
	nohup dockerd "${dockerd_args[@]}" >/var/log/dockerd-opensandbox.log 2>&1 &
	for _ in $(seq 1 60); do
		docker info >/dev/null 2>&1 && break
		sleep 0.5
	done
	docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/dockerd-opensandbox.log" >&2; tail -20 /var/log/dockerd-opensandbox.log >&2; exit 1; }
fi
keep_qgroups_exact
echo "dependencies ready: $(docker version --format 'docker engine {{.Server.Version}}'), live-restore $(docker info --format '{{.LiveRestoreEnabled}}')"
