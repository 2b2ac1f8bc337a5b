#!/bin/bash
# fio shared-file throughput: manyfs mount (srl-tree and inode lock) vs tmpfs
# and vs bindfs (another multithreaded direct-I/O FUSE file system) over tmpfs.
M=${MANYFS:-target/release/manyfs}
run() { # dir label
  for rw in randwrite randread; do
    for j in 1 2 8; do
      rm -f $1/shared
      r=$(fio --name=s --filename=$1/shared --rw=$rw --bs=4k --direct=1 --ioengine=psync \
            --numjobs=$j --size=32M --offset_increment=32M --time_based --runtime=4 \
            --group_reporting --output-format=terse 2>/dev/null | head -1)
      # terse v3: field 8 = read iops, 49 = write iops
      if [ $rw = randread ]; then iops=$(echo "$r" | cut -d';' -f8); else iops=$(echo "$r" | cut -d';' -f49); fi
      echo "$2 $rw jobs=$j iops=$iops"
    done
  done
}
mkdir -p /tmp/fio-tmpfs /mnt/mfs
mount -t tmpfs -o size=2g fio-tmpfs /tmp/fio-tmpfs
run /tmp/fio-tmpfs tmpfs
# Another FUSE file system doing direct I/O with many threads: bindfs
# (Debian package bindfs) passing the same tmpfs through.
if command -v bindfs >/dev/null; then
  mkdir -p /tmp/fio-bind
  bindfs --multithreaded -o direct_io,forward-odirect=512 /tmp/fio-tmpfs /tmp/fio-bind
  run /tmp/fio-bind bindfs-over-tmpfs
  fusermount3 -u /tmp/fio-bind
fi
umount /tmp/fio-tmpfs
for lock in srl-tree inode; do
  rm -f /tmp/fio.pool
  $M mkfs /tmp/fio.pool --size 2G >/dev/null
  $M mount /tmp/fio.pool /mnt/mfs -o lock=$lock,durability=dram
  run /mnt/mfs manyfs-$lock
  umount /mnt/mfs; sleep 1
done
rm -f /tmp/fio.pool
