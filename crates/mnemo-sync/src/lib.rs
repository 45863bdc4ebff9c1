//! The sync engine: one memory store as a local folder, kept in sync both ways.
//!
//! - [`allocator`] — the allocator setting of the sandbox side's processes.
//! - [`fs`] — the confined local folder: relative paths that cannot escape, no-follow opens,
//!   atomic writes, a stat cache for hashing.
//!
//! This is the only crate that touches memory folders on disk.

pub mod allocator;
pub mod fs;
pub mod sync;

pub use sync::teardown::{TEARDOWN_BOUND, TEARDOWN_CONCURRENCY, Teardown, TeardownSteps, teardown, teardown_pipelined};
pub use sync::{
    DeletionMode, FULL_WALK_EVERY, Live, LivePaths, LiveWork, MountError, ProgressFn, StoreConfig, StoreSync,
    SyncError, SyncReport,
};
