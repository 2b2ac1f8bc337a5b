//! Benchmarks for manyfs: the FxMark workloads of the SRL-NOVA (segment
//! range lock) paper (plus a read/write mix and HACC-IO's N-to-1 checkpoint)
//! against in-process manyfs with each range lock and against any directory, a memory-bandwidth
//! reference, and range-lock microbenchmarks.
//!
//! `manyfs bench` is a thin command-line layer over [`run`],
//! [`report::table`], [`report::write_json`], [`plot::write_plot`] and
//! [`locks::run_locks`].

#![warn(missing_docs)]

pub mod backend;
pub mod error;
pub mod index;
pub mod locks;
pub mod plot;
pub mod report;
pub mod reproduce;
pub mod runner;
pub mod sys;
pub mod target;
pub mod workload;

pub use error::{BenchError, Result};
pub use runner::{Config, PlacementLog, Record, Series, run, run_point, run_series};
pub use target::{PoolConfig, Target, TargetEnv};
pub use workload::Workload;
