#!/usr/bin/env bash
# Installs and starts what the test suite needs on a fresh Debian machine,
# idempotently: the Docker engine (Debian's docker.io), a static busybox
# for minimal test images, util-linux, and the interpreters execd's code
# interpreter tests drive (ipykernel with matplotlib and numpy, Node.js).
# Safe to run again and again.
set -euo pipefail

need=()
command -v dockerd >/dev/null || need+=(docker.io)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v unshare >/dev/null || need+=(util-linux)
command -v make >/dev/null || need+=(make)
command -v ip >/dev/null || need+=(iproute2)
for pkg in python3-ipykernel python3-matplotlib python3-numpy; do
	dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
command -v node >/dev/null || need+=(nodejs)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "missing packages: ${need[*]}; install them as root (apt-get install ${need[*]})" >&2
		exit 1
	fi
	echo "installing: ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ]; then
		echo "the Docker engine is not running; start it (sudo dockerd) or run as root" >&2
		exit 1
	fi
	echo "starting dockerd"
	nohup dockerd >/var/log/dockerd-opensandbox.log 2>&1 &
	for _ in $(seq 1 60); do
		docker info >/dev/null 2>&1 && break
		sleep 0.5
	done
	docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/dockerd-opensandbox.log" >&2; tail -20 /var/log/dockerd-opensandbox.log >&2; exit 1; }
fi
echo "dependencies ready: $(docker version --format 'docker engine {{.Server.Version}}')"
