#!/usr/bin/env bash
# POSIX conformance: pjdfstest (the Rust rewrite, crate `pjdfstest`) as root
# against a manyfs FUSE mount. Exit 0 when every test passes or is one of
# the skips listed in docs/mount.md ("POSIX conformance").
#
# Installs pjdfstest into target/pjdfstest once (cargo install --debug,
# under half a minute on two cores); later runs reuse it. With --install,
# installs it and stops (scripts/test.sh builds it while other steps
# run). Needs root (the suite switches
# users, makes device nodes and remounts read-only): as another user it
# says so and exits 0, except under CI=true, where that is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "pjdfstest: needs root" >&2
    if [ "${CI:-}" = "true" ] || [ "${CI:-}" = "1" ]; then
        exit 1
    fi
    echo "pjdfstest: SKIPPED" >&2
    exit 0
fi

PJD_VERSION=0.2.2
ROOT="$PWD/target/pjdfstest"
PJD="$ROOT/bin/pjdfstest"
if ! [ -x "$PJD" ] || ! "$PJD" --version 2>/dev/null | grep -qF "$PJD_VERSION"; then
    echo "pjdfstest: installing pjdfstest $PJD_VERSION into $ROOT" >&2
    # --debug: it compiles in half the time, and the suite's time is in
    # the file system's system calls, not in its own code.
    cargo install pjdfstest --version "=$PJD_VERSION" --locked --root "$ROOT" --quiet --debug
fi
if [ "${1:-}" = "--install" ]; then
    exit 0
fi
# The manyfs binary: $MANYFS when given (scripts/test.sh passes the one
# `cargo test` built), else a debug build.
if [ -z "${MANYFS:-}" ]; then
    cargo build --quiet -p manyfs-cli
    MANYFS="$PWD/target/debug/manyfs"
fi

work="$(mktemp -d /tmp/manyfs-pjdfstest.XXXXXX)"
chmod 755 "$work" # the suite acts as other users, who must reach the mount
mnt="$work/mnt"
mkdir -p "$mnt" "$work/second" "$work/bin"
cleanup() {
    if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
    rm -rf "$work"
}
trap cleanup EXIT

# The suite's dummy users: both exist on every Debian system.
config() {
    cat <<EOF
[features]
posix_fallocate = {}
rename_ctime = {}
utime_now = {}
utimensat = {}

[settings]
naptime = 0.01
allow_remount = $1

[dummy_auth]
entries = [["nobody", "nogroup"], ["daemon", "daemon"]]
EOF
}
config false > "$work/pjdfstest.toml"
config true > "$work/pjdfstest-remount.toml"
# pjdfstest remounts read-only with mount(8), which would look for a
# mount helper of the FUSE file system; remount in the kernel directly.
printf '#!/bin/sh\nexec /bin/mount -i "$@"\n' > "$work/bin/mount"
chmod +x "$work/bin/mount"

fresh_mount() {
    if mountpoint -q "$mnt"; then umount "$mnt"; fi
    rm -f "$work/pool"
    "$MANYFS" mkfs "$work/pool" --size 1G > /dev/null
    "$MANYFS" mount "$work/pool" "$mnt"
}

# Everything but the read-only remounts, with a second file system for the
# EXDEV cases.
fresh_mount
(cd "$work" && "$PJD" -c "$work/pjdfstest.toml" -p "$mnt" -s "$work/second") \
    | tee "$work/all.log" | grep -E "FAILED|skipped|^Summary" || true
grep -q "^Summary: 0 failed" "$work/all.log"

# The read-only remount cases on their own: in one run with the rest, an
# earlier case leaves a file open and the remount fails with EBUSY (tmpfs
# and ext4 show the same).
fresh_mount
(cd "$work" && PATH="$work/bin:$PATH" "$PJD" -c "$work/pjdfstest-remount.toml" -p "$mnt" erofs) \
    | tee "$work/erofs.log" | grep -E "FAILED|skipped|^Summary" || true
grep -q "^Summary: 0 failed, 0 skipped" "$work/erofs.log"

umount "$mnt"
"$MANYFS" fsck "$work/pool" > /dev/null
echo "pjdfstest: all passed" >&2
