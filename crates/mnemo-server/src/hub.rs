//! Live fan-out of session events to open streams.
//!
//! On a database only this process writes (SQLite), handlers hand what they appended straight
//! to [`EventHub::publish`]. On a database several replicas share, an append made through
//! another replica is only heard about (a [`Signal`] from the store), so the hub is *shared*:
//! every event — this replica's own included — reaches streams through [`follow`], which reads
//! the signalled events back from the store in signal order. One path keeps a session's events
//! in log order on every replica; a periodic [`Signal::Resync`] catches up whatever a lost
//! notification hid.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mnemo_api::SessionId;
use mnemo_store::{ListEvents, SessionEvent, Signal, Store};
use tokio::sync::broadcast;

/// Events buffered per session for slow streams; a stream that falls further behind is closed
/// and its client reconnects (and re-reads history, as the reference runner does).
const CAPACITY: usize = 1024;

struct Channel {
    tx: broadcast::Sender<SessionEvent>,
    /// The newest position handed to this channel's streams (shared hubs only).
    last: Option<i64>,
}

/// One broadcast channel per session with open streams.
#[derive(Default)]
pub(crate) struct EventHub {
    channels: Mutex<HashMap<SessionId, Channel>>,
    /// Events arrive through [`follow`] only.
    shared: bool,
}

impl std::fmt::Debug for EventHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventHub").field("shared", &self.shared).finish_non_exhaustive()
    }
}

impl EventHub {
    /// A hub fed by a store's signals (see [`follow`]).
    pub(crate) fn shared() -> Self {
        Self { channels: Mutex::default(), shared: true }
    }

    pub(crate) fn subscribe(&self, session: &SessionId) -> broadcast::Receiver<SessionEvent> {
        let mut channels = self.channels.lock().expect("event hub poisoned");
        channels
            .entry(session.clone())
            .or_insert_with(|| Channel { tx: broadcast::channel(CAPACITY).0, last: None })
            .tx
            .subscribe()
    }

    /// Subscribes, and on a shared hub learns where the session's log stands, so a later
    /// re-check knows which events are new.
    pub(crate) async fn subscribe_from(
        &self,
        store: &dyn Store,
        session: &SessionId,
    ) -> Result<broadcast::Receiver<SessionEvent>, mnemo_store::StoreError> {
        let rx = self.subscribe(session);
        if self.shared {
            let newest = store
                .list_events(session, ListEvents { descending: true, limit: 1, ..ListEvents::default() })
                .await?
                .items
                .first()
                .map_or(0, |e| e.seq);
            if let Some(channel) = self.channels.lock().expect("event hub poisoned").get_mut(session) {
                channel.last.get_or_insert(newest);
            }
        }
        Ok(rx)
    }

    /// Hands events (already committed) to every open stream of the session. A shared hub
    /// ignores this: its events come from the store's signals, in log order.
    pub(crate) fn publish(&self, session: &SessionId, events: &[SessionEvent]) {
        if !self.shared {
            self.deliver(session, events);
        }
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
            let _ = channel.tx.send(e.clone());
        }
    }

    /// Sessions with open streams and the newest position they were handed; drops sessions
    /// whose streams have all gone.
    fn watched(&self) -> Vec<(SessionId, i64)> {
        let mut channels = self.channels.lock().expect("event hub poisoned");
        channels.retain(|_, c| c.tx.receiver_count() > 0);
        channels.iter().filter_map(|(id, c)| c.last.map(|last| (id.clone(), last))).collect()
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
            Signal::Events { session, first, last } => {
                if !hub.watching(&session) {
                    continue;
                }
                match store.events_after(&session, first - 1).await {
                    Ok(events) => {
                        let upto: Vec<_> = events.into_iter().filter(|e| e.seq <= last).collect();
                        hub.deliver(&session, &upto);
                    }
                    Err(e) => tracing::warn!(session.id = %session, error = %e.chain(), "cannot read signalled events"),
                }
            }
            // The change feed follows these itself (see `changes.rs`).
            Signal::Memory { .. } => {}
            Signal::Work => followers.work.notify_waiters(),
            Signal::Credentials => (followers.forget_credentials)(),
            Signal::Resync => {
                followers.work.notify_waiters();
                (followers.forget_credentials)();
                for (session, last) in hub.watched() {
                    match store.events_after(&session, last).await {
                        Ok(events) => hub.deliver(&session, &events),
                        Err(e) => tracing::warn!(session.id = %session, error = %e.chain(), "cannot re-check events"),
                    }
                }
            }
        }
    }
}
