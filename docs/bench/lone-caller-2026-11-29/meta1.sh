#!/usr/bin/env bash
# meta_ops, one process, FILES files: -o spin (default) against -o spin=0 and passthrough_hp, R rounds alternated
M=${M:-/work/main/target/release/manyfs}; R=${R:-5}; F=${FILES:-3000}; MNT=/tmp/ab/mnt; mkdir -p $MNT /dev/shm/pt-src
for r in $(seq $R); do
 for t in spin nospin pt; do
  rm -f /dev/shm/ab.pool; rm -rf /dev/shm/pt-src/*
  case $t in
   spin) $M mkfs /dev/shm/ab.pool --size 1G >/dev/null; $M mount -f /dev/shm/ab.pool $MNT 2>/dev/null & ;;
   nospin) $M mkfs /dev/shm/ab.pool --size 1G >/dev/null; $M mount -f -o spin=0 /dev/shm/ab.pool $MNT 2>/dev/null & ;;
   pt) /tmp/peers/out/passthrough_hp --foreground /dev/shm/pt-src $MNT & ;;
  esac
  for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
  echo "$r $t $(${META:-/tmp/ab/meta_ops} $MNT 1 $F | awk '{printf "%s %s ", $1, $2}')"
  fusermount3 -u $MNT; wait
 done
done
