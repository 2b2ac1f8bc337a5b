#!/usr/bin/env bash
# Gathers what scripts/device-issues.sh needs on a bare many-core machine
# (no package registry, another C library) into one git-ignored folder
# that the device tool can carry (`carry: [".devbin"]`, under 64 MiB):
# manyfs's release binaries and preload library, `meta_ops`, libfuse's
# `memfs_ll` and `passthrough_hp`, fio, RocksDB's db_bench and fusermount3.
# Each C program runs through a wrapper in BUNDLE/bin that starts it with
# this machine's loader and the libraries it was linked against
# (BUNDLE/lib), so it does not depend on what the other machine has.
#
#   cargo build --release -p manyfs-cli -p manyfs-preload
#   cargo build --release -p manyfs-bench --example meta_ops
#   scripts/fuse-peers.sh /tmp/peers/libfuse /tmp/peers/out
#   FIO=/tmp/fio/fio scripts/device-bundle.sh [BUNDLE]     (default .devbin)
#
# FIO: a fio built from source (`./configure --disable-native && make`):
# Debian's links Ceph's and Gluster's libraries (84 MB). Without FIO the
# installed fio is bundled if its libraries fit. PEERS (default
# /tmp/peers/out) holds memfs_ll and passthrough_hp; DB_BENCH (default
# from PATH) is RocksDB's db_bench.
set -euo pipefail
root=$(realpath "$(dirname "$0")/..")
out=$(realpath -m "${1:-$root/.devbin}")
rel=${CARGO_TARGET_DIR:-$root/target}/release
peers=${PEERS:-/tmp/peers/out}
fio=${FIO:-$(command -v fio || true)}
dbbench=${DB_BENCH:-$(command -v db_bench || true)}
fusermount=$(command -v fusermount3 || true)

rm -rf "$out"
mkdir -p "$out/bin" "$out/real" "$out/lib"

# Rust binaries: one C library symbol version set, already run on the
# device before; stripped to keep the bundle small.
for b in "$rel/manyfs" "$rel/examples/meta_ops"; do
    [ -x "$b" ] || { echo "device-bundle: $b missing (see the header)" >&2; exit 1; }
    strip -o "$out/bin/$(basename "$b")" "$b"
done
[ -f "$rel/libmanyfs_preload.so" ] || {
    echo "device-bundle: $rel/libmanyfs_preload.so missing" >&2
    exit 1
}
strip -o "$out/bin/libmanyfs_preload.so" "$rel/libmanyfs_preload.so"

loader=$(ldd /bin/true | awk '/ld-linux/ {print $1}')
cp -L "$loader" "$out/lib/"
loader_name=$(basename "$loader")

# A C program and the libraries it loads, behind a wrapper that starts it
# with the bundled loader.
bundle() { # NAME PATH
    local name=$1 path=$2 lib
    [ -x "$path" ] || { echo "device-bundle: $name: $path missing" >&2; exit 1; }
    cp -L "$path" "$out/real/$name"
    strip "$out/real/$name" 2>/dev/null || true
    for lib in $(ldd "$path" | awk '$3 ~ /^\// {print $3}'); do
        [ -e "$out/lib/$(basename "$lib")" ] || cp -L "$lib" "$out/lib/"
    done
    cat >"$out/bin/$name" <<EOF
#!/bin/sh
# $name from the machine that made this bundle, with its own libraries.
d=\$(dirname "\$(readlink -f "\$0")")/..
exec "\$d/lib/$loader_name" --library-path "\$d/lib" "\$d/real/$name" "\$@"
EOF
    chmod +x "$out/bin/$name"
}

bundle memfs_ll "$peers/memfs_ll"
bundle passthrough_hp "$peers/passthrough_hp"
[ -n "$fio" ] || { echo "device-bundle: no fio (set FIO)" >&2; exit 1; }
bundle fio "$fio"
[ -n "$dbbench" ] || { echo "device-bundle: no db_bench (set DB_BENCH)" >&2; exit 1; }
bundle db_bench "$dbbench"
# fusermount3 is set-uid where installed; the scripts run as root, where
# the copy unmounts as well.
[ -n "$fusermount" ] && bundle fusermount3 "$fusermount"

size=$(du -sm "$out" | cut -f1)
echo "device-bundle: $out, ${size} MiB"
[ "$size" -lt 60 ] || { echo "device-bundle: over the 64 MiB a call carries" >&2; exit 1; }
# Each wrapper starts here: a broken library set shows now, not there.
for p in fio db_bench; do
    "$out/bin/$p" --version >/dev/null 2>&1 || "$out/bin/$p" --help >/dev/null 2>&1 ||
        { echo "device-bundle: $p does not start from the bundle" >&2; exit 1; }
done
"$out/bin/memfs_ll" --version >/dev/null 2>&1 || true
