#!/bin/bash
# fioab.sh ROUNDS RW JOBS BIN... : fresh mount per point, uring=off, alternating
R=$1 RW=$2 J=$3; shift 3
MNT=/tmp/fw/mnt-fio; mkdir -p $MNT; POOL=/dev/shm/fw-fio.pool
for i in $(seq $R); do for b in "$@"; do
  if [ $b = memfs ]; then /tmp/peers/out/memfs_ll -o fuse_dio -o clone_fd $MNT; else rm -f $POOL; $b mkfs $POOL --size 2G >/dev/null; $b mount $POOL $MNT -o uring=off; fi
  sleep 0.3
  r=$(fio --name=s --filename=$MNT/shared --rw=$RW --bs=4k --direct=1 --ioengine=psync --numjobs=$J --size=32M --offset_increment=32M --time_based --runtime=3 --group_reporting --output-format=terse 2>/dev/null | head -1)
  if [ $RW = randread ]; then f=8; else f=49; fi
  echo "$RW $J $(basename $b) $(cut -d';' -f$f <<<"$r") load=$(cut -d' ' -f1 /proc/loadavg)"
  umount $MNT; rm -f $POOL; sleep 0.5
done; done
