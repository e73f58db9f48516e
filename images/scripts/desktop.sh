#!/bin/bash
# /opt/opensandbox/desktop.sh: an XFCE desktop to watch and drive in a web
# browser (noVNC) or a VNC viewer.
#
#   display :0   Xvfb, SCREEN_GEOMETRY (default 1280x800x24), with an XFCE
#                session (window manager, panel, desktop) on its own D-Bus
#   port 5900    x11vnc serving display :0 on all interfaces; password
#                VNC_PASSWORD, default "opensandbox"; VNC_PASSWORD= (set
#                and empty) means no password
#   port 6080    websockify: noVNC's web client (/vnc.html, also at /) and
#                the WebSocket bridge to port 5900
#
# All of it runs as the sandbox user (uid 1000) when the script runs as
# root (RUN_USER, see x11-lib.sh). The script prints one line starting with
# "desktop.sh: ready:" once the session's window manager, panel and desktop
# run and both ports answer, then stays in the foreground: it exits 1 if a
# part exits, and stops them all and exits 0 on SIGTERM, SIGINT or SIGHUP.
# Logs are in a fresh /tmp/opensandbox-desktop.XXXXXX, named in the ready
# line.
set -u
PROG=desktop.sh
# shellcheck source=x11-lib.sh
. /opt/opensandbox/x11-lib.sh

DISPLAY_NUMBER=0
VNC_PORT=5900
NOVNC_PORT=6080
NOVNC_WEB=/usr/share/novnc
GEOMETRY=${SCREEN_GEOMETRY:-1280x800x24}

x11_init
start_xvfb "$DISPLAY_NUMBER" "$GEOMETRY"

# The session's own D-Bus: dbus-run-session starts the bus, runs the
# session and stays their parent, in the part's process group, so that
# stopping the part stops the bus too.
start_part xfce dbus-run-session -- xfce4-session
session_ready() {
	local p
	for p in xfwm4 xfce4-panel xfdesktop; do
		pgrep -u "$RUN_UID" -x "$p" >/dev/null || return 1
	done
}
wait_ready xfce "the XFCE session (xfwm4, xfce4-panel, xfdesktop)" session_ready

start_x11vnc "$DISPLAY_NUMBER" "$VNC_PORT" "${VNC_PASSWORD-opensandbox}"

start_part novnc websockify --web "$NOVNC_WEB" "$NOVNC_PORT" "localhost:$VNC_PORT"
novnc_ready() {
	curl -fsS --max-time 2 "http://127.0.0.1:$NOVNC_PORT/vnc.html" 2>/dev/null | grep -qi '<html'
}
wait_ready novnc "noVNC on port $NOVNC_PORT" novnc_ready

auth="no password"
[ -z "${VNC_PASSWORD-opensandbox}" ] || auth="password from VNC_PASSWORD"
[ -n "${VNC_PASSWORD+set}" ] || auth="password opensandbox, the default"
log "ready: XFCE on display :$DISPLAY_NUMBER $GEOMETRY, VNC port $VNC_PORT ($auth), noVNC http://127.0.0.1:$NOVNC_PORT/vnc.html, logs in $RUN_DIR"
supervise
