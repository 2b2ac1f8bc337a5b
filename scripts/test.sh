#!/usr/bin/env bash
# The whole test suite: what CI runs (.ci/run calls exactly this).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The library's public boundary is documented and its modules form layers;
# the other library crates' docs build without broken links as well.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet -p manyfs -p manyfs-fuse -p manyfs-bench -p manyfs-crashtest
bash scripts/module-graph.sh > /dev/null
cargo test --workspace
# Model-checked concurrency, compiled against shuttle's scheduler: the lock
# word, SRL and the big-reader lock (manyfs-rangelock), the index trees
# (manyfs-index), the log append and the name table (manyfs).
cargo test -p manyfs-rangelock -p manyfs-index -p manyfs --features shuttle --lib shuttle_models
# POSIX conformance of a FUSE mount (pjdfstest, as root; see docs/mount.md).
bash scripts/pjdfstest.sh
