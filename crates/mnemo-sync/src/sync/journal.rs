//! The durable journal: what a mount must remember to survive a kill -9.
//!
//! After every download, sync and flush the engine writes its state — the baseline, the
//! unsettled sends, the refusals and the pending deletes — to a file *next to* the folder (never
//! inside it, where the agent could edit it and where it would be synced) with
//! [`crate::fs::atomic_write`]'s sequence: temp file, fsync, rename, fsync of the parent. `mnemo mount --resume` reads it back, so edits made while the
//! mount was down are uploaded and nothing is re-downloaded over them. A folder without a
//! journal naming the same store and folder is still refused.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::State;
use crate::fs::{Durability, RelPath, atomic_write_with};

const FORMAT: u32 = 1;

/// Why a journal could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("no journal at {0}")]
    Missing(PathBuf),
    #[error("cannot read the journal {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("the journal {path} belongs to {other}, not to this store and folder")]
    Foreign { path: PathBuf, other: String },
    #[error("cannot write the journal {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

#[derive(Debug, Serialize, Deserialize)]
struct OnDisk {
    format: u32,
    memory_store_id: String,
    root: PathBuf,
    baseline: BTreeMap<String, String>,
    unsettled: BTreeMap<String, String>,
    refused: BTreeMap<String, String>,
    /// Path → milliseconds since the Unix epoch when it was first seen missing.
    pending_deletes: BTreeMap<String, u64>,
}

/// Where the journal of the folder `root` lives: `.<folder name>.mnemo-journal` beside it.
pub fn journal_path(root: &Path) -> PathBuf {
    let name = root.file_name().map_or_else(|| "root".into(), |n| n.to_string_lossy().into_owned());
    root.with_file_name(format!(".{name}.mnemo-journal"))
}

fn rel_map(map: impl IntoIterator<Item = (String, String)>) -> impl Iterator<Item = (RelPath, String)> {
    map.into_iter().filter_map(|(k, v)| RelPath::parse(&k).ok().map(|k| (k, v)))
}

/// Writes the state durably: temp file, fsync, rename, fsync of the parent.
pub(crate) fn save(root: &Path, store_id: &str, state: &State) -> Result<(), JournalError> {
    write(root, store_id, state, Durability::Durable, || true).map(drop)
}

/// Writes the state with [`atomic_write_with`]: `before_rename` runs once the temp file is
/// written (with [`Durability::FlushedByCaller`], the caller flushes it there) and may call the
/// write off (`Ok(false)`).
pub(crate) fn write(
    root: &Path,
    store_id: &str,
    state: &State,
    durability: Durability,
    before_rename: impl FnOnce() -> bool,
) -> Result<bool, JournalError> {
    let path = journal_path(root);
    let bytes = encode(root, store_id, state);
    atomic_write_with(&path, &bytes, durability, before_rename).map_err(|source| JournalError::Write { path, source })
}

/// The journal's bytes for `state`.
fn encode(root: &Path, store_id: &str, state: &State) -> Vec<u8> {
    let now_wall = SystemTime::now();
    let now = Instant::now();
    let on_disk = OnDisk {
        format: FORMAT,
        memory_store_id: store_id.to_owned(),
        root: root.to_owned(),
        baseline: state.baseline.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        unsettled: state.unsettled.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        refused: state.refused.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        pending_deletes: state
            .pending_deletes
            .iter()
            .map(|(k, since)| {
                let wall = now_wall - now.saturating_duration_since(*since);
                (k.to_string(), wall.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64)
            })
            .collect(),
    };
    serde_json::to_vec(&on_disk).expect("the journal serialises")
}

/// Reads the state of `root` back, if the journal names this store and folder.
pub(crate) fn load(root: &Path, store_id: &str) -> Result<State, JournalError> {
    let path = journal_path(root);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(JournalError::Missing(path));
        }
        Err(e) => {
            return Err(JournalError::Unreadable { path, reason: e.to_string() });
        }
    };
    let on_disk: OnDisk = serde_json::from_slice(&bytes)
        .map_err(|e| JournalError::Unreadable { path: path.clone(), reason: e.to_string() })?;
    if on_disk.format != FORMAT {
        return Err(JournalError::Unreadable { path, reason: format!("unknown format {}", on_disk.format) });
    }
    if on_disk.memory_store_id != store_id || on_disk.root != root {
        let other = format!("{} at {}", on_disk.memory_store_id, on_disk.root.display());
        return Err(JournalError::Foreign { path, other });
    }
    let now_wall = SystemTime::now();
    let now = Instant::now();
    let pending_deletes: HashMap<RelPath, Instant> = on_disk
        .pending_deletes
        .into_iter()
        .filter_map(|(k, ms)| {
            let rel = RelPath::parse(&k).ok()?;
            let since = UNIX_EPOCH + Duration::from_millis(ms);
            let ago = now_wall.duration_since(since).unwrap_or_default();
            Some((rel, now.checked_sub(ago).unwrap_or(now)))
        })
        .collect();
    Ok(State {
        baseline: rel_map(on_disk.baseline).collect(),
        unsettled: rel_map(on_disk.unsettled).collect(),
        refused: rel_map(on_disk.refused).collect(),
        pending_deletes,
    })
}

/// Removes the journal (after a clean teardown).
pub(crate) fn remove(root: &Path) {
    let _ = std::fs::remove_file(journal_path(root));
}
