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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Weak};

use mnemo_api::{MemoryStoreId, WorkspaceId};
use mnemo_store::{MemoryFeedEntry, Signal, Store, StoreError};
use tokio::sync::{broadcast, watch};

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

/// A store's watch channel (its latest change seq), and its workspace once a feed found it there.
type Watched = (watch::Sender<i64>, Option<WorkspaceId>);

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
    pub(crate) fn subscribe(&self, store: &MemoryStoreId) -> watch::Receiver<i64> {
        let mut stores = self.stores.lock().expect("change hub poisoned");
        stores.entry(store.clone()).or_insert_with(|| (watch::channel(0).0, None)).0.subscribe()
    }

    /// A feed found `store` in workspace `ws`: re-checks read it there.
    fn found_in(&self, store: &MemoryStoreId, ws: &WorkspaceId) {
        if let Some(entry) = self.stores.lock().expect("change hub poisoned").get_mut(store) {
            entry.1 = Some(ws.clone());
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
        let Some((tx, _)) = stores.get(store) else { return };
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
        stores.retain(|_, (tx, _)| tx.receiver_count() > 0);
        stores.iter().filter_map(|(id, (_, ws))| Some((ws.clone()?, id.clone()))).collect()
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
    ) -> Result<Self, StoreError> {
        let wake = hub.subscribe(store);
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
        Ok(Self { ws: ws.clone(), store: store.clone(), cursor, wake })
    }

    pub(crate) fn store(&self) -> &MemoryStoreId {
        &self.store
    }

    /// Where the feed stands: the position of the last entry handed out.
    pub(crate) fn cursor(&self) -> i64 {
        self.cursor
    }

    /// The next entries after the cursor (at most `limit`), reading the store now; empty when
    /// there is nothing new.
    pub(crate) async fn read(
        &mut self,
        db: &dyn Store,
        hub: &ChangeHub,
        limit: u32,
    ) -> Result<Vec<MemoryFeedEntry>, StoreError> {
        // Everything up to what the hub heard is covered by this read.
        self.wake.borrow_and_update();
        hub.count_read();
        let entries = db.memory_changes_after(&self.ws, &self.store, self.cursor, limit).await?;
        if let Some(last) = entries.last() {
            self.cursor = last.seq;
        }
        Ok(entries)
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
