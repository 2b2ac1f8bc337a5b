#!/usr/bin/env bash
# RocksDB's db_bench, fillrandom then readrandom (100-byte values, 1 and 2
# threads), three ways, side by side in one run: `manyfs run` (the pool in
# the db_bench process), the FUSE mount (`manyfs mount`), and tmpfs
# (/dev/shm).
#
#   scripts/dbbench-compare.sh [NUM]        (default 200000 keys per thread)
#   THREADS="1 16" scripts/dbbench-compare.sh [NUM]   (other thread counts)
#   scripts/dbbench-compare.sh --pairs N [NUM]
#
# `--pairs N` measures only `manyfs run` against tmpfs at one thread, N
# times in alternation (each on a fresh pool and database, seeds 1..N),
# and prints every pair and the median of the ratios: on a shared machine
# whose speed drifts by tens of percent within a minute, a ratio of runs
# made back to back is what can be compared.
#
# Uses the `manyfs` binary and libmanyfs_preload.so of $BIN (default
# target/release; build them with `cargo build --release -p manyfs-cli
# -p manyfs-preload`) and db_bench from PATH (Debian's rocksdb-tools;
# scripts/install-deps.sh installs it), or $DB_BENCH. Pools are 2 GiB
# files under /dev/shm. Each db_bench run gets a fresh database
# directory: fillrandom on an empty database, then readrandom of the keys
# it wrote, with the same seed everywhere. Prints a markdown table of
# ops/s as db_bench reports them (`fillrandom : X micros/op N ops/sec`;
# with 2 threads, both threads' operations over the run's time).
set -euo pipefail
pairs=0
if [ "${1:-}" = --pairs ]; then
    pairs=${2:?--pairs needs a count}
    shift 2
fi
num=${1:-200000}
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release}
manyfs=$bin/manyfs
dbbench=${DB_BENCH:-db_bench}
[ -x "$manyfs" ] && [ -f "$bin/libmanyfs_preload.so" ] || {
    echo "dbbench-compare: $manyfs or $bin/libmanyfs_preload.so missing (set BIN)" >&2
    exit 1
}
command -v "$dbbench" >/dev/null || {
    echo "dbbench-compare: $dbbench not found (scripts/install-deps.sh installs rocksdb-tools)" >&2
    exit 1
}
work=$(mktemp -d /dev/shm/dbbench-compare.XXXXXX)
mnt=$work/fuse
trap 'fusermount3 -u "$mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$mnt" "$work/tmpfs"

ops() { # BENCH < db_bench output -> its ops/s, as 55.1k or 1.23M
    awk -v b="$1" '$1 == b && $2 == ":" {
        for (i = 3; i < NF; i++) if ($(i + 1) == "ops/sec") { n = $i; break }
    }
    END {
        if (n == "") { print "?"; exit }
        if (n >= 1e6) printf "%.2fM\n", n / 1e6
        else if (n >= 1e3) printf "%.1fk\n", n / 1e3
        else print n
    }'
}
bench() { # DB THREADS [PREFIX...] -> "FILL READ"
    local db=$1 threads=$2 out
    shift 2
    out=$("$@" "$dbbench" --db="$db" --benchmarks=fillrandom,readrandom \
        --num="$num" --value_size=100 --threads="$threads" --seed=1 \
        --use_existing_db=0 2>"$work/stderr") || {
        echo "dbbench-compare: db_bench failed in $db:" >&2
        cat "$work/stderr" >&2
        exit 1
    }
    if grep -q 'manyfs run:' "$work/stderr"; then
        echo "dbbench-compare: the preload complained in $db:" >&2
        grep 'manyfs run:' "$work/stderr" >&2
    fi
    echo "$(ops fillrandom <<<"$out") $(ops readrandom <<<"$out")"
}

if [ "$pairs" -gt 0 ]; then
    raw() { # BENCH < db_bench output -> its ops/s as a plain number
        awk -v b="$1" '$1 == b && $2 == ":" {
            for (i = 3; i < NF; i++) if ($(i + 1) == "ops/sec") print $i
        }'
    }
    one() { # DB SEED [PREFIX...] -> "FILL READ"
        local db=$1 seed=$2 out
        shift 2
        out=$("$@" "$dbbench" --db="$db" --benchmarks=fillrandom,readrandom \
            --num="$num" --value_size=100 --threads=1 --seed="$seed" 2>"$work/stderr") || {
            echo "dbbench-compare: db_bench failed in $db:" >&2
            cat "$work/stderr" >&2
            exit 1
        }
        echo "$(raw fillrandom <<<"$out") $(raw readrandom <<<"$out")"
    }
    echo "| pair | tmpfs fillrandom | manyfs run fillrandom | ratio | tmpfs readrandom | manyfs run readrandom | ratio |"
    echo "|---|---|---|---|---|---|---|"
    for i in $(seq 1 "$pairs"); do
        rm -rf "$work/tmpfs/db" "$work/run" "$work/run.pool"
        read -r tf tr <<<"$(one "$work/tmpfs/db" "$i")"
        read -r mf mr <<<"$(one "$work/run/db" "$i" "$manyfs" run --pool "$work/run.pool" \
            --at "$work/run" --size 2G --)"
        echo "$i $tf $mf $tr $mr"
    done | awk '
        { printf "| %d | %d | %d | %.2f | %d | %d | %.2f |\n", $1, $2, $3, $3 / $2, $4, $5, $5 / $4
          f[NR] = $3 / $2; r[NR] = $5 / $4 }
        function median(a, n,   i, j, t) {
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        END { printf "| median | | | %.2f | | | %.2f |\n", median(f, NR), median(r, NR) }'
    exit 0
fi

read -r -a counts <<<"${THREADS:-1 2}"
# shellcheck source=lib/three-ways.sh
. "$(dirname "$0")/lib/three-ways.sh"
table_head "fillrandom readrandom" thread "${counts[@]}"
row() { # NAME DIR [PREFIX...]
    local name=$1 dir=$2 t fill=() reads=() got
    shift 2
    for t in "${counts[@]}"; do
        read -r -a got <<<"$(bench "$dir/db$t" "$t" "$@")"
        fill+=("${got[0]}")
        reads+=("${got[1]}")
    done
    local line="| $name |"
    for v in "${fill[@]}" "${reads[@]}"; do
        line+=" $v |"
    done
    echo "$line"
}
three_ways 2G
