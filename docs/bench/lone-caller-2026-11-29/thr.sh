#!/usr/bin/env bash
# -o threads=N at many callers (THREADS), against memfs_ll; R rounds alternated.
# TS="2 nice memfs": a row with the daemon at nice -n -10 (default options).
M=${M:-/work/main/target/release/manyfs}; R=${R:-2}; MNT=/tmp/ab/mnt; mkdir -p $MNT
for r in $(seq $R); do
 for t in ${TS:-2 4 8 memfs}; do
  rm -f /dev/shm/ab.pool; $M mkfs /dev/shm/ab.pool --size 1G >/dev/null
  case $t in
   memfs) /tmp/peers/out/memfs_ll -f -o fuse_dio -o clone_fd $MNT & ;;
   nice) nice -n -10 $M mount -f /dev/shm/ab.pool $MNT 2>/dev/null & ;;
   *) $M mount -f -o threads=$t /dev/shm/ab.pool $MNT 2>/dev/null & ;;
  esac
  for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
  out=$($M bench -w ${W:-DWOM,DRBM} -t dir:$MNT --threads ${THREADS:-64} --duration 2s --no-membw 2>&1 | grep -E "^(DWOM|DWOL|DRBM) " | awk '$3 ~ /^[0-9]+$/ {print $1, $4}' | tr '\n' ' ')
  echo "$r threads=$t $out"
  fusermount3 -u $MNT; wait
 done
done
