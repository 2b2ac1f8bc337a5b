#!/usr/bin/env bash
# -o spin (default 50 us) against -o spin=0 and memfs_ll; THREADS callers, BENCH_OPTS
# (--no-pin: callers free), W workloads, R rounds. M: the manyfs binary.
# Prints each point's ops/s and its p50/p99 latency.
M=${M:-/work/main/target/release/manyfs}
R=${R:-3}; MNT=/tmp/ab/mnt; mkdir -p $MNT
for r in $(seq $R); do
 for t in ${TS:-spin nospin memfs}; do
  rm -f /dev/shm/ab.pool; $M mkfs /dev/shm/ab.pool --size 1G >/dev/null
  case $t in
   memfs) /tmp/peers/out/memfs_ll -f -o fuse_dio -o clone_fd $MNT & ;;
   spin) $M mount -f /dev/shm/ab.pool $MNT 2>/dev/null & ;;
   nospin) $M mount -f -o spin=0 /dev/shm/ab.pool $MNT 2>/dev/null & ;;
  esac
  for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
  out=$($M bench -w ${W:-DWOM,DRBM} -t dir:$MNT --threads ${THREADS:-1} --duration 2s --no-membw $BENCH_OPTS 2>&1 | grep -E "^(DWOM|DWOL|DRBM) " | awk '$3 ~ /^[0-9]+$/ {print $1, $3, $4, "p50", $7, "p99", $8}' | tr '\n' ' ')
  echo "$r $t $out"
  fusermount3 -u $MNT; wait
 done
done
