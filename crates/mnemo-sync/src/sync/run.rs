//! One reconciliation pass, planned before it is carried out: check the marker, gather both
//! sides (scan, list, settle), decide every path ([`super::plan::decide`]) into a [`Plan`], then
//! carry it out ([`super::execute`]): remove, upload and delete, pull, write the journal.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use super::plan::{Action, PathState, Warning, decide};
use super::upload::Upload;
use super::{LocalMap, Remote, RemoteMap, StoreSync, SyncError, blocking, marker_reason};
use crate::fs::{Digest, LocalFile, MarkerState, RelPath};

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
    /// Every path was decided afresh; `false` when neither side nor the engine's state had
    /// changed since a sync that found nothing to do (no hint, no walk, a `304` listing).
    pub planned: bool,
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
pub(super) enum Push {
    Upload(Upload),
    /// A row-7 candidate: deleted only once corroborated.
    Delete {
        rel: RelPath,
        base: Digest,
        memory: Remote,
    },
}

impl Push {
    pub(super) fn rel(&self) -> &RelPath {
        match self {
            Self::Upload(u) => &u.rel,
            Self::Delete { rel, .. } => rel,
        }
    }
}

/// A fetch scheduled for the content pass.
pub(super) struct Pull {
    pub(super) rel: RelPath,
    pub(super) memory: Remote,
    pub(super) expect_local: Option<Digest>,
}

/// A file the server deleted, to remove locally if it still holds `expect_local` (row 4).
pub(super) struct Removal {
    pub(super) rel: RelPath,
    pub(super) expect_local: Digest,
    /// Kept if the removal fails.
    pub(super) baseline: Option<Digest>,
}

/// What one sync will do, path by path, decided before any of it is done.
#[derive(Default)]
pub(super) struct Plan {
    /// The baseline of every path whose action keeps one, until an upload or a pull replaces it.
    pub(super) next: BTreeMap<RelPath, Digest>,
    /// Uploads and deletion candidates, in path order: they are sent one by one in that order, as
    /// the reference does, so the store's versions come out in the same sequence.
    pub(super) pushes: Vec<Push>,
    /// Fetches for the content pass.
    pub(super) pulls: Vec<Pull>,
    /// Local removals, carried out before the pushes.
    pub(super) removals: Vec<Removal>,
    /// Paths whose pending-delete record is void (their file exists, or both sides are gone).
    void_pending: Vec<RelPath>,
    /// Warnings logged while deciding (a conflict, a read-only store's kept file…).
    warnings: usize,
}

impl Plan {
    pub(super) fn keep(&mut self, rel: &RelPath, baseline: Option<Digest>) {
        if let Some(b) = baseline {
            self.next.insert(rel.clone(), b);
        }
    }

    /// Whether carrying the plan out changes nothing: no action, no warning, and every path
    /// keeps the baseline it had.
    fn changes_nothing(&self, baseline: &BTreeMap<RelPath, Digest>) -> bool {
        self.pushes.is_empty()
            && self.pulls.is_empty()
            && self.removals.is_empty()
            && self.void_pending.is_empty()
            && self.warnings == 0
            && self.next == *baseline
    }

    /// Adds a push in path order (a removal decided again may add one after later paths).
    fn push(&mut self, push: Push) {
        let at = self.pushes.partition_point(|p| p.rel() < push.rel());
        self.pushes.insert(at, push);
    }
}

/// How many final syncs that left an upload or a delete undone are tried again (a transient
/// error is tried again until the teardown's bound).
const FINAL_ATTEMPTS_WITH_FAILURES: u32 = 5;

/// The inputs of a sync whose plan changed nothing. `decide` is a pure function of a path's
/// local digest, listing, baseline and refusal: the same local view (the same shared map, so
/// no hint arrived and nothing was walked), the same listing (the server answered `304`) and
/// the same state make the same empty plan again, so it need not be made.
pub(super) struct Fixpoint {
    local: Arc<LocalMap>,
    remote: Arc<RemoteMap>,
    state: u64,
}

impl Fixpoint {
    /// The same local view and listing (the state is compared by its fingerprint apart).
    fn holds(&self, local: &Arc<LocalMap>, remote: &Arc<RemoteMap>) -> bool {
        Arc::ptr_eq(&self.local, local) && Arc::ptr_eq(&self.remote, remote)
    }
}

impl StoreSync {
    /// One sync. `final_sync` waives the deletion window (the cap still applies) and may run once.
    /// Failures of single files are logged and retried later; an error means the whole store
    /// could not be synced this time.
    pub async fn sync(&mut self, final_sync: bool) -> Result<SyncReport, SyncError> {
        let started = Instant::now();
        let outcome = self.sync_unrecorded(final_sync).await;
        super::metrics::sync_done(if final_sync { "final" } else { "full" }, started, &outcome);
        outcome
    }

    /// [`sync`](Self::sync) without its metrics.
    async fn sync_unrecorded(&mut self, final_sync: bool) -> Result<SyncReport, SyncError> {
        if final_sync && self.final_done {
            return Err(SyncError::FinalTwice);
        }
        // A full sync re-reads every path the watcher saw, those live sync left included.
        self.live_left = false;
        let outcome = self.sync_once(final_sync).await;
        self.live_left = outcome.is_err();
        // A final sync that failed, or left an upload or a delete undone (a transient fault),
        // may be tried again by the teardown.
        if final_sync && outcome.as_ref().is_ok_and(|r| r.failed == 0) {
            self.final_done = true;
        }
        outcome
    }

    /// The final sync, tried again after a transient failure (a `5xx` burst or a broken
    /// connection outlasting the client's own retries) with back-off, until it succeeds, fails
    /// for good, or the caller's bound cuts it off. Without this, one unlucky final sync
    /// dropped the local deletions it carried (the flush after it pushes edits only).
    pub async fn final_sync_retrying(&mut self) -> Result<SyncReport, SyncError> {
        let mut attempt = 0;
        loop {
            let why = match self.sync(true).await {
                Err(e) if e.is_transient() => e.to_string(),
                Ok(report) if report.failed > 0 && attempt < FINAL_ATTEMPTS_WITH_FAILURES => {
                    format!("{} uploads or deletes failed", report.failed)
                }
                other => return other,
            };
            let delay = super::TEARDOWN_RETRY.delay(attempt);
            tracing::warn!(memory_store_id = %self.cfg.store_id, ?delay, "final memory sync failed, retrying: {why}");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// [`flush`](Self::flush), tried again after a transient failure like
    /// [`final_sync_retrying`](Self::final_sync_retrying).
    pub async fn flush_retrying(&mut self) -> Result<SyncReport, SyncError> {
        let mut attempt = 0;
        loop {
            match self.flush().await {
                Err(e) if e.is_transient() => {
                    let delay = super::TEARDOWN_RETRY.delay(attempt);
                    tracing::warn!(memory_store_id = %self.cfg.store_id, ?delay, "memory flush failed, retrying: {e}");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn sync_once(&mut self, final_sync: bool) -> Result<SyncReport, SyncError> {
        let mut report = SyncReport::default();
        // The marker first: an untrusted folder is judged on a real scan, and its change hints
        // are dropped (the next trusted sync walks), so nothing seen while it was untrusted is lost.
        let marker = self.marker().await?;
        if marker != MarkerState::Matches {
            self.untrusted(marker, &mut report).await?;
            return Ok(report);
        }
        if final_sync {
            // The last sync walks everything anyway and nothing syncs after it: drop the
            // watcher and its view now instead of holding them beside the walk's result.
            self.forget_local_view();
        }
        let Some((local, remote)) = self.gather(final_sync, &mut report).await? else {
            return Ok(report);
        };
        // An incomplete folder is planned afresh: the pulls that failed are made again.
        if let Some(fixpoint) = self.fixpoint.take()
            && !final_sync
            && !self.incomplete
            && fixpoint.holds(&local, &remote)
        {
            let state = self.state.fingerprint();
            if fixpoint.state == state && (!self.cfg.journal || self.journaled == Some(state)) {
                self.fixpoint = Some(fixpoint);
                return Ok(report);
            }
        }
        report.planned = true;
        let mut plan = self.plan(&local, &remote, &mut report);
        // A deletion waits for a later sync to corroborate it, and an unsettled upload for a
        // listing: either makes the next sync's outcome differ even on the same inputs.
        let quiet = plan.changes_nothing(&self.state.baseline)
            && self.state.pending_deletes.is_empty()
            && self.state.unsettled.is_empty();
        self.forget_void_pending(&mut plan);
        self.remove_locals(&mut plan, &remote, &mut report).await?;
        self.send_pushes(std::mem::take(&mut plan.pushes), final_sync, &mut plan.next, &mut report).await;
        self.state.baseline = plan.next;
        // Every path was decided, so every memory the folder lacks is among these pulls: the
        // folder is complete unless one of them fails.
        self.incomplete = false;
        self.content_pass(plan.pulls, &mut report).await;
        self.save_journal().await;
        if quiet && !final_sync {
            self.fixpoint = Some(Fixpoint { local, remote, state: self.state.fingerprint() });
        }
        Ok(report)
    }

    /// A folder whose marker does not name this store, judged on a full walk: one that still
    /// holds files is left as found, an empty or vanished one is re-downloaded.
    async fn untrusted(&mut self, marker: MarkerState, report: &mut SyncReport) -> Result<(), SyncError> {
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
        Ok(())
    }

    /// Both sides of a trusted folder: its files and the store's listing (unknown-outcome
    /// uploads settled). `None` when every file vanished at once and the folder was re-downloaded
    /// instead (a wipe never reaches the server).
    async fn gather(
        &mut self,
        final_sync: bool,
        report: &mut SyncReport,
    ) -> Result<Option<(Arc<LocalMap>, Arc<RemoteMap>)>, SyncError> {
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
            self.last_local = Some(Arc::clone(&local));
        }
        let (remote, listed) = self.list_for_sync().await?;
        report.listed = listed;
        self.settle(&remote);
        if local.is_empty() && self.state.baseline.len() > 1 && !walked {
            // A wipe is only ever decided on a real scan, never on the watcher's view.
            let files = Arc::clone(&self.files);
            local = Arc::new(blocking(move || files.scan()).await??);
            report.walked = true;
            if !final_sync {
                self.last_local = Some(Arc::clone(&local));
            }
        }
        if local.is_empty() && self.state.baseline.len() > 1 {
            self.recover("every memory file is gone at once").await?;
            self.save_journal().await;
            report.recovered = true;
            return Ok(None);
        }
        Ok(Some((local, remote)))
    }

    /// Decides every path of remote ∪ local ∪ baseline. Neither I/O nor a change of the engine's
    /// state: the plan is carried out after.
    fn plan(&self, local: &BTreeMap<RelPath, LocalFile>, remote: &RemoteMap, report: &mut SyncReport) -> Plan {
        let mut plan = Plan::default();
        let paths: BTreeSet<&RelPath> = remote.keys().chain(local.keys()).chain(self.state.baseline.keys()).collect();
        for rel in paths {
            let local_sha = local.get(rel).map(|f| f.sha256);
            if let Some(removal) = self.plan_path(&mut plan, rel, remote.get(rel), local_sha, report) {
                plan.removals.push(removal);
            }
        }
        plan
    }

    /// Drops the pending-delete records the plan found void.
    pub(super) fn forget_void_pending(&mut self, plan: &mut Plan) {
        for rel in plan.void_pending.drain(..) {
            self.state.pending_deletes.remove(&rel);
        }
    }

    /// Decides one path and files the outcome in `plan`, except a local removal, which is
    /// returned: whether it happens depends on the file still holding what the scan saw.
    pub(super) fn plan_path(
        &self,
        plan: &mut Plan,
        rel: &RelPath,
        remote: Option<&Remote>,
        local: Option<Digest>,
        report: &mut SyncReport,
    ) -> Option<Removal> {
        let d = decide(&PathState {
            remote,
            local,
            baseline: self.state.baseline.get(rel).copied(),
            read_only: self.cfg.read_only,
            refused: self.state.refused.get(rel).copied(),
        });
        if d.clear_pending_delete
            && !self.state.pending_deletes.is_empty()
            && self.state.pending_deletes.contains_key(rel)
        {
            plan.void_pending.push(rel.clone());
        }
        if let Some(w) = d.warning {
            plan.warnings += 1;
            self.log_warning(rel, w);
            if w == Warning::BothChanged {
                report.conflicts += 1;
            }
        }
        match d.action {
            Action::Keep => plan.keep(rel, d.baseline),
            Action::Create => {
                plan.push(Push::Upload(Upload { rel: rel.clone(), existing: None, fallback: None, read: None }))
            }
            Action::Update { memory } => {
                let precondition = memory.content_sha256;
                plan.push(Push::Upload(Upload {
                    rel: rel.clone(),
                    existing: Some((memory.clone(), precondition)),
                    fallback: Some(precondition),
                    read: None,
                }));
            }
            Action::Pull { memory, expect_local } => {
                plan.keep(rel, d.baseline);
                plan.pulls.push(Pull { rel: rel.clone(), memory: memory.clone(), expect_local });
            }
            Action::DeleteCandidate { memory, base } => {
                plan.keep(rel, d.baseline);
                plan.push(Push::Delete { rel: rel.clone(), base, memory: memory.clone() });
            }
            Action::RemoveLocal { expect_local } => {
                return Some(Removal { rel: rel.clone(), expect_local, baseline: d.baseline });
            }
        }
        None
    }

    /// The local files: patched from the watcher's hints when they can be trusted, else a full
    /// walk (which also restarts the watcher, first, so no change slips between the two).
    async fn local_files(
        &mut self,
        force_walk: bool,
    ) -> Result<(Result<Arc<LocalMap>, crate::fs::FsError>, bool), SyncError> {
        let fresh_enough =
            self.syncs_since_walk < super::FULL_WALK_EVERY && self.last_walk.elapsed() < super::FULL_WALK_MAX_AGE;
        if let (false, true, Some(watch), Some(previous)) = (force_walk, fresh_enough, &self.watch, &self.last_local)
            && let super::watch::Changes::Paths(paths) = {
                let (watch_files, watch) = (Arc::clone(&self.files), watch.clone());
                blocking(move || watch.take_settled(&watch_files)).await?
            }
        {
            if paths.is_empty() {
                self.syncs_since_walk += 1;
                return Ok((Ok(Arc::clone(previous)), false));
            }
            let (files, mut local) = (Arc::clone(&self.files), LocalMap::clone(previous));
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
                return Ok((Ok(Arc::new(local)), false));
            }
        }
        if self.cfg.watch && !force_walk && self.files.root_exists() {
            self.watch = match super::watch::Watch::start(&self.cfg.root, self.live_sink()) {
                Ok(w) => Some(Arc::new(w)),
                Err(e) => {
                    tracing::debug!(memory_store_id = %self.cfg.store_id, "no filesystem watch, walking every sync: {e}");
                    None
                }
            };
        }
        let files = Arc::clone(&self.files);
        let local = blocking(move || files.scan()).await?.map(Arc::new);
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
        // The download made every folder there is: watch those without listing any. A file it
        // could not write may have left a folder of its own: then the tree is listed.
        let started = if self.incomplete {
            super::watch::Watch::start(&self.cfg.root, self.live_sink())
        } else {
            let mut folders = BTreeSet::new();
            for rel in self.state.baseline.keys() {
                let mut path = rel.as_str();
                // A folder already named has its parents named too.
                while let Some((parent, _)) = path.rsplit_once('/')
                    && folders.insert(parent)
                {
                    path = parent;
                }
            }
            super::watch::Watch::start_over(&self.cfg.root, folders, self.live_sink())
        };
        match started {
            Ok(w) => {
                self.watch = Some(Arc::new(w));
                let view = self.state.baseline.iter().map(|(rel, sha256)| {
                    // The engine never reads `size` of its own view; only hashes are compared.
                    (rel.clone(), LocalFile { sha256: *sha256, size: 0 })
                });
                self.last_local = Some(Arc::new(view.collect()));
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
        self.fixpoint = None;
    }

    /// An upload whose answer never arrived may have landed: if the listing shows exactly the
    /// bytes sent, adopt them. Then forget every unsettled send.
    pub(crate) fn settle(&mut self, remote: &RemoteMap) {
        for (rel, sent) in self.state.unsettled.drain() {
            if remote.get(&rel).is_some_and(|m| m.content_sha256 == sent) {
                self.state.baseline.insert(rel, sent);
            }
        }
    }

    pub(super) fn log_warning(&self, rel: &RelPath, w: Warning) {
        if w == Warning::RecreatingDeletedRemotely {
            tracing::info!(path = %rel, memory_store_id = %self.cfg.store_id, "{}", w.message());
        } else {
            tracing::warn!(path = %rel, memory_store_id = %self.cfg.store_id, "{}", w.message());
        }
    }
}
