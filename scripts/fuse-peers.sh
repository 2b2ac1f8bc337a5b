#!/usr/bin/env bash
# Build libfuse's own example file systems, memfs_ll (C++, in libfuse >= 3.17)
# and passthrough_hp, as peers for scripts/fuse-compare.sh. Nothing of
# libfuse goes into manyfs: the source and the build stay outside the tree.
#
#   scripts/fuse-peers.sh [LIBFUSE_SRC [OUT]]    # prints the two binaries' paths
#   LIBFUSE_SRC=/tmp/peers/libfuse OUT=/tmp/peers/out scripts/fuse-peers.sh
#
# LIBFUSE_SRC is an unpacked libfuse source tree (a directory, so a machine
# without network can get it copied in). From the fetch tool's bare mirror:
#   git --git-dir=/work/.mirror/libfuse+libfuse/repo archive HEAD | tar -x -C /tmp/peers/libfuse
# (HEAD was 3.19.0-rc0; the fuse-3.18.x tags lack memfs_ll's -o fuse_dio.)
# To use it on a machine that only gets the repository copied in (e.g. the
# device machine), copy the tree under the repository as an ignored path,
# e.g. target/libfuse-src (target/ is ignored; the tree is 3.6 MB), pass it
# with `carry`, and run
#   scripts/fuse-peers.sh target/libfuse-src target/peers
# There apt-get may have no network: without meson the script compiles with
# gcc/g++ directly (FUSE_PEERS_DIRECT=1 forces that path anywhere).
# The binaries are linked against a static libfuse, so they only need libc
# and libstdc++ and can also be built here and carried as they are.
#
# Idempotent: a stamp holding a hash of the source skips the build when the
# binaries are there and the source has not changed. Build tools are installed
# with apt-get only when missing; when meson cannot be had (no network), the
# library and the two examples are compiled with gcc/g++ directly.
set -euo pipefail

SRC=${1:-${LIBFUSE_SRC:-}}
OUT=${2:-${OUT:-/tmp/peers/out}}
if [ -z "$SRC" ] || [ ! -f "$SRC/example/memfs_ll.cc" ] || [ ! -f "$SRC/example/passthrough_hp.cc" ]; then
  echo "usage: $0 LIBFUSE_SRC [OUT]  (a libfuse >= 3.17 source tree with example/memfs_ll.cc)" >&2
  exit 2
fi
SRC=$(cd "$SRC" && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# Hash of everything that goes into the two binaries, so a different libfuse
# version (or an edited example) rebuilds and an unchanged one does not.
stamp=$( (cd "$SRC" && find lib include example meson.build meson_options.txt -type f -print0 |
          sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1)
if [ -x "$OUT/memfs_ll" ] && [ -x "$OUT/passthrough_hp" ] &&
   [ "$(cat "$OUT/.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$OUT/memfs_ll"
  echo "$OUT/passthrough_hp"
  exit 0
fi

# Install what is missing, quietly; returns non-zero (instead of exiting) when
# apt-get cannot get it, so the caller can fall back.
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo=sudo
  echo "fuse-peers: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  { $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
    { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; }
  } </dev/null >/dev/null 2>&1
}

BUILD=$OUT/build
# Both paths compile with -O3 like libfuse's release build; a static library
# keeps the binaries free of a libfuse3.so that would have to travel with them.
build_meson() {
  if [ -f "$BUILD/build.ninja" ]; then
    meson setup --reconfigure "$BUILD" "$SRC" >/dev/null
  else
    meson setup "$BUILD" "$SRC" -Dbuildtype=release -Ddefault_library=static \
      -Dexamples=true -Dtests=false -Dutils=false >/dev/null
  fi
  ninja -C "$BUILD" example/memfs_ll example/passthrough_hp >/dev/null
  cp "$BUILD/example/memfs_ll" "$BUILD/example/passthrough_hp" "$OUT/"
}

# Without meson: write the two config headers meson would generate (the values
# it finds on Linux with glibc, the few that vary probed here), compile the
# library's sources and link the examples.
build_direct() {
  rm -rf "$BUILD"; mkdir -p "$BUILD/obj"
  local ver base major minor hot rc
  ver=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" "$SRC/meson.build" | head -1)
  base=${ver%%-*}; rc=; [ "$base" != "$ver" ] && rc=${ver#*-}
  IFS=. read -r major minor hot <<<"$base"
  have() { # NAME C-SNIPPET: defines NAME when the snippet compiles
    if printf '#define _GNU_SOURCE\n%b\nint main(void){return 0;}\n' "$2" |
         gcc -x c -fsyntax-only - 2>/dev/null; then echo "#define $1"; else echo "#undef $1"; fi
  }
  {
    echo '#pragma once'
    echo '#define FUSE_SERVICE_SOCKET_DIR "/run/filesystems"'
    echo '#define FUSE_SERVICE_SOCKET_DIR_RAW /run/filesystems'
    echo '#define FUSE_SERVICE_SOCKET_PERMS 0220'
    echo '#define FUSE_SYNC_INIT_DEFAULT FUSE_SYNC_INIT_AUTO'
    for h in BACKTRACE COPY_FILE_RANGE FACCESSAT FALLOCATE FDATASYNC FORK FSTATAT ICONV \
             LINUX_LIMITS_H OPENAT PIPE2 POSIX_FALLOCATE PTHREAD_SETNAME_NP READLINKAT \
             SETXATTR SPLICE STRUCT_STAT_ST_ATIM SYS_XATTR_H UTIMENSAT VMSPLICE; do
      echo "#define HAVE_$h"
    done
    have HAVE_STATX '#include <sys/stat.h>\nstatic struct statx s;'
    have HAVE_CLOSE_RANGE '#include <unistd.h>\nstatic int (*f)(unsigned,unsigned,int)=close_range;'
    have HAVE_NEW_MOUNT_API '#include <sys/mount.h>\nstatic int (*f)(const char*,unsigned)=fsopen;'
    echo "#define PACKAGE_VERSION \"$ver\""
  } >"$BUILD/fuse_config.h"
  printf '#pragma once\n#define FUSE_MAJOR_VERSION %s\n#define FUSE_MINOR_VERSION %s\n#define FUSE_HOTFIX_VERSION %s\n#define FUSE_RC_VERSION %s\n#define LIBFUSE_BUILT_WITH_VERSIONED_SYMBOLS 1\n' \
    "$major" "$minor" "${hot:-0}" "$rc" >"$BUILD/libfuse_config.h"
  local common=(-O3 -D_REENTRANT -DHAVE_LIBFUSE_PRIVATE_CONFIG_H -D_FILE_OFFSET_BITS=64
                -DHAVE_SYMVER_ATTRIBUTE -fno-strict-aliasing -pthread
                -I"$BUILD" -I"$SRC/include" -I"$SRC/lib" -I"$SRC")
  local f objs=()
  for f in "$SRC"/lib/*.c "$SRC"/lib/modules/*.c; do
    case ${f##*/} in
      mount_bsd.c|fuse_uring.c) continue ;;                  # BSD only; io_uring needs liburing
      fuse_service.c) [ -f "$SRC/lib/fuse_service_stub.c" ] && continue ;;
      mount_fsmount.c) grep -q '^#define HAVE_NEW_MOUNT_API' "$BUILD/fuse_config.h" || continue ;;
    esac
    gcc -std=gnu11 "${common[@]}" -DFUSE_USE_VERSION=$((major * 100 + minor)) \
      -DFUSERMOUNT_DIR='"/usr/local/bin"' -c "$f" -o "$BUILD/obj/${f##*/}.o"
    objs+=("$BUILD/obj/${f##*/}.o")
  done
  ar rcs "$BUILD/libfuse3.a" "${objs[@]}"
  for f in memfs_ll passthrough_hp; do
    g++ -std=c++20 -D_GNU_SOURCE "${common[@]}" "$SRC/example/$f.cc" "$BUILD/libfuse3.a" \
      -ldl -lrt -o "$OUT/$f"
  done
}

apt_install meson ninja-build gcc g++ pkg-config ||
  echo "fuse-peers: apt-get could not install the build tools; using what is here" >&2
# FUSE_PEERS_DIRECT=1 takes the meson-less path even where meson is installed.
if [ "${FUSE_PEERS_DIRECT:-0}" != 1 ] && command -v meson >/dev/null &&
   command -v ninja >/dev/null && command -v g++ >/dev/null; then
  build_meson
elif command -v gcc >/dev/null && command -v g++ >/dev/null; then
  echo "fuse-peers: compiling with gcc/g++ directly (no meson)" >&2
  build_direct
else
  echo "fuse-peers: neither meson nor gcc/g++ available" >&2
  exit 1
fi
echo "$stamp" >"$OUT/.stamp"
echo "$OUT/memfs_ll"
echo "$OUT/passthrough_hp"
