#!/usr/bin/env bash
# manyfs's FUSE mount against libfuse's own example file systems and tmpfs,
# in one run: the same workloads on every target, rounds interleaved, medians.
#
#   cargo build --release -p manyfs-cli
#   cargo build --release -p manyfs-bench --example meta_ops
#   scripts/fuse-peers.sh /tmp/peers/libfuse /tmp/peers/out      # memfs_ll, passthrough_hp
#   PEERS=/tmp/peers/out REPEAT=3 scripts/fuse-compare.sh        # as root
#   THREADS="1 2 4 8 16" REPEAT=5 PEERS=... scripts/fuse-compare.sh   # a 16-core machine
#
# Targets (TARGETS, default all four):
#   manyfs          `manyfs mount POOL MNT` with the default options (MANYFS_OPTS
#                   adds -o options), pool in /dev/shm
#   memfs_ll        libfuse's in-memory example, MEMFS_OPTS [-o fuse_dio -o clone_fd]
#   passthrough_hp  libfuse's passthrough example over a tmpfs directory, PT_OPTS []
#   tmpfs           the kernel, no FUSE: the ceiling
#   manyfs-base     (only when listed) a second manyfs build, MANYFS_BASE, with
#                   MANYFS_BASE_OPTS [MANYFS_OPTS]: a before/after in one run,
#                   e.g. TARGETS="manyfs-base manyfs memfs_ll" MANYFS_BASE=/tmp/manyfs-main
# Workloads, each at every count in THREADS:
#   FxMark through the directory (`manyfs bench -t dir:MNT`): DWOM DRBM DWOL
#     (data, one shared file / private files) and MWCL MWCM MWUL MWUM MRPL MRPM
#     (create, unlink, path lookup, in private directories (L) and a shared one (M))
#   fio 4 KiB O_DIRECT psync random read / write, numjobs=N on one shared file
#   meta_ops: create / stat / unlink, N forked processes, private directories
# Every round mounts each target afresh and runs everything on it; rounds are
# interleaved (manyfs, memfs_ll, ... then again) so drift in the machine hits
# all targets alike. The tables print the median over REPEAT rounds and the
# spread ((max-min)/median) and the ratios manyfs/memfs_ll (data) and
# manyfs/passthrough_hp (metadata); RAW=FILE keeps every measurement.
set -euo pipefail

M=${MANYFS:-target/release/manyfs}
META=${META_OPS:-target/release/examples/meta_ops}
PEERS=${PEERS:-/tmp/peers/out}
MEMFS_LL=${MEMFS_LL:-$PEERS/memfs_ll}
PASSTHROUGH_HP=${PASSTHROUGH_HP:-$PEERS/passthrough_hp}
TARGETS=${TARGETS:-manyfs memfs_ll passthrough_hp tmpfs}
THREADS=${THREADS:-1 2}
REPEAT=${REPEAT:-1}
DURATION=${DURATION:-2s}        # per FxMark point
# Unmeasured warm-up per FxMark point. A fresh manyfs pool faults in a page
# for each copy-on-write block until every block was touched once (and in
# file mode freed blocks come back only at the next checkpoint, 5 s): 6s
# measures the steady state.
WARMUP=${WARMUP:-200ms}
FIO_RUNTIME=${FIO_RUNTIME:-3}   # seconds per fio point
META_FILES=${META_FILES:-2000}  # files per meta_ops process; 0 skips meta_ops
FX_DATA=${FX_DATA-DWOM,DRBM,DWOL}  # FX_DATA="" skips them
FX_META=${FX_META-MWCL,MWCM,MWUL,MWUM,MRPL,MRPM}  # FX_META="" skips them
MANYFS_OPTS=${MANYFS_OPTS:-}
MANYFS_BASE=${MANYFS_BASE:-}
MANYFS_BASE_OPTS=${MANYFS_BASE_OPTS-$MANYFS_OPTS}
# memfs_ll has no -o for worker threads; fuse_dio gives direct I/O with
# parallel direct writes (libfuse >= 3.19). memfs_ll parses clone_fd but never
# hands it to its loop (one descriptor, up to 10 threads).
MEMFS_OPTS=${MEMFS_OPTS:--o fuse_dio -o clone_fd}
PT_OPTS=${PT_OPTS:-}

[ "$(id -u)" -eq 0 ] || { echo "fuse-compare: run as root (mounts)" >&2; exit 1; }
for t in $TARGETS; do
  case $t in
    manyfs) need=("$M") ;;
    manyfs-base) need=("${MANYFS_BASE:?fuse-compare: manyfs-base needs MANYFS_BASE=BINARY}") ;;
    memfs_ll) need=("$MEMFS_LL") ;;
    passthrough_hp) need=("$PASSTHROUGH_HP") ;;
    tmpfs) need=() ;;
    *) echo "fuse-compare: unknown target $t" >&2; exit 2 ;;
  esac
  for b in "${need[@]}" "$M" "$META"; do
    [ -x "$b" ] || { echo "fuse-compare: $b missing (see the usage at the top)" >&2; exit 1; }
  done
done
command -v fio >/dev/null || { echo "fuse-compare: fio missing (scripts/install-deps.sh)" >&2; exit 1; }
M=$(realpath "$M"); META=$(realpath "$META")

# One directory per run: mount point, backing tmpfs, raw results. The pool
# gets a unique name in /dev/shm, so two runs never share or unmount each
# other's anything.
RUN=$(mktemp -d /tmp/fuse-compare.XXXXXX)
MNT=$RUN/mnt BACK=$RUN/back
POOL=$(mktemp -u /dev/shm/fuse-compare.XXXXXX.pool)
RAW=${RAW:-$RUN/raw.tsv}
mkdir -p "$MNT" "$BACK"
: >"$RAW"
cleanup() {
  umount "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
  umount "$BACK" 2>/dev/null || true
  rm -f "$POOL"
  rm -rf "$RUN/fx.json"
  rmdir "$MNT" "$BACK" 2>/dev/null || true
}
trap cleanup EXIT

# Waits until MNT is a mount of the expected type: the FUSE peers return from
# daemonizing once mounted, but a short wait costs nothing and catches a
# peer that failed to mount (a silent one would benchmark the empty dir).
wait_mounted() {
  local _
  for _ in $(seq 50); do
    mountpoint -q "$MNT" && return 0
    sleep 0.1
  done
  echo "fuse-compare: $1 did not mount on $MNT" >&2
  return 1
}

mount_target() {
  case $1 in
    manyfs)
      rm -f "$POOL"
      "$M" mkfs "$POOL" --size 2G >/dev/null
      # shellcheck disable=SC2086  # MANYFS_OPTS is a word list on purpose
      "$M" mount "$POOL" "$MNT" ${MANYFS_OPTS:+-o $MANYFS_OPTS} ;;
    manyfs-base)
      rm -f "$POOL"
      "$MANYFS_BASE" mkfs "$POOL" --size 2G >/dev/null
      # shellcheck disable=SC2086
      "$MANYFS_BASE" mount "$POOL" "$MNT" ${MANYFS_BASE_OPTS:+-o $MANYFS_BASE_OPTS} ;;
    memfs_ll)
      # shellcheck disable=SC2086
      "$MEMFS_LL" $MEMFS_OPTS "$MNT" ;;
    passthrough_hp)
      mount -t tmpfs -o size=2g fuse-compare-back "$BACK"
      # passthrough_hp wants absolute paths (it changes its directory).
      # shellcheck disable=SC2086
      "$PASSTHROUGH_HP" $PT_OPTS "$BACK" "$MNT" ;;
    tmpfs)
      mount -t tmpfs -o size=2g fuse-compare-tmpfs "$MNT" ;;
  esac
  wait_mounted "$1"
}

umount_target() {
  umount "$MNT"
  # passthrough_hp leaves its backing directory a moment after the unmount.
  if [ "$1" = passthrough_hp ]; then
    for _ in $(seq 100); do umount "$BACK" 2>/dev/null && return 0; sleep 0.1; done
    umount "$BACK"
  fi
  case $1 in manyfs|manyfs-base) rm -f "$POOL" ;; esac
  sleep 0.5  # let a FUSE daemon exit before the next mount on MNT
}

# record TARGET WORKLOAD THREADS OPS
record() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$RAW"; }

bench_target() {
  local t=$1 thr rw j r f w
  thr=$(tr ' ' ',' <<<"$THREADS")
  # FxMark: the JSON has one key per line; pick workload, threads, ops/s.
  for w in "$FX_DATA" "$FX_META"; do
    [ -n "$w" ] || continue
    rm -f "$RUN/fx.json"
    "$M" bench -w "$w" -t "dir:$MNT" --threads "$thr" --duration "$DURATION" --warmup "$WARMUP" \
      --no-membw --no-pin --json "$RUN/fx.json" >/dev/null 2>"$RUN/fx.err" ||
      { echo "fuse-compare: $t: manyfs bench -w $w failed:" >&2; tail -3 "$RUN/fx.err" >&2; continue; }
    awk -F': *' -v t="$t" '
      /"workload"/ { gsub(/[",]/, "", $2); wl = $2 }
      /"threads"/ { gsub(/,/, "", $2); th = $2 }
      /"ops_per_sec"/ { gsub(/,/, "", $2); printf "%s\tfxmark %s\t%s\t%.0f\n", t, wl, th, $2 }
    ' "$RUN/fx.json" >>"$RAW"
  done
  # fio: each job has its own 32 MiB region of one shared file (offset_increment),
  # like FxMark's DWOM/DRBM, so only the file (its lock, its inode) is shared.
  for rw in randread randwrite; do
    for j in $THREADS; do
      rm -f "$MNT/shared"
      r=$(fio --name=s --filename="$MNT/shared" --rw=$rw --bs=4k --direct=1 --ioengine=psync \
            --numjobs="$j" --size=32M --offset_increment=32M --time_based --runtime="$FIO_RUNTIME" \
            --group_reporting --output-format=terse 2>"$RUN/fio.err" | head -1) || true
      # terse v3: field 8 is read IOPS, 49 write IOPS
      if [ $rw = randread ]; then f=8; else f=49; fi
      r=$(cut -d';' -f$f <<<"$r")
      if [ -n "$r" ]; then record "$t" "fio $rw" "$j" "$r"
      else echo "fuse-compare: $t: fio $rw jobs=$j failed: $(head -c 300 "$RUN/fio.err")" >&2; fi
    done
  done
  rm -f "$MNT/shared"
  # meta_ops: N processes, each in its own directory (META_FILES=0 skips it).
  [ "$META_FILES" -gt 0 ] || return 0
  for j in $THREADS; do
    "$META" "$MNT" "$j" "$META_FILES" 2>"$RUN/meta.err" |
      awk -v t="$t" -v j="$j" '$1 ~ /^(create|stat|unlink)$/ { printf "%s\tmeta_ops %s\t%s\t%s\n", t, $1, j, $2 }' >>"$RAW" ||
      echo "fuse-compare: $t: meta_ops $j failed: $(head -c 300 "$RUN/meta.err")" >&2
  done
}

# Tables: one per workload; rows = thread counts, columns = targets (median
# ops/s, spread), then the ratio of manyfs to the peer that matters for it.
print_tables() {
  awk -F'\t' -v targets="$TARGETS" '
    function med(k,   n, i, j, a, tmp) {
      n = split(vals[k], a, " ")
      for (i = 2; i <= n; i++) { tmp = a[i]; for (j = i - 1; j >= 1 && a[j] > tmp; j--) a[j+1] = a[j]; a[j+1] = tmp }
      lo[k] = a[1]; hi[k] = a[n]
      return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
    }
    function human(x) {
      return x >= 1e6 ? sprintf("%.2fM", x/1e6) : x >= 1e3 ? sprintf("%.1fk", x/1e3) : sprintf("%.0f", x)
    }
    {
      k = $2 SUBSEP $3 SUBSEP $1
      vals[k] = vals[k] (k in vals ? " " : "") $4
      if (!($2 in seenw)) { seenw[$2] = 1; wl[++nw] = $2 }
      if (!(($2, $3) in seent)) { seent[$2, $3] = 1; th[$2] = th[$2] (th[$2] == "" ? "" : " ") $3 }
    }
    END {
      nt = split(targets, tg, " ")
      for (i = 1; i <= nw; i++) {
        w = wl[i]
        meta = (w ~ /^meta_ops/ || w ~ /^fxmark M/)
        peer = meta ? "passthrough_hp" : "memfs_ll"
        printf "\n## %s (ops/s, median; spread = (max-min)/median)\n", w
        printf "%-7s", "threads"
        for (j = 1; j <= nt; j++) printf " %22s", tg[j]
        printf "  %s", "manyfs/" peer
        if (targets ~ /manyfs-base/) printf "  %s", "base/" peer
        printf "\n"
        n = split(th[w], ts, " ")
        for (x = 1; x <= n; x++) {
          printf "%-7s", ts[x]
          for (j = 1; j <= nt; j++) {
            k = w SUBSEP ts[x] SUBSEP tg[j]
            if (k in vals) { m[tg[j]] = med(k); printf " %13s (%5.1f%%)", human(m[tg[j]]), m[tg[j]] ? 100 * (hi[k] - lo[k]) / m[tg[j]] : 0 }
            else { m[tg[j]] = ""; printf " %22s", "-" }
          }
          if (m["manyfs"] != "" && m[peer] != "" && m[peer] > 0) printf "  %.2fx", m["manyfs"] / m[peer]
          else printf "  -"
          if (targets ~ /manyfs-base/) {
            if (m["manyfs-base"] != "" && m[peer] != "" && m[peer] > 0) printf "  %.2fx", m["manyfs-base"] / m[peer]
            else printf "  -"
          }
          printf "\n"
        }
      }
    }
  ' "$1"
}

# `fuse-compare.sh --tables RAW`: the tables of an earlier run's raw file.
if [ "${1:-}" = --tables ]; then
  print_tables "${2:?--tables needs a raw file}"
  exit 0
fi

echo "# fuse-compare $(date -u +%FT%TZ) $(nproc) CPUs, $(uname -r); THREADS=\"$THREADS\" REPEAT=$REPEAT DURATION=$DURATION WARMUP=$WARMUP FIO_RUNTIME=$FIO_RUNTIME META_FILES=$META_FILES"
echo "# manyfs: $M ${MANYFS_OPTS:+-o $MANYFS_OPTS}${MANYFS_BASE:+; manyfs-base: $MANYFS_BASE ${MANYFS_BASE_OPTS:+-o $MANYFS_BASE_OPTS}}"
echo "# memfs_ll: $MEMFS_LL $MEMFS_OPTS; passthrough_hp: $PASSTHROUGH_HP $PT_OPTS (over tmpfs)"
# CPU time the hypervisor gave to other guests (the noise a ratio cannot
# see on a shared VM): steal_mark notes now; steal_pct sets STEAL to the
# percent of all CPU time stolen since the mark.
steal_mark() { read -r _ u n s i w q sq st _ </proc/stat; MARK_TOTAL=$((u + n + s + i + w + q + sq + st)) MARK_STEAL=$st; }
steal_pct() {
  local t0=$MARK_TOTAL s0=$MARK_STEAL
  steal_mark
  STEAL="$(( (MARK_STEAL - s0) * 100 / (MARK_TOTAL > t0 ? MARK_TOTAL - t0 : 1) ))%"
}
for r in $(seq "$REPEAT"); do
  for t in $TARGETS; do
    echo "# round $r/$REPEAT $t $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    steal_mark
    mount_target "$t"
    bench_target "$t" || true
    umount_target "$t"
    steal_pct
    echo "# round $r/$REPEAT $t done $(date -u +%T), host steal $STEAL of the CPU time" >&2
  done
done

print_tables "$RAW"
echo
echo "# raw measurements: $RAW"
