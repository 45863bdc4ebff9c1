//! The confined local folder of one memory store.
//!
//! A memory store is materialised as a folder (the *root*) that an untrusted agent edits while the
//! sync engine reads, hashes, writes and removes files in it. Everything here is built so that
//! nothing the agent does inside the root can make the engine touch anything outside it:
//!
//! - [`RelPath`] is parsed once at the edge and can never name the root itself or escape it (no
//!   `..`, `.`, empty segments, absolute paths, backslashes or NUL).
//! - Every operation opens the root by path with `O_DIRECTORY | O_NOFOLLOW` and then walks down
//!   with `openat`-style calls relative to directory fds, never by joining path strings, so a
//!   folder swapped for a symlink mid-walk cannot redirect a read or a write.
//! - Every open uses `O_NOFOLLOW`, and reads also use `O_NONBLOCK` plus an `fstat` check, so a
//!   symlink or FIFO is refused rather than followed or waited on.
//! - Writes go through a temp file in the same directory, are fsynced, renamed over the target and
//!   the directory is fsynced; the root itself is never created by a write.
//!
//! [`FileStore`] is the entry point; [`marker_text`] and [`MARKER_NAME`] describe the marker file
//! that tells the engine a folder belongs to a given store. [`atomic_write`] is the same atomic
//! write for a single file addressed by path outside any folder (the journal beside a folder, the
//! worker's records). [`host`] confines host paths that are not in a store — the agent's working
//! directory, for the worker's file tools — to permitted roots, with the same no-follow opens.

mod atomic;
mod digest;
pub mod host;
mod path;
mod store;
mod sys;
mod walk;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

pub use atomic::{atomic_write, atomic_write_with};
pub use digest::Digest;
pub use path::RelPath;
pub use store::{FileStore, NewFiles};

/// The name of the marker file at the root of every memory store folder.
pub const MARKER_NAME: &str = ".anthropic-memory-store";

/// The exact contents of the marker file for `store_id`: `version 1`, a newline, then the id,
/// with no trailing newline, so that its SHA-256 is stable across writers.
pub fn marker_text(store_id: &str) -> String {
    format!("version 1\n{store_id}")
}

/// How much of an atomic write is on disk when it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// The temp file is fsynced before the rename and its directory after it.
    Durable,
    /// The caller flushes the temp file's bytes itself before the rename (one `syncfs` for a
    /// batch of files); the directory is still fsynced after the rename.
    FlushedByCaller,
    /// The temp file is fsynced before the rename, its directory is not: a crash may lose the
    /// rename (the old file stays, whole, never torn) until the caller fsyncs the folder
    /// ([`FileStore::sync_folder_of`]) before anything relies on the new file.
    BytesOnly,
    /// Nothing is fsynced: a bulk write that ends with one `syncfs` before anything relies on it.
    Deferred,
}

/// One regular file found by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalFile {
    /// SHA-256 of the file's bytes.
    pub sha256: Digest,
    /// The number of bytes that were hashed.
    pub size: u64,
}

/// Whether the root's marker file says the folder belongs to a given store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerState {
    /// The marker is a regular file whose contents are exactly [`marker_text`] for the store.
    Matches,
    /// There is no marker, or no root at all.
    Missing,
    /// Something is there but it is not this store's marker: other contents, a symlink, a FIFO, a
    /// directory, or a file that cannot be read.
    Mismatch,
}

/// Why a file-store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path can never name a file inside the store.
    #[error("path `{path}` {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it, phrased to follow the path (`escapes the store root`).
        reason: &'static str,
    },
    /// The root is gone, or its path is a symlink or something other than a directory.
    #[error("the memory store folder `{}` is missing or is not a real directory", .0.display())]
    RootMissing(PathBuf),
    /// A symlink, FIFO, socket, device or directory is where a regular file (or, for a parent
    /// component, a real directory) was expected; it is refused rather than followed.
    #[error("`{0}` is not a regular file in the store: a symlink, fifo, device or directory is in the way")]
    NotRegular(String),
    /// The store only holds text and these bytes are not valid UTF-8.
    #[error("`{0}` is not valid utf-8 text; only text files can be synced")]
    NotUtf8(String),
    /// The operating system refused an operation.
    #[error("cannot {op} `{path}`: {source}")]
    Io {
        /// What was being done, as a verb phrase (`open`, `create a folder for`).
        op: &'static str,
        /// The path relative to the root (or the root itself) the operation was about.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl FsError {
    /// Whether the error means the file (or one of its folders) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// Whether the operating system said the disk is full (`ENOSPC`, or a quota: `EDQUOT`).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Self::Io { source, .. }
            if matches!(source.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded))
    }

    /// Whether the file itself can never be synced as it is: a bad path, something other than a
    /// regular file, or content that is not UTF-8. Retrying will not help until the file changes.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::InvalidPath { .. } | Self::NotRegular(_) | Self::NotUtf8(_))
    }
}
