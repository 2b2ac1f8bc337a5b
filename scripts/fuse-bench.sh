#!/bin/bash
# Side-by-side FUSE-mount benchmark: tmpfs, then one manyfs mount per option
# set, each running the same FxMark-style DWOM/DRBM points, fio 4 KiB random
# I/O on one shared file, and the metadata phases of the meta_ops example.
#
#   cargo build --release -p manyfs-cli -p manyfs-bench --example meta_ops
#   scripts/fuse-bench.sh [OPTS ...]      # as root; OPTS = -o lists, default: "" (defaults)
#   PARTS="meta fxmark fio" REPEAT=3 EXTRA_DIR=/mnt/other scripts/fuse-bench.sh threads=2 threads=4
#
# An option set may start with BINARY: to mount with another build of the
# manyfs command (e.g. /tmp/manyfs-base:threads=2), for before/after runs.
# PARTS picks what runs (default: all three), REPEAT repeats the whole
# comparison (medians are left to the reader: every line is printed),
# EXTRA_DIR adds an already-mounted directory (another FUSE file system) as
# a target.
set -euo pipefail
M=${MANYFS:-target/release/manyfs}
META=${META_OPS:-target/release/examples/meta_ops}
PARTS=${PARTS:-meta fxmark fio}
REPEAT=${REPEAT:-1}
# Each run gets its own tmpfs, mount point and pool, so two runs (or a run
# beside an unrelated mount) never share or unmount each other's.
RUN=$(mktemp -d /tmp/fuse-bench.XXXXXX)
TMPFS=$RUN/tmpfs
MNT=${MNT:-$RUN/mnt}
POOL=${POOL:-$(mktemp -u /dev/shm/fuse-bench.XXXXXX.pool)}
[ $# -eq 0 ] && set -- ""

bench_dir() { # dir label
  local d=$1 l=$2
  for p in $PARTS; do
    case $p in
      meta) $META "$d" 2 2000 | sed "s|^|$l meta |" ;;
      fxmark)
        $M bench -w DWOM,DRBM -t "dir:$d" --threads 1,2 --duration 2s --no-membw --no-pin 2>/dev/null |
          grep -E '^\s*(DWOM|DRBM)' | sed "s|^|$l fxmark |" ;;
      fio)
        for rw in randwrite randread; do
          for j in 1 2 8; do
            rm -f "$d/shared"
            r=$(fio --name=s --filename="$d/shared" --rw=$rw --bs=4k --direct=1 --ioengine=psync \
                  --numjobs=$j --size=32M --offset_increment=32M --time_based --runtime=3 \
                  --group_reporting --output-format=terse 2>/dev/null | head -1)
            if [ $rw = randread ]; then f=8; else f=49; fi
            echo "$l fio $rw jobs=$j iops=$(echo "$r" | cut -d';' -f$f)"
          done
        done
        rm -f "$d/shared" ;;
    esac
  done
}

mkdir -p "$TMPFS" "$MNT"
mount -t tmpfs -o size=2g fuse-bench-tmpfs "$TMPFS"
trap 'umount "$TMPFS" 2>/dev/null || true; umount "$MNT" 2>/dev/null || true; rm -f "$POOL"; rmdir "$TMPFS" "$RUN/mnt" "$RUN" 2>/dev/null || true' EXIT
for r in $(seq "$REPEAT"); do
  echo "# round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  bench_dir "$TMPFS" tmpfs
  [ -n "${EXTRA_DIR:-}" ] && bench_dir "$EXTRA_DIR" extra
  for spec in "$@"; do
    bin=$M; o=$spec
    case $spec in /*:*|/*) bin=${spec%%:*}; o=${spec#*:}; [ "$o" = "$spec" ] && o= ;; esac
    rm -f "$POOL"
    $bin mkfs "$POOL" --size 2G >/dev/null
    # durability=dram unless the set names its own (an option may not be
    # given twice with two values).
    case ",$o," in *,durability=*) d= ;; *) d=durability=dram ;; esac
    $bin mount "$POOL" "$MNT" -o "$d${d:+${o:+,}}$o"
    bench_dir "$MNT" "manyfs[${spec:-default}]"
    umount "$MNT"; sleep 1
  done
done
