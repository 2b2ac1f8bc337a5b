#!/usr/bin/env bash
# Ran against a trial build (not kept): its serving threads polled for MANYFS_SPIN_US
# microseconds (MANYFS_SPIN_YIELD=1: yielding between polls), and follow_caller=off
# turned off a trial that moved them to a lone caller's CPU. The kept form is -o spin=US (spin2.sh).
M=${M:-/work/main/target/release/manyfs}
R=${R:-3}; MNT=/tmp/ab/mnt; mkdir -p $MNT
for r in $(seq $R); do
 for t in ${TS:-off t1 t1spin spin memfs}; do
  rm -f /dev/shm/ab.pool; $M mkfs /dev/shm/ab.pool --size 1G >/dev/null
  case $t in
   memfs) /tmp/peers/out/memfs_ll -f -o fuse_dio -o clone_fd $MNT & ;;
   off) $M mount -f -o follow_caller=off /dev/shm/ab.pool $MNT 2>/dev/null & ;;
   t1) $M mount -f -o follow_caller=off,threads=1 /dev/shm/ab.pool $MNT 2>/dev/null & ;;
   t1spin) MANYFS_SPIN_US=${SPIN:-50} $M mount -f -o follow_caller=off,threads=1 /dev/shm/ab.pool $MNT 2>/dev/null & ;;
   yspin) MANYFS_SPIN_YIELD=1 MANYFS_SPIN_US=${SPIN:-50} $M mount -f -o follow_caller=off /dev/shm/ab.pool $MNT 2>/dev/null & ;;
   spin) MANYFS_SPIN_US=${SPIN:-50} $M mount -f -o follow_caller=off /dev/shm/ab.pool $MNT 2>/dev/null & ;;
  esac
  for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
  out=$($M bench -w ${W:-DWOM,DRBM} -t dir:$MNT --threads ${THREADS:-1} --duration 2s --no-membw $BENCH_OPTS 2>&1 | grep -E "^(DWOM|DWOL|DRBM) " | awk '{print $1, $3, $4, $6}' | tr '\n' ' ')
  echo "$r $t $out"
  fusermount3 -u $MNT; wait
 done
done
