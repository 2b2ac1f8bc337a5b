#!/bin/bash
# ab.sh ROUNDS WORKLOAD THREADS SPEC...   SPEC = label:bin:opts  or memfs
R=$1 W=$2 N=$3; shift 3
for i in $(seq $R); do for s in "$@"; do
  if [ $s = memfs ]; then r=$(./one.sh memfs /tmp/fw/manyfs-base $W $N 2>&1); l=memfs
  else IFS=: read l b o e <<<"$s"; r=$(env $e MOPTS=$o ./one.sh manyfs $b $W $N 2>&1); fi
  echo "$W $N $l $(echo "$r" | grep -o '"ops_per_sec":[0-9.]*,"p50_ns":[0-9]*,"p99_ns":[0-9]*' | sed 's/"ops_per_sec"://; s/"p50_ns"://; s/"p99_ns"://' | awk -F, '{printf "%.0f %d %d", $1, $2, $3}') load=$(cut -d' ' -f1 /proc/loadavg)"
done; done
