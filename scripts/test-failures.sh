#!/usr/bin/env bash
# Prints, from a `go test -v` log, only the output of the tests that failed.
# Parallel tests interleave their output; Go marks each switch with an
# "=== RUN|CONT|NAME|PAUSE <test>" line, which is what this follows.
# Usage: scripts/test-failures.sh LOG [MAX_LINES]
set -euo pipefail
log=${1:?usage: $0 LOG [MAX_LINES]}
max=${2:-400}
awk '
	NR == FNR {
		if (match($0, /^ *--- FAIL: [^ ]+/)) {
			name = substr($0, RSTART, RLENGTH); sub(/^ *--- FAIL: /, "", name)
			sub(/\/.*/, "", name); failed[name] = 1
		}
		next
	}
	/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; sub(/\/.*/, "", cur); if (cur in failed) print; next }
	/^ *--- (PASS|FAIL|SKIP): / { cur = $3; sub(/\/.*/, "", cur) }
	/^(ok|FAIL|PASS)([ \t]|$)/ { cur = ""; next }
	cur in failed { print }
' "$log" "$log" | head -n "$max"
# A test binary that panicked (a test timeout included) prints no
# "--- FAIL" for the tests it was running: show the panic and the stack
# heads instead.
if grep -q '^panic: ' "$log"; then
	echo "---- panic:"
	grep -n -A 30 '^panic: ' "$log" | head -n 80
fi
