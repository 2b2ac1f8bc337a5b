#!/usr/bin/env bash
# Ran against the trial build that moved the serving threads to a lone caller's CPU
# (not kept): prints where the caller and the serving threads run and may run.
M=/work/main/target/release/manyfs; MNT=/tmp/ab/mnt; mkdir -p $MNT
rm -f /dev/shm/ab.pool; $M mkfs /dev/shm/ab.pool --size 1G >/dev/null; $M mount -f /dev/shm/ab.pool $MNT 2>/dev/null & D=$!
for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
$M bench -w DWOM -t dir:$MNT --threads 1 --duration 3s --no-membw --no-pin > /tmp/ab/dbg.out 2>&1 &
B=$!
sleep 1
BP=$(pgrep -f "bench -w DWOM" | head -1)
for i in 1 2 3 4; do sleep 0.3; echo "caller: $(ps -L -o tid=,psr=,comm= -p $BP | tr '\n' ' ') | daemon: $(ps -L -o tid=,psr=,comm= -p $D | grep fuser | tr '\n' ' ')"; for t in $(ps -L -o tid= -p $D); do grep -H Cpus_allowed_list /proc/$D/task/$t/status; done | grep -v "0-1" ; done
wait $B; grep "^DWOM" /tmp/ab/dbg.out | head -1
fusermount3 -u $MNT; wait
