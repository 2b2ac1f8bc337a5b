# Sourced by scripts/run-compare.sh and scripts/dbbench-compare.sh: the same
# workload three ways, one table row each, through the caller's
# `row NAME DIR [PREFIX...]`: `manyfs run` (the pool in the program's
# process), the FUSE mount, and tmpfs. Needs `$manyfs`, `$work` (with a
# `tmpfs` directory) and `$mnt` set by the caller.
#
#   table_head "WORKLOAD..." UNIT COUNT...   the table's first two lines
#   three_ways POOL_SIZE
table_head() {
    local workloads=$1 unit=$2 w n head="| where |" rule="|---|"
    shift 2
    for w in $workloads; do
        for n in "$@"; do
            head+=" $w $n $unit$([ "$n" = 1 ] || echo s) |"
            rule+="---|"
        done
    done
    echo "$head"
    echo "$rule"
}
three_ways() {
    local size=$1
    row "manyfs run" "$work/run" "$manyfs" run --pool "$work/run.pool" --at "$work/run" \
        --size "$size" --
    "$manyfs" mkfs "$work/fuse.pool" --size "$size" >/dev/null
    "$manyfs" mount "$work/fuse.pool" "$mnt"
    row "FUSE mount" "$mnt"
    fusermount3 -u "$mnt"
    row "tmpfs" "$work/tmpfs"
}
