//! Carrying out a sync's [`Plan`]: the local removals, the uploads and corroborated deletions
//! (in path order: uploads in batches where the server takes them, else one by one; deletes one
//! by one within the delete cap), and the content pass.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use futures::stream::{self, StreamExt};
use mnemo_api::{MemoryStoreId, View};

use super::run::{Plan, Pull, Push, SyncReport};
use super::upload::{Upload, UploadOutcome};
use super::{DeletionMode, FETCH_CONCURRENCY, Remote, RemoteMap, StoreSync, SyncError, UPLOAD_CONCURRENCY, blocking};
use crate::fs::{Digest, FsError, MarkerState, RelPath};

/// What became of one pull of the content pass.
enum Pulled {
    /// The file holds the memory now.
    Written(Digest),
    /// Not written, and nothing to retry for it: the memory is gone, or a local write raced
    /// the pull (the watcher brings the path back).
    Left,
    /// Not written for a reason only a later pull mends (a failed fetch, a full disk).
    Failed,
}

/// The per-sync allowance of remote deletions.
struct DeleteCap {
    left: usize,
    held: usize,
    sent: usize,
    suppressed: usize,
    /// Deletes the server did not take (a transient fault): counted as failures of the sync.
    failed: usize,
}

impl StoreSync {
    /// Removes the files the server deleted. A file edited since the scan is decided again with
    /// its fresh digest (which may plan an upload instead, or another removal).
    pub(super) async fn remove_locals(
        &mut self,
        plan: &mut Plan,
        remote: &RemoteMap,
        report: &mut SyncReport,
    ) -> Result<(), SyncError> {
        for removal in std::mem::take(&mut plan.removals) {
            let mut next = Some(removal);
            while let Some(removal) = next.take() {
                let (files, path, expect) = (Arc::clone(&self.files), removal.rel.clone(), removal.expect_local);
                let removed = blocking(move || -> Result<Option<Option<Digest>>, crate::fs::FsError> {
                    if files.remove_if_unchanged(&path, expect)? {
                        Ok(None)
                    } else {
                        // Edited since the scan: decide again with the fresh digest.
                        Ok(Some(files.hash_now(&path)?))
                    }
                })
                .await?;
                let rel = &removal.rel;
                match removed {
                    Ok(None) => report.removed_locally += 1,
                    Ok(Some(Some(fresh))) => {
                        next = self.plan_path(plan, rel, remote.get(rel), Some(fresh), report);
                        self.forget_void_pending(plan);
                    }
                    Ok(Some(None)) => {}
                    Err(e) => {
                        tracing::warn!(path = %rel, memory_store_id = %self.cfg.store_id, "failed to remove memory deleted remotely: {e}");
                        plan.keep(rel, removal.baseline);
                        report.failed += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// Sends the uploads and the corroborated deletions (within the cap) one by one, in path
    /// order; each outcome sets its path's baseline in `next`.
    pub(super) async fn send_pushes(
        &mut self,
        pushes: Vec<Push>,
        final_sync: bool,
        next: &mut BTreeMap<RelPath, Digest>,
        report: &mut SyncReport,
    ) {
        let left = (self.state.baseline.len() / 4).clamp(8, 50);
        let mut cap = DeleteCap { left, held: 0, sent: 0, suppressed: 0, failed: 0 };
        // Uploads between two deletes go out together (in one request when the server takes
        // batches), still in path order.
        let mut uploads = Vec::new();
        for push in pushes {
            match push {
                Push::Upload(upload) => uploads.push(upload),
                Push::Delete { rel, base, memory } => {
                    self.send_uploads(std::mem::take(&mut uploads), next, report).await;
                    if self.corroborated_delete(&rel, base, &memory, final_sync, &mut cap).await {
                        next.remove(&rel);
                        report.deleted_remotely += 1;
                    }
                }
            }
        }
        self.send_uploads(uploads, next, report).await;
        report.failed += cap.failed;
        if cap.suppressed > 0 {
            tracing::debug!(memory_store_id = %self.cfg.store_id, count = cap.suppressed, "local deletions not propagated (deletions disabled)");
        }
        super::metrics::deletions("withheld_by_cap", cap.held);
        if cap.held > 0 {
            let verb = if self.cfg.deletions == DeletionMode::LogOnly { "would send" } else { "sent" };
            tracing::warn!(memory_store_id = %self.cfg.store_id, "delete cap reached: {verb} {} deletes, held {} for later syncs", cap.sent, cap.held);
        }
    }

    /// Fetches and writes what the table decided to pull, [`FETCH_CONCURRENCY`] at a time. A
    /// write happens only if the file still holds what the scan saw; otherwise it waits for the
    /// next sync. A pull that fails (the fetch, or the write: a full disk) marks the folder
    /// incomplete ([`StoreSync::is_incomplete`]) until a full sync pulls it.
    pub(super) async fn content_pass(&mut self, pulls: Vec<Pull>, report: &mut SyncReport) {
        let client = &self.client;
        let store = &self.cfg.store_id;
        let files = &self.files;
        let root = &self.cfg.root;
        let results: Vec<(RelPath, Pulled)> = stream::iter(pulls)
            .map(|pull| async move {
                let fetched = match client.get_memory(store, &pull.memory.id, Some(View::Full)).await {
                    Ok(m) => m,
                    // Deleted meanwhile: the feed or the next sync says so.
                    Err(e) if e.is_not_found() => return (pull.rel, Pulled::Left),
                    Err(e) => {
                        tracing::warn!(path = %pull.rel, memory_store_id = %store, "failed to fetch memory content: {e}");
                        return (pull.rel, Pulled::Failed);
                    }
                };
                let Some(digest) = super::server_digest(&fetched) else { return (pull.rel, Pulled::Failed) };
                let (files, rel) = (Arc::clone(files), pull.rel.clone());
                let content = fetched.content.unwrap_or_default();
                let written = blocking(move || files.write_if_unchanged(&rel, pull.expect_local, content.as_bytes())).await;
                match written {
                    Ok(Ok(true)) => (pull.rel, Pulled::Written(digest)),
                    Ok(Ok(false)) => {
                        // The watcher saw the write, which brings the path back.
                        tracing::debug!(path = %pull.rel, memory_store_id = %store, "file changed during the sync; pulling it next time");
                        (pull.rel, Pulled::Left)
                    }
                    Ok(Err(e)) => {
                        write_failed(&pull.rel, store, root, &e);
                        (pull.rel, Pulled::Failed)
                    }
                    Err(e) => {
                        tracing::warn!(path = %pull.rel, memory_store_id = %store, "failed to write memory: {e}");
                        (pull.rel, Pulled::Failed)
                    }
                }
            })
            .buffer_unordered(FETCH_CONCURRENCY)
            .collect()
            .await;
        for (rel, pulled) in results {
            match pulled {
                Pulled::Written(sha) => {
                    self.state.baseline.insert(rel, sha);
                    report.pulled += 1;
                }
                Pulled::Left => {}
                Pulled::Failed => self.incomplete = true,
            }
        }
    }

    /// The deletion discipline of a row-7 candidate. Returns whether the remote memory is gone.
    async fn corroborated_delete(
        &mut self,
        rel: &RelPath,
        base: Digest,
        memory: &Remote,
        final_sync: bool,
        cap: &mut DeleteCap,
    ) -> bool {
        let store = self.cfg.store_id.clone();
        if self.cfg.deletions == DeletionMode::Disabled {
            cap.suppressed += 1;
            return false;
        }
        let first_missing = *self.state.pending_deletes.entry(rel.clone()).or_insert_with(Instant::now);
        if !final_sync && first_missing.elapsed() < self.cfg.delete_window {
            return false;
        }
        // Re-check now: the marker still matches and the file is still gone.
        let (files, path, id) = (Arc::clone(&self.files), rel.clone(), store.to_string());
        let recheck = blocking(move || (files.check_marker(&id), files.hash_now(&path))).await;
        match recheck {
            Ok((MarkerState::Matches, Ok(None))) => {}
            Ok((MarkerState::Matches, Ok(Some(_)))) => {
                self.state.pending_deletes.remove(rel);
                return false;
            }
            _ => return false,
        }
        if cap.left == 0 {
            cap.held += 1;
            return false;
        }
        cap.left -= 1;
        cap.sent += 1;
        if self.cfg.deletions == DeletionMode::LogOnly {
            tracing::info!(path = %rel, memory_store_id = %store, "log-only: sync would delete this memory on the server");
            super::metrics::deletions("log_only", 1);
            return false;
        }
        self.wrote();
        match self.client.delete_memory(&store, &memory.id, Some(&base.to_hex())).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) if matches!(e.status(), Some(409 | 412)) => {
                tracing::warn!(path = %rel, memory_store_id = %store, "memory deleted locally but changed remotely; keeping the remote version");
                return false;
            }
            Err(e) => {
                tracing::warn!(path = %rel, memory_store_id = %store, "failed to delete memory: {e}");
                cap.failed += 1;
                return false;
            }
        }
        tracing::info!(path = %rel, memory_store_id = %store, "propagated local deletion");
        super::metrics::deletions("made", 1);
        self.state.pending_deletes.remove(rel);
        true
    }

    /// Sends uploads in path order and records each outcome.
    async fn send_uploads(
        &mut self,
        mut uploads: Vec<Upload>,
        next: &mut BTreeMap<RelPath, Digest>,
        report: &mut SyncReport,
    ) {
        if uploads.is_empty() {
            return;
        }
        let outcomes = self.upload_in_order(&mut uploads).await;
        for (upload, outcome) in uploads.iter().zip(outcomes) {
            self.apply_upload(upload, outcome, next, report);
        }
    }

    /// Runs uploads [`UPLOAD_CONCURRENCY`] at a time.
    pub(crate) async fn run_uploads(&mut self, uploads: Vec<Upload>) -> Vec<(Upload, UploadOutcome)> {
        let this = &*self;
        let results: Vec<_> = stream::iter(uploads)
            .map(|u| async move {
                let outcome = this.upload(&u).await;
                (u, outcome)
            })
            .buffer_unordered(UPLOAD_CONCURRENCY)
            .collect()
            .await;
        results
    }
}

/// Logs a memory that could not be written into the folder: the path, the store and the folder,
/// and in plain words when the disk is full. The file is left as it was (writes are atomic);
/// the pull is tried again at the next sync.
pub(super) fn write_failed(rel: &RelPath, store: &MemoryStoreId, root: &Path, e: &FsError) {
    if e.is_disk_full() {
        tracing::warn!(path = %rel, memory_store_id = %store, folder = %root.display(), "failed to write memory: the disk holding {} is full ({e}); the file was left as it was, and it is pulled again at the next sync", root.display());
    } else {
        tracing::warn!(path = %rel, memory_store_id = %store, folder = %root.display(), "failed to write memory: {e}");
    }
}
