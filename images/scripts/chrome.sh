#!/bin/bash
# /opt/opensandbox/chrome.sh (also /entrypoint): Chromium with a screen,
# for automation over the DevTools protocol and for watching over VNC.
#
#   display :1   Xvfb, SCREEN_GEOMETRY (default 1280x800x24)
#   port 5901    x11vnc serving display :1 on all interfaces; password
#                VNC_PASSWORD if set and not empty, else none
#   port 9222    Chromium's DevTools protocol on 127.0.0.1 (execd's
#                /proxy/9222 reaches it there); GET /json/version names
#                the browser and its WebSocket URL
#
# Arguments go to Chromium after the flags below (more flags, or URLs to
# open). Chromium, Xvfb and x11vnc run as the sandbox user (uid 1000) when
# the script runs as root (RUN_USER, see x11-lib.sh). The script prints one
# line starting with "chrome.sh: ready:" once all three answer, then stays
# in the foreground: it exits 1 if one of them exits, and stops them all
# and exits 0 on SIGTERM, SIGINT or SIGHUP. Logs and the browser profile
# are in a fresh /tmp/opensandbox-chrome.XXXXXX, named in the ready line.
set -u
PROG=chrome.sh
# shellcheck source=x11-lib.sh
. /opt/opensandbox/x11-lib.sh

DISPLAY_NUMBER=1
VNC_PORT=5901
DEVTOOLS_PORT=9222
GEOMETRY=${SCREEN_GEOMETRY:-1280x800x24}

x11_init
start_xvfb "$DISPLAY_NUMBER" "$GEOMETRY"
start_x11vnc "$DISPLAY_NUMBER" "$VNC_PORT" "${VNC_PASSWORD:-}"

size=${GEOMETRY%x*}
flags=(
	# Chromium's own sandbox needs user namespaces or its setuid helper;
	# a container's seccomp profile and dropped capabilities deny the
	# first, and the image has no setuid helper. The container is the
	# boundary around the browser here.
	--no-sandbox
	--remote-debugging-port="$DEVTOOLS_PORT"
	# No --remote-allow-origins: clients that are not web pages (Puppeteer,
	# Playwright, CDP libraries) send no Origin header and need none. A
	# DevTools front end in a browser does; pass
	# --remote-allow-origins=ORIGIN as an argument for it.
	--user-data-dir="$RUN_DIR/profile"
	--no-first-run
	--no-default-browser-check
	--disable-background-networking
	--disable-component-update
	--disable-sync
	# No GPU in a sandbox; software rendering.
	--disable-gpu
	# A container's /dev/shm is 64 MB by default, too small for shared
	# memory between Chromium's processes; they use /tmp instead.
	--disable-dev-shm-usage
	# No keyring daemon to ask for passwords.
	--password-store=basic
	--ozone-platform=x11
	--window-position=0,0
	--window-size="${size/x/,}"
)
start_part chromium chromium "${flags[@]}" "$@"

devtools_ready() {
	VERSION_JSON=$(curl -fsS --max-time 2 "http://127.0.0.1:$DEVTOOLS_PORT/json/version" 2>/dev/null) &&
		[[ $VERSION_JSON == *'"Browser"'* ]]
}
wait_ready chromium "the DevTools protocol on port $DEVTOOLS_PORT" devtools_ready
browser=$(sed -n 's/.*"Browser": *"\([^"]*\)".*/\1/p' <<<"$VERSION_JSON")

auth="no password"
[ -z "${VNC_PASSWORD:-}" ] || auth="password from VNC_PASSWORD"
log "ready: ${browser:-Chromium} DevTools http://127.0.0.1:$DEVTOOLS_PORT, VNC port $VNC_PORT ($auth), display :$DISPLAY_NUMBER $GEOMETRY, logs in $RUN_DIR"
supervise
