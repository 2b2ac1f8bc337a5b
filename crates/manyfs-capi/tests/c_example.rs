//! `examples/c/checkpoint.c`, compiled with the system C compiler against
//! `include/manyfs.h` and this crate's static library, runs and verifies.

use std::path::PathBuf;
use std::process::Command;

/// `libmanyfs.a` as cargo built it for this test run: the library target is
/// built (with all its crate types) before the tests that link it, into
/// the directory that holds the test binaries.
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let lib = exe.parent().expect("deps directory").join("libmanyfs.a");
    assert!(lib.is_file(), "{} is missing", lib.display());
    lib
}

#[test]
fn checkpoint_example_compiles_runs_and_verifies() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().expect("temporary directory");
    let exe = work.path().join("checkpoint");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args([
            "-std=c11",
            "-D_DEFAULT_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-O1",
        ])
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("examples/c/checkpoint.c"))
        .arg(staticlib())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("running {cc} (scripts/install-deps.sh installs gcc): {e}"));
    assert!(
        built.status.success(),
        "{cc} failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let run = Command::new(&exe)
        .arg(work.path())
        .output()
        .expect("run checkpoint");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "checkpoint exited with {}:\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        stdout,
        "mkfs: 64 MiB pool\n\
         wrote: 4 threads x 16 blocks of 4096 bytes\n\
         synced and unmounted\n\
         verified: 64 blocks after remount\n\
         readdir /: checkpoint (file)\n\
         unlinked: /checkpoint\n\
         checkpoint: OK\n"
    );
    assert!(
        !work.path().join("pool").exists(),
        "the example removes its pool"
    );
}
