# keyscan.py looks for secrets inside the sandbox it runs in without being
# given them: for each target it gets the SHA-256 of the secret, its length
# and its first few bytes (a prefix such as "sk-ant", which every key of a
# kind shares). It reads every regular file under / ($SCAN_ROOT; not
# /proc, /sys, /dev)
# and the environment and command line of every process, hashes each
# stretch of the secret's length that starts with the prefix, and reports
# where the hash matched.
#
# Targets come in SCAN_TARGETS: "name:sha256hex:length:prefixhex", comma
# separated. The last line printed is a JSON object
# {"files": N, "processes": N, "unreadable": N, "found": {name: [where...]}}.
import hashlib
import json
import os
import sys

CHUNK = 4 << 20


def parse_targets(spec):
    out = []
    for item in spec.split(","):
        name, digest, length, prefix = item.split(":")
        out.append((name, bytes.fromhex(digest), int(length), bytes.fromhex(prefix)))
    return out


TARGETS = parse_targets(os.environ["SCAN_TARGETS"])
OVERLAP = max(t[2] for t in TARGETS) - 1
found = {t[0]: [] for t in TARGETS}


def scan(buf, where):
    """Records where for every target whose secret lies whole in buf."""
    for name, digest, length, prefix in TARGETS:
        if where in found[name]:
            continue
        i = buf.find(prefix)
        while 0 <= i <= len(buf) - length:
            if hashlib.sha256(buf[i:i + length]).digest() == digest:
                found[name].append(where)
                break
            i = buf.find(prefix, i + 1)


def scan_file(path):
    # Windows overlap by one byte less than the longest secret, so a secret
    # that straddles two reads lies whole in the second.
    with open(path, "rb") as f:
        tail = b""
        while data := f.read(CHUNK):
            buf = tail + data
            scan(buf, path)
            tail = buf[len(buf) - OVERLAP:] if OVERLAP else b""


files = unreadable = 0
skip = {"/proc", "/sys", "/dev"}
ROOT = os.environ.get("SCAN_ROOT", "/")
for root, dirs, names in os.walk(ROOT, topdown=True):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
    for n in names:
        p = os.path.join(root, n)
        try:
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            scan_file(p)
            files += 1
        except OSError:
            unreadable += 1

processes = 0
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    seen = False
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as f:
                scan(f.read(), f"/proc/{pid}/{part}")
            seen = True
        except OSError:
            pass  # the process ended meanwhile
    processes += seen

print(json.dumps({"files": files, "processes": processes, "unreadable": unreadable, "found": found}))
sys.stdout.flush()
