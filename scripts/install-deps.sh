#!/usr/bin/env bash
# Install the Debian packages that manyfs's tests and tools need.
#
# Idempotent and quiet: it only runs `apt-get update` when a package is
# missing, and then installs only the missing ones. Runs as root with no stdin.
set -euo pipefail

# fuse3:   fusermount3 and the FUSE runtime for `manyfs mount` and its tests
# fio:     the shared-file workload of the FUSE integration tests
# sqlite3: the database workload of the FUSE integration tests
# fonts-dejavu-core: the TrueType font `manyfs bench --plot` draws its text with
# rsync, attr, acl: the FUSE tests copy trees with FIFOs, devices, extended
#          attributes and ACLs in and out (rsync -aHAX) and read and set
#          attributes and ACLs (getfattr, setfacl)
# gcc:     compiles mimalloc, the allocator of the `manyfs` command, the
#          C example of libmanyfs (crates/manyfs-capi/tests/c_example.rs) and
#          the C programs of `manyfs run`'s tests (crates/manyfs-cli/tests/run.rs)
# rocksdb-tools: db_bench, the key-value workload of `manyfs run`'s tests
#          (crates/manyfs-cli/tests/run.rs) and scripts/dbbench-compare.sh
# make:    GNU make's $(realpath) in `manyfs run`'s tests (glibc's realpath)
# libc6-dev: the static libc (libc.a) of the statically linked program
#          `manyfs run`'s tests build (`gcc -static`), which it must refuse
PACKAGES=(fuse3 fio sqlite3 fonts-dejavu-core rsync attr acl gcc rocksdb-tools make libc6-dev)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq </dev/null >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
