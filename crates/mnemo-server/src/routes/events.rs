//! `/v1/sessions/{session}/events`: the log (list), appending (send), and the live stream (SSE).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use mnemo_api::SessionId;
use mnemo_store::rules::scope;
use mnemo_store::{ListEvents, SessionEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::page_cursor;
use super::path_id;
use super::sessions::visible_session;
use crate::auth::Caller;
use crate::extract::{Json, RawQuery};
use crate::{ApiError, AppState};

/// Largest page of the event log (the reference runner asks for 1000).
const MAX_EVENTS_PAGE: u32 = 1000;
const DEFAULT_EVENTS_PAGE: u32 = 100;
/// Keep-alive cadence of streams.
pub(crate) const PING_EVERY: Duration = Duration::from_secs(15);

#[derive(Debug, Serialize)]
pub(crate) struct EventPage {
    data: Vec<Value>,
    next_page: Option<String>,
}

pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<axum::Json<EventPage>, ApiError> {
    let id: SessionId = path_id("session", &id)?;
    visible_session(&state, &caller, &id).await?;
    let one = |name: &str| q.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let limit = match one("limit") {
        None => DEFAULT_EVENTS_PAGE,
        Some(s) => s
            .parse::<u32>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| ApiError::invalid(format!("limit must be a positive integer (got `{s}`)")))?
            .min(MAX_EVENTS_PAGE),
    };
    let descending = match one("order") {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => return Err(ApiError::invalid(format!("order must be `asc` or `desc` (got `{other}`)"))),
    };
    let types = q.iter().filter(|(k, _)| k == "types[]" || k == "types").map(|(_, v)| v.clone()).collect();
    let (processed_gte, processed_lte) = super::time_range("created_at", &one)?;
    let query = ListEvents { processed_gte, processed_lte, descending, limit, types, after: page_cursor(one("page"))? };
    let listing = state.store.list_events(&id, query).await?;
    Ok(axum::Json(EventPage {
        data: listing.items.into_iter().map(|e| e.body).collect(),
        next_page: listing.next.map(|c| c.encode()),
    }))
}

/// Parses the events of a request at the edge; an error names the field (`events[2].tool_use_id`).
pub(crate) fn parse_events(field: &str, values: Vec<Value>) -> Result<Vec<mnemo_api::Event>, ApiError> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            mnemo_api::Event::parse(v).map_err(|e| ApiError::invalid(e.within(&format!("{field}[{i}]")).to_string()))
        })
        .collect()
}

#[derive(Debug, Deserialize)]
pub(crate) struct SendEvents {
    events: Vec<Value>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Sent {
    data: Vec<Value>,
}

/// Appends events. An API key drives the agent side too (`agent.message`, `agent.tool_use`,
/// ending a turn with `session.status_idle`); workers and clients post `user.*` events.
pub(crate) async fn send(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<SendEvents>,
) -> Result<axum::Json<Sent>, ApiError> {
    let id: SessionId = path_id("session", &id)?;
    visible_session(&state, &caller, &id).await?;
    if body.events.is_empty() {
        return Err(ApiError::invalid("events must not be empty"));
    }
    let events = parse_events("events", body.events)?;
    let appended = state.store.append_events(&id, events, scope::event_author(&caller.0)).await?;
    state.hub.publish(&id, &appended.written);
    if appended.enqueued_work {
        state.work_signal.notify_waiters();
    }
    Ok(axum::Json(Sent { data: appended.recorded.into_iter().map(|e| e.body).collect() }))
}

fn sse(event: &SessionEvent) -> Event {
    let kind = event.body["type"].as_str().unwrap_or("message");
    let mut e = Event::default().event(kind).data(event.body.to_string());
    if let Some(id) = event.body["id"].as_str() {
        e = e.id(id);
    }
    e
}

fn ends_stream(event: &SessionEvent) -> bool {
    matches!(event.body["type"].as_str(), Some("session.status_terminated" | "session.deleted"))
}

/// Streams events appended from now on; with `Last-Event-ID` (header) or `last_event_id`
/// (query), first replays what came after that event. Every message carries an `event:` line
/// (the reference client drops messages without one); `ping` events keep the connection alive.
pub(crate) async fn stream(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let id: SessionId = path_id("session", &id)?;
    visible_session(&state, &caller, &id).await?;
    let resume_from = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| q.iter().find(|(k, _)| k == "last_event_id").map(|(_, v)| v.clone()));
    // Subscribe before reading history so nothing falls between the two.
    let mut live = state.hub.subscribe_from(&*state.store, &id).await?;
    let mut replay = Vec::new();
    if let Some(last) = resume_from {
        let all = state.store.events_after(&id, 0).await?;
        let pos = all
            .iter()
            .position(|e| e.body["id"] == last.as_str())
            .ok_or_else(|| ApiError::invalid(format!("event `{last}` is not in session `{id}`")))?;
        replay = all[pos + 1..].to_vec();
    }
    let stream = async_stream(move |mut emit| async move {
        let mut last_seq = i64::MIN;
        for e in replay {
            last_seq = e.seq;
            if !emit.send(sse(&e)).await || ends_stream(&e) {
                return;
            }
        }
        loop {
            let next = tokio::select! {
                next = live.recv() => next,
                () = emit.closed() => return,
            };
            match next {
                Ok(e) if e.seq <= last_seq => {}
                Ok(e) => {
                    last_seq = e.seq;
                    if !emit.send(sse(&e)).await || ends_stream(&e) {
                        return;
                    }
                }
                // Fell behind or the hub went away: end; the client reconnects and re-reads.
                Err(RecvError::Lagged(_) | RecvError::Closed) => return,
            }
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(PING_EVERY).event(Event::default().event("ping").data("{}"))))
}

/// A tiny generator: `body` pushes events through an `Emitter` into a channel-backed stream.
pub(crate) fn async_stream<F, Fut>(body: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(Emitter) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(64);
    let open = crate::metrics::OpenStream::new();
    tokio::spawn(async move {
        let _open = open;
        body(Emitter(tx)).await;
    });
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) })
}

pub(crate) struct Emitter(tokio::sync::mpsc::Sender<Event>);

impl Emitter {
    /// Resolves when the client has gone.
    pub(crate) async fn closed(&self) {
        self.0.closed().await;
    }

    /// Sends one event; `false` once the client has gone (the generator should stop).
    pub(crate) async fn send(&mut self, e: Event) -> bool {
        self.0.send(e).await.is_ok()
    }
}
