#!/bin/bash
# one.sh TARGET(manyfs|memfs) BIN WORKLOAD THREADS [perf args...]: mount, run one FxMark point with perf stat on the daemon
set -u
T=$1 M=$2 W=$3 N=$4; shift 4
MNT=/tmp/fw/mnt-$T; mkdir -p $MNT
POOL=${POOLDIR:-/dev/shm}/fw-$T.pool
if [ $T = manyfs ]; then rm -f $POOL; $M mkfs $POOL --size 2G >/dev/null; $M mount $POOL $MNT -o ${MOPTS:-uring=off}; PID=$(pgrep -n -f "mount $POOL");
else /tmp/peers/out/memfs_ll -o fuse_dio -o clone_fd $MNT; PID=$(pgrep -n -f "memfs_ll.*$MNT"); fi
sleep 0.3
B=$M
( $B bench -w $W -t dir:$MNT --threads $N --duration ${DUR:-2s} --warmup ${WARM:-200ms} --no-membw --no-pin --json /tmp/fw/$T.json > /tmp/fw/$T.out 2>&1 ) &
BP=$!
sleep ${PDELAY:-0.6}
if [ $# -gt 0 ]; then eval "${1//\{\}/$PID}" 2>&1 | tail -${TAILN:-30}; fi
wait $BP
grep -E "ops_per_sec|p50|p99" /tmp/fw/$T.json | tr -d '\n '; echo
umount $MNT; rm -f $POOL; sleep 0.3
