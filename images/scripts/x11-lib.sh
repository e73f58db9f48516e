# shellcheck shell=bash
# /opt/opensandbox/x11-lib.sh: what chrome.sh and desktop.sh share, sourced
# by both (images/build.sh copies it into the chrome and desktop images).
#
# A script that sources it sets PROG (its name, for messages), calls
# x11_init, starts its parts with start_part and waits for each with
# wait_ready, prints one readiness line and calls supervise. Every part
# runs in a session and process group of its own (setsid), so that
# stopping a part also stops whatever it started (Chromium's renderers, the
# XFCE session's panel and window manager).
#
# Environment:
#   RUN_USER         the user the parts run as when the script runs as root
#                    (default sandbox, uid 1000); when the script runs as
#                    another user, the parts run as that user
#   STARTUP_TIMEOUT  seconds each part gets to become ready (default 60)
#
# The script works as a container's entrypoint (PID 1) and as a background
# command (execd's commands API, `docker exec ... &`): it stays in the
# foreground until a part exits on its own, which makes it exit 1 after
# stopping the others and printing the end of that part's log, or until it
# gets SIGTERM, SIGINT or SIGHUP, which make it stop every part and exit 0.

PARTS=()      # names, in start order
PART_PIDS=()  # their pids, which are also their process group ids
RUN_DIR=''    # logs, the browser profile, the VNC password file
STOPPING=0

log() { echo "$PROG: $*"; }

# fail reports a start-up failure, stops what was started and exits 1.
fail() {
	echo "$PROG: $*" >&2
	stop_parts
	if [ -n "$RUN_DIR" ] && ! rmdir "$RUN_DIR" 2>/dev/null; then
		echo "$PROG: logs are in $RUN_DIR" >&2
	fi
	exit 1
}

# x11_init picks the user the parts run as, makes the run directory and
# sets the signal traps.
x11_init() {
	STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-60}
	[[ $STARTUP_TIMEOUT =~ ^[1-9][0-9]*$ ]] || fail "STARTUP_TIMEOUT must be a whole number of seconds, not '$STARTUP_TIMEOUT'"
	local entry
	if [ "$(id -u)" = 0 ]; then
		RUN_USER=${RUN_USER:-sandbox}
		entry=$(getent passwd "$RUN_USER") || fail "no user '$RUN_USER' (RUN_USER) in this image"
	else
		entry=$(getent passwd "$(id -u)") || fail "uid $(id -u) has no passwd entry"
	fi
	IFS=: read -r RUN_USER _ RUN_UID RUN_GID _ RUN_HOME _ <<<"$entry"
	[ -d "$RUN_HOME" ] || RUN_HOME=/tmp
	trap 'on_signal' TERM INT HUP
	RUN_DIR=$(mktemp -d "/tmp/opensandbox-${PROG%.sh}.XXXXXX") || fail "cannot make a directory in /tmp"
	if [ "$(id -u)" = 0 ]; then
		chown "$RUN_UID:$RUN_GID" "$RUN_DIR"
		# The X server's socket directory, made as the X server expects
		# it (root's, sticky, writable by all). Not through a symlink:
		# root would change the mode of whatever it points at.
		[ ! -L /tmp/.X11-unix ] || fail "/tmp/.X11-unix is a symbolic link"
		mkdir -p /tmp/.X11-unix || fail "cannot make /tmp/.X11-unix"
		chown root:root /tmp/.X11-unix
		chmod 1777 /tmp/.X11-unix
	fi
	# The XDG runtime directory GTK, D-Bus and XFCE look for.
	XDG_DIR=/tmp/xdg-runtime-$RUN_UID
	if [ ! -d "$XDG_DIR" ]; then
		mkdir -m 700 "$XDG_DIR" || fail "cannot make $XDG_DIR"
		[ "$(id -u)" != 0 ] || chown "$RUN_UID:$RUN_GID" "$XDG_DIR"
	fi
}

# user_cmd sets USER_CMD to the prefix that runs a command as RUN_USER,
# with that user's HOME, the display and the XDG runtime directory, and
# without VNC_PASSWORD. setpriv and env exec the command: its pid is the
# prefix's own.
user_cmd() {
	USER_CMD=()
	if [ "$(id -u)" = 0 ] && [ "$RUN_UID" != 0 ]; then
		USER_CMD=(setpriv --reuid="$RUN_UID" --regid="$RUN_GID" --init-groups)
	fi
	USER_CMD+=(env -u VNC_PASSWORD -u DISPLAY HOME="$RUN_HOME" USER="$RUN_USER" LOGNAME="$RUN_USER"
		SHELL=/bin/bash XDG_RUNTIME_DIR="$XDG_DIR" ${DISPLAY:+DISPLAY="$DISPLAY"})
}

# start_part NAME COMMAND... starts COMMAND as RUN_USER in a session of
# its own, its output in $RUN_DIR/NAME.log. Extra redirections go on the
# caller's side: start_part xvfb Xvfb ... 3>file.
start_part() {
	local name=$1
	shift
	user_cmd
	# A background command of a script is not a process group leader,
	# so setsid makes the new session in place and $! is the part's pid.
	setsid "${USER_CMD[@]}" "$@" >"$RUN_DIR/$name.log" 2>&1 &
	PARTS+=("$name")
	PART_PIDS+=("$!")
}

# pid_of NAME prints the pid of part NAME.
pid_of() {
	local i
	for i in "${!PARTS[@]}"; do
		if [ "${PARTS[$i]}" = "$1" ]; then
			echo "${PART_PIDS[$i]}"
			return 0
		fi
	done
	return 1
}

# alive PID: the process runs and is not a zombie.
alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# wait_ready NAME WHAT CHECK... polls CHECK (a command) every 0.1 s until it
# succeeds. It fails, with the end of NAME's log, when part NAME exits first
# or after STARTUP_TIMEOUT seconds.
wait_ready() {
	local name=$1 what=$2 pid deadline
	shift 2
	pid=$(pid_of "$name")
	deadline=$((SECONDS + STARTUP_TIMEOUT))
	until "$@"; do
		if ! alive "$pid"; then
			show_log "$name"
			fail "$name exited before $what was ready"
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			show_log "$name"
			fail "$what was not ready after ${STARTUP_TIMEOUT}s (STARTUP_TIMEOUT)"
		fi
		sleep 0.1
	done
}

show_log() {
	[ -s "$RUN_DIR/$1.log" ] || return 0
	echo "$PROG: last lines of $RUN_DIR/$1.log:" >&2
	tail -n 20 "$RUN_DIR/$1.log" | sed 's/^/    /' >&2
}

# start_xvfb DISPLAY GEOMETRY starts Xvfb on :DISPLAY and waits until it
# accepts clients: -displayfd makes it write the display number once it is
# ready, which is the X server's own readiness signal.
start_xvfb() {
	local d=$1 geometry=$2
	[[ $geometry =~ ^[0-9]+x[0-9]+x(8|16|24)$ ]] || fail "the screen geometry must be WIDTHxHEIGHTxDEPTH (depth 8, 16 or 24), not '$geometry'"
	# An X server on :N listens on /tmp/.X11-unix/XN (and on the abstract
	# socket of that name); /proc/net/unix lists listening sockets with
	# the flag __SO_ACCEPTCON (00010000).
	if awk -v p="/tmp/.X11-unix/X$d" '$4 == "00010000" && ($8 == p || $8 == "@" p) { found = 1 } END { exit !found }' /proc/net/unix; then
		fail "display :$d is already in use; is $PROG running already?"
	fi
	# A socket or lock file without a server was left by one that did not
	# exit cleanly (a killed container or command).
	rm -f "/tmp/.X$d-lock" "/tmp/.X11-unix/X$d" || fail "cannot remove the stale /tmp/.X$d-lock or /tmp/.X11-unix/X$d"
	local ready=$RUN_DIR/xvfb.display
	: >"$ready"
	# -s 0: no screen saver blanking the screen after ten idle minutes.
	start_part xvfb Xvfb ":$d" -screen 0 "$geometry" -nolisten tcp -s 0 -displayfd 3 3>"$ready"
	wait_ready xvfb "the X server on :$d" test -s "$ready"
	export DISPLAY=:$d
}

# start_x11vnc DISPLAY PORT PASSWORD serves DISPLAY over VNC (RFB) on PORT,
# all interfaces, for any number of viewers at once (-shared) and until it
# is stopped (-forever). An empty PASSWORD means no password (-nopw).
start_x11vnc() {
	local d=$1 port=$2 password=$3 auth
	if [ -n "$password" ]; then
		# x11vnc -storepasswd FILE asks for the password, twice, and
		# whether to write it; the answers go to its standard input
		# (printf is a shell builtin), so the password is never on a
		# command line, which ps shows to everyone. The file is
		# RUN_USER's, mode 600, in the run directory.
		[[ $password != *$'\n'* ]] || fail "VNC_PASSWORD must be one line"
		auth=$RUN_DIR/vncpasswd
		user_cmd
		printf '%s\n%s\ny\n' "$password" "$password" |
			setsid "${USER_CMD[@]}" x11vnc -storepasswd "$auth" >"$RUN_DIR/storepasswd.log" 2>&1
		[ -s "$auth" ] || { show_log storepasswd; fail "x11vnc -storepasswd did not write $auth"; }
		chmod 600 "$auth"
		auth=(-rfbauth "$auth")
	else
		auth=(-nopw)
	fi
	start_part x11vnc x11vnc -display ":$d" -rfbport "$port" -forever -shared "${auth[@]}" -noxdamage
	wait_ready x11vnc "VNC on port $port" rfb_ready "$port"
}

# rfb_ready PORT: a VNC server on 127.0.0.1:PORT sends its RFB banner.
rfb_ready() {
	local fd line
	{ exec {fd}<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
	IFS= read -r -t 2 -n 12 line <&"$fd"
	exec {fd}>&-
	[[ $line == "RFB 003.00"[0-9] ]]
}

# stop_parts stops every part, last started first: SIGTERM to its process
# group, SIGKILL to what is left after 5 s.
stop_parts() {
	local i pid deadline
	STOPPING=1
	for ((i = ${#PART_PIDS[@]} - 1; i >= 0; i--)); do
		pid=${PART_PIDS[$i]}
		kill -TERM -- "-$pid" 2>/dev/null
		deadline=$((SECONDS + 5))
		while alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
		kill -KILL -- "-$pid" 2>/dev/null
	done
	wait 2>/dev/null
}

on_signal() {
	[ "$STOPPING" = 0 ] || return 0
	log "stopping"
	stop_parts
	rm -rf "$RUN_DIR"
	exit 0
}

# supervise waits until a part exits on its own, then stops the others
# and exits 1: a container or background command whose browser or desktop
# is gone should say so.
supervise() {
	local who rc i
	wait -n -p who "${PART_PIDS[@]}"
	rc=$?
	for i in "${!PART_PIDS[@]}"; do
		[ "${PART_PIDS[$i]}" = "${who:-}" ] || continue
		echo "$PROG: ${PARTS[$i]} exited (status $rc); stopping the rest" >&2
		show_log "${PARTS[$i]}"
	done
	stop_parts
	echo "$PROG: logs are in $RUN_DIR" >&2
	exit 1
}
