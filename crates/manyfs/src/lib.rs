//! manyfs: a user-space file system for persistent memory that keeps scaling
//! when many threads share one file.
//!
//! Start with [`Fs::mkfs`] or [`Fs::mount`], then use [`Fs::open`] and the
//! returned [`File`] from as many threads as you like.

pub mod alloc;
pub mod cpu;
pub mod error;
pub mod index;
pub mod layout;
pub mod lock;
pub mod media;
pub mod sync;
pub mod time;

pub use error::{Error, Result};
