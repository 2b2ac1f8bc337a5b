#!/bin/bash
# usage: loop.sh BIN_DIR|tmpfs N SHELL -> seconds for N rounds of
#   echo $i > DIR/f$i; cat DIR/f$i > /dev/null
# under `manyfs run` (each command mounts the pool in turn) or on tmpfs.
B=$1; N=$2; SH=${3:-bash}
rm -rf /dev/shm/loop; mkdir -p /dev/shm/loop/d
body="for i in \$(seq $N); do echo \$i > /dev/shm/loop/d/f\$i; cat /dev/shm/loop/d/f\$i > /dev/null; done"
start=$(date +%s.%N)
if [ "$B" = tmpfs ]; then
  $SH -c "$body"
else
  $B/manyfs run --pool /dev/shm/loop/p.pool --at /dev/shm/loop/d --size 1G -- $SH -c "$body"
fi
end=$(date +%s.%N)
echo "$end - $start" | bc
