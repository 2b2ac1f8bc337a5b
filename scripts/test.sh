#!/usr/bin/env bash
# The whole test suite: what CI runs (.ci/run calls exactly this).
set -euo pipefail
cd "$(dirname "$0")/.."

# CI builds a fresh clone once: incremental compilation only adds work
# there (about 15% of the test build's CPU time on two cores).
if [[ -n ${CI:-} ]]; then
    export CARGO_INCREMENTAL=0
fi

# Each step's wall time goes to stderr, so a slow CI run says where.
step() {
    local start=$SECONDS
    "$@"
    echo "test.sh: ${SECONDS}s total, $((SECONDS - start))s: $*" >&2
}

step bash scripts/install-deps.sh
step cargo fmt --all --check
step cargo clippy --workspace --all-targets --quiet -- -D warnings
# The minimum supported Rust version (rust-version in Cargo.toml) still
# builds every target: its toolchain is installed once, then reused.
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
[[ $msrv == *.*.* ]] || msrv="$msrv.0"
# When the default toolchain is that version, the builds below already
# prove it; otherwise check with it.
if [[ $(rustc --version) != "rustc $msrv "* ]]; then
    rustup run "$msrv" rustc --version >/dev/null 2>&1 ||
        rustup toolchain install "$msrv" --profile minimal --no-self-update
    step cargo "+$msrv" check --workspace --all-targets --quiet
fi
# The fuzz targets (their own workspace; run with cargo-fuzz on nightly)
# build on stable (without compiling libFuzzer, which only `cargo fuzz`
# links).
step cargo check --manifest-path fuzz/Cargo.toml --bins --no-default-features --quiet
# The vendored fuser is not a member (its lints and format are its own),
# so its unit tests, manyfs's worker pool among them
# (vendor/fuser/src/workers.rs), run here.
step cargo test --manifest-path vendor/fuser/Cargo.toml --lib --quiet
# The library's public boundary is documented and its modules form layers;
# the other library crates' docs build without broken links as well.
# manyfs-capi's library is also named `manyfs` (libmanyfs.so): documented
# on its own, first, so the library's pages are the ones left in target/doc.
step env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet -p manyfs-capi
step env RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet -p manyfs -p manyfs-sync -p manyfs-rangelock -p manyfs-index -p manyfs-fuse -p manyfs-bench -p manyfs-crashtest -p manyfs-exec
# No cycle among any module's children, re-exports followed; inherent
# impls beside their types (xtask/src/layers.rs).
step cargo run -q -p xtask -- layers > /dev/null
# Every test binary, built once (not the examples: clippy checked them
# above, and cargo test would also link them). The crash explorer
# (CPU-bound, about 80 s on two cores) then runs beside the rest of the
# suite, whose tests mostly wait on mounts, processes and the disk; there
# its tests are skipped (they are all named `crash_explorer::...`).
step cargo test --workspace --lib --bins --tests --no-run --quiet
# pjdfstest's own build (about 30 s of CPU) overlaps the suite too; it
# runs at the end.
bash scripts/pjdfstest.sh --install > target/pjdfstest-install.log 2>&1 &
pjdfstest_install=$!
explorer=$(cargo test --workspace --test crash_explorer --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\/crash_explorer-[^"]*\)".*/\1/p' | tail -n 1)
[[ -x $explorer ]] || { echo "test.sh: the crash explorer's test binary was not built" >&2; exit 1; }
explorer_log="$PWD/target/crash-explorer.log"
(cd crates/manyfs-crashtest && exec "$explorer") > "$explorer_log" 2>&1 &
explorer_pid=$!
trap 'kill "$explorer_pid" "$pjdfstest_install" 2>/dev/null || true' EXIT
step cargo test --workspace --lib --bins --tests -- --skip crash_explorer::
step cargo test --workspace --doc --quiet
explorer_start=$SECONDS
if ! wait "$explorer_pid"; then
    cat "$explorer_log" >&2
    echo "test.sh: the crash explorer failed (above)" >&2
    exit 1
fi
grep "^test result" "$explorer_log"
echo "test.sh: ${SECONDS}s total, $((SECONDS - explorer_start))s: waiting for the crash explorer (tests/crash_explorer.rs)" >&2
trap - EXIT
if ! wait "$pjdfstest_install"; then
    cat target/pjdfstest-install.log >&2
    echo "test.sh: installing pjdfstest failed (above)" >&2
    exit 1
fi
# POSIX conformance of a FUSE mount (pjdfstest, as root; see docs/mount.md),
# through the manyfs binary `cargo test` built; it mostly waits on the
# mount, so it runs beside the CPU-bound shuttle build below.
pjdfstest_log="$PWD/target/pjdfstest.log"
pjdfstest_start=$SECONDS
env MANYFS="$PWD/target/debug/manyfs" bash scripts/pjdfstest.sh > "$pjdfstest_log" 2>&1 &
pjdfstest_pid=$!
trap 'kill "$pjdfstest_pid" 2>/dev/null || true' EXIT
# Model-checked concurrency, compiled against shuttle's scheduler: the FUSE
# serving threads' gate (manyfs-sync), the lock word, SRL and the
# big-reader lock (manyfs-rangelock), the index trees (manyfs-index), the
# log append and the name table (manyfs).
step cargo test -p manyfs-sync -p manyfs-rangelock -p manyfs-index -p manyfs --features shuttle --lib shuttle_models
if ! wait "$pjdfstest_pid"; then
    cat "$pjdfstest_log" >&2
    echo "test.sh: pjdfstest failed (above)" >&2
    exit 1
fi
trap - EXIT
cat "$pjdfstest_log"
echo "test.sh: ${SECONDS}s total, $((SECONDS - pjdfstest_start))s since it started: pjdfstest (scripts/pjdfstest.sh)" >&2
