#!/bin/bash
# usage: fuse-rw1.sh MANYFS_BIN -> fio randwrite 1 job IOPS through a fresh mount
M=$1; W=$(mktemp -d /dev/shm/frw.XXXX); mkdir $W/mnt
$M mkfs $W/p --size 2G >/dev/null && $M mount $W/p $W/mnt || exit 1
fio --name=c --directory=$W/mnt --filename=shared --size=32M --bs=4k --rw=${RW:-randwrite} --ioengine=psync --direct=1 --thread --numjobs=1 --time_based --runtime=${SECS:-4} --group_reporting 2>/dev/null | sed -n 's/.*IOPS=\([0-9.k]*\).*/\1/p' | head -1
fusermount3 -u $W/mnt; rm -rf $W
