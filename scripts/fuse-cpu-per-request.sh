#!/usr/bin/env bash
# CPU time per request through a FUSE mount: the daemon's (user and
# kernel), and the whole machine's, for manyfs's mount and libfuse's
# memfs_ll, one FxMark workload at one thread count.
#
#   cargo build --release -p manyfs-cli
#   scripts/fuse-peers.sh /tmp/peers/libfuse /tmp/peers/out      # memfs_ll
#   W=DWOM THR=2 scripts/fuse-cpu-per-request.sh                 # as root
#
# Prints, per target: requests/s; the daemon's CPU microseconds per
# request (all its threads, from /proc/PID/stat) and the user part of it;
# the machine's busy microseconds per request (/proc/stat) and its idle
# share; the daemon's voluntary context switches per request.
set -euo pipefail

M=${MANYFS:-target/release/manyfs}
PEERS=${PEERS:-/tmp/peers/out}
W=${W:-DWOM}
THR=${THR:-2}
DUR=${DUR:-4}          # seconds measured
WARMUP_MS=${WARMUP_MS:-300}
TARGETS=${TARGETS:-manyfs memfs_ll}

[ "$(id -u)" -eq 0 ] || { echo "fuse-cpu-per-request: run as root (mounts)" >&2; exit 1; }
M=$(realpath "$M")
RUN=$(mktemp -d /tmp/fuse-cpu.XXXXXX)
MNT=$RUN/mnt
POOL=/dev/shm/fuse-cpu-pool.$$
mkdir -p "$MNT"
cleanup() { mountpoint -q "$MNT" && umount "$MNT"; rm -f "$POOL"; rm -rf "$RUN"; }
trap cleanup EXIT

# Busy and idle jiffies of the whole machine.
machine() { awk '/^cpu / { print $2+$3+$4+$7+$8, $5+$6 }' /proc/stat; }
# User and user+system jiffies of process $1 (all its threads).
daemon() { awk '{ print $14, $14+$15 }' "/proc/$1/stat"; }
# Voluntary context switches of process $1 (all its threads).
switches() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt/ { s += $2 } END { print s }'; }

for t in $TARGETS; do
  case $t in
    manyfs)
      "$M" mkfs "$POOL" --size 2G >/dev/null
      "$M" mount "$POOL" "$MNT" ;;
    memfs_ll)
      "$PEERS/memfs_ll" -o fuse_dio -o clone_fd "$MNT" ;;
    *) echo "fuse-cpu-per-request: unknown target $t" >&2; exit 2 ;;
  esac
  for _ in $(seq 50); do mountpoint -q "$MNT" && break; sleep 0.1; done
  pid=$(pgrep -n -f -- "$MNT")
  read -r busy0 idle0 < <(machine)
  read -r du0 d0 < <(daemon "$pid")
  cs0=$(switches "$pid")
  "$M" bench -w "$W" -t "dir:$MNT" --threads "$THR" --duration "${DUR}s" \
    --warmup "${WARMUP_MS}ms" --no-membw --no-pin --json "$RUN/fx.json" >/dev/null 2>&1
  read -r busy1 idle1 < <(machine)
  read -r du1 d1 < <(daemon "$pid")
  cs1=$(switches "$pid")
  ops=$(awk -F': *' '/"ops_per_sec"/ { gsub(/,/, "", $2); print $2 }' "$RUN/fx.json")
  # Requests over the warm-up and the measured time (jiffies are 10 ms).
  awk -v t="$t" -v w="$W" -v thr="$THR" -v ops="$ops" -v secs="$DUR" -v warm="$WARMUP_MS" \
      -v d=$((d1 - d0)) -v du=$((du1 - du0)) -v busy=$((busy1 - busy0)) \
      -v idle=$((idle1 - idle0)) -v cs=$((cs1 - cs0)) 'BEGIN {
    n = ops * (secs + warm / 1000)
    printf "%-9s %s %s threads: %8.0f req/s  daemon %.2f us/req (user %.2f)  machine busy %.2f us/req, idle %.0f%%  daemon switches/req %.2f\n",
      t, w, thr, ops, d * 1e4 / n, du * 1e4 / n, busy * 1e4 / n, 100 * idle / (idle + busy), cs / n }'
  umount "$MNT"
  rm -f "$POOL"
  sleep 0.5
done
