//! Live fan-out of memory changes to open change feeds (`GET /v1/memory_stores/{id}/changes`).
//!
//! Every backend tells of committed memory versions through [`Store::memory_signals`]: SQLite
//! from the process that wrote them, PostgreSQL through `NOTIFY` from every replica. One task
//! ([`follow`]) turns those signals into a per-store [`watch`] value — the newest position
//! heard of — and a feed reads the store only when that value passes its cursor. So an idle
//! feed costs no database work; the feed itself always reads what it sends from the store (by
//! position, after its cursor), so a signal lost, late or out of order only delays. A
//! [`Signal::Resync`] (PostgreSQL's periodic re-check, or a subscriber that fell behind)
//! re-reads each watched store's newest position once — one query per store, however many
//! feeds watch it.
//!
//! The signals are global (every workspace's stores), but a feed only wakes on its own store's
//! id, and it reads only through its caller's workspace ([`Feed::open`] checks the store there
//! first): another workspace's changes never reach it. A re-check reads a store in the workspace
//! a feed verified it in, so a feed that failed (a store of another workspace) never decides
//! for the feeds that did not.
//!
//! **One read per change, however many feeds.** A write to a store with a thousand feeds wakes
//! them all at the same cursor; the first to read takes the store's read lock, reads the new
//! entries (and, for `content=inline`, their versions' content) and leaves the [`Batch`] there;
//! the others find it and send it. A feed takes a batch only if it was read in the feed's
//! workspace, from the feed's cursor, with the feed's limit and content option, after every
//! change the feed was woken for, and less than [`SHARE_FOR`] ago — so a batch is never older
//! than a read the feed would have made itself a moment earlier (a version redacted on this
//! server drops the store's batch at once; on another replica, it is at most [`SHARE_FOR`]
//! late). The hub holds a batch weakly: it lives as long as some feed still sends it.
//!
//! **A writer's own versions come back without their content.** A client that names itself
//! ([`WRITER_HEADER`](mnemo_api::headers::WRITER_HEADER)) on its writes and on its feed has
//! the bytes it wrote; the hub remembers, per store with open feeds, which client wrote which
//! version (for [`OWN_FOR`], at most [`OWN_MAX`] versions), and the feed sends that client
//! those entries with their digest but without their content. The shared batch keeps every
//! content: only what is sent differs.
//! Writes made through another replica are not known here, so their content is sent, as it
//! always may be.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::response::sse::Event;
use mnemo_api::headers::WriterId;
use mnemo_api::{MemoryChangeEvent, MemoryStoreId, MemoryVersionId, WorkspaceId};
use mnemo_store::{MemoryFeedEntry, Signal, Store, StoreError};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

/// How long a store's [`Batch`] may serve feeds that wake for the same change.
pub(crate) const SHARE_FOR: Duration = Duration::from_secs(1);

/// One ticker per keep-alive interval, shared by every change feed that asked for it: idle feeds
/// ping together, in one wake-up of the runtime per interval, instead of each on its own timer
/// (a thousand feeds opened over a few minutes had the server wake a thousand times per
/// interval, which cost it four times the pings themselves).
#[derive(Debug, Default)]
pub(crate) struct PingClock {
    tickers: Mutex<HashMap<u64, watch::Receiver<u64>>>,
}

impl PingClock {
    /// Ticks every `secs` seconds from the first feed that asked; the receiver has seen every
    /// tick so far, so its first `changed()` is the next tick. Call inside a Tokio runtime.
    pub(crate) fn every(&self, secs: u64) -> watch::Receiver<u64> {
        let mut tickers = self.tickers.lock().expect("the ping clock's lock is never poisoned");
        let mut rx = tickers
            .entry(secs)
            .or_insert_with(|| {
                let (tx, rx) = watch::channel(0u64);
                tokio::spawn(async move {
                    let period = std::time::Duration::from_secs(secs);
                    let mut every = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        every.tick().await;
                        // Only the clock's own receiver left: nobody to ping this time.
                        if tx.receiver_count() > 1 {
                            tx.send_modify(|n| *n += 1);
                        }
                    }
                });
                rx
            })
            .clone();
        rx.borrow_and_update();
        rx
    }
}

/// What one read of a store's feed found, with what it was read for; shared by every feed of
/// the store that stands where it was read from (see the module docs).
#[derive(Debug)]
pub(crate) struct Batch {
    ws: WorkspaceId,
    after: i64,
    limit: u32,
    inline: bool,
    /// The newest position the hub had heard of when the read began: the read covers it.
    covers: i64,
    read_at: Instant,
    /// The store's redactions on this server when the read began.
    redactions: u64,
    /// The entries after `after`, with their versions' content under `inline`.
    pub(crate) entries: Vec<MemoryFeedEntry>,
}

impl Batch {
    fn serves(&self, ws: &WorkspaceId, after: i64, limit: u32, inline: bool, woken_for: i64, redactions: u64) -> bool {
        self.after == after
            && self.redactions == redactions
            && self.limit == limit
            && self.inline == inline
            && self.covers >= woken_for
            && &self.ws == ws
            && self.read_at.elapsed() < SHARE_FOR
    }
}

/// How long the hub remembers who wrote a version: far longer than a feed takes to send it.
const OWN_FOR: Duration = Duration::from_secs(60);
/// The most versions of one store the hub remembers the writer of (the oldest go first).
const OWN_MAX: usize = 4096;

/// Who wrote a store's recent versions, by the writers'
/// [`WRITER_HEADER`](mnemo_api::headers::WRITER_HEADER).
#[derive(Debug, Default)]
struct Writers {
    by_version: HashMap<MemoryVersionId, WriterId>,
    order: VecDeque<(Instant, MemoryVersionId)>,
}

impl Writers {
    fn wrote(&mut self, writer: &WriterId, version: &MemoryVersionId, now: Instant) {
        while let Some((at, _)) = self.order.front()
            && (self.order.len() >= OWN_MAX || now.duration_since(*at) >= OWN_FOR)
        {
            let (_, old) = self.order.pop_front().expect("front was there");
            self.by_version.remove(&old);
        }
        if self.by_version.insert(version.clone(), writer.clone()).is_none() {
            self.order.push_back((now, version.clone()));
        }
    }

    fn by(&self, version: &MemoryVersionId, writer: &WriterId) -> bool {
        self.by_version.get(version) == Some(writer)
    }
}

/// The last batch read of a store, held while some feed still sends it; its lock makes the
/// feeds woken by one change take turns, so the first reads and the rest reuse.
#[derive(Default)]
pub(crate) struct LastRead {
    batch: tokio::sync::Mutex<Weak<Batch>>,
    /// Versions of the store redacted on this server: a batch read before one serves no feed.
    redactions: AtomicU64,
    /// Who wrote the store's recent versions (see the module docs).
    writers: Mutex<Writers>,
}

/// A store's watch channel (its latest change seq), its workspace once a feed found it there,
/// and its last read.
struct Watched {
    tx: watch::Sender<i64>,
    ws: Option<WorkspaceId>,
    last: Arc<LastRead>,
}

/// One watch channel per store with open feeds, and the store's workspace once a feed found it
/// there.
#[derive(Default)]
pub(crate) struct ChangeHub {
    stores: Mutex<HashMap<MemoryStoreId, Watched>>,
    /// Store reads made for feeds (by feeds and by re-checks), for tests and diagnostics.
    reads: AtomicU64,
}

impl std::fmt::Debug for ChangeHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeHub").finish_non_exhaustive()
    }
}

impl ChangeHub {
    /// A receiver that changes whenever a version newer than its value may have committed in
    /// `store`. Subscribe before reading, so nothing committed in between is missed.
    pub(crate) fn subscribe(&self, store: &MemoryStoreId) -> (watch::Receiver<i64>, Arc<LastRead>) {
        let mut stores = self.stores.lock().expect("change hub poisoned");
        let watched = stores.entry(store.clone()).or_insert_with(|| Watched {
            tx: watch::channel(0).0,
            ws: None,
            last: Arc::default(),
        });
        (watched.tx.subscribe(), Arc::clone(&watched.last))
    }

    /// A feed found `store` in workspace `ws`: re-checks read it there.
    fn found_in(&self, store: &MemoryStoreId, ws: &WorkspaceId) {
        if let Some(entry) = self.stores.lock().expect("change hub poisoned").get_mut(store) {
            entry.ws = Some(ws.clone());
        }
    }

    /// A version of `store` was redacted here: its feeds read again rather than share a batch
    /// that may name it.
    pub(crate) fn redacted(&self, store: &MemoryStoreId) {
        let last = self.stores.lock().expect("change hub poisoned").get(store).map(|w| Arc::clone(&w.last));
        if let Some(last) = last {
            last.redactions.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// `writer` wrote `versions` of `store`: its feeds leave their content out. Remembered only
    /// while the store has feeds here (the write's own request pays nothing otherwise).
    pub(crate) fn wrote<'a>(
        &self,
        store: &MemoryStoreId,
        writer: &WriterId,
        versions: impl IntoIterator<Item = &'a MemoryVersionId>,
    ) {
        let last = self.stores.lock().expect("change hub poisoned").get(store).map(|w| Arc::clone(&w.last));
        let Some(last) = last else { return };
        let now = Instant::now();
        let mut writers = last.writers.lock().expect("the writers' lock is never poisoned");
        for version in versions {
            writers.wrote(writer, version, now);
        }
    }

    /// Counts one store read made for the feeds.
    pub(crate) fn count_read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// A version at `seq` committed in `store`: wakes its feeds unless they were told already.
    fn heard(&self, store: &MemoryStoreId, seq: i64) {
        let mut stores = self.stores.lock().expect("change hub poisoned");
        let Some(Watched { tx, .. }) = stores.get(store) else { return };
        if tx.receiver_count() == 0 {
            stores.remove(store);
            return;
        }
        tx.send_if_modified(|newest| {
            let newer = seq > *newest;
            if newer {
                *newest = seq;
            }
            newer
        });
    }

    /// Stores with open feeds that found them, and their workspace; forgets those whose feeds
    /// have all gone.
    fn watched(&self) -> Vec<(WorkspaceId, MemoryStoreId)> {
        let mut stores = self.stores.lock().expect("change hub poisoned");
        stores.retain(|_, w| w.tx.receiver_count() > 0);
        stores.iter().filter_map(|(id, w)| Some((w.ws.clone()?, id.clone()))).collect()
    }

    /// The store is gone: its feeds end (their receivers see the sender dropped).
    fn gone(&self, store: &MemoryStoreId) {
        self.stores.lock().expect("change hub poisoned").remove(store);
    }
}

/// Feeds the hub from the store's memory signals until the store goes away.
pub(crate) async fn follow(
    store: Weak<dyn Store>,
    hub: std::sync::Arc<ChangeHub>,
    mut signals: broadcast::Receiver<Signal>,
) {
    loop {
        let signal = match signals.recv().await {
            Ok(signal) => signal,
            Err(broadcast::error::RecvError::Lagged(_)) => Signal::Resync,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        match signal {
            Signal::Memory { store, seq } => {
                crate::maintenance::WRITES.made();
                hub.heard(&store, seq);
            }
            Signal::Resync => {
                let watched = hub.watched();
                if watched.is_empty() {
                    continue;
                }
                let Some(db) = store.upgrade() else { return };
                for (ws, id) in watched {
                    hub.count_read();
                    match db.memory_change_seq(&ws, &id).await {
                        Ok(seq) => hub.heard(&id, seq),
                        Err(StoreError::NotFound { .. }) => hub.gone(&id),
                        Err(e) => {
                            tracing::warn!(memory_store.id = %id, error = %e.chain(), "cannot re-check memory changes")
                        }
                    }
                }
            }
            Signal::Events { .. } | Signal::Work | Signal::Credentials => {}
        }
    }
}

/// One reader of a store's feed: where it stands, and what wakes it.
pub(crate) struct Feed {
    ws: WorkspaceId,
    store: MemoryStoreId,
    cursor: i64,
    wake: watch::Receiver<i64>,
    last: Arc<LastRead>,
    /// Entries carry their versions' content (`content=inline`).
    inline: bool,
    /// The client following the feed, by its
    /// [`WRITER_HEADER`](mnemo_api::headers::WRITER_HEADER): its own versions come without their
    /// content.
    writer: Option<WriterId>,
}

/// Entries per store read.
pub(crate) const FEED_BATCH: u32 = 100;

impl Feed {
    /// A feed of `store` of workspace `ws` from `after` (`None`: from the newest version now).
    /// Subscribes first, then reads, so a version committed in between is still seen.
    pub(crate) async fn open(
        db: &dyn Store,
        hub: &ChangeHub,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        after: Option<i64>,
        inline: bool,
        writer: Option<WriterId>,
    ) -> Result<Self, StoreError> {
        let (wake, last) = hub.subscribe(store);
        hub.count_read();
        let cursor = match after {
            Some(after) => {
                // Refuses an unknown store now, not at the first change.
                db.get_memory_store(ws, store).await?;
                after
            }
            None => db.memory_change_seq(ws, store).await?,
        };
        hub.found_in(store, ws);
        Ok(Self { ws: ws.clone(), store: store.clone(), cursor, wake, last, inline, writer })
    }

    pub(crate) fn store(&self) -> &MemoryStoreId {
        &self.store
    }

    /// Where the feed stands: the position of the last entry handed out.
    pub(crate) fn cursor(&self) -> i64 {
        self.cursor
    }

    /// The next entries after the cursor (at most `limit`): the batch another feed of the store
    /// just read from the same cursor, or else read from the store now; empty when there is
    /// nothing new.
    pub(crate) async fn read(&mut self, db: &dyn Store, hub: &ChangeHub, limit: u32) -> Result<Arc<Batch>, StoreError> {
        // Everything up to what the hub heard is covered by this read.
        let woken_for = *self.wake.borrow_and_update();
        let mut last = self.last.batch.lock().await;
        let redactions = self.last.redactions.load(Ordering::SeqCst);
        let shared =
            last.upgrade().filter(|b| b.serves(&self.ws, self.cursor, limit, self.inline, woken_for, redactions));
        let batch = match shared {
            Some(shared) => shared,
            None => {
                // Read under the lock: feeds woken by the same change wait for this read.
                let covers = *self.wake.borrow();
                let read_at = Instant::now();
                hub.count_read();
                let entries = db.memory_changes_after(&self.ws, &self.store, self.cursor, limit, self.inline).await?;
                let batch = Arc::new(Batch {
                    ws: self.ws.clone(),
                    after: self.cursor,
                    limit,
                    inline: self.inline,
                    covers,
                    read_at,
                    redactions,
                    entries,
                });
                *last = Arc::downgrade(&batch);
                batch
            }
        };
        drop(last);
        if let Some(newest) = batch.entries.last() {
            self.cursor = newest.seq;
        }
        Ok(batch)
    }

    /// The SSE message of `entry` for this feed: without the content of a version its own client
    /// wrote.
    pub(crate) fn event(&self, entry: &MemoryFeedEntry) -> Event {
        let own = entry.change.content.is_some()
            && self.writer.as_ref().is_some_and(|w| {
                self.last
                    .writers
                    .lock()
                    .expect("the writers' lock is never poisoned")
                    .by(&entry.change.memory_version_id, w)
            });
        let data = if own {
            serde_json::to_string(&MemoryChangeEvent { content: None, ..entry.change.clone() })
        } else {
            serde_json::to_string(&entry.change)
        };
        Event::default()
            .event(entry.change.event_name())
            .id(entry.seq.to_string())
            .data(data.expect("a change event serialises"))
    }

    /// Waits until a version after the cursor may have committed (no store work); `false` once
    /// the store is gone.
    pub(crate) async fn changed(&mut self) -> bool {
        loop {
            if self.wake.changed().await.is_err() {
                return false;
            }
            if *self.wake.borrow_and_update() > self.cursor {
                return true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_serves_only_a_feed_that_would_have_read_the_same() {
        let ws = WorkspaceId::generate();
        let batch = Batch {
            ws: ws.clone(),
            after: 10,
            limit: 100,
            inline: true,
            covers: 12,
            read_at: Instant::now(),
            redactions: 0,
            entries: Vec::new(),
        };
        // (workspace, cursor, limit, inline, woken for, redactions) → served
        let other = WorkspaceId::generate();
        let table = [
            ((&ws, 10, 100, true, 12, 0), true),
            ((&ws, 10, 100, true, 11, 0), true),
            ((&ws, 10, 100, true, 13, 0), false),
            ((&ws, 9, 100, true, 12, 0), false),
            ((&ws, 10, 50, true, 12, 0), false),
            ((&ws, 10, 100, false, 12, 0), false),
            ((&ws, 10, 100, true, 12, 1), false),
            ((&other, 10, 100, true, 12, 0), false),
        ];
        for ((ws, after, limit, inline, woken_for, redactions), served) in table {
            assert_eq!(
                batch.serves(ws, after, limit, inline, woken_for, redactions),
                served,
                "{after} {limit} {inline} {woken_for} {redactions}"
            );
        }
        let old = Batch { read_at: Instant::now() - SHARE_FOR, ..batch };
        assert!(!old.serves(&ws, 10, 100, true, 12, 0), "older than SHARE_FOR");
    }

    #[test]
    fn the_writers_of_versions_are_remembered_for_a_while_and_a_number() {
        let (one, two) = (WriterId::random(), WriterId::random());
        let v: Vec<MemoryVersionId> = (0..OWN_MAX + 3).map(|_| MemoryVersionId::generate()).collect();
        let start = Instant::now();
        let mut writers = Writers::default();
        writers.wrote(&one, &v[0], start);
        writers.wrote(&two, &v[1], start);
        assert!(writers.by(&v[0], &one) && !writers.by(&v[0], &two));
        assert!(writers.by(&v[1], &two) && !writers.by(&v[1], &one));
        assert!(!writers.by(&v[2], &one), "a version nobody named");
        // Forgotten once OWN_FOR has passed (at the next write).
        writers.wrote(&one, &v[2], start + OWN_FOR);
        assert!(!writers.by(&v[0], &one) && !writers.by(&v[1], &two));
        assert!(writers.by(&v[2], &one));
        // At most OWN_MAX, the oldest first.
        for version in &v[3..OWN_MAX + 2] {
            writers.wrote(&one, version, start + OWN_FOR);
        }
        assert_eq!((writers.by_version.len(), writers.order.len()), (OWN_MAX, OWN_MAX));
        assert!(writers.by(&v[2], &one));
        writers.wrote(&one, &v[OWN_MAX + 2], start + OWN_FOR);
        assert_eq!((writers.by_version.len(), writers.order.len()), (OWN_MAX, OWN_MAX));
        assert!(!writers.by(&v[2], &one));
        assert!(writers.by(&v[3], &one) && writers.by(&v[OWN_MAX + 2], &one));
    }
}
