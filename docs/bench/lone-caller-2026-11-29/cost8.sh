#!/usr/bin/env bash
# daemon CPU and switches per request at THREADS callers (DWOM), manyfs vs memfs_ll
M=/work/main/target/release/manyfs; MNT=/tmp/ab/mnt; mkdir -p $MNT
for t in manyfs memfs; do
  rm -f /dev/shm/ab.pool; $M mkfs /dev/shm/ab.pool --size 1G >/dev/null
  case $t in
   memfs) /tmp/peers/out/memfs_ll -f -o fuse_dio -o clone_fd $MNT & D=$!;;
   *) $M mount -f /dev/shm/ab.pool $MNT 2>/dev/null & D=$!;;
  esac
  for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
  $M bench -w DWOM -t dir:$MNT --threads ${THREADS:-8} --duration 5s --no-membw > /tmp/ab/c8.$t 2>&1 &
  B=$!; sleep 2
  perf stat -x, -e task-clock,context-switches,cpu-migrations -p $D -- sleep 2 2> /tmp/ab/c8s.$t
  wait $B
  ops=$(awk '$1=="DWOM" && $3 ~ /^[0-9]+$/ {print $4}' /tmp/ab/c8.$t)
  echo "$t ops=$ops $(cut -d, -f1,3 /tmp/ab/c8s.$t | tr '\n' ' ')"
  fusermount3 -u $MNT; wait
done
