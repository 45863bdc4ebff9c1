//! Live fan-out of session events to open streams.

use std::collections::HashMap;
use std::sync::Mutex;

use mnemo_api::SessionId;
use mnemo_store::SessionEvent;
use tokio::sync::broadcast;

/// Events buffered per session for slow streams; a stream that falls further behind is closed
/// and its client reconnects (and re-reads history, as the reference runner does).
const CAPACITY: usize = 1024;

/// One broadcast channel per session with open streams.
#[derive(Debug, Default)]
pub(crate) struct EventHub {
    channels: Mutex<HashMap<SessionId, broadcast::Sender<SessionEvent>>>,
}

impl EventHub {
    pub(crate) fn subscribe(&self, session: &SessionId) -> broadcast::Receiver<SessionEvent> {
        let mut channels = self.channels.lock().expect("event hub poisoned");
        channels.entry(session.clone()).or_insert_with(|| broadcast::channel(CAPACITY).0).subscribe()
    }

    /// Hands events (already committed) to every open stream of the session.
    pub(crate) fn publish(&self, session: &SessionId, events: &[SessionEvent]) {
        let mut channels = self.channels.lock().expect("event hub poisoned");
        if let Some(tx) = channels.get(session) {
            if tx.receiver_count() == 0 {
                channels.remove(session);
                return;
            }
            for e in events {
                let _ = tx.send(e.clone());
            }
        }
    }
}
