//! One memory store as one self-describing file, and back: `mnemo store export` and
//! `mnemo store import`.
//!
//! - [`format`](mod@format) — the file (JSON Lines: header, one line per live memory, optional history,
//!   trailer with counts) and [`ExportFile::read`], which refuses an unknown, newer, truncated
//!   or damaged file before anything is written.
//! - [`export()`] — reads a store through [`mnemo_client::Client`] and writes the lines.
//! - [`plan`] — what an import does with each memory, as a pure function of the store's listing.
//! - [`import()`] — recreates the live memories: idempotent, resumable, conflicts reported
//!   rather than overwritten, [`IMPORT_CONCURRENCY`] uploads in flight.
//!
//! Both work against `mnemo serve` and the hosted API alike: they use the public endpoints only.
//! This crate writes no file and draws no progress bar itself: its callers choose where the
//! lines go (stdout, or an atomic write) and how progress shows.

pub mod export;
pub mod format;
pub mod import;
pub mod plan;

use futures::StreamExt;
use futures::stream::BoxStream;
use mnemo_api::MemoryStoreId;
use mnemo_client::ClientError;

pub use export::{ExportOptions, ExportSummary, export};
pub use format::{Contents, ExportFile, FileError, MemoryEntry, MemoryIndex};
pub use import::{ImportOptions, ImportReport, Target, import, open_target};

/// Memories uploaded at once by an import.
pub const IMPORT_CONCURRENCY: usize = 8;

/// A failed export or import (file problems are [`FileError`]s, found before this point).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the server failed; `what` says which, the message says why in plain words
    /// (so the client's error is not a `source`: its text would only repeat them).
    #[error("cannot {what}: {}", plain(.error))]
    Call { what: String, error: Box<ClientError> },
    #[error("memory store {0} not found (check the id, the --base-url and that the API key belongs there)")]
    StoreNotFound(MemoryStoreId),
    #[error(
        "memory store {0} is archived: its memories cannot be created or updated; import into another store (--into) or a new one"
    )]
    Archived(MemoryStoreId),
    /// The server answered something an export cannot stand behind (a digest that does not
    /// match the content, a memory listed twice).
    #[error("the server's answer is inconsistent: {0}")]
    Inconsistent(String),
    /// A value the store would refuse (a `--name` that is not a valid store name…).
    #[error("{0}")]
    Invalid(String),
    /// Writing the lines failed (a full disk, a closed pipe).
    #[error("cannot write the export")]
    Write(#[source] std::io::Error),
    /// Reading the file again, as its memories are imported, failed (it changed meanwhile).
    #[error("{0}")]
    File(FileError),
}

/// The memories of a checked file read again on a thread of their own (the reading blocks),
/// handed over at most `depth` ahead of the import, so that only a few contents are in memory
/// at once. The thread ends when the stream is dropped.
pub fn read_contents<R>(contents: Contents<R>, depth: usize) -> BoxStream<'static, Result<MemoryEntry, FileError>>
where
    R: std::io::BufRead + Send + 'static,
{
    let (mut tx, rx) = futures::channel::mpsc::channel(depth.max(1));
    std::thread::spawn(move || {
        for item in contents {
            // The receiver is gone: the import ended.
            if futures::executor::block_on(futures::SinkExt::send(&mut tx, item)).is_err() {
                break;
            }
        }
    });
    rx.boxed()
}

impl Error {
    pub(crate) fn call(what: impl Into<String>) -> impl FnOnce(ClientError) -> Self {
        let what = what.into();
        move |error| Self::Call { what, error: Box::new(error) }
    }
}

/// A failed call in plain words, with what to do where there is something to do. Never holds
/// a credential: the client's errors carry none.
pub fn plain(e: &ClientError) -> String {
    let message = match e {
        ClientError::Api { error, .. } => error.message.as_str(),
        _ => "",
    };
    let request = match e {
        ClientError::Api { request_id: Some(id), .. } => format!(" (request {id})"),
        _ => String::new(),
    };
    match e {
        ClientError::Transport(source) => {
            let mut out = format!("the server could not be reached ({source}");
            let mut next = std::error::Error::source(source);
            while let Some(cause) = next {
                out.push_str(&format!(": {cause}"));
                next = cause.source();
            }
            out + "); check --base-url and the network, then run the command again"
        }
        _ => match e.status() {
            Some(401) => format!(
                "the server refused the API key (401: {message}); pass a key of that server with --api-key or ANTHROPIC_API_KEY"
            ),
            Some(403) => format!("the API key may not do this (403: {message}){request}"),
            Some(404) => format!("not found (404: {message})"),
            Some(413) => format!("the server refused it as too large (413: {message})"),
            Some(429) => {
                format!("the server kept refusing with 429 (rate limited: {message}); run the command again later")
            }
            Some(s) if s >= 500 => format!("the server failed ({s}: {message}){request}; run the command again"),
            _ => e.to_string(),
        },
    }
}
