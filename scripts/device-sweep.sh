#!/bin/bash
# The scaling sweep for a many-core machine, in one call that fits a short
# lease (6-7 minutes): the points the 2-core development machine cannot
# settle. Each command is bounded by `timeout`, so one that hangs costs its
# own budget only.
#
#   strip -o .devbin/manyfs target/release/manyfs     # a binary to carry (git-ignored path)
#   MANYFS=.devbin/manyfs OUT=/tmp/sweep scripts/device-sweep.sh
#
# On the lent device machine, `OUT` is the folder whose files come back.
# Points:
# - metadata in one shared directory and in private ones, 1/2/16/64
#   threads, against tmpfs (issue: shared-directory creates and unlinks
#   from 1 to 2 threads);
# - the same shared-directory points with 64 name shards per directory;
# - the tier checkpoint's write-latency trace with data on /dev/shm and
#   on the machine's disk, 1 and 2 writers;
# - DWSL (4 KiB write + fsync) in file mode and on the tier against ext4;
# - DWOM/DRBM on one shared file, srl-tree against the per-inode lock;
# - with PEERS=DIR (libfuse's memfs_ll and passthrough_hp built there by
#   scripts/fuse-peers.sh, and meta_ops built), the mount against them at
#   1-16 threads, classic and over io_uring (about 6 more minutes: on a short
#   lease run it alone, `scripts/fuse-compare.sh` with THREADS="1 2 4 8 16").
set -u
M=$(realpath "${MANYFS:-target/release/manyfs}")
ROOT=$(realpath "$(dirname "$0")/..")
META=$(realpath -m "${META_OPS:-$ROOT/target/release/examples/meta_ops}")
OUT=$(realpath -m "${OUT:?set OUT to a folder for the results}")
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
set -x
uname -a
nproc
lscpu | grep -E 'Model name|NUMA|Socket|Thread|Core'
findmnt -T /var/tmp
findmnt -T /dev/shm
free -g
cd /tmp || exit 1
# Split in two: a bench killed by its timeout writes no JSON.
timeout 110 "$M" bench -w MWCM,MWUM -t lib:srl-tree,tmpfs --threads 1,2,16,64 \
  --duration 1s --repeat 3 --no-membw --json "$OUT/meta-shared.json"
timeout 110 "$M" bench -w MWCL,MWRM -t lib:srl-tree,tmpfs --threads 1,2,16,64 \
  --duration 1s --repeat 3 --no-membw --json "$OUT/meta-private-rename.json"
timeout 40 "$M" bench -w MWCM,MWUM -t lib:srl-tree --threads 1,2 --duration 1s --repeat 3 \
  --no-membw --dir-shards 64 --json "$OUT/meta-shards64.json"
rm -f /dev/shm/ckpt.*
timeout 60 "$M" bench --reproduce tier-checkpoint --data /dev/shm/ckpt.data --data-size 4G \
  --pool /dev/shm/ckpt.pool --duration 1s --threads 1,2 --json "$OUT/ckpt-shm.json" \
  --plot "$OUT/ckpt-shm.svg"
rm -f /dev/shm/ckpt.*
timeout 90 "$M" bench --reproduce tier-checkpoint --threads 1,2 --json "$OUT/ckpt-disk.json" \
  --plot "$OUT/ckpt-disk.svg"
mkdir -p /var/tmp/dwsl-ext4
timeout 60 "$M" bench -w DWSL -t lib:srl-tree,dir:/var/tmp/dwsl-ext4 --durability file \
  --pool /var/tmp/dwsl.pool --pool-size 512M --threads 1,2 --duration 2s --repeat 3 --no-membw \
  --json "$OUT/dwsl-file.json"
timeout 60 "$M" bench -w DWSL -t lib:srl-tree,dir:/var/tmp/dwsl-ext4 --durability dram \
  --pool /dev/shm/tier-dwsl.pool --pool-size 256M --data /var/tmp/tier-dwsl.data \
  --data-size 256M --threads 1,2 --duration 2s --repeat 3 --no-membw --json "$OUT/dwsl-tier.json"
rm -rf /var/tmp/dwsl.pool /dev/shm/tier-dwsl.pool /var/tmp/tier-dwsl.data /var/tmp/dwsl-ext4
timeout 60 "$M" bench -w DWOM,DRBM -t lib:srl-tree,lib:inode,tmpfs --threads 1,2,4,8,16,64 \
  --duration 500ms --no-membw --json "$OUT/rw.json"
# The mount against libfuse's memfs_ll and passthrough_hp, when the peers
# were built there (scripts/fuse-peers.sh SRC DIR; PEERS=DIR): FxMark, fio and
# meta_ops at 1-16 threads, classic /dev/fuse and, where the kernel has the
# switch, FUSE over io_uring turned on for the run.
if [ -n "${PEERS:-}" ]; then
  MANYFS=$M META_OPS=$META MANYFS_OPTS=uring=off THREADS="1 2 4 8 16" REPEAT=1 DURATION=1s \
    FIO_RUNTIME=2 RAW="$OUT/fuse-peers.tsv" timeout 400 "$ROOT/scripts/fuse-compare.sh" > "$OUT/fuse-peers.txt" 2>&1
  if [ -w /sys/module/fuse/parameters/enable_uring ]; then
    echo Y > /sys/module/fuse/parameters/enable_uring
    MANYFS=$M META_OPS=$META MANYFS_OPTS=uring=on TARGETS=manyfs THREADS="1 2 4 8 16" REPEAT=1 \
      DURATION=1s FIO_RUNTIME=2 RAW="$OUT/fuse-uring.tsv" timeout 120 "$ROOT/scripts/fuse-compare.sh" > "$OUT/fuse-uring.txt" 2>&1
    echo N > /sys/module/fuse/parameters/enable_uring
  fi
fi
echo DONE
