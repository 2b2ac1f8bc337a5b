#!/usr/bin/env bash
# fio 4 KiB random writes and reads (psync, --thread, one shared file, 1
# and 2 jobs) three ways, side by side: `manyfs run` (the pool in the fio
# process), the FUSE mount (`manyfs mount`), and tmpfs (/dev/shm).
#
#   scripts/run-compare.sh [SECONDS]        (default 3 per run)
#   JOBS="1 2 4 8 16" scripts/run-compare.sh 2   (a many-core machine)
#
# Uses the `manyfs` binary and libmanyfs_preload.so of $BIN (default
# target/release; build them with `cargo build --release -p manyfs-cli
# -p manyfs-preload`). Prints a markdown table.
set -euo pipefail
secs=${1:-3}
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release}
manyfs=$bin/manyfs
[ -x "$manyfs" ] && [ -f "$bin/libmanyfs_preload.so" ] || {
    echo "run-compare: $manyfs or $bin/libmanyfs_preload.so missing (set BIN)" >&2
    exit 1
}
work=$(mktemp -d /dev/shm/run-compare.XXXXXX)
mnt=$work/fuse
trap 'fusermount3 -u "$mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$mnt" "$work/tmpfs"

iops() { # fio output -> IOPS of the group
    sed -n 's/.*IOPS=\([0-9.k]*\).*/\1/p' | head -1
}
job() { # DIR RW JOBS [PREFIX...]
    local dir=$1 rw=$2 jobs=$3
    shift 3
    "$@" fio --name=c --directory="$dir" --filename=shared --size=256M --bs=4k \
        --rw="$rw" --ioengine=psync --thread --numjobs="$jobs" --time_based \
        --runtime="$secs" --group_reporting --output-format=normal | iops
}

read -r -a counts <<<"${JOBS:-1 2}"
# shellcheck source=lib/three-ways.sh
. "$(dirname "$0")/lib/three-ways.sh"
table_head "randwrite randread" job "${counts[@]}"
row() { # NAME DIR [PREFIX...]
    local name=$1 dir=$2
    shift 2
    local line="| $name |"
    for rw in randwrite randread; do
        for jobs in "${counts[@]}"; do
            line+=" $(job "$dir" "$rw" "$jobs" "$@") |"
        done
    done
    echo "$line"
}
three_ways 1G
