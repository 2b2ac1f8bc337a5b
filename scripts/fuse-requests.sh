#!/bin/bash
# FUSE requests per metadata operation and their latency: runs the meta_ops
# example on DIR (a FUSE mount) with the kernel's fuse_request_send and
# fuse_request_end tracepoints on (a private trace instance, clock mono,
# filtered to DIR's connection) and prints, per phase, the requests of each
# opcode per operation and the mean time from send to end of each.
#
#   cargo build --release -p manyfs-bench --example meta_ops
#   scripts/fuse-requests.sh DIR [PROCS] [FILES]     # as root
set -euo pipefail
DIR=$1; PROCS=${2:-1}; FILES=${3:-2000}
META=${META_OPS:-target/release/examples/meta_ops}
T=/sys/kernel/tracing/instances/fuse-requests-$$
# The connection is the mount's anonymous device minor (major 0).
conn=$(( $(stat -c %d "$DIR") & 0xff ))
mkdir "$T"
trap 'echo 0 > "$T/events/fuse/enable"; rmdir "$T"' EXIT
echo mono > "$T/trace_clock"
echo 32768 > "$T/buffer_size_kb"
for e in fuse_request_send fuse_request_end; do
  echo "connection == $conn" > "$T/events/fuse/$e/filter"
  echo 1 > "$T/events/fuse/$e/enable"
done
out=$(META_OPS_TIMES=1 "$META" "$DIR" "$PROCS" "$FILES")
echo 0 > "$T/events/fuse/enable"
echo "$out"
echo "$out" | python3 -c '
import re, sys, collections
ops = int(sys.argv[1]); phases = []
for l in sys.stdin:
    m = re.search(r"^(\S+).*mono ([\d.]+)\.\.([\d.]+)", l)
    if m: phases.append((m[1], float(m[2]), float(m[3])))
sent = {}; cnt = collections.Counter(); lat = collections.defaultdict(float); tot = collections.Counter()
for l in open(sys.argv[2]):
    m = re.search(r" ([\d.]+): fuse_request_(send|end): connection \d+ req (\d+)(?: opcode \d+ \((\w+)\))?", l)
    if not m: continue
    ts, kind, req = float(m[1]), m[2], m[3]
    if kind == "send": sent[req] = (ts, m[4]); continue
    if req not in sent: continue
    t0, op = sent.pop(req)
    for name, lo, hi in phases:
        if lo <= t0 <= hi:
            cnt[name, op] += 1; lat[name, op] += ts - t0; tot[name] += 1
for name, _, _ in phases:
    parts = [f"{op[5:]}={cnt[n, op] / ops:.2f} ({lat[n, op] / cnt[n, op] * 1e6:.0f} us)"
             for (n, op) in sorted(cnt, key=lambda k: -cnt[k]) if n == name and cnt[n, op] / ops >= 0.01]
    print(f"{name:<7} {tot[name] / ops:5.2f} req/op: " + " ".join(parts))
' "$((PROCS * FILES))" "$T/trace"
