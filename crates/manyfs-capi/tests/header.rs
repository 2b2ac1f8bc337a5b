//! `include/manyfs.h` is what cbindgen generates from this crate today.
//!
//! The header is checked in, so building the library needs no cbindgen and
//! C users find it in the source tree; this test keeps the two from
//! drifting. `MANYFS_BLESS_HEADER=1` rewrites the header instead of
//! comparing.

use std::path::Path;

#[test]
fn header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    // From the source file, not the crate: no `cargo metadata` run.
    let generated = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut fresh = Vec::new();
    generated.write(&mut fresh);
    let path = dir.join("include/manyfs.h");
    if std::env::var_os("MANYFS_BLESS_HEADER").is_some() {
        std::fs::write(&path, &fresh).expect("write include/manyfs.h");
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/manyfs.h is out of date: run `MANYFS_BLESS_HEADER=1 cargo test -p manyfs-capi --test header` and commit it"
    );
}
