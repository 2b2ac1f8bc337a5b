#!/usr/bin/env bash
# FUSE over io_uring (enable_uring=Y for the run) against the classic /dev/fuse path
# (polling serving threads, -o uring=off) and memfs_ll; THREADS callers (free), R rounds.
M=${M:-/work/main/target/release/manyfs}
R=${R:-2}; MNT=/tmp/ab/mnt; mkdir -p $MNT
P=/sys/module/fuse/parameters/enable_uring; was=$(cat $P); echo Y > $P
trap 'echo $was > $P' EXIT
for r in $(seq $R); do
 for t in uring classic memfs; do
  rm -f /dev/shm/ab.pool; $M mkfs /dev/shm/ab.pool --size 1G >/dev/null
  case $t in
   memfs) /tmp/peers/out/memfs_ll -f -o fuse_dio -o clone_fd $MNT & ;;
   uring) $M mount -f -o uring=on /dev/shm/ab.pool $MNT 2>&1 | grep -v serving & ;;
   classic) $M mount -f -o uring=off /dev/shm/ab.pool $MNT 2>/dev/null & ;;
  esac
  for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
  for th in ${THREADS:-1 2}; do
   out=$($M bench -w ${W:-DWOM,DRBM,DWOL} -t dir:$MNT --threads $th --duration 2s --no-membw --no-pin 2>&1 | grep -E "^(DWOM|DWOL|DRBM) " | awk '$3 ~ /^[0-9]+$/ {print $1, $4}' | tr '\n' ' ')
   echo "$r $t t=$th $out"
  done
  fusermount3 -u $MNT; wait
 done
done
