#!/bin/bash
# usage: rw64.sh BIN_DIR SECS -> IOPS of fio randwrite 1 job, 64 MiB file, under manyfs run (or tmpfs)
B=$1; S=$2
rm -rf /dev/shm/rc; mkdir -p /dev/shm/rc/run
if [ "$B" = tmpfs ]; then
  fio --name=c --directory=/dev/shm/rc/run --filename=shared --size=64M --bs=4k --rw=randwrite --ioengine=psync --thread --numjobs=1 --time_based --runtime=$S --group_reporting | sed -n 's/.*IOPS=\([0-9.k]*\).*/\1/p' | head -1
else
  $B/manyfs run --pool /dev/shm/rc/run.pool --at /dev/shm/rc/run --size 1G -- fio --name=c --directory=/dev/shm/rc/run --filename=shared --size=64M --bs=4k --rw=randwrite --ioengine=psync --thread --numjobs=1 --time_based --runtime=$S --group_reporting | sed -n 's/.*IOPS=\([0-9.k]*\).*/\1/p' | head -1
fi
