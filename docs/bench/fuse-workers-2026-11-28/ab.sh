#!/bin/bash
# Before/after of the serving-thread pool: base (fixed readers) vs new (on
# demand), default threads (2 here) and threads=16, DWOM/DRBM/DWOL at 1 and
# 2 callers, p50/p99 per op, rounds interleaved. Then classic vs io_uring.
set -u
R=${R:-5}
run() { # bin opts label round
  mkdir -p /tmp/ab/m
  $1 mkfs /dev/shm/ab.pool --size 1G >/dev/null
  $1 mount ${2:+-o $2} /dev/shm/ab.pool /tmp/ab/m
  $1 bench -w DWOM,DRBM,DWOL -t dir:/tmp/ab/m --threads 1,2 --duration 2s --no-membw --no-pin 2>/dev/null |
    grep -E "^(DWOM|DRBM|DWOL) .* [12] " | awk -v l="$3" -v r=$4 '{print l, $1, $3, $4, $7, $8, r}'
  umount /tmp/ab/m; rm -f /dev/shm/ab.pool
}
for r in $(seq $R); do
  for t in uring=off uring=off,threads=16; do
    run /tmp/manyfs-base "$t" "base${t:+,$t}" $r
    run /tmp/manyfs-new "$t" "new${t:+,$t}" $r
  done
  run /tmp/manyfs-new uring=off "new,uring=off" $r
  run /tmp/manyfs-new uring=on "new,uring=on" $r
done
