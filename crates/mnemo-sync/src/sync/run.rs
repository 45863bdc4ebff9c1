//! One reconciliation pass: scan, list, decide per path, then upload, pull and delete.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use futures::stream::{self, StreamExt};
use mnemo_api::View;

use super::plan::{Action, PathState, Warning, decide};
use super::upload::{Upload, UploadOutcome};
use super::{DeletionMode, FETCH_CONCURRENCY, StoreSync, SyncError, UPLOAD_CONCURRENCY, blocking, marker_reason};
use crate::fs::{LocalFile, MarkerState, RelPath};

/// What one sync changed, for the one-line summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub pulled: usize,
    pub uploaded: usize,
    pub removed_locally: usize,
    pub deleted_remotely: usize,
    pub conflicts: usize,
    pub refused: usize,
    pub failed: usize,
    /// The folder was re-downloaded (marker/folder gone, or a wipe).
    pub recovered: bool,
    /// The folder failed the marker check while holding files: nothing was synced.
    pub skipped: bool,
    /// The whole tree was walked and hashed (rather than only the paths the watcher flagged).
    pub walked: bool,
    /// The store was listed afresh (rather than confirmed unchanged by the server).
    pub listed: bool,
}

impl SyncReport {
    /// Whether anything changed on either side.
    pub fn changed(&self) -> bool {
        self.pulled + self.uploaded + self.removed_locally + self.deleted_remotely > 0 || self.recovered
    }
}

impl std::fmt::Display for SyncReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pulled {}, uploaded {}, removed locally {}, deleted remotely {}, conflicts {}, refused {}, failed {}",
            self.pulled,
            self.uploaded,
            self.removed_locally,
            self.deleted_remotely,
            self.conflicts,
            self.refused,
            self.failed
        )?;
        if self.recovered {
            f.write_str(" (re-downloaded)")?;
        }
        Ok(())
    }
}

/// A change sent to the server by a sync.
enum Push {
    Upload(Upload),
    /// A row-7 candidate: deleted only once corroborated.
    Delete {
        rel: RelPath,
        base: String,
        memory: super::Remote,
    },
}

/// A fetch scheduled for the content pass.
struct Pull {
    rel: RelPath,
    memory: super::Remote,
    expect_local: Option<String>,
}

/// The per-sync allowance of remote deletions.
struct DeleteCap {
    left: usize,
    held: usize,
    sent: usize,
    suppressed: usize,
}

impl StoreSync {
    /// One sync. `final_sync` waives the deletion window (the cap still applies) and may run once.
    /// Failures of single files are logged and retried later; an error means the whole store
    /// could not be synced this time.
    pub async fn sync(&mut self, final_sync: bool) -> Result<SyncReport, SyncError> {
        if final_sync {
            if self.final_done {
                return Err(SyncError::FinalTwice);
            }
            self.final_done = true;
        }
        let mut report = SyncReport::default();
        // The marker first: an untrusted folder is judged on a real scan, and its change hints
        // are dropped (the next trusted sync walks), so nothing seen while it was untrusted is lost.
        let marker = self.marker().await?;
        if marker != MarkerState::Matches {
            self.forget_local_view();
            let files = Arc::clone(&self.files);
            let local = blocking(move || files.scan()).await?.unwrap_or_default();
            report.walked = true;
            if local.is_empty() {
                self.recover("the folder or its marker is gone").await?;
                self.save_journal().await;
                report.recovered = true;
            } else {
                let reason = marker_reason(marker);
                tracing::warn!(memory_store_id = %self.cfg.store_id, root = %self.cfg.root.display(), "{reason}; leaving the memory store folder as found and not syncing");
                report.skipped = true;
            }
            return Ok(report);
        }
        if final_sync {
            // The last sync walks everything anyway and nothing syncs after it: drop the
            // watcher and its view now instead of holding them beside the walk's result.
            self.forget_local_view();
        }
        let (local, walked) = self.local_files(final_sync).await?;
        report.walked = walked;
        let mut local = match local {
            Ok(local) => local,
            // The root vanished between the marker check and the scan: the next sync recovers.
            Err(e) => {
                self.forget_local_view();
                return Err(e.into());
            }
        };
        // Keep the view now: the hints it consumed must survive a failure of what follows.
        if !final_sync {
            self.last_local = Some(local.clone());
        }
        let (remote, listed) = self.list_for_sync().await?;
        report.listed = listed;
        self.settle(&remote);
        if local.is_empty() && self.state.baseline.len() > 1 && !walked {
            // A wipe is only ever decided on a real scan, never on the watcher's view.
            let files = Arc::clone(&self.files);
            local = blocking(move || files.scan()).await??;
            report.walked = true;
            if !final_sync {
                self.last_local = Some(local.clone());
            }
        }
        if local.is_empty() && self.state.baseline.len() > 1 {
            self.recover("every memory file is gone at once").await?;
            self.save_journal().await;
            report.recovered = true;
            return Ok(report);
        }

        let paths: BTreeSet<&RelPath> = remote.keys().chain(local.keys()).chain(self.state.baseline.keys()).collect();
        let baseline_before = self.state.baseline.len();
        let mut cap = DeleteCap { left: (baseline_before / 4).clamp(8, 50), held: 0, sent: 0, suppressed: 0 };
        let mut next: BTreeMap<RelPath, String> = BTreeMap::new();
        // Uploads and deletions, in path order: they are sent one by one in that order, as the
        // reference does, so the store's versions come out in the same sequence.
        let mut pushes: Vec<Push> = Vec::new();
        let mut pulls: Vec<Pull> = Vec::new();

        for rel in paths {
            let r = remote.get(rel);
            let mut local_sha = local.get(rel).map(|f: &LocalFile| f.sha256.clone());
            loop {
                let d = decide(&PathState {
                    remote: r.map(|m| m.content_sha256.as_str()),
                    local: local_sha.as_deref(),
                    baseline: self.state.baseline.get(rel).map(String::as_str),
                    read_only: self.cfg.read_only,
                    refused: self.state.refused.get(rel).map(String::as_str),
                });
                if d.clear_pending_delete {
                    self.state.pending_deletes.remove(rel);
                }
                if let Some(w) = d.warning {
                    self.log_warning(rel, w);
                    if w == Warning::BothChanged {
                        report.conflicts += 1;
                    }
                }
                let keep = |next: &mut BTreeMap<RelPath, String>, b: Option<String>| {
                    if let Some(b) = b {
                        next.insert(rel.clone(), b);
                    }
                };
                match d.action {
                    Action::Keep => keep(&mut next, d.baseline),
                    Action::Create => {
                        pushes.push(Push::Upload(Upload { rel: rel.clone(), existing: None, fallback: None }))
                    }
                    Action::Update { precondition } => {
                        let existing = r.expect("an update has a remote memory").clone();
                        pushes.push(Push::Upload(Upload {
                            rel: rel.clone(),
                            existing: Some((existing, precondition.clone())),
                            fallback: Some(precondition),
                        }));
                    }
                    Action::Pull { expect_local } => {
                        keep(&mut next, d.baseline);
                        let memory = r.expect("a pull has a remote memory").clone();
                        pulls.push(Pull { rel: rel.clone(), memory, expect_local });
                    }
                    Action::DeleteCandidate => {
                        keep(&mut next, d.baseline.clone());
                        let memory = r.expect("a delete candidate has a remote memory").clone();
                        let base = d.baseline.expect("a candidate has a baseline");
                        pushes.push(Push::Delete { rel: rel.clone(), base, memory });
                    }
                    Action::RemoveLocal { expect_local } => {
                        let (files, path) = (Arc::clone(&self.files), rel.clone());
                        let removed = blocking(move || -> Result<Option<Option<String>>, crate::fs::FsError> {
                            if files.remove_if_unchanged(&path, &expect_local)? {
                                Ok(None)
                            } else {
                                // Edited since the scan: decide again with the fresh digest.
                                Ok(Some(files.hash_now(&path)?))
                            }
                        })
                        .await?;
                        match removed {
                            Ok(None) => report.removed_locally += 1,
                            Ok(Some(fresh)) if fresh.is_some() => {
                                local_sha = fresh;
                                continue;
                            }
                            Ok(Some(_)) => {}
                            Err(e) => {
                                tracing::warn!(path = %rel, memory_store_id = %self.cfg.store_id, "failed to remove memory deleted remotely: {e}");
                                keep(&mut next, d.baseline);
                                report.failed += 1;
                            }
                        }
                    }
                }
                break;
            }
        }

        // Each upload's outcome sets its path's baseline; deletions are corroborated, within the cap.
        for push in pushes {
            match push {
                Push::Upload(upload) => {
                    let outcome = self.upload(&upload).await;
                    self.apply_upload(&upload, outcome, &mut next, &mut report);
                }
                Push::Delete { rel, base, memory } => {
                    if self.corroborated_delete(&rel, &base, &memory, final_sync, &mut cap).await {
                        next.remove(&rel);
                        report.deleted_remotely += 1;
                    }
                }
            }
        }
        if cap.suppressed > 0 {
            tracing::debug!(memory_store_id = %self.cfg.store_id, count = cap.suppressed, "local deletions not propagated (deletions disabled)");
        }
        if cap.held > 0 {
            let verb = if self.cfg.deletions == DeletionMode::LogOnly { "would send" } else { "sent" };
            tracing::warn!(memory_store_id = %self.cfg.store_id, "delete cap reached: {verb} {} deletes, held {} for later syncs", cap.sent, cap.held);
        }

        self.state.baseline = next;
        self.content_pass(pulls, &mut report).await;
        self.save_journal().await;
        Ok(report)
    }

    /// The local files: patched from the watcher's hints when they can be trusted, else a full
    /// walk (which also restarts the watcher, first, so no change slips between the two).
    async fn local_files(
        &mut self,
        force_walk: bool,
    ) -> Result<(Result<BTreeMap<RelPath, LocalFile>, crate::fs::FsError>, bool), SyncError> {
        let fresh_enough =
            self.syncs_since_walk < super::FULL_WALK_EVERY && self.last_walk.elapsed() < super::FULL_WALK_MAX_AGE;
        if let (false, true, Some(watch), Some(previous)) = (force_walk, fresh_enough, &self.watch, &self.last_local)
            && let super::watch::Changes::Paths(paths) = {
                let (watch_files, watch) = (Arc::clone(&self.files), watch.clone());
                blocking(move || watch.take_settled(&watch_files)).await?
            }
        {
            let (files, mut local) = (Arc::clone(&self.files), previous.clone());
            let patched = blocking(move || {
                for rel in paths {
                    match files.hash_now(&rel) {
                        Ok(Some(sha256)) => {
                            let size =
                                std::fs::symlink_metadata(files.root().join(rel.as_str())).map_or(0, |m| m.len());
                            local.insert(rel, LocalFile { sha256, size });
                        }
                        Ok(None) => {
                            // A vanished directory takes its files with it: walk.
                            let below = format!("{rel}/");
                            if local.keys().any(|k| k.as_str().starts_with(&below)) {
                                return None;
                            }
                            local.remove(&rel);
                        }
                        Err(e) if e.is_refusal() => {
                            // A new directory may hold files created before it was watched.
                            if files.root().join(rel.as_str()).symlink_metadata().is_ok_and(|m| m.is_dir()) {
                                return None;
                            }
                            local.remove(&rel);
                        }
                        Err(_) => return None,
                    }
                }
                Some(local)
            })
            .await?;
            if let Some(local) = patched {
                self.syncs_since_walk += 1;
                return Ok((Ok(local), false));
            }
        }
        if self.cfg.watch && !force_walk && self.files.root_exists() {
            self.watch = match super::watch::Watch::start(&self.cfg.root) {
                Ok(w) => Some(Arc::new(w)),
                Err(e) => {
                    tracing::debug!(memory_store_id = %self.cfg.store_id, "no filesystem watch, walking every sync: {e}");
                    None
                }
            };
        }
        let files = Arc::clone(&self.files);
        let local = blocking(move || files.scan()).await?;
        self.syncs_since_walk = 0;
        self.last_walk = Instant::now();
        Ok((local, true))
    }

    /// Right after a download: start watching now and take the files just written as the local
    /// view, so the first sync re-reads only what changed since instead of walking and hashing
    /// every file. Nothing but the engine has touched the folder yet (it did not exist before
    /// the mount), so the view is exact.
    pub(crate) fn watch_from_download(&mut self) {
        if !self.cfg.watch {
            return;
        }
        match super::watch::Watch::start(&self.cfg.root) {
            Ok(w) => {
                self.watch = Some(Arc::new(w));
                let view = self.state.baseline.iter().map(|(rel, sha256)| {
                    // The engine never reads `size` of its own view; only hashes are compared.
                    (rel.clone(), LocalFile { sha256: sha256.clone(), size: 0 })
                });
                self.last_local = Some(view.collect());
                self.syncs_since_walk = 0;
                self.last_walk = Instant::now();
            }
            Err(e) => {
                tracing::debug!(memory_store_id = %self.cfg.store_id, "no filesystem watch, walking every sync: {e}")
            }
        }
    }

    /// Drops the watcher and the patched view: the next sync walks the whole tree.
    pub(crate) fn forget_local_view(&mut self) {
        self.watch = None;
        self.last_local = None;
    }

    /// An upload whose answer never arrived may have landed: if the listing shows exactly the
    /// bytes sent, adopt them. Then forget every unsettled send.
    pub(crate) fn settle(&mut self, remote: &super::RemoteMap) {
        for (rel, sent) in self.state.unsettled.drain() {
            if remote.get(&rel).is_some_and(|m| m.content_sha256 == sent) {
                self.state.baseline.insert(rel, sent);
            }
        }
    }

    fn log_warning(&self, rel: &RelPath, w: Warning) {
        if w == Warning::RecreatingDeletedRemotely {
            tracing::info!(path = %rel, memory_store_id = %self.cfg.store_id, "{}", w.message());
        } else {
            tracing::warn!(path = %rel, memory_store_id = %self.cfg.store_id, "{}", w.message());
        }
    }

    /// Fetches and writes what the table decided to pull, [`FETCH_CONCURRENCY`] at a time. A
    /// write happens only if the file still holds what the scan saw; otherwise it waits for the
    /// next sync.
    async fn content_pass(&mut self, pulls: Vec<Pull>, report: &mut SyncReport) {
        let client = &self.client;
        let store = &self.cfg.store_id;
        let files = &self.files;
        let results: Vec<(RelPath, Option<String>)> = stream::iter(pulls)
            .map(|pull| async move {
                let fetched = match client.get_memory(store, &pull.memory.id, Some(View::Full)).await {
                    Ok(m) => m,
                    Err(e) if e.is_not_found() => return (pull.rel, None),
                    Err(e) => {
                        tracing::warn!(path = %pull.rel, memory_store_id = %store, "failed to fetch memory content: {e}");
                        return (pull.rel, None);
                    }
                };
                let (files, rel) = (Arc::clone(files), pull.rel.clone());
                let content = fetched.content.unwrap_or_default();
                let written = blocking(move || files.write_if_unchanged(&rel, pull.expect_local.as_deref(), content.as_bytes())).await;
                match written {
                    Ok(Ok(true)) => (pull.rel, Some(fetched.content_sha256)),
                    Ok(Ok(false)) => {
                        tracing::debug!(path = %pull.rel, memory_store_id = %store, "file changed during the sync; pulling it next time");
                        (pull.rel, None)
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(path = %pull.rel, memory_store_id = %store, "failed to write memory: {e}");
                        (pull.rel, None)
                    }
                    Err(e) => {
                        tracing::warn!(path = %pull.rel, memory_store_id = %store, "failed to write memory: {e}");
                        (pull.rel, None)
                    }
                }
            })
            .buffer_unordered(FETCH_CONCURRENCY)
            .collect()
            .await;
        for (rel, sha) in results {
            if let Some(sha) = sha {
                self.state.baseline.insert(rel, sha);
                report.pulled += 1;
            }
        }
    }

    /// The deletion discipline of a row-7 candidate. Returns whether the remote memory is gone.
    async fn corroborated_delete(
        &mut self,
        rel: &RelPath,
        base: &str,
        memory: &super::Remote,
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
            return false;
        }
        match self.client.delete_memory(&store, &memory.id, Some(base)).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) if matches!(e.status(), Some(409 | 412)) => {
                tracing::warn!(path = %rel, memory_store_id = %store, "memory deleted locally but changed remotely; keeping the remote version");
                return false;
            }
            Err(e) => {
                tracing::warn!(path = %rel, memory_store_id = %store, "failed to delete memory: {e}");
                return false;
            }
        }
        tracing::info!(path = %rel, memory_store_id = %store, "propagated local deletion");
        self.state.pending_deletes.remove(rel);
        true
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
