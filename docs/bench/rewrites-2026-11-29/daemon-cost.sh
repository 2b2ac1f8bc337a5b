#!/bin/bash
# daemon-cost.sh manyfs|memfs -> DWOM 1 thread through the mount; daemon CPU per op
M=${MANYFS:-target/release/manyfs}; W=/dev/shm/dc; rm -rf $W; mkdir -p $W/mnt
if [ "$1" = memfs ]; then ${PEERS:-/tmp/peers/out}/memfs_ll -o fuse_dio -o clone_fd $W/mnt & sleep 1; pid=$(pgrep -n memfs_ll)
else $M mkfs $W/p --size 2G >/dev/null && $M mount ${2:+-o $2} $W/p $W/mnt && pid=$(pgrep -n -f "manyfs mount"); fi
( $M bench -w DWOM -t dir:$W/mnt --threads 1 --duration 5s --warmup 1s --no-membw 2>&1 | grep -E "^DWOM +dir" > $W/out & )
sleep 2.5
perf stat -x, -e task-clock,context-switches -p $pid -- sleep 2 2> $W/stat
sleep 3
ops=$(awk '{print $4}' $W/out | head -1); p50=$(awk '{print $6}' $W/out | head -1)
tc=$(grep task-clock $W/stat | cut -d, -f1); cs=$(grep context-switches $W/stat | cut -d, -f1)
echo "$1 ops=$ops p50=$p50 daemon_ms_per_2s=$tc cs=$cs"
fusermount3 -u $W/mnt; sleep 0.5; rm -rf $W
