//! Live sync: a change is synced within moments instead of at the next interval.
//!
//! Two sources feed one **dirty set** of paths, [`Live`]: the store's change feed (a remote
//! change marks its path due at once) and the watcher's hints (a local change marks its path
//! due after [`QUIET`] without further writes to it). The watcher's hints wait in
//! [`LocalHints`], which wakes live sync only when it stops being empty: a burst of writes
//! costs live sync one wake-up and its timer, not one per filesystem event. Local changes go up
//! **together**: the set's local paths fall due when the last of them has been quiet for
//! [`QUIET`] (at most [`MAX_HOLD`] after the first was), so a burst of writes is one live sync
//! and one batch request rather than one of each per file. [`StoreSync::sync_paths`] then syncs
//! just those paths under the rules of a full sync: the marker check, fresh state of both sides
//! (the file read now, and sent as read if it goes up; the store's listing — the conditional
//! listing of the whole store while the engine knows of no change since its last one, which the
//! server answers with a bare `304`, else each path's folder listed now), unsettled uploads
//! settled, every path decided by
//! [`super::plan::decide`], then the same removal, upload and content passes (conditional
//! updates; `write_if_unchanged`, so a writer racing the pull is never clobbered). Local
//! deletions are never sent from here: they wait for a full sync, its corroboration window and
//! its cap. The periodic full sync stays the safety net for anything live sync skips or misses
//! (a feed that (re)started from now asks for one at once, see [`LiveWork::FullSync`]).
//!
//! The feed also tells the engine of its own writes (every upload comes back as a change): a
//! change whose digest is what the engine already agreed on at that path, at a path the watcher
//! did not flag, is dropped without a request ([`Seen`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mnemo_api::MemoryStoreId;
use mnemo_client::{ChangeSubscription, Client, FeedEvent};
use tokio::sync::mpsc;
use tokio::time::Instant;

use mnemo_api::Operation;

use super::run::{Plan, Push, SyncReport};
use super::upload::Ready;
use super::{Remote, RemoteMap, StoreSync, SyncError, blocking};
use crate::fs::{Digest, Durability, MARKER_NAME, MarkerState, RelPath};

/// How long a file must go without further writes before live sync uploads it.
pub const QUIET: Duration = Duration::from_millis(200);

/// How long a burst of local writes may hold back the files of it already quiet: once the
/// first of them has been quiet this long, every file quiet by then goes up, even while others
/// are still being written (a file rewritten without pause would otherwise hold up the rest).
pub(crate) const MAX_HOLD: Duration = Duration::from_secs(1);

/// While live sync runs, a full sync with nothing pending ([`StoreSync::full_sync_needed`]) is
/// skipped, but no more than this many intervals in a row: the safety net for whatever both the
/// feed and the watcher could miss. The engine walks the tree every [`super::FULL_WALK_EVERY`]
/// syncs, so this keeps a live mount's walks as rare as they were.
pub const LIVE_FULL_SYNC_EVERY: u32 = 20;

/// Which interval ticks of a live mount run a full sync. While live sync runs, a tick with
/// nothing pending for a full sync ([`StoreSync::full_sync_needed`]) is skipped, up to
/// [`LIVE_FULL_SYNC_EVERY`]` - 1` in a row. A folder left incomplete by a pull that failed
/// ([`StoreSync::is_incomplete`]: the disk was full) gets a full sync at the next tick, then,
/// while it stays incomplete (the disk still full), after 2, 4, 8 … ticks, never rarer than the
/// safety net: each one fetches what is missing again, too much to repeat every interval
/// against a disk that stays full. Once a full sync completes it, ticks are skipped again.
/// Without live sync every tick runs one.
#[derive(Debug, Default)]
pub struct FullSyncTicks {
    /// Ticks since the last full sync.
    skipped: u32,
    /// Full syncs in a row that left the folder incomplete.
    incomplete_runs: u32,
}

impl FullSyncTicks {
    /// Whether this tick runs a full sync, given whether live sync runs, whether the engine
    /// needs a full sync for what live sync leaves to it, and whether its folder is incomplete.
    /// A tick that runs none is counted; call [`ran`](Self::ran) after one that runs.
    pub fn due(&mut self, live_running: bool, needed: bool, incomplete: bool) -> bool {
        let ticks = self.skipped + 1;
        let due = !live_running
            || needed
            || ticks >= LIVE_FULL_SYNC_EVERY
            || (incomplete && ticks >= (1 << self.incomplete_runs.min(5)).min(LIVE_FULL_SYNC_EVERY));
        if !due {
            self.skipped = ticks;
        }
        due
    }

    /// A full sync ran (on a tick, or because live sync asked for one) and left the folder
    /// `incomplete` or not.
    pub fn ran(&mut self, incomplete: bool) {
        self.skipped = 0;
        self.incomplete_runs = if incomplete { self.incomplete_runs.saturating_add(1) } else { 0 };
    }
}

/// How long [`Live::subscribe`] waits for the feed to open before the download goes ahead
/// without it (a later opening then asks for a full sync, as any fresh start does).
pub(crate) const CONNECT_WAIT: Duration = Duration::from_secs(2);

/// What the watcher saw change, for live sync: each path with when it last changed. The
/// watcher's thread adds to it ([`saw`](Self::saw)); live sync reads it when its timer says the
/// set may be due and takes it when it is. Live sync is woken only when it stops being empty,
/// so the events of a burst after the first cost no wake-up (each write, close and truncation
/// of a file is an event of its own).
#[derive(Debug, Default)]
pub(crate) struct LocalHints {
    /// `None` once live sync stopped: nothing is recorded any more.
    seen: Mutex<Option<HashMap<RelPath, Instant>>>,
    wake: tokio::sync::Notify,
}

impl LocalHints {
    fn open() -> Arc<Self> {
        Arc::new(Self { seen: Mutex::new(Some(HashMap::new())), wake: tokio::sync::Notify::new() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HashMap<RelPath, Instant>>> {
        // Every change under the lock is a single insert or take, whole or not at all.
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The watcher saw `rel` change now; `false` once live sync stopped (nothing recorded).
    pub(crate) fn saw(&self, rel: RelPath) -> bool {
        let now = Instant::now();
        let first = {
            let mut seen = self.lock();
            let Some(seen) = seen.as_mut() else { return false };
            let first = seen.is_empty();
            seen.insert(rel, now);
            first
        };
        if first {
            self.wake.notify_one();
        }
        true
    }

    /// When the earliest and the latest of the waiting paths last changed.
    fn span(&self) -> Option<(Instant, Instant)> {
        let seen = self.lock();
        let mut times = seen.as_ref()?.values().copied();
        let first = times.next()?;
        Some(times.fold((first, first), |(lo, hi), t| (lo.min(t), hi.max(t))))
    }

    /// Everything waiting; the next path seen wakes live sync again.
    fn take(&self) -> HashMap<RelPath, Instant> {
        self.lock().as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Live sync stopped: forget what waits, record nothing more.
    fn close(&self) {
        *self.lock() = None;
    }
}

/// What the feed tells live sync.
#[derive(Debug)]
pub(crate) enum Hint {
    /// The store changed this path, to what the feed says.
    Remote(RelPath, Seen),
    /// The store changed this path to these bytes, which came with the feed's entry (to be
    /// checked against the entry's digest before they are written).
    RemoteBytes(RelPath, Digest, Arc<String>),
    /// The feed started from now (first connection, or a reconnection without a cursor):
    /// changes committed before it are only found by a full sync.
    Resync,
    /// The feed is gone for good; the reason is logged once.
    Ended(String),
}

/// What the change feed said a path holds after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// These bytes (by digest).
    Holds(Digest),
    /// Nothing: the memory was deleted.
    Gone,
    /// The feed did not say (a redacted or unreadable digest), or the caller named the path.
    Unknown,
}

impl Seen {
    fn of(change: &mnemo_api::MemoryChangeEvent) -> Self {
        match change.operation {
            Operation::Deleted => Self::Gone,
            Operation::Created | Operation::Modified => {
                change.content_sha256.as_deref().and_then(Digest::parse_hex).map_or(Self::Unknown, Self::Holds)
            }
        }
    }
}

/// What to do next, as [`Live::next`] says.
#[derive(Debug)]
pub enum LiveWork {
    /// Sync these paths now ([`StoreSync::sync_paths`]).
    Paths(LivePaths),
    /// Run a full sync now ([`StoreSync::sync`]).
    FullSync,
}

/// Paths due for a live sync, with who flagged them (a path only the watcher flagged is skipped
/// without a request when its file still holds the baseline; one only the feed flagged, when
/// the store holds what the engine already agreed on).
#[derive(Debug, Default)]
pub struct LivePaths {
    paths: BTreeMap<RelPath, Flags>,
    /// The bytes of a path's newest store change, where they came with the feed.
    bytes: BTreeMap<RelPath, (Digest, Arc<String>)>,
}

/// Who flagged a due path.
#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    /// The store changed it; with what the feed said it holds now (the newest change's).
    remote: Option<Seen>,
    /// The watcher (or the caller) saw it change.
    local: bool,
}

impl Flags {
    /// The store holds what both sides last agreed on, as far as the feed says: a change the
    /// engine itself made, or already has.
    fn store_agrees(&self, baseline: Option<Digest>) -> bool {
        match self.remote {
            Some(Seen::Holds(sha)) => baseline == Some(sha),
            Some(Seen::Gone) => baseline.is_none(),
            Some(Seen::Unknown) | None => false,
        }
    }

    /// A change of the store the engine itself made, or already has, and nothing local is
    /// pending.
    fn is_echo(&self, baseline: Option<Digest>) -> bool {
        !self.local && self.store_agrees(baseline)
    }
}

/// Paths chosen by the caller: `(path, whether the store changed it)`; a repeated path counts
/// once, and a store change outranks a local one.
impl FromIterator<(RelPath, bool)> for LivePaths {
    fn from_iter<I: IntoIterator<Item = (RelPath, bool)>>(iter: I) -> Self {
        let mut paths: BTreeMap<RelPath, Flags> = BTreeMap::new();
        for (rel, remote) in iter {
            let flags = paths.entry(rel).or_default();
            if remote {
                flags.remote = Some(Seen::Unknown);
            } else {
                flags.local = true;
            }
        }
        Self { paths, bytes: BTreeMap::new() }
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
    /// When its own quiet period ends (now for a pinned path).
    due: Instant,
    flags: Flags,
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
    /// What the engine's watcher saw change ([`StoreSync::attach_live`] hands it over).
    local: Arc<LocalHints>,
    feed: tokio::task::JoinHandle<()>,
    /// How many times [`next`](Self::next) woke up.
    #[cfg(test)]
    turns: usize,
    dirty: BTreeMap<RelPath, Dirty>,
    /// The bytes of a dirty path's newest store change, where they came with the feed.
    bytes: BTreeMap<RelPath, (Digest, Arc<String>)>,
    resync: bool,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.feed.abort();
        self.local.close();
    }
}

impl Live {
    /// Subscribes to `store`'s change feed *before* its folder is downloaded, so no change
    /// committed during the download is missed and no full sync is needed right after it. Waits
    /// until the feed is open, refused or unsupported (at most two seconds, `CONNECT_WAIT`). Hand the
    /// result to [`StoreSync::attach_live`] once the engine exists.
    pub async fn subscribe(client: &Client, store: MemoryStoreId) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut feed = client.subscribe_memory_changes(store.clone(), None).with_content();
        let first = tokio::time::timeout(CONNECT_WAIT, feed.next()).await;
        let mut live = Self::new(store.clone(), rx, tokio::spawn(async {}));
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
                live.feed = tokio::spawn(follow_feed(client.subscribe_memory_changes(store, None).with_content(), tx));
                return live;
            }
        }
        live.feed = tokio::spawn(follow_feed(feed, tx));
        live
    }

    fn new(store: MemoryStoreId, rx: mpsc::UnboundedReceiver<Hint>, feed: tokio::task::JoinHandle<()>) -> Self {
        Self {
            store,
            rx: Some(rx),
            local: LocalHints::open(),
            feed,
            #[cfg(test)]
            turns: 0,
            dirty: BTreeMap::new(),
            bytes: BTreeMap::new(),
            resync: false,
        }
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
            #[cfg(test)]
            {
                self.turns += 1;
            }
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
            let wake = self.batch_due(now);
            if wake.is_some_and(|at| at <= now) {
                self.take_local();
                // Every path pinned or quiet by now goes, together.
                let due: Vec<RelPath> =
                    self.dirty.iter().filter(|(_, d)| d.pinned || d.due <= now).map(|(p, _)| p.clone()).collect();
                let mut bytes = BTreeMap::new();
                for p in &due {
                    if let Some(b) = self.bytes.remove(p) {
                        bytes.insert(p.clone(), b);
                    }
                }
                let paths = due.into_iter().filter_map(|p| self.dirty.remove(&p).map(|d| (p, d.flags))).collect();
                return LiveWork::Paths(LivePaths { paths, bytes });
            }
            let Some(rx) = &mut self.rx else {
                return std::future::pending().await;
            };
            tokio::select! {
                hint = rx.recv() => match hint {
                    Some(hint) => self.add(hint),
                    None => self.stop("the change feed task ended"),
                },
                // The watcher's first path since the set was last taken (its later ones wait
                // for the timer).
                () = self.local.wake.notified() => {}
                () = tokio::time::sleep_until(wake.unwrap_or(now)), if wake.is_some() => {}
            }
        }
    }

    /// When the dirty set is due: now with a pinned path in it; else once its last local path
    /// has been quiet for [`QUIET`], but no later than [`MAX_HOLD`] after its first was. `None`
    /// when it is empty. The watcher's waiting paths count as they are, without being taken.
    fn batch_due(&self, now: Instant) -> Option<Instant> {
        if self.dirty.values().any(|d| d.pinned) {
            return Some(now);
        }
        let waiting = self.local.span().map(|(lo, hi)| (lo + QUIET, hi + QUIET));
        let mut quiet = self.dirty.values().map(|d| (d.due, d.due)).chain(waiting);
        let first = quiet.next()?;
        let (earliest, latest) = quiet.fold(first, |(lo, hi), (l, h)| (lo.min(l), hi.max(h)));
        Some(latest.min(earliest + MAX_HOLD))
    }

    /// Moves the watcher's waiting paths into the dirty set: each due once quiet for [`QUIET`]
    /// after its last change (a pinned path stays due now).
    fn take_local(&mut self) {
        for (rel, seen) in self.local.take() {
            let entry =
                self.dirty.entry(rel).or_insert(Dirty { due: seen + QUIET, flags: Flags::default(), pinned: false });
            entry.flags.local = true;
            if !entry.pinned {
                entry.due = seen + QUIET;
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
        let now = Instant::now();
        let entry = self.dirty.entry(rel).or_insert(Dirty { due: now, flags: Flags::default(), pinned: true });
        entry.due = now;
        entry.flags.local = true;
        entry.pinned = true;
    }

    fn add(&mut self, hint: Hint) {
        let now = Instant::now();
        match hint {
            Hint::Remote(rel, seen) => {
                // The newest change is what the store holds now: bytes of an older one are stale.
                self.bytes.remove(&rel);
                let entry = self.dirty.entry(rel).or_insert(Dirty { due: now, flags: Flags::default(), pinned: true });
                entry.flags.remote = Some(seen);
                entry.due = now;
                entry.pinned = true;
            }
            Hint::RemoteBytes(rel, digest, bytes) => {
                self.add(Hint::Remote(rel.clone(), Seen::Holds(digest)));
                self.bytes.insert(rel, (digest, bytes));
            }
            Hint::Resync => self.resync = true,
            Hint::Ended(reason) => self.stop(&reason),
        }
    }

    fn stop(&mut self, reason: &str) {
        tracing::info!(memory_store_id = %self.store, "{reason}; syncing on the interval only");
        self.rx = None;
        self.local.close();
        self.dirty.clear();
        self.bytes.clear();
    }
}

/// Follows the store's change feed into `tx` until it ends or `tx` closes.
async fn follow_feed(mut feed: ChangeSubscription, tx: mpsc::UnboundedSender<Hint>) {
    loop {
        let hint = match feed.next().await {
            FeedEvent::Connected { resumed: true } => continue,
            FeedEvent::Connected { resumed: false } => Hint::Resync,
            FeedEvent::Change { change, .. } => {
                let seen = Seen::of(&change);
                // A redacted version names no path; nothing to pull for it.
                let Some(path) = change.path else { continue };
                if path.trim_start_matches('/') == MARKER_NAME {
                    continue;
                }
                let Ok(rel) = RelPath::from_memory_path(&path) else {
                    continue; // the full sync logs why such a memory is skipped
                };
                match (seen, change.content) {
                    // Checked against the digest only if written: most are the engine's own
                    // uploads coming back, dropped unread.
                    (Seen::Holds(digest), Some(bytes)) => Hint::RemoteBytes(rel, digest, Arc::new(bytes)),
                    _ => Hint::Remote(rel, seen),
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
        let feed = self.client.subscribe_memory_changes(self.cfg.store_id.clone(), None).with_content();
        let mut live = Live::new(self.cfg.store_id.clone(), rx, tokio::spawn(follow_feed(feed, tx)));
        self.attach_live(&mut live);
        live
    }

    /// Has the watcher report local changes to `live` (unless the store is read-only: nothing
    /// local is ever pushed, so only the feed drives it).
    pub fn attach_live(&mut self, live: &mut Live) {
        if self.cfg.read_only || !live.is_running() {
            return;
        }
        if let Some(watch) = &self.watch {
            watch.set_live(Arc::clone(&live.local));
        }
        self.live = Some(Arc::clone(&live.local));
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

    /// Whether a full sync has anything to do that live sync leaves to it: a change the watcher
    /// saw that live sync did not take (none ran, or it stopped) or a rescan it asked for,
    /// something of the paths live sync took that it could not settle (a deletion, a new
    /// directory, an unreadable file, an upload that did not land: [`Self::sync_paths`]), a
    /// deletion waiting for its window, an upload of unknown outcome, or no watcher at all.
    /// While live sync runs, the interval's full sync can be skipped otherwise: the feed reports
    /// every change of the store, and live sync has settled every change the watcher saw, so it
    /// would list an unchanged store and re-read files it already agrees on (`mnemo mount` still
    /// runs one every [`LIVE_FULL_SYNC_EVERY`] intervals, as the safety net).
    pub fn full_sync_needed(&self) -> bool {
        self.watch.as_ref().is_none_or(|w| w.left_to_full_sync())
            || self.live_left
            || self.last_local.is_none()
            || !self.state.pending_deletes.is_empty()
            || !self.state.unsettled.is_empty()
    }

    /// Whether the folder lacks something of the store a pull failed to bring (a full disk, a
    /// failed fetch) since the last full sync planned every path. Live sync never makes such a
    /// pull again on its own (no hint comes for it), so while this holds a live mount runs full
    /// syncs ([`FullSyncTicks`]).
    pub fn is_incomplete(&self) -> bool {
        self.incomplete
    }

    /// What a (re)started watcher sends live hints to.
    pub(crate) fn live_sink(&self) -> Option<super::watch::LiveSink> {
        self.live.clone()
    }

    /// Syncs just `due` (see the module docs): the rules of [`sync`](Self::sync) on fresh state
    /// of those paths, except that local deletions are left to the next full sync. A path the
    /// engine cannot judge alone (a directory, a symlink, a folder whose marker fails) is left
    /// to the full sync as well.
    ///
    /// A local path it took is settled when, afterwards, both sides agree on the bytes it read
    /// from the file; any other is left to the next full sync ([`Self::full_sync_needed`]).
    pub async fn sync_paths(&mut self, due: LivePaths) -> Result<SyncReport, SyncError> {
        let started = std::time::Instant::now();
        let outcome = self.sync_paths_unrecorded(due).await;
        self.live_left |= outcome.is_err();
        super::metrics::sync_done("live", started, &outcome);
        outcome
    }

    /// [`sync_paths`](Self::sync_paths) without its metrics.
    async fn sync_paths_unrecorded(&mut self, mut due: LivePaths) -> Result<SyncReport, SyncError> {
        let mut report = SyncReport::default();
        // The engine's own writes coming back through the feed (and changes it already has);
        // where a local change waits too (the echo of the last upload met the next edit), the
        // store's side is no change.
        due.paths.retain(|rel, flags| !flags.is_echo(self.state.baseline.get(rel).copied()));
        for (rel, flags) in &mut due.paths {
            if flags.local && flags.store_agrees(self.state.baseline.get(rel).copied()) {
                flags.remote = None;
                due.bytes.remove(rel);
            }
        }
        if self.final_done || due.is_empty() {
            return Ok(report);
        }
        let (files, id) = (Arc::clone(&self.files), self.cfg.store_id.to_string());
        let paths: Vec<(RelPath, bool, Option<Digest>)> = due
            .paths
            .into_iter()
            .map(|(rel, f)| {
                let baseline = self.state.baseline.get(&rel).copied();
                (rel, f.remote.is_some(), baseline)
            })
            .collect();
        // The marker is read in the same trip to the blocking pool as the files. Each file is
        // read once: a changed one is sent as read here, if it goes up.
        let hashed = blocking(move || {
            if files.check_marker(&id) != MarkerState::Matches {
                return None;
            }
            let mut hashed = Vec::new();
            let mut read = BTreeMap::new();
            let mut dirs = Vec::new();
            // A path it could not read (a symlink, no permission), or a new directory: the
            // full sync judges them.
            let mut unreadable = false;
            for (rel, remote, baseline) in paths {
                match files.read_now(&rel) {
                    Ok(Some((sha, bytes))) => {
                        if Some(sha) != baseline
                            && let Some(ready) = Ready::of(sha, bytes)
                        {
                            read.insert(rel.clone(), ready);
                        }
                        hashed.push((rel, remote, Some(sha)));
                    }
                    Ok(None) => hashed.push((rel, remote, None)),
                    // A new directory may hold files written before the watcher saw it: they
                    // are synced with it (found by a walk, as a full sync finds them).
                    Err(_) if files.root().join(rel.as_str()).symlink_metadata().is_ok_and(|m| m.is_dir()) => {
                        dirs.push(format!("{rel}/"))
                    }
                    Err(_) => unreadable = true,
                }
            }
            if !dirs.is_empty() {
                unreadable = true;
                if let Ok(all) = files.scan() {
                    let below =
                        all.into_iter().filter(|(p, _)| dirs.iter().any(|d| p.as_str().starts_with(d.as_str())));
                    hashed.extend(below.map(|(p, f)| (p, false, Some(f.sha256))));
                }
            }
            Some((hashed, read, unreadable))
        })
        .await?;
        let Some((hashed, mut read, unreadable)) = hashed else {
            // The marker failed: everything waits for the full sync, which says why.
            self.live_left = true;
            report.skipped = true;
            return Ok(report);
        };
        self.live_left |= unreadable;
        // The watcher's paths and what their files held: settled if the baseline says so at the end.
        let mut judged: Vec<(RelPath, Option<Digest>)> = Vec::new();
        let mut local: BTreeMap<RelPath, Option<Digest>> = BTreeMap::new();
        let mut store_changed = false;
        for (rel, remote, sha) in hashed {
            let baseline = self.state.baseline.get(&rel).copied();
            // Only the watcher flagged it: nothing to send unless the file holds new bytes (a
            // change of the store comes with its own event, a deletion waits for a full sync).
            let unchanged = sha.is_none() || sha == baseline;
            if !remote && (unchanged || self.cfg.read_only) {
                // A deletion, or a change of a read-only store's file, is the full sync's.
                self.live_left |= sha != baseline;
                continue;
            }
            if !remote {
                judged.push((rel.clone(), sha));
            }
            store_changed |= remote;
            local.insert(rel, sha);
        }
        if store_changed {
            self.write_bytes_from_the_feed(&mut local, &due.bytes, &mut report).await;
            if local.is_empty() {
                // Only the feed's bytes were written: the journal follows within JOURNAL_LAG.
                self.defer_journal();
                return Ok(report);
            }
        }
        if local.is_empty() {
            return Ok(report);
        }
        let remote = if !store_changed && let Some(agreed) = self.remote_as_agreed(local.keys()) {
            // The feed told of no change of these paths: the store holds what both sides last
            // agreed on, in the memories the engine knows. No request: an update's precondition
            // still refuses it should the store have changed meanwhile.
            Arc::new(agreed)
        } else if self.listing_is_current() && !store_changed {
            // Nothing changed in the store since the last listing as far as the engine knows:
            // the conditional listing, a bare `304` on the server (else a fresh listing).
            self.list_for_sync().await?.0
        } else {
            // The store changed since: each path's folder, fresh, rather than the whole store.
            self.wrote();
            let listed = self.list_paths(local.keys()).await?;
            for (rel, memory) in &listed {
                self.learned_id(rel, memory.id.clone());
            }
            Arc::new(listed)
        };
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
        let uploads = std::mem::take(&mut plan.pushes)
            .into_iter()
            .filter_map(|p| match p {
                // Sent as read above when the plan judged those very bytes.
                Push::Upload(mut u) => {
                    u.read = read.remove(&u.rel).filter(|r| local.get(&u.rel) == Some(&Some(r.sha)));
                    Some(Push::Upload(u))
                }
                Push::Delete { .. } => None,
            })
            .collect();
        self.send_pushes(uploads, false, &mut plan.next, &mut report).await;
        self.state.baseline = plan.next;
        self.content_pass(plan.pulls, &mut report).await;
        self.live_left |= judged.iter().any(|(rel, sha)| self.state.baseline.get(rel).copied() != *sha);
        self.save_journal().await;
        Ok(report)
    }

    /// The store changes whose bytes came with the feed, to paths the folder holds as both sides
    /// last agreed (or lacks on both): written now, with no request — the store wins, and
    /// nothing local is lost since nothing local changed. Each path written leaves `local`;
    /// any other (changed here too, an upload of unknown outcome, a write the folder refused)
    /// stays for the listing below.
    async fn write_bytes_from_the_feed(
        &mut self,
        local: &mut BTreeMap<RelPath, Option<Digest>>,
        bytes: &BTreeMap<RelPath, (Digest, Arc<String>)>,
        report: &mut SyncReport,
    ) {
        let ready: Vec<(RelPath, Option<Digest>, Digest, Arc<String>)> = local
            .iter()
            .filter_map(|(rel, sha)| {
                let (digest, content) = bytes.get(rel)?;
                let agreed = *sha == self.state.baseline.get(rel).copied();
                (agreed && !self.state.unsettled.contains_key(rel))
                    .then(|| (rel.clone(), *sha, *digest, Arc::clone(content)))
            })
            .collect();
        if ready.is_empty() {
            return;
        }
        // The store changed since the engine's last listing of it.
        self.wrote();
        let files = Arc::clone(&self.files);
        let written = blocking(move || {
            ready
                .into_iter()
                .map(|(rel, sha, digest, content)| {
                    // Bytes that are not what the entry says are left to the listing below.
                    if Digest::of(content.as_bytes()) != digest {
                        return (rel, digest, Ok(false));
                    }
                    // The bytes are durable before the rename; the rename is made durable
                    // before the journal records it (`save_journal`).
                    let outcome = files.write_if_unchanged_with(&rel, sha, content.as_bytes(), Durability::BytesOnly);
                    (rel, digest, outcome)
                })
                .collect::<Vec<_>>()
        })
        .await;
        let Ok(written) = written else { return };
        for (rel, digest, outcome) in written {
            // Otherwise changed meanwhile (the watcher brings it back), or a write that fails
            // again below, where it is reported: the listing decides.
            if let Ok(true) = outcome {
                self.unsynced_renames.push(rel.clone());
                self.state.baseline.insert(rel.clone(), digest);
                local.remove(&rel);
                report.pulled += 1;
            }
        }
    }

    /// The store's memories at `paths` as both sides last agreed on them: each path with a
    /// baseline in the memory the engine knows for it, holding the baseline's bytes; a path
    /// with neither, absent. `None` where the engine cannot tell without a listing: a path with
    /// only one of the two, or an upload of unknown outcome.
    fn remote_as_agreed<'a>(&self, paths: impl Iterator<Item = &'a RelPath>) -> Option<RemoteMap> {
        let mut remote = RemoteMap::new();
        for rel in paths {
            if self.state.unsettled.contains_key(rel) {
                return None;
            }
            match (self.state.baseline.get(rel), self.known_id(rel)) {
                (Some(sha), Some(id)) => {
                    remote.insert(rel.clone(), Remote { id: id.clone(), content_sha256: *sha });
                }
                (None, None) => {}
                _ => return None,
            }
        }
        Some(remote)
    }

    /// The store's memories at `paths`, read now: one content-free listing per folder.
    async fn list_paths(&self, paths: impl Iterator<Item = &RelPath>) -> Result<RemoteMap, SyncError> {
        let wanted: BTreeSet<&RelPath> = paths.collect();
        let folders: BTreeSet<String> = wanted.iter().map(|rel| folder_of(rel)).collect();
        let mut remote = RemoteMap::new();
        for folder in folders {
            for memory in self.client.list_folder(&self.cfg.store_id, &folder).await? {
                if let Some(rel) = self.local_path(&memory.path)
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

    /// Live sync with its feed's sender and the watcher's side.
    fn live() -> (Live, mpsc::UnboundedSender<Hint>, Arc<LocalHints>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let live = Live::new(MemoryStoreId::generate(), rx, tokio::spawn(async {}));
        let local = Arc::clone(&live.local);
        (live, tx, local)
    }

    fn paths(work: LiveWork) -> Vec<(String, bool)> {
        match work {
            LiveWork::Paths(p) => {
                p.paths.into_iter().map(|(r, flags)| (r.as_str().to_owned(), flags.remote.is_some())).collect()
            }
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
        let (mut live, tx, local) = live();
        let start = Instant::now();
        local.saw(rel("a.md"));
        tx.send(Hint::Remote(rel("b.md"), Seen::Unknown)).unwrap();
        assert_eq!(paths(live.next().await), [("b.md".to_owned(), true)]);
        assert!(start.elapsed() < QUIET);
        // Writes keep coming for a while: the quiet period restarts with each.
        for _ in 0..3 {
            tokio::time::sleep(QUIET / 2).await;
            local.saw(rel("a.md"));
        }
        let t = Instant::now();
        assert_eq!(paths(live.next().await), [("a.md".to_owned(), false)]);
        assert!(t.elapsed() >= QUIET - QUIET / 2, "{:?}", t.elapsed());
        // Duplicates of one path come out once; a resync outranks pending paths.
        tx.send(Hint::Remote(rel("c.md"), Seen::Unknown)).unwrap();
        tx.send(Hint::Remote(rel("c.md"), Seen::Unknown)).unwrap();
        tx.send(Hint::Resync).unwrap();
        assert!(matches!(live.next().await, LiveWork::FullSync));
        assert_eq!(paths(live.next().await), [("c.md".to_owned(), true)]);
    }

    /// Ticks of a live mount, one run per row: which ran a full sync.
    #[test]
    fn an_incomplete_folder_gets_full_syncs_at_growing_intervals_until_complete() {
        // (ticks, live running, needed, incomplete after each sync, the ticks that run one)
        type Row = (u32, bool, bool, bool, &'static [u32]);
        assert_eq!(LIVE_FULL_SYNC_EVERY, 20, "the rows below assume it");
        let table: &[Row] = &[
            // At rest: only the safety net runs.
            (45, true, false, false, &[20, 40]),
            // Something for the full sync every tick: every tick.
            (3, true, true, false, &[1, 2, 3]),
            // No live sync: every tick.
            (3, false, false, false, &[1, 2, 3]),
            // The disk stays full: after 1, 2, 4, 8, 16 ticks, then every 20 (the safety net).
            (92, true, false, true, &[1, 3, 7, 15, 31, 51, 71, 91]),
        ];
        for (ticks, live, needed, incomplete, want) in table {
            let mut schedule = FullSyncTicks::default();
            // The download left the folder incomplete (or not).
            schedule.ran(false);
            let mut ran = Vec::new();
            let mut now_incomplete = *incomplete;
            for tick in 1..=*ticks {
                if schedule.due(*live, *needed, now_incomplete) {
                    ran.push(tick);
                    schedule.ran(*incomplete);
                    now_incomplete = *incomplete;
                }
            }
            assert_eq!(ran, *want, "ticks {ticks}, live {live}, needed {needed}, incomplete {incomplete}");
        }

        // Space returns: the sync that completes the folder ends the back-off.
        let mut schedule = FullSyncTicks::default();
        let mut ran = Vec::new();
        let mut incomplete = true;
        for tick in 1..=60 {
            if schedule.due(true, false, incomplete) {
                ran.push(tick);
                // The third full sync finds space.
                incomplete = ran.len() < 3;
                schedule.ran(incomplete);
            }
        }
        assert_eq!(ran, [1, 3, 7, 27, 47], "back to the safety net once complete");
        // A live pull that fails later: the next tick.
        let mut schedule = FullSyncTicks::default();
        assert!(!schedule.due(true, false, false));
        assert!(schedule.due(true, false, true));
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_local_writes_goes_up_together() {
        let (mut live, tx, local) = live();
        let start = Instant::now();
        // Three files written 100 ms apart, while live sync waits: each alone would be due
        // 200 ms after its write.
        let writer = tokio::spawn(async move {
            for name in ["a.md", "d/b.md", "e/c.md"] {
                local.saw(rel(name));
                tokio::time::sleep(QUIET / 2).await;
            }
            tx
        });
        let got = paths(live.next().await);
        let _tx = writer.await.unwrap();
        assert_eq!(got, [("a.md".to_owned(), false), ("d/b.md".to_owned(), false), ("e/c.md".to_owned(), false)]);
        // Due once the last write has been quiet for QUIET.
        assert_eq!(start.elapsed(), QUIET + QUIET);
    }

    #[tokio::test(start_paused = true)]
    async fn the_events_of_a_burst_wake_live_sync_once_plus_its_timer() {
        let (mut live, _tx, local) = live();
        let start = Instant::now();
        // 50 files, each written, truncated and closed (three events), 1 ms apart.
        let writer = tokio::spawn(async move {
            for i in 0..50 {
                for _ in 0..3 {
                    local.saw(rel(&format!("f{i:02}.md")));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let got = paths(live.next().await);
        writer.await.unwrap();
        assert_eq!(got.len(), 50);
        assert_eq!(start.elapsed(), Duration::from_millis(49) + QUIET);
        // The first event, the timer set from it, the one set from the last event, and the
        // turn that returns: not one per event.
        assert!(live.turns <= 4, "{} turns for 150 events", live.turns);
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_rewritten_without_pause_holds_the_others_back_at_most_max_hold() {
        let (mut live, tx, local) = live();
        let start = Instant::now();
        local.saw(rel("a.md"));
        let writer = tokio::spawn(async move {
            for _ in 0..40 {
                local.saw(rel("busy.md"));
                tokio::time::sleep(QUIET / 4).await;
            }
            tx
        });
        assert_eq!(paths(live.next().await), [("a.md".to_owned(), false)]);
        assert_eq!(start.elapsed(), QUIET + MAX_HOLD);
        let _tx = writer.await.unwrap();
        // The busy file goes once it is quiet.
        assert_eq!(paths(live.next().await), [("busy.md".to_owned(), false)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_remote_change_takes_the_quiet_local_ones_along() {
        let (mut live, tx, local) = live();
        let writer = tokio::spawn(async move {
            local.saw(rel("quiet.md"));
            tokio::time::sleep(QUIET / 2).await;
            local.saw(rel("fresh.md"));
            // quiet.md has been quiet for QUIET, but the burst is not over: fresh.md is not.
            tokio::time::sleep(QUIET * 3 / 4).await;
            tx.send(Hint::Remote(rel("r.md"), Seen::Gone)).unwrap();
            tx
        });
        let got = paths(live.next().await);
        let _tx = writer.await.unwrap();
        assert_eq!(got, [("quiet.md".to_owned(), false), ("r.md".to_owned(), true)]);
        assert_eq!(paths(live.next().await), [("fresh.md".to_owned(), false)]);
    }

    /// On the real clock (the paused one never moves between two readings): a pinned path is
    /// due at once, not at a `now` read a moment later, which never came.
    #[tokio::test]
    async fn a_remote_change_is_due_at_once_on_the_real_clock() {
        let (mut live, tx, _) = live();
        tx.send(Hint::Remote(rel("r.md"), Seen::Unknown)).unwrap();
        let work = tokio::time::timeout(Duration::from_secs(5), live.next()).await.expect("due at once");
        assert_eq!(paths(work), [("r.md".to_owned(), true)]);
    }

    #[test]
    fn a_change_the_engine_already_has_is_an_echo() {
        let (a, b) = (Digest::of(b"a"), Digest::of(b"b"));
        let flags = |remote: Option<Seen>, local: bool| Flags { remote, local };
        // (flags, baseline, echo)
        let table = [
            (flags(Some(Seen::Holds(a)), false), Some(a), true),
            (flags(Some(Seen::Holds(a)), false), Some(b), false),
            (flags(Some(Seen::Holds(a)), false), None, false),
            (flags(Some(Seen::Holds(a)), true), Some(a), false),
            (flags(Some(Seen::Gone), false), None, true),
            (flags(Some(Seen::Gone), false), Some(a), false),
            (flags(Some(Seen::Unknown), false), Some(a), false),
            (flags(None, true), Some(a), false),
        ];
        for (i, (f, baseline, echo)) in table.into_iter().enumerate() {
            assert_eq!(f.is_echo(baseline), echo, "row {i}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_newest_remote_change_of_a_path_is_the_one_kept() {
        let (mut live, tx, _) = live();
        let (a, b) = (Digest::of(b"a"), Digest::of(b"b"));
        tx.send(Hint::Remote(rel("x.md"), Seen::Holds(a))).unwrap();
        tx.send(Hint::Remote(rel("x.md"), Seen::Holds(b))).unwrap();
        match live.next().await {
            LiveWork::Paths(p) => {
                let flags = p.paths[&rel("x.md")];
                assert_eq!(flags.remote, Some(Seen::Holds(b)));
                assert!(!flags.local);
            }
            LiveWork::FullSync => panic!("expected paths"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_written_in_full_is_due_at_once_whatever_the_watcher_says() {
        let (mut live, _tx, local) = live();
        let start = Instant::now();
        local.saw(rel("w.md"));
        live.written(rel("w.md"));
        // The watcher's late event for the same write must not push it back.
        local.saw(rel("w.md"));
        assert_eq!(paths(live.next().await), [("w.md".to_owned(), false)]);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn an_ended_feed_turns_live_sync_off() {
        let (mut live, tx, local) = live();
        local.saw(rel("a.md"));
        tx.send(Hint::Ended("the server has no memory change feed".into())).unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(5), live.next()).await;
        assert!(waited.is_err(), "nothing more comes once the feed ended");
        assert!(!live.is_running());
    }
}
