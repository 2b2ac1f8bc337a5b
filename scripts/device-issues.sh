#!/usr/bin/env bash
# The many-core points of the mount (FUSE against libfuse's peers) and of
# `manyfs run` (against the mount and tmpfs), prepared to run on a lent
# 16-core machine from a bundle made here (scripts/device-bundle.sh), in
# two calls that each fit one command's ten minutes:
#
#   scripts/device-bundle.sh                           # here: .devbin, ~45 MiB
#   OUT=$OUT scripts/device-issues.sh run     # there, carry .devbin (~3-4 min)
#   OUT=$OUT scripts/device-issues.sh fuse    # there, carry .devbin (~6-7 min)
#
# `run`: fio 4 KiB random writes and reads on one shared file at 1-16 jobs,
#   `manyfs run` / the mount / tmpfs (scripts/run-compare.sh), and RocksDB's
#   db_bench fillrandom/readrandom at 1 and 16 threads the same three ways,
#   then five alternated `manyfs run`/tmpfs pairs at one thread
#   (scripts/dbbench-compare.sh).
# `fuse`: in process, DWOM and DWOL at one thread against tmpfs; then the
#   mount against memfs_ll (data) and passthrough_hp (metadata) at 1-16
#   threads (scripts/fuse-compare.sh), and, where the kernel has the switch,
#   the mount again over FUSE-over-io_uring, turned on for that part only.
# COUNTS (default "1 2 4 8 16") are the thread and job counts; db_bench
# runs at the first and the last. Everything goes to OUT (the folder whose files come back): one log per
# part, the tables, and the raw measurements. Every step is bounded by
# `timeout`, so a step that hangs costs only its own share.
set -u
part=${1:?usage: device-issues.sh run|fuse}
root=$(realpath "$(dirname "$0")/..")
B=$(realpath "${BUNDLE:-$root/.devbin}")
OUT=$(realpath -m "${OUT:?set OUT to a folder for the results}")
mkdir -p "$OUT"
export PATH="$B/bin:$PATH"
M=$B/bin/manyfs
COUNTS=${COUNTS:-1 2 4 8 16}
read -r -a counts <<<"$COUNTS"
ends=$(printf "%s\n" "${counts[0]}" "${counts[${#counts[@]}-1]}" | uniq | xargs)
exec > >(tee -a "$OUT/$part-log.txt") 2>&1
echo "# device-issues $part $(date -u +%FT%TZ) $(nproc) CPUs, $(uname -r)"
grep -m1 'model name' /proc/cpuinfo
command -v fio db_bench memfs_ll >/dev/null || { echo "device-issues: bundle incomplete in $B" >&2; exit 1; }
[ -e /dev/fuse ] || echo "device-issues: no /dev/fuse here: every mount point will fail"
cd "$root" || exit 1
case $part in
run)
    BIN=$B/bin JOBS="$COUNTS" timeout 200 scripts/run-compare.sh 2 >"$OUT/run-fio.md"
    cat "$OUT/run-fio.md"
    BIN=$B/bin THREADS="$ends" timeout 150 scripts/dbbench-compare.sh 100000 >"$OUT/run-dbbench.md"
    cat "$OUT/run-dbbench.md"
    BIN=$B/bin timeout 90 scripts/dbbench-compare.sh --pairs 5 100000 >"$OUT/run-dbbench-pairs.md"
    cat "$OUT/run-dbbench-pairs.md"
    ;;
fuse)
    (cd /tmp && timeout 60 "$M" bench -w DWOM,DWOL -t lib:srl-tree,tmpfs --threads 1 \
        --duration 2s --repeat 3 --json "$OUT/inproc-1thread.json")
    MANYFS=$M META_OPS=$B/bin/meta_ops MEMFS_LL=$B/bin/memfs_ll PASSTHROUGH_HP=$B/bin/passthrough_hp \
        TARGETS="manyfs memfs_ll passthrough_hp" THREADS="$COUNTS" REPEAT=1 DURATION=1s \
        FIO_RUNTIME=2 META_FILES=1000 RAW="$OUT/fuse-raw.tsv" \
        timeout 330 scripts/fuse-compare.sh >"$OUT/fuse.txt" 2>&1
    cat "$OUT/fuse.txt"
    switch=/sys/module/fuse/parameters/enable_uring
    if [ -w "$switch" ]; then
        was=$(cat "$switch")
        echo Y >"$switch"
        MANYFS=$M META_OPS=$B/bin/meta_ops MANYFS_OPTS=uring=on TARGETS=manyfs \
            THREADS="$COUNTS" REPEAT=1 DURATION=1s FIO_RUNTIME=2 FX_META="" META_FILES=0 \
            RAW="$OUT/fuse-uring-raw.tsv" timeout 100 scripts/fuse-compare.sh >"$OUT/fuse-uring.txt" 2>&1
        echo "$was" >"$switch"
        cat "$OUT/fuse-uring.txt"
    else
        echo "device-issues: $switch absent or read-only: no FUSE-over-io_uring part"
    fi
    ;;
*)
    echo "device-issues: unknown part $part (run or fuse)" >&2
    exit 2
    ;;
esac
echo "# device-issues $part done $(date -u +%FT%TZ)"
