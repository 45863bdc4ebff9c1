//! The runner's tasks besides the dispatcher: the stream task (open the live stream, read and
//! reconcile the history, route live events, reconnect with back-off) and the idle watchdog.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use mnemo_api::Backoff;
use mnemo_client::{Client, ClientError};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::RunEnd;
use super::routing::{Shared, on_live_event, reconcile};

/// Page size of the history read.
const HISTORY_PAGE: u32 = 1000;
/// Pauses between event-stream reconnects: 0.5 s doubling to 10 s, back to 0.5 s once an event
/// arrives.
const RECONNECT_BACKOFF: Backoff = Backoff::doubling(Duration::from_millis(500), Duration::from_secs(10));

/// Records why the run ends (first reason wins) and closes the queue.
pub(super) fn finish(shared: &Shared, end: &Mutex<Option<RunEnd>>, stop: &CancellationToken, reason: RunEnd) {
    end.lock().expect("run end lock").get_or_insert(reason);
    stop.cancel();
    shared.close();
}

pub(super) async fn stream_loop(
    client: Client,
    session_id: String,
    shared: Arc<Shared>,
    stop: CancellationToken,
    end: Arc<Mutex<Option<RunEnd>>>,
) {
    let mut reconnects: u32 = 0;
    while !stop.is_cancelled() {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            s = client.stream_events(&session_id) => s,
        };
        match stream {
            Err(e) if e.is_permanent() => {
                tracing::warn!(session_id = %session_id, "the event stream was refused: {e}");
                finish(&shared, &end, &stop, RunEnd::Refused(e.to_string()));
                return;
            }
            Err(e) => tracing::warn!(session_id = %session_id, "cannot open the event stream, retrying: {e}"),
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                shared.lock().reading_history = true;
                match read_history(&client, &session_id).await {
                    Ok(history) => reconcile(&shared, &history),
                    Err(e) => {
                        if e.is_permanent() {
                            finish(&shared, &end, &stop, RunEnd::Refused(e.to_string()));
                            return;
                        }
                        tracing::warn!(session_id = %session_id, "cannot read the session's history; retrying on reconnect: {e}");
                    }
                }
                loop {
                    let item = tokio::select! {
                        () = stop.cancelled() => return,
                        item = stream.next() => item,
                    };
                    match item {
                        Some(Ok(ev)) => {
                            reconnects = 0;
                            if let Some(reason) = on_live_event(&shared, &ev) {
                                finish(&shared, &end, &stop, reason);
                                return;
                            }
                        }
                        Some(Err(ClientError::Decode { message, .. })) => {
                            tracing::warn!(session_id = %session_id, "skipping an unreadable event: {message}");
                        }
                        Some(Err(e)) => {
                            tracing::debug!(session_id = %session_id, "event stream broke: {e}");
                            break;
                        }
                        None => break,
                    }
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(RECONNECT_BACKOFF.delay(reconnects)) => {}
        }
        reconnects = reconnects.saturating_add(1);
    }
}

async fn read_history(client: &Client, session_id: &str) -> Result<Vec<Value>, ClientError> {
    let mut out = Vec::new();
    let mut page: Option<String> = None;
    loop {
        let p = client.list_events(session_id, HISTORY_PAGE, page.as_deref()).await?;
        out.extend(p.data);
        match p.next_page.filter(|n| !n.is_empty()) {
            Some(next) => page = Some(next),
            None => return Ok(out),
        }
    }
}

/// Ends the run once the idle clock has stayed armed for `max_idle`.
pub(super) async fn watchdog(
    shared: Arc<Shared>,
    max_idle: Duration,
    stop: CancellationToken,
    end: Arc<Mutex<Option<RunEnd>>>,
) {
    loop {
        let since = shared.lock().idle_since;
        match since {
            None => tokio::select! {
                () = stop.cancelled() => return,
                () = shared.idle_changed.notified() => {}
            },
            Some(since) => {
                let deadline = since + max_idle;
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = shared.idle_changed.notified() => {}
                    () = tokio::time::sleep_until(deadline) => {
                        if shared.lock().idle_since == Some(since) {
                            tracing::info!("the session stayed idle for {}s; done serving it", max_idle.as_secs());
                            finish(&shared, &end, &stop, RunEnd::Idle);
                            return;
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runner::routing::tests::shared;

    #[tokio::test(start_paused = true)]
    async fn the_watchdog_fires_after_max_idle() {
        let (s, _rx) = shared();
        let stop = CancellationToken::new();
        let end = Arc::new(Mutex::new(None));
        let dog = tokio::spawn(watchdog(Arc::clone(&s), Duration::from_secs(60), stop.clone(), Arc::clone(&end)));
        on_live_event(&s, &json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}));
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!stop.is_cancelled());
        // Activity disarms; a new turn end re-arms from scratch.
        on_live_event(&s, &json!({"type": "user.message"}));
        on_live_event(&s, &json!({"type": "session.status_idle", "stop_reason": {"type": "end_turn"}}));
        tokio::time::sleep(Duration::from_secs(45)).await;
        assert!(!stop.is_cancelled());
        tokio::time::sleep(Duration::from_secs(20)).await;
        dog.await.unwrap();
        assert!(stop.is_cancelled());
        assert_eq!(*end.lock().unwrap(), Some(RunEnd::Idle));
    }
}
