#!/usr/bin/env bash
# Where the serving threads sit decides a lone caller's round trip: the caller is
# pinned to CPU 0 by `manyfs bench` (BENCH_OPTS=--no-pin frees it); the daemon free,
# or confined with taskset to CPU 0 or 1; memfs_ll likewise. R rounds.
# lone caller on CPU0 (bench pins thread 0 to CPU 0): daemon free vs daemon on CPU0 vs daemon on CPU1; memfs_ll likewise
M=${M:-/work/main/target/release/manyfs}
R=${R:-3}; MNT=/tmp/ab/mnt; mkdir -p $MNT
for r in $(seq $R); do
 for t in free cpu0 cpu1 memfree memcpu0; do
  case $t in
   free) TS="";; cpu0|memcpu0) TS="taskset -c 0";; cpu1) TS="taskset -c 1";;
   memfree) TS="";;
  esac
  case $t in
   mem*) $TS /tmp/peers/out/memfs_ll -f -o fuse_dio -o clone_fd $MNT & ;;
   *) rm -f /dev/shm/ab.pool; $M mkfs /dev/shm/ab.pool --size 1G >/dev/null; $TS $M mount -f /dev/shm/ab.pool $MNT 2>/dev/null & ;;
  esac
  for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
  out=$($M bench -w ${W:-DWOM,DRBM} -t dir:$MNT --threads 1 --duration 2s --no-membw $BENCH_OPTS 2>&1 | grep -E "^(DWOM|DWOL|DRBM) " | awk '{print $1, $4, $6}' | tr '\n' ' ')
  echo "$r $t $out"
  fusermount3 -u $MNT; wait
 done
done
