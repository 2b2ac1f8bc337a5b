//! Diagnostics of the mount daemon: `tracing` events written to stderr.
//!
//! Off unless asked for: `-o debug` turns on `debug` level for manyfs (the
//! library and this adapter); `RUST_LOG` (an `EnvFilter` directive such as
//! `manyfs_fuse=debug` or `info`) chooses the levels itself and wins over
//! `-o debug`.
//!
//! What is logged: mount and unmount (`info`), each request that fails
//! with an error from the library (`debug`), and handler panics (`error`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The filter `-o debug` stands for when `RUST_LOG` is not set.
const DEBUG_FILTER: &str = "manyfs=debug,manyfs_fuse=debug";

/// Whether the daemon will log: `-o debug` was given or `RUST_LOG` is set.
pub fn wanted(debug: bool) -> bool {
    debug || std::env::var_os(EnvFilter::DEFAULT_ENV).is_some_and(|v| !v.is_empty())
}

/// Install the stderr subscriber if [`wanted`]. Does nothing when logging
/// is off or a global subscriber is already installed (an embedding
/// program's own).
pub fn init(debug: bool) {
    if !wanted(debug) {
        return;
    }
    let filter = match std::env::var(EnvFilter::DEFAULT_ENV) {
        Ok(v) if !v.is_empty() => EnvFilter::try_new(&v).unwrap_or_else(|e| {
            eprintln!("manyfs: ignoring RUST_LOG={v:?} ({e}); using {DEBUG_FILTER}");
            EnvFilter::new(DEBUG_FILTER)
        }),
        _ => EnvFilter::new(DEBUG_FILTER),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_thread_names(true)
        .try_init();
}
