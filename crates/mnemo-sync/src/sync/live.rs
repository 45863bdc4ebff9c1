//! Live sync: a change is synced within moments instead of at the next interval.
//!
//! Two sources feed one **dirty set** of paths, [`Live`]: the store's change feed (a remote
//! change marks its path due at once) and the watcher's hints (a local change marks its path
//! due after [`QUIET`] without further writes to it). [`StoreSync::sync_paths`] then syncs just
//! those paths under the rules of a full sync: the marker check, fresh state of both sides (the
//! file hashed now, the path's folder listed now), unsettled uploads settled, every path decided
//! by [`super::plan::decide`], then the same removal, upload and content passes (conditional
//! updates; `write_if_unchanged`, so a writer racing the pull is never clobbered). Local
//! deletions are never sent from here: they wait for a full sync, its corroboration window and
//! its cap. The periodic full sync stays the safety net for anything live sync skips or misses
//! (a feed that (re)started from now asks for one at once, see [`LiveWork::FullSync`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use mnemo_api::MemoryStoreId;
use mnemo_client::{ChangeSubscription, Client, FeedEvent};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::run::{Plan, Push, SyncReport};
use super::{Remote, RemoteMap, StoreSync, SyncError, blocking};
use crate::fs::{Digest, MARKER_NAME, MarkerState, RelPath};

/// How long a file must go without further writes before live sync uploads it.
pub const QUIET: Duration = Duration::from_millis(200);

/// How long [`Live::subscribe`] waits for the feed to open before the download goes ahead
/// without it (a later opening then asks for a full sync, as any fresh start does).
pub(crate) const CONNECT_WAIT: Duration = Duration::from_secs(2);

/// What the watcher and the feed tell live sync.
#[derive(Debug)]
pub(crate) enum Hint {
    /// The watcher saw this path change.
    Local(RelPath),
    /// The store changed this path.
    Remote(RelPath),
    /// The feed started from now (first connection, or a reconnection without a cursor):
    /// changes committed before it are only found by a full sync.
    Resync,
    /// The feed is gone for good; the reason is logged once.
    Ended(String),
}

/// What to do next, as [`Live::next`] says.
#[derive(Debug)]
pub enum LiveWork {
    /// Sync these paths now ([`StoreSync::sync_paths`]).
    Paths(LivePaths),
    /// Run a full sync now ([`StoreSync::sync`]).
    FullSync,
}

/// Paths due for a live sync, with whether the store changed them (a path only the watcher
/// flagged is skipped without a request when its file still holds the baseline).
#[derive(Debug, Default)]
pub struct LivePaths {
    paths: BTreeMap<RelPath, bool>,
}

/// Paths chosen by the caller: `(path, whether the store changed it)`; a repeated path counts
/// once, and a store change outranks a local one.
impl FromIterator<(RelPath, bool)> for LivePaths {
    fn from_iter<I: IntoIterator<Item = (RelPath, bool)>>(iter: I) -> Self {
        let mut paths = BTreeMap::new();
        for (rel, remote) in iter {
            *paths.entry(rel).or_insert(false) |= remote;
        }
        Self { paths }
    }
}

impl LivePaths {
    /// How many paths are due.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

/// One path of the dirty set.
#[derive(Debug, Clone, Copy)]
struct Dirty {
    due: Instant,
    remote: bool,
    /// Due now whatever the watcher says next ([`Live::written`], or a store change).
    pinned: bool,
}

/// The dirty set of one store's live sync, fed by its change feed (a task following
/// [`Client::subscribe_memory_changes`]) and the engine's watcher. Dropping it stops both.
#[derive(Debug)]
pub struct Live {
    store: MemoryStoreId,
    /// `None` once the feed ended: live sync is off, the interval alone syncs.
    rx: Option<mpsc::UnboundedReceiver<Hint>>,
    /// Where the engine's watcher sends local hints, until [`StoreSync::attach_live`] takes it.
    sink: Option<mpsc::UnboundedSender<Hint>>,
    feed: tokio::task::JoinHandle<()>,
    dirty: BTreeMap<RelPath, Dirty>,
    resync: bool,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.feed.abort();
    }
}

impl Live {
    /// Subscribes to `store`'s change feed *before* its folder is downloaded, so no change
    /// committed during the download is missed and no full sync is needed right after it. Waits
    /// until the feed is open, refused or unsupported (at most two seconds, `CONNECT_WAIT`). Hand the
    /// result to [`StoreSync::attach_live`] once the engine exists.
    pub async fn subscribe(client: &Client, store: MemoryStoreId) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut feed = client.subscribe_memory_changes(store.clone(), None);
        let first = tokio::time::timeout(CONNECT_WAIT, feed.next()).await;
        let mut live = Self::new(store.clone(), rx, tx.clone(), tokio::spawn(async {}));
        match first {
            // Open before the download starts: the download's listing is the fresh start.
            Ok(FeedEvent::Connected { .. }) => {}
            // A subscription opens before it hands out changes; were it ever otherwise, a full
            // sync covers whatever came before.
            Ok(FeedEvent::Change { .. }) => live.resync = true,
            Ok(FeedEvent::Unsupported) => {
                live.stop("the server has no memory change feed");
                return live;
            }
            Ok(FeedEvent::Refused(e)) => {
                live.stop(&format!("the server refused the memory change feed ({e})"));
                return live;
            }
            // Still opening: the subscription goes on and its opening asks for a full sync.
            Err(_) => {
                tracing::debug!(memory_store_id = %store, "the change feed is slow to open; live sync starts with a full sync");
                drop(feed);
                live.feed = tokio::spawn(follow_feed(client.subscribe_memory_changes(store, None), tx));
                return live;
            }
        }
        live.feed = tokio::spawn(follow_feed(feed, tx));
        live
    }

    fn new(
        store: MemoryStoreId,
        rx: mpsc::UnboundedReceiver<Hint>,
        sink: mpsc::UnboundedSender<Hint>,
        feed: tokio::task::JoinHandle<()>,
    ) -> Self {
        Self { store, rx: Some(rx), sink: Some(sink), feed, dirty: BTreeMap::new(), resync: false }
    }

    /// Whether live sync still runs (the feed exists and has not been refused).
    pub fn is_running(&self) -> bool {
        self.rx.is_some()
    }

    /// Waits for the next work: paths whose quiet period ended or that the store changed, or a
    /// full sync the feed asked for. Cancel-safe (the set lives in `self`), so it can sit in a
    /// `select!` beside the interval timer. Never returns once live sync is off.
    pub async fn next(&mut self) -> LiveWork {
        loop {
            let mut queued = Vec::new();
            if let Some(rx) = &mut self.rx {
                while let Ok(hint) = rx.try_recv() {
                    queued.push(hint);
                }
            }
            for hint in queued {
                self.add(hint);
            }
            if std::mem::take(&mut self.resync) {
                return LiveWork::FullSync;
            }
            let now = Instant::now();
            let due: Vec<RelPath> = self.dirty.iter().filter(|(_, d)| d.due <= now).map(|(p, _)| p.clone()).collect();
            if !due.is_empty() {
                let paths = due.into_iter().filter_map(|p| self.dirty.remove(&p).map(|d| (p, d.remote))).collect();
                return LiveWork::Paths(LivePaths { paths });
            }
            let earliest = self.dirty.values().map(|d| d.due).min();
            let Some(rx) = &mut self.rx else {
                return std::future::pending().await;
            };
            tokio::select! {
                hint = rx.recv() => match hint {
                    Some(hint) => self.add(hint),
                    None => self.stop("the change feed task ended"),
                },
                () = tokio::time::sleep_until(earliest.unwrap_or(now)), if earliest.is_some() => {}
            }
        }
    }

    /// The caller wrote `rel` in full and knows it is complete (a worker's `write` or `edit`
    /// call): it is due now, without the quiet period meant for writers the engine cannot see
    /// finish. Nothing happens once live sync is off.
    pub fn written(&mut self, rel: RelPath) {
        if self.rx.is_none() {
            return;
        }
        let entry = self.dirty.entry(rel).or_insert(Dirty { due: Instant::now(), remote: false, pinned: true });
        entry.due = Instant::now();
        entry.pinned = true;
    }

    fn add(&mut self, hint: Hint) {
        let now = Instant::now();
        match hint {
            Hint::Local(rel) => {
                let entry = self.dirty.entry(rel).or_insert(Dirty { due: now + QUIET, remote: false, pinned: false });
                // Every further write restarts the quiet period; a pinned path stays due now.
                if !entry.pinned {
                    entry.due = now + QUIET;
                }
            }
            Hint::Remote(rel) => {
                self.dirty.insert(rel, Dirty { due: now, remote: true, pinned: true });
            }
            Hint::Resync => self.resync = true,
            Hint::Ended(reason) => self.stop(&reason),
        }
    }

    fn stop(&mut self, reason: &str) {
        tracing::info!(memory_store_id = %self.store, "{reason}; syncing on the interval only");
        self.rx = None;
        self.sink = None;
        self.dirty.clear();
    }
}

/// Follows the store's change feed into `tx` until it ends or `tx` closes.
async fn follow_feed(mut feed: ChangeSubscription, tx: mpsc::UnboundedSender<Hint>) {
    loop {
        let hint = match feed.next().await {
            FeedEvent::Connected { resumed: true } => continue,
            FeedEvent::Connected { resumed: false } => Hint::Resync,
            FeedEvent::Change { change, .. } => {
                // A redacted version names no path; nothing to pull for it.
                let Some(path) = change.path else { continue };
                if path.trim_start_matches('/') == MARKER_NAME {
                    continue;
                }
                match RelPath::from_memory_path(&path) {
                    Ok(rel) => Hint::Remote(rel),
                    Err(_) => continue, // the full sync logs why such a memory is skipped
                }
            }
            FeedEvent::Unsupported => Hint::Ended("the server has no memory change feed".into()),
            FeedEvent::Refused(e) => Hint::Ended(format!("the server refused the memory change feed ({e})")),
        };
        let last = matches!(hint, Hint::Ended(_));
        if tx.send(hint).is_err() || last {
            return;
        }
    }
}

/// The folder listing that shows `rel`: `/` for a top-level file, else `/dir/`.
fn folder_of(rel: &RelPath) -> String {
    match rel.as_str().rsplit_once('/') {
        Some((dir, _)) => format!("/{dir}/"),
        None => "/".to_owned(),
    }
}

impl StoreSync {
    /// Starts live sync: subscribes to the store's change feed and has the watcher report
    /// local changes too (unless the store is read-only: nothing local is ever pushed). Drive
    /// it with [`Live::next`] and [`sync_paths`](Self::sync_paths).
    ///
    /// The feed starts from now, so its opening asks for a full sync (changes made since the
    /// engine last listed the store are only found that way); [`Live::subscribe`] before the
    /// download avoids that.
    pub fn live(&mut self) -> Live {
        let (tx, rx) = mpsc::unbounded_channel();
        let feed = self.client.subscribe_memory_changes(self.cfg.store_id.clone(), None);
        let mut live = Live::new(self.cfg.store_id.clone(), rx, tx.clone(), tokio::spawn(follow_feed(feed, tx)));
        self.attach_live(&mut live);
        live
    }

    /// Has the watcher report local changes to `live` (unless the store is read-only: nothing
    /// local is ever pushed, so only the feed drives it).
    pub fn attach_live(&mut self, live: &mut Live) {
        let Some(tx) = live.sink.take() else { return };
        if self.cfg.read_only {
            return;
        }
        if let Some(watch) = &self.watch {
            watch.set_live(tx.clone());
        }
        self.live = Some(tx);
    }

    /// Does what [`Live::next`] asked for, and logs the outcome (a failure is left to the
    /// next full sync, which retries everything).
    pub async fn run_live(&mut self, work: LiveWork) {
        let store = self.cfg.store_id.clone();
        let outcome = match work {
            LiveWork::FullSync => self.sync(false).await.map(|r| ("synced", r)),
            LiveWork::Paths(paths) => self.sync_paths(paths).await.map(|r| ("live sync", r)),
        };
        match outcome {
            Ok((what, report)) if report.changed() => tracing::info!(memory_store_id = %store, "{what}: {report}"),
            Ok((what, _)) => tracing::debug!(memory_store_id = %store, "{what}: no changes"),
            Err(e) => {
                tracing::warn!(memory_store_id = %store, "live memory sync failed (the next full sync retries): {e}")
            }
        }
    }

    /// What a (re)started watcher sends live hints to.
    pub(crate) fn live_sink(&self) -> Option<super::watch::LiveSink> {
        self.live.clone()
    }

    /// Syncs just `due` (see the module docs): the rules of [`sync`](Self::sync) on fresh state
    /// of those paths, except that local deletions are left to the next full sync. A path the
    /// engine cannot judge alone (a directory, a symlink, a folder whose marker fails) is left
    /// to the full sync as well.
    pub async fn sync_paths(&mut self, due: LivePaths) -> Result<SyncReport, SyncError> {
        let started = std::time::Instant::now();
        let outcome = self.sync_paths_unrecorded(due).await;
        super::metrics::sync_done("live", started, &outcome);
        outcome
    }

    /// [`sync_paths`](Self::sync_paths) without its metrics.
    async fn sync_paths_unrecorded(&mut self, due: LivePaths) -> Result<SyncReport, SyncError> {
        let mut report = SyncReport::default();
        if self.final_done || due.is_empty() {
            return Ok(report);
        }
        if self.marker().await? != MarkerState::Matches {
            report.skipped = true;
            return Ok(report);
        }
        let files = Arc::clone(&self.files);
        let paths: Vec<(RelPath, bool)> = due.paths.into_iter().collect();
        let hashed = blocking(move || {
            let mut hashed = Vec::new();
            let mut dirs = Vec::new();
            for (rel, remote) in paths {
                match files.hash_now(&rel) {
                    Ok(sha) => hashed.push((rel, remote, sha)),
                    // A new directory may hold files written before the watcher saw it: they
                    // are synced with it (found by a walk, as a full sync finds them).
                    Err(_) if files.root().join(rel.as_str()).symlink_metadata().is_ok_and(|m| m.is_dir()) => {
                        dirs.push(format!("{rel}/"))
                    }
                    Err(_) => {}
                }
            }
            if !dirs.is_empty()
                && let Ok(all) = files.scan()
            {
                let below = all.into_iter().filter(|(p, _)| dirs.iter().any(|d| p.as_str().starts_with(d.as_str())));
                hashed.extend(below.map(|(p, f)| (p, false, Some(f.sha256))));
            }
            hashed
        })
        .await?;
        let mut local: BTreeMap<RelPath, Option<Digest>> = BTreeMap::new();
        for (rel, remote, sha) in hashed {
            let baseline = self.state.baseline.get(&rel).copied();
            // Only the watcher flagged it: nothing to send unless the file holds new bytes (a
            // change of the store comes with its own event, a deletion waits for a full sync).
            let unchanged = sha.is_none() || sha == baseline;
            if !remote && (unchanged || self.cfg.read_only) {
                continue;
            }
            local.insert(rel, sha);
        }
        if local.is_empty() {
            return Ok(report);
        }
        let remote = self.list_paths(local.keys()).await?;
        for rel in local.keys() {
            if let Some(sent) = self.state.unsettled.remove(rel)
                && remote.get(rel).is_some_and(|m| m.content_sha256 == sent)
            {
                self.state.baseline.insert(rel.clone(), sent);
            }
        }
        let mut plan = Plan::default();
        plan.next = self.state.baseline.clone();
        for (rel, sha) in &local {
            plan.next.remove(rel);
            if let Some(removal) = self.plan_path(&mut plan, rel, remote.get(rel), *sha, &mut report) {
                plan.removals.push(removal);
            }
        }
        self.forget_void_pending(&mut plan);
        self.remove_locals(&mut plan, &remote, &mut report).await?;
        // Deletion candidates keep their baseline (planned above) and wait for a full sync.
        let uploads = std::mem::take(&mut plan.pushes).into_iter().filter(|p| matches!(p, Push::Upload(_))).collect();
        self.send_pushes(uploads, false, &mut plan.next, &mut report).await;
        self.state.baseline = plan.next;
        self.content_pass(plan.pulls, &mut report).await;
        self.save_journal().await;
        Ok(report)
    }

    /// The store's memories at `paths`, read now: one content-free listing per folder.
    async fn list_paths(&self, paths: impl Iterator<Item = &RelPath>) -> Result<RemoteMap, SyncError> {
        let wanted: BTreeSet<&RelPath> = paths.collect();
        let folders: BTreeSet<String> = wanted.iter().map(|rel| folder_of(rel)).collect();
        let mut remote = RemoteMap::new();
        for folder in folders {
            for memory in self.client.list_folder(&self.cfg.store_id, &folder).await? {
                if let Some(rel) = self.local_path(&memory)
                    && wanted.contains(&rel)
                    && let Some(listed) = Remote::of(&memory)
                {
                    remote.insert(rel, listed);
                }
            }
        }
        Ok(remote)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    fn live() -> (Live, mpsc::UnboundedSender<Hint>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Live::new(MemoryStoreId::generate(), rx, tx.clone(), tokio::spawn(async {})), tx)
    }

    fn paths(work: LiveWork) -> Vec<(String, bool)> {
        match work {
            LiveWork::Paths(p) => p.paths.into_iter().map(|(r, remote)| (r.as_str().to_owned(), remote)).collect(),
            LiveWork::FullSync => panic!("expected paths"),
        }
    }

    #[test]
    fn folders_are_listing_prefixes() {
        assert_eq!(folder_of(&rel("a.md")), "/");
        assert_eq!(folder_of(&rel("d/e/a.md")), "/d/e/");
    }

    #[tokio::test(start_paused = true)]
    async fn local_changes_wait_for_quiet_and_remote_ones_do_not() {
        let (mut live, tx) = live();
        let start = Instant::now();
        tx.send(Hint::Local(rel("a.md"))).unwrap();
        tx.send(Hint::Remote(rel("b.md"))).unwrap();
        assert_eq!(paths(live.next().await), [("b.md".to_owned(), true)]);
        assert!(start.elapsed() < QUIET);
        // Writes keep coming for a while: the quiet period restarts with each.
        for _ in 0..3 {
            tokio::time::sleep(QUIET / 2).await;
            tx.send(Hint::Local(rel("a.md"))).unwrap();
        }
        let t = Instant::now();
        assert_eq!(paths(live.next().await), [("a.md".to_owned(), false)]);
        assert!(t.elapsed() >= QUIET - QUIET / 2, "{:?}", t.elapsed());
        // Duplicates of one path come out once; a resync outranks pending paths.
        tx.send(Hint::Remote(rel("c.md"))).unwrap();
        tx.send(Hint::Remote(rel("c.md"))).unwrap();
        tx.send(Hint::Resync).unwrap();
        assert!(matches!(live.next().await, LiveWork::FullSync));
        assert_eq!(paths(live.next().await), [("c.md".to_owned(), true)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_written_in_full_is_due_at_once_whatever_the_watcher_says() {
        let (mut live, tx) = live();
        let start = Instant::now();
        tx.send(Hint::Local(rel("w.md"))).unwrap();
        live.written(rel("w.md"));
        // The watcher's late event for the same write must not push it back.
        tx.send(Hint::Local(rel("w.md"))).unwrap();
        assert_eq!(paths(live.next().await), [("w.md".to_owned(), false)]);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn an_ended_feed_turns_live_sync_off() {
        let (mut live, tx) = live();
        tx.send(Hint::Local(rel("a.md"))).unwrap();
        tx.send(Hint::Ended("the server has no memory change feed".into())).unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(5), live.next()).await;
        assert!(waited.is_err(), "nothing more comes once the feed ended");
        assert!(!live.is_running());
    }
}
