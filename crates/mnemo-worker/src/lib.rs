//! The worker: claims session work items from an environment's queue, mounts the session's
//! memory stores through the sync engine, runs the agent's tool calls, and tears down cleanly.
//!
//! - [`poller`] — the poll loop (in-process, or an `--on-work` script per item).
//! - [`item`] — one item from claim to stop: credential, heartbeat, session, memory, tools,
//!   teardown.
//! - [`lease`] — the heartbeat loop and why a lease ended.
//! - [`memory`] — the session's stores as folders, through `mnemo-sync`, with crash recovery.
//! - [`runner`] — the session tool runner: event stream, history reconcile, routing,
//!   confirmations, result posting, the idle watchdog.
//! - [`hardening`] — the worker makes itself non-dumpable; the name of its sealed-credentials
//!   descriptor.
//! - [`tools`] — the built-in toolset (bash, read, write, edit, glob, grep), confined to the
//!   working directory and the memory folders by `mnemo_sync::fs::host`, the confinement the
//!   sync engine's folders use too.
//!
//! One item, from claim to stop:
//!
//! ```text
//!  poller (environment key) ── poll/ack ──▶ /v1/environments/{id}/work
//!     │ one item at a time
//!     ▼
//!  item ── lease (heartbeat task, sessions token) ──▶ …/work/{id}/heartbeat
//!     │  GET /v1/sessions/{id}
//!     ├── skills ──▶ <workdir>/skills (removed at the end)
//!     ├── memory ── one mnemo_sync::StoreSync per store ──▶ /v1/memory_stores/…
//!     ├── runner (event stream + history reconcile + routing; idle watchdog)
//!     │      │ tool calls, one at a time            ▲ user.tool_result
//!     │      ▼                                      │
//!     │   tools (bash in its own namespaces; file tools confined) ── then memory's due syncs
//!     └── teardown: per store final sync → flush → dispose; then stop the item
//!         (unless the lease was lost)
//! ```

pub mod config;
mod error;
pub mod hardening;
pub mod item;
pub mod lease;
pub mod memory;
pub mod poller;
pub mod runner;
pub mod skills;
pub mod tools;

pub use config::WorkerConfig;
pub use error::WorkerError;
