#!/bin/bash
# Steady state: 6 s of warm-up per point (the pool's fresh blocks are all
# touched once and file mode's deferred frees come back), manyfs vs memfs_ll.
set -u
for r in 1 2 3; do
  mkdir -p /tmp/ab/m
  /tmp/manyfs-final mkfs /dev/shm/ab.pool --size 1G >/dev/null
  /tmp/manyfs-final mount -o uring=off /dev/shm/ab.pool /tmp/ab/m
  /tmp/manyfs-final bench -w DWOM,DWOL -t dir:/tmp/ab/m --threads 1,2 --warmup 6s --duration 2s --no-membw --no-pin 2>/dev/null | grep -E "^(DWOM|DWOL) .* [12] " | awk -v l=manyfs -v r=$r '{print l, $1, $3, $4, $7, $8, r}'
  umount /tmp/ab/m; rm -f /dev/shm/ab.pool
  /tmp/peers/out/memfs_ll -o fuse_dio /tmp/ab/m; sleep 0.5
  /tmp/manyfs-final bench -w DWOM,DWOL -t dir:/tmp/ab/m --threads 1,2 --warmup 6s --duration 2s --no-membw --no-pin 2>/dev/null | grep -E "^(DWOM|DWOL) .* [12] " | awk -v l=memfs_ll -v r=$r '{print l, $1, $3, $4, $7, $8, r}'
  umount /tmp/ab/m; sleep 0.5
done
