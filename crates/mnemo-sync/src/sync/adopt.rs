//! Adopting a folder that already holds files (`mnemo mount --adopt DIR`): Claude Code's memory
//! folder, a notes folder. What the store lacks is uploaded and what the folder lacks is pulled
//! by the first sync, as for any mount with no history. A path on both sides with different bytes
//! follows the store-wins rule without losing the local bytes: they are written to the store
//! first, as a version of that memory, and the store's bytes written back over them, so the
//! history holds both and the folder ends with the store's. Symlinks, FIFOs, sockets and devices
//! are never read or touched (and are reported).
//!
//! A kill between those two writes must not leave the local bytes as the memory's newest
//! version (which would invert the rule): before the first write, the store's bytes are recorded
//! durably beside the folder ([`record_path`]), and an adoption that finds a record finishes it
//! before anything else. Everything else an adoption does is idempotent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mnemo_api::{MemoryId, MemoryVersionId, Precondition, UpdateMemory, View};
use mnemo_client::Client;
use serde::{Deserialize, Serialize};

use super::{MountError, State, StoreConfig, StoreSync, SyncError, blocking, marker_reason};
use crate::fs::{Digest, FileStore, MarkerState, RelPath, atomic_write};

/// What adopting a folder did before its first sync.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Adoption {
    /// Paths whose bytes differed on both sides, by memory path.
    pub conflicts: Vec<Conflict>,
    /// Entries under the folder that are neither files nor folders (symlinks, FIFOs, sockets,
    /// devices), relative to it: never read, never changed, never uploaded.
    pub left_alone: Vec<PathBuf>,
}

/// One path on both sides with different bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The memory's path (`/notes/a.md`).
    pub path: String,
    /// Where the local bytes went: the memory version holding them, or — when the store would
    /// not take them (not UTF-8, too large) — the local file they were moved to.
    pub local: Kept,
}

/// Where a conflict's local bytes are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    Version(MemoryVersionId),
    File(PathBuf),
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.local {
            Kept::Version(v) => write!(
                f,
                "{}: differed from the store; the store's version stays, the local bytes are kept as version {v}",
                self.path
            ),
            Kept::File(at) => write!(
                f,
                "{}: differed from the store, which would not take the local bytes; they are kept in {}",
                self.path,
                at.display()
            ),
        }
    }
}

/// The store's bytes of the conflicts being resolved, recorded before the local bytes are
/// written over them.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    store_id: String,
    /// By memory id: the store's content to write back, and the digest of the local bytes
    /// written over it.
    pending: BTreeMap<String, Pending>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pending {
    path: String,
    store_content: String,
    store_sha256: String,
    local_sha256: String,
}

/// Where an adoption in progress records the store's bytes: beside the folder, like its journal.
pub fn record_path(root: &Path) -> PathBuf {
    let name = root.file_name().map_or_else(|| "root".into(), |n| n.to_string_lossy().into_owned());
    root.with_file_name(format!(".{name}.mnemo-adopt"))
}

impl StoreSync {
    /// Takes over the existing folder `cfg.root` (see the module's docs): resolves every
    /// conflict, stamps the folder's marker, and returns an engine whose first
    /// [`sync`](Self::sync) uploads what the store lacks and pulls the rest. The folder is the
    /// owner's: disposing of the engine never removes it.
    pub async fn adopt(client: Client, cfg: StoreConfig) -> Result<(Self, Adoption), MountError> {
        let refuse =
            |reason: String| MountError::CannotAdopt { path: cfg.root.clone(), store: cfg.store_id.clone(), reason };
        let files = Arc::new(FileStore::new(&cfg.root).with_utf8_only(false));
        if !files.root_exists() {
            return Err(refuse("there is no folder there (a new folder is made by a mount without --adopt)".into()));
        }
        // A folder another store's mount owns is never taken over; this store's is.
        let marker = files.check_marker(cfg.store_id.as_str());
        if marker == MarkerState::Mismatch {
            return Err(refuse(marker_reason(marker).into()));
        }
        let failed = |e: SyncError| refuse(e.to_string());
        // Local bytes an interrupted adoption already kept as a version are not kept twice.
        let kept_before = finish_record(&client, &cfg).await.map_err(failed)?;

        let scan = Arc::clone(&files);
        let local = blocking(move || scan.scan()).await.map_err(failed)?.map_err(|e| refuse(e.to_string()))?;
        let root = cfg.root.clone();
        let left_alone = blocking(move || not_files(&root)).await.map_err(failed)?;
        let listed = client.list_all_memories(&cfg.store_id, View::Basic).await.map_err(|e| refuse(e.to_string()))?;
        let mut adoption = Adoption { left_alone, ..Adoption::default() };
        for memory in listed {
            let Ok(rel) = RelPath::from_memory_path(&memory.path) else { continue };
            let (Some(file), Some(remote)) = (local.get(&rel), Digest::parse_hex(&memory.content_sha256)) else {
                continue;
            };
            if file.sha256 == remote || kept_before.get(&memory.path) == Some(&file.sha256.to_hex()) {
                continue;
            }
            let kept = keep_local(&client, &cfg, &files, &rel, &memory.id).await.map_err(failed)?;
            if let Some(local) = kept {
                adoption.conflicts.push(Conflict { path: memory.path.clone(), local });
            }
        }

        let (stamp, id) = (Arc::clone(&files), cfg.store_id.to_string());
        blocking(move || stamp.write_marker(&id)).await.map_err(failed)?.map_err(|e| refuse(e.to_string()))?;
        let mut engine = Self::build(client, cfg, files, State::default(), None);
        engine.created_root = false;
        Ok((engine, adoption))
    }
}

/// Keeps the local bytes of a conflicting path: as a version of `memory` under the store's own
/// bytes, or — when the store refuses them — moved to a file beside it. `None` when the
/// conflict went away meanwhile (someone wrote the same bytes).
async fn keep_local(
    client: &Client,
    cfg: &StoreConfig,
    files: &Arc<FileStore>,
    rel: &RelPath,
    memory: &MemoryId,
) -> Result<Option<Kept>, SyncError> {
    let store = client.get_memory(&cfg.store_id, memory, Some(View::Full)).await?;
    let (read, at) = (Arc::clone(files), rel.clone());
    let bytes = blocking(move || read.read(&at)).await??;
    let local_sha256 = Digest::of(&bytes).to_hex();
    if local_sha256 == store.content_sha256 {
        return Ok(None);
    }
    let Ok(text) = String::from_utf8(bytes.clone()) else {
        return move_aside(cfg, files, rel, bytes).await.map(Some);
    };
    let pending = Pending {
        path: store.path.clone(),
        store_content: store.content.clone().unwrap_or_default(),
        store_sha256: store.content_sha256.clone(),
        local_sha256: local_sha256.clone(),
    };
    update_record(cfg, |r| {
        r.pending.insert(memory.to_string(), pending.clone());
    })
    .await?;
    let local = UpdateMemory {
        content: Some(text),
        path: None,
        precondition: Some(Precondition::ContentSha256 { content_sha256: store.content_sha256.clone() }),
    };
    let kept = match client.update_memory(&cfg.store_id, memory, &local, Some(View::Basic)).await {
        Ok(kept) => kept,
        Err(e) if e.is_permanent() && !e.is_conflict() => {
            // Refused (too large, say): nothing was written; the bytes stay local, aside.
            update_record(cfg, |r| {
                r.pending.remove(memory.as_str());
            })
            .await?;
            return move_aside(cfg, files, rel, bytes).await.map(Some);
        }
        Err(e) => return Err(e.into()),
    };
    restore(client, cfg, memory, &pending).await?;
    update_record(cfg, |r| {
        r.pending.remove(memory.as_str());
    })
    .await?;
    Ok(Some(Kept::Version(kept.memory_version_id)))
}

/// Writes the store's recorded bytes back over the local bytes written on top of them; a memory
/// changed since by someone else (or already restored) is left as it is.
async fn restore(client: &Client, cfg: &StoreConfig, memory: &MemoryId, pending: &Pending) -> Result<(), SyncError> {
    let back = UpdateMemory {
        content: Some(pending.store_content.clone()),
        path: None,
        precondition: Some(Precondition::ContentSha256 { content_sha256: pending.local_sha256.clone() }),
    };
    match client.update_memory(&cfg.store_id, memory, &back, Some(View::Basic)).await {
        Ok(_) => Ok(()),
        // Not the local bytes any more: restored already, or changed by someone since — the
        // store's newest is not the adopted folder's, which is all the rule asks.
        Err(e) if e.is_conflict() || e.is_not_found() || e.error_code() == Some("precondition_failed") => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Finishes the conflicts an adoption that was killed left recorded; the local digest each had
/// kept, by memory path.
async fn finish_record(client: &Client, cfg: &StoreConfig) -> Result<BTreeMap<String, String>, SyncError> {
    let path = record_path(&cfg.root);
    let record = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice::<Record>(&bytes).map_err(|e| {
            SyncError::Task(format!(
                "the adoption record {} cannot be read ({e}); move it away to start over",
                path.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(SyncError::Task(format!("cannot read the adoption record {}: {e}", path.display()))),
    };
    if record.store_id != cfg.store_id.as_str() {
        return Err(SyncError::Task(format!(
            "the adoption record {} belongs to memory store {}; finish that adoption or move the record away",
            path.display(),
            record.store_id
        )));
    }
    for (memory, pending) in &record.pending {
        let id: MemoryId =
            memory.parse().map_err(|_| SyncError::Task(format!("the adoption record names `{memory}`")))?;
        tracing::info!(memory_store_id = %cfg.store_id, path = %pending.path, "finishing an interrupted adoption: the store's version goes back on top");
        restore(client, cfg, &id, pending).await?;
    }
    let _ = std::fs::remove_file(&path);
    Ok(record.pending.into_values().map(|p| (p.path, p.local_sha256)).collect())
}

/// Changes the record beside the folder durably (removed when nothing is pending).
async fn update_record(cfg: &StoreConfig, change: impl FnOnce(&mut Record)) -> Result<(), SyncError> {
    let path = record_path(&cfg.root);
    let mut record = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_default(),
        Err(_) => Record::default(),
    };
    record.store_id = cfg.store_id.to_string();
    change(&mut record);
    blocking(move || {
        if record.pending.is_empty() {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        } else {
            let bytes = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
            atomic_write(&path, &bytes)
        }
    })
    .await?
    .map_err(|e| SyncError::Task(format!("cannot write the adoption record: {e}")))
}

/// Moves local bytes the store will not take to a free `NAME.local-N` beside the file.
async fn move_aside(
    cfg: &StoreConfig,
    files: &Arc<FileStore>,
    rel: &RelPath,
    bytes: Vec<u8>,
) -> Result<Kept, SyncError> {
    let (files, rel) = (Arc::clone(files), rel.clone());
    let root = cfg.root.clone();
    blocking(move || -> Result<Kept, SyncError> {
        for n in 1.. {
            let aside = RelPath::parse(&format!("{}.local-{n}", rel.as_str()))?;
            if files.hash_now(&aside)?.is_none() {
                files.write(&aside, &bytes)?;
                return Ok(Kept::File(root.join(aside.as_str())));
            }
        }
        unreachable!("some suffix is free")
    })
    .await?
}

/// What under `root` is neither a regular file nor a folder (never followed), relative to it.
fn not_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if !kind.is_file() {
                out.push(entry.path().strip_prefix(root).map(Path::to_path_buf).unwrap_or_else(|_| entry.path()));
            }
        }
    }
    out.sort();
    out
}
