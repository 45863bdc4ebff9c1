//! Live fan-out of session events to open streams, in log order.
//!
//! On a database only this process writes (SQLite), a handler tells [`EventHub::publish`] that
//! it appended, and the hub reads the session's log back from the newest position its streams
//! were handed. Two appends to one session may finish in either order; reading back (rather
//! than forwarding what the handler wrote) means the later one carries the earlier one's events
//! too, so a stream never sees a position go backwards and never skips an event (the load run
//! found exactly that: an event out-raced by a later one was dropped as already seen).
//! On a database several replicas share, an append made through another replica is only heard
//! about (a [`Signal`] from the store), so the hub is *shared*: every event — this replica's own
//! included — reaches streams through [`follow`], which reads the signalled events back from the
//! store in signal order; a periodic [`Signal::Resync`] catches up whatever a lost notification
//! hid.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mnemo_api::{SessionId, WorkspaceId};
use mnemo_store::{ListEvents, SessionEvent, Signal, Store, StoreError, Streamed};
use tokio::sync::broadcast;

/// Events buffered per session for slow streams; a stream that falls further behind is closed
/// and its client reconnects (and re-reads history, as the reference runner does).
const CAPACITY: usize = 1024;

struct Channel {
    tx: broadcast::Sender<Streamed>,
    /// The session's workspace: the hub's own reads of its log are made in it.
    workspace: WorkspaceId,
    /// The newest position handed to this channel's streams (shared hubs only).
    last: Option<i64>,
}

/// One broadcast channel per session with open streams.
#[derive(Default)]
pub(crate) struct EventHub {
    channels: Mutex<HashMap<SessionId, Channel>>,
    /// Events arrive through [`follow`] only.
    shared: bool,
    /// Sessions whose signalled events are being read back ([`read_signalled`]), each with the
    /// newest position signalled.
    wanted: Mutex<HashMap<SessionId, i64>>,
}

impl std::fmt::Debug for EventHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventHub").field("shared", &self.shared).finish_non_exhaustive()
    }
}

impl EventHub {
    /// A hub fed by a store's signals (see [`follow`]).
    pub(crate) fn shared() -> Self {
        Self { channels: Mutex::default(), shared: true, wanted: Mutex::default() }
    }

    /// Subscribes to workspace `ws`'s session (the caller found it there).
    pub(crate) fn subscribe(&self, ws: &WorkspaceId, session: &SessionId) -> broadcast::Receiver<Streamed> {
        let mut channels = self.channels.lock().expect("event hub poisoned");
        channels
            .entry(session.clone())
            .or_insert_with(|| Channel { tx: broadcast::channel(CAPACITY).0, workspace: ws.clone(), last: None })
            .tx
            .subscribe()
    }

    /// Subscribes, and on a shared hub learns where the session's log stands, so a later
    /// re-check knows which events are new.
    pub(crate) async fn subscribe_from(
        &self,
        store: &dyn Store,
        ws: &WorkspaceId,
        session: &SessionId,
    ) -> Result<broadcast::Receiver<Streamed>, mnemo_store::StoreError> {
        let rx = self.subscribe(ws, session);
        let newest = store
            .list_events(ws, session, ListEvents { descending: true, limit: 1, ..ListEvents::default() })
            .await?
            .items
            .first()
            .map_or(0, |e| e.seq);
        if let Some(channel) = self.channels.lock().expect("event hub poisoned").get_mut(session) {
            channel.last.get_or_insert(newest);
        }
        Ok(rx)
    }

    /// Tells the session's open streams that `written` (already committed) was appended: the hub
    /// reads the log back from the newest position it handed out, so whatever another append
    /// committed in between goes first. A shared hub ignores this: its events come from the
    /// store's signals, in log order.
    pub(crate) async fn publish(&self, store: &dyn Store, session: &SessionId, written: &[SessionEvent]) {
        if !written.is_empty() {
            // An append (the agent loop's too): the webhook sender may have a delivery to send.
            crate::maintenance::WRITES.made();
        }
        if self.shared || written.is_empty() {
            return;
        }
        let Some(last) = self.position(session) else { return };
        let Some(last) = last else {
            self.deliver(session, written); // no position learnt yet: nothing to order against
            return;
        };
        if written.iter().all(|e| e.seq <= last) {
            return; // an append that finished later already carried these
        }
        if !self.read_back(store, session, last).await {
            // Better out of step than silent: the stream's client re-reads on reconnect.
            self.deliver(session, written);
        }
    }

    /// Hands the session's streams whatever its log gained that the store appended on its own
    /// (archiving writes `session.status_terminated`). A shared hub hears of it by signal.
    pub(crate) async fn catch_up(&self, store: &dyn Store, session: &SessionId) {
        if let (false, Some(Some(last))) = (self.shared, self.position(session)) {
            self.read_back(store, session, last).await;
        }
    }

    /// Delivers the log after `last`; `false` when it cannot be read (a deleted session's
    /// streams are ended).
    async fn read_back(&self, store: &dyn Store, session: &SessionId, last: i64) -> bool {
        let Some(ws) = self.workspace_of(session) else { return true };
        match store.events_after(&ws, session, last).await {
            Ok(events) => {
                self.deliver(session, &events);
                true
            }
            Err(StoreError::NotFound { .. }) => {
                self.deleted(session);
                true
            }
            Err(e) => {
                tracing::warn!(session.id = %session, error = %e.chain(), "cannot read appended events back");
                false
            }
        }
    }

    /// Ends the open streams of a deleted session with a `session.deleted` event, as the
    /// reference API does (no further events follow).
    pub(crate) fn deleted(&self, session: &SessionId) {
        let Some(channel) = self.channels.lock().expect("event hub poisoned").remove(session) else { return };
        let _ = channel.tx.send(Streamed::Deleted {
            id: mnemo_api::EventId::generate(),
            processed_at: mnemo_api::rfc3339_micros(chrono::Utc::now().timestamp_micros()),
        });
    }

    /// The workspace of the session's streams, while it has a channel.
    fn workspace_of(&self, session: &SessionId) -> Option<WorkspaceId> {
        self.channels.lock().expect("event hub poisoned").get(session).map(|c| c.workspace.clone())
    }

    /// `None` when the session has no open stream; else the newest position handed to its
    /// streams, if one is known.
    fn position(&self, session: &SessionId) -> Option<Option<i64>> {
        let channels = self.channels.lock().expect("event hub poisoned");
        channels.get(session).filter(|c| c.tx.receiver_count() > 0).map(|c| c.last)
    }

    fn deliver(&self, session: &SessionId, events: &[SessionEvent]) {
        let mut channels = self.channels.lock().expect("event hub poisoned");
        let Some(channel) = channels.get_mut(session) else { return };
        if channel.tx.receiver_count() == 0 {
            channels.remove(session);
            return;
        }
        for e in events {
            if channel.last.is_some_and(|last| e.seq <= last) {
                continue;
            }
            channel.last = Some(e.seq);
            let _ = channel.tx.send(Streamed::Logged(e.clone()));
        }
    }

    /// Sessions with open streams and the newest position they were handed; drops sessions
    /// whose streams have all gone.
    fn watched(&self) -> Vec<(SessionId, i64)> {
        let mut channels = self.channels.lock().expect("event hub poisoned");
        channels.retain(|_, c| c.tx.receiver_count() > 0);
        channels.iter().filter_map(|(id, c)| c.last.map(|last| (id.clone(), last))).collect()
    }

    /// Records that the session's log reached `last`; `true` when no reader is on it yet (the
    /// caller starts one).
    fn want(&self, session: &SessionId, last: i64) -> bool {
        let mut wanted = self.wanted.lock().expect("event hub poisoned");
        match wanted.get_mut(session) {
            Some(target) => {
                *target = (*target).max(last);
                false
            }
            None => {
                wanted.insert(session.clone(), last);
                true
            }
        }
    }

    /// The newest position signalled for `session`.
    fn target(&self, session: &SessionId) -> i64 {
        self.wanted.lock().expect("event hub poisoned").get(session).copied().unwrap_or(i64::MIN)
    }

    /// Whether the reader of `session` may stop: its streams were handed everything signalled,
    /// or its last read (from `from`, begun when `before` was the target) brought nothing new
    /// and no signal came meanwhile. Stopping forgets the session, so the next signal starts a
    /// new reader.
    fn satisfied(&self, session: &SessionId, from: i64, before: i64) -> bool {
        let mut wanted = self.wanted.lock().expect("event hub poisoned");
        let target = wanted.get(session).copied().unwrap_or(i64::MIN);
        let done = match self.position(session) {
            Some(Some(now)) => now >= target || (now == from && target == before),
            _ => true,
        };
        if done {
            wanted.remove(session);
        }
        done
    }

    fn watching(&self, session: &SessionId) -> bool {
        self.channels.lock().expect("event hub poisoned").get(session).is_some_and(|c| c.tx.receiver_count() > 0)
    }
}

/// What [`follow`] does besides feeding streams.
pub(crate) struct Followers {
    /// Wakes long polls.
    pub(crate) work: Arc<tokio::sync::Notify>,
    /// Forgets remembered credentials.
    pub(crate) forget_credentials: Box<dyn Fn() + Send + Sync>,
}

/// Turns a shared store's signals into stream events, long-poll wake-ups and forgotten
/// credentials, until the store stops signalling.
pub(crate) async fn follow(
    store: Arc<dyn Store>,
    hub: Arc<EventHub>,
    mut signals: broadcast::Receiver<Signal>,
    followers: Followers,
) {
    loop {
        let signal = match signals.recv().await {
            Ok(signal) => signal,
            // Missed some: re-check everything.
            Err(broadcast::error::RecvError::Lagged(_)) => Signal::Resync,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        match signal {
            Signal::Events { session, last, .. } => {
                if hub.watching(&session) && hub.want(&session, last) {
                    tokio::spawn(read_signalled(Arc::clone(&store), Arc::clone(&hub), session));
                }
            }
            // The change feed follows these itself (see `changes.rs`).
            Signal::Memory { .. } => {}
            Signal::Work => followers.work.notify_waiters(),
            Signal::Credentials => (followers.forget_credentials)(),
            Signal::Resync => {
                followers.work.notify_waiters();
                (followers.forget_credentials)();
                // One reader per session, side by side: re-checking 200 open sessions one after
                // another held every stream up for seconds (the load run's finding).
                for (session, last) in hub.watched() {
                    if hub.want(&session, last) {
                        tokio::spawn(read_signalled(Arc::clone(&store), Arc::clone(&hub), session));
                    }
                }
            }
        }
    }
}

/// Reads one session's signalled events back until its streams have everything signalled so
/// far, then stops. One reader per session at a time (signals arriving meanwhile only raise its
/// target, so a burst costs one read, not one per signal), readers of different sessions run
/// side by side: one slow read no longer holds up every other session's stream. Reading from
/// the newest position handed out is safe because a session's appends hold its row lock until
/// they commit, so what one read sees of a session's log is always a prefix of it.
async fn read_signalled(store: Arc<dyn Store>, hub: Arc<EventHub>, session: SessionId) {
    while let (Some(Some(from)), Some(ws)) = (hub.position(&session), hub.workspace_of(&session)) {
        let target = hub.target(&session);
        match store.events_after(&ws, &session, from).await {
            Ok(events) => hub.deliver(&session, &events),
            Err(StoreError::NotFound { .. }) => {
                hub.deleted(&session);
                break;
            }
            Err(e) => {
                // The periodic re-check catches up whatever this missed.
                tracing::warn!(session.id = %session, error = %e.chain(), "cannot read signalled events");
                break;
            }
        }
        if hub.satisfied(&session, from, target) {
            return;
        }
    }
    hub.wanted.lock().expect("event hub poisoned").remove(&session);
}
