//! The sync engine: one memory store as a local folder, kept in sync both ways.
//!
//! - [`allocator`] — the allocator setting of the sandbox side's processes.
//! - [`fs`] — the confined local folder: relative paths that cannot escape, no-follow opens,
//!   atomic writes, a stat cache for hashing.
//! - [`sync`] — the engine ([`StoreSync`]): mount, sync (the reconciliation table of
//!   `sync::plan` as a pure function), flush, dispose, the journal, the watcher, live sync and
//!   the bounded teardown shared by `mnemo mount` and the worker.
//!
//! Memory folders on disk are touched only through [`fs`]'s confinement: by this engine, and by
//! the worker's file tools, which edit the same folders.
//!
//! ```text
//!  agent's file tools ── edit ──▶ DIR/ (files 0600, marker .anthropic-memory-store)
//!                                  ▲ scan/hash (inotify hints)   │ pull (write_if_unchanged)
//!                                  │                              ▼
//!                 StoreSync ── sync::plan per path ── mnemo-client ──▶ /v1/memory_stores/…
//!                                  │
//!                                  └── journal beside DIR (.DIR.mnemo-journal)
//! ```

pub mod allocator;
pub mod fs;
pub mod sync;

pub use sync::adopt::{Adoption, Conflict, Kept, record_path as adopt_record_path};
pub use sync::teardown::{TEARDOWN_BOUND, TEARDOWN_CONCURRENCY, Teardown, TeardownSteps, teardown, teardown_pipelined};
pub use sync::{
    DeletionMode, FULL_WALK_EVERY, FullSyncTicks, LIVE_FULL_SYNC_EVERY, Live, LivePaths, LiveWork, MountError,
    ProgressFn, StoreConfig, StoreSync, SyncError, SyncReport,
};
