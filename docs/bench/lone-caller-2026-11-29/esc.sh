#!/usr/bin/env bash
# The daemon confined to CPU 0, the caller started there and then freed: does it stay?
# daemon pinned to CPU0; caller started on CPU0 then freed: does it stay?
M=/work/main/target/release/manyfs; MNT=/tmp/ab/mnt; mkdir -p $MNT
rm -f /dev/shm/ab.pool; $M mkfs /dev/shm/ab.pool --size 1G >/dev/null; taskset -c 0 $M mount -f /dev/shm/ab.pool $MNT 2>/dev/null & 
for i in $(seq 50); do mountpoint -q $MNT && break; sleep 0.1; done
taskset -c 0 $M bench -w DWOM -t dir:$MNT --threads 1 --duration 4s --no-membw --no-pin > /tmp/ab/esc.out 2>&1 &
B=$!
sleep 0.5
BP=$(pgrep -f "bench -w DWOM" | head -1)
for t in /proc/$BP/task/*; do taskset -p -c 0,1 $(basename $t) >/dev/null; done
for i in 1 2 3 4 5 6; do sleep 0.5; echo "psr: $(ps -L -o psr=,comm= -p $BP | tr '\n' ' ')"; done
wait $B; grep "^DWOM" /tmp/ab/esc.out
fusermount3 -u $MNT; wait
