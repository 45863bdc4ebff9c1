//! `/v1/sessions/{session}/events`: the log (list), appending (send), and the live stream (SSE).

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use mnemo_api::{SessionId, Timestamp};
use mnemo_http::{BadInput, FromQuery, Id, Order, Params, Query, cursor, positive_limit, time_range};
use mnemo_store::rules::scope;
use mnemo_store::{Cursor, ListEvents, SessionEvent, Streamed};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::sessions::visible_session;
use crate::auth::Caller;
use crate::extract::Json;
use crate::{ApiError, AppState};

/// Largest page of the event log (the reference runner asks for 1000).
const MAX_EVENTS_PAGE: u32 = 1000;
const DEFAULT_EVENTS_PAGE: u32 = 100;
/// Keep-alive cadence of streams.
pub(crate) const PING_EVERY: Duration = Duration::from_secs(15);

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct EventPage {
    #[schema(value_type = Vec<mnemo_api::LoggedEvent>)]
    data: Vec<Value>,
    /// Pass back as `page` for the next page; null on the last.
    next_page: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{session}/events",
    operation_id = "events.list",
    tag = "events",
    summary = "List a session's events",
    params(("session" = mnemo_api::SessionId, Path, description = "The session."), EventsQuery),
    responses((status = 200, description = "OK.", body = EventPage)),
    security(("api_key" = []), ("api_key_bearer" = []), ("environment_key" = []), ("sessions_token" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Id(id): Id<SessionId>,
    Query(q): Query<Params>,
) -> Result<axum::Json<EventPage>, ApiError> {
    // Who may see the session is settled before its query is judged.
    visible_session(&state, &caller, &id).await?;
    let ws = caller.workspace()?;
    let q: EventFilter = q.read()?;
    let query = ListEvents {
        processed_gte: q.processed_gte,
        processed_lte: q.processed_lte,
        descending: q.order == Order::Desc,
        limit: q.limit,
        types: q.types,
        after: q.after,
    };
    let page = mnemo_http::page(state.store.list_events(ws, &id, query).await?);
    Ok(axum::Json(EventPage { data: page.data.iter().map(SessionEvent::to_json).collect(), next_page: page.next_page }))
}

/// The event log's query, as [`EventsQuery`] describes it. A parameter given twice counts once,
/// as it always has here.
#[derive(Debug)]
pub(crate) struct EventFilter {
    limit: u32,
    order: Order,
    types: Vec<String>,
    processed_gte: Option<Timestamp>,
    processed_lte: Option<Timestamp>,
    after: Option<Cursor>,
}

impl FromQuery for EventFilter {
    const ONCE: &'static [&'static str] = &[];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let limit = positive_limit(q.one("limit"), DEFAULT_EVENTS_PAGE, MAX_EVENTS_PAGE)?;
        let order = Order::parse(q.one("order"))?;
        let types = q.all(&["types[]", "types"]);
        let (processed_gte, processed_lte) = time_range(q, "created_at")?;
        Ok(Self { limit, order, types, processed_gte, processed_lte, after: cursor(q.one("page"))? })
    }
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

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct SendEvents {
    /// One or more events (`user.*`; with an API key, the agent side's `agent.*` and `session.status_idle` too).
    #[schema(value_type = Vec<mnemo_api::Event>, min_items = 1)]
    events: Vec<Value>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Sent {
    #[schema(value_type = Vec<mnemo_api::LoggedEvent>)]
    data: Vec<Value>,
}

/// Appends events. An API key drives the agent side too (`agent.message`, `agent.tool_use`,
/// ending a turn with `session.status_idle`); workers and clients post `user.*` events.
#[utoipa::path(
    post,
    path = "/v1/sessions/{session}/events",
    operation_id = "events.send",
    tag = "events",
    summary = "Append events to a session",
    params(("session" = mnemo_api::SessionId, Path, description = "The session.")),
    request_body = SendEvents,
    responses((status = 200, description = "The events as recorded, with their ids.", body = Sent)),
    security(("api_key" = []), ("api_key_bearer" = []), ("environment_key" = []), ("sessions_token" = [])),
)]
pub(crate) async fn send(
    State(state): State<AppState>,
    caller: Caller,
    Id(id): Id<SessionId>,
    Json(body): Json<SendEvents>,
) -> Result<axum::Json<Sent>, ApiError> {
    visible_session(&state, &caller, &id).await?;
    if body.events.is_empty() {
        return Err(ApiError::invalid("events must not be empty"));
    }
    let events = parse_events("events", body.events)?;
    let author = scope::event_author(&caller.credential)
        .ok_or_else(|| ApiError::permission(format!("this credential does not reach session `{id}`")))?;
    let ws = caller.workspace()?;
    let appended = state.store.append_events(ws, &id, events, author).await?;
    state.hub.publish(&*state.store, &id, &appended.written).await;
    if appended.enqueued_work {
        state.work_signal.notify_waiters();
    }
    state.wake_agent(ws, &id);
    Ok(axum::Json(Sent { data: appended.recorded.iter().map(SessionEvent::to_json).collect() }))
}

fn sse(event: &Streamed) -> Event {
    Event::default().event(event.kind()).data(event.to_json().to_string()).id(event.id().as_str())
}

/// Streams events appended from now on; with `Last-Event-ID` (header) or `last_event_id`
/// (query), first replays what came after that event. Every message carries an `event:` line
/// (the reference client drops messages without one); `ping` events keep the connection alive.
#[utoipa::path(
    get,
    path = "/v1/sessions/{session}/events/stream",
    operation_id = "events.stream",
    tag = "events",
    summary = "Stream a session's events as they are appended (SSE)",
    params(("session" = mnemo_api::SessionId, Path, description = "The session."), StreamQuery, ("Last-Event-ID" = Option<String>, Header, description = "Replay what came after this event first.")),
    responses((status = 200, description = "An SSE stream: each message's `event` is the event's `type`, its `data` the event, its `id` the event's id; `ping` messages keep the connection alive. It ends after `session.status_terminated` or `session.deleted`.", content_type = "text/event-stream", body = mnemo_api::LoggedEvent)),
    security(("api_key" = []), ("api_key_bearer" = []), ("environment_key" = []), ("sessions_token" = [])),
)]
pub(crate) async fn stream(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Id(id): Id<SessionId>,
    Query(q): Query<Params>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    visible_session(&state, &caller, &id).await?;
    // Held for the stream's life: one credential cannot take every connection.
    let slot = state.streams.open(&caller.credential)?;
    let resume_from = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| q.one("last_event_id").map(str::to_owned));
    // Subscribe before reading history so nothing falls between the two.
    let ws = caller.workspace()?;
    let mut live = state.hub.subscribe_from(&*state.store, ws, &id).await?;
    let mut replay = Vec::new();
    if let Some(last) = resume_from {
        let all = state.store.events_after(ws, &id, 0).await?;
        let pos = all
            .iter()
            .position(|e| e.event.id.as_str() == last)
            .ok_or_else(|| ApiError::invalid(format!("event `{last}` is not in session `{id}`")))?;
        replay = all.into_iter().skip(pos + 1).map(Streamed::Logged).collect();
    }
    let stream = async_stream(move |mut emit| async move {
        let _slot = slot;
        let mut last_seq = i64::MIN;
        for e in replay {
            last_seq = e.seq();
            if !emit.send(sse(&e)).await || e.ends_stream() {
                return;
            }
        }
        loop {
            let next = tokio::select! {
                next = live.recv() => next,
                () = emit.closed() => return,
            };
            match next {
                Ok(e) if e.seq() <= last_seq => {}
                Ok(e) => {
                    last_seq = e.seq();
                    if !emit.send(sse(&e)).await || e.ends_stream() {
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

/// The query `list` reads (by hand, from the raw query); described for the API document.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct EventsQuery {
    /// Page size, at least 1 (default 100; more than 1,000 reads as 1,000).
    #[param(minimum = 1)]
    limit: Option<u32>,
    /// The `next_page` of the previous page.
    page: Option<String>,
    /// `asc` (oldest first; the default) or `desc`.
    #[param(pattern = "^(asc|desc)$")]
    order: Option<String>,
    /// Only events of these types (`user.message`, `agent.tool_use`, …).
    #[param(rename = "types[]")]
    types: Option<Vec<String>>,
    /// Processed at or after (RFC 3339); `created_at[gt]`, `[lte]` and `[lt]` work alike.
    #[param(rename = "created_at[gte]")]
    created_at_gte: Option<chrono::DateTime<chrono::Utc>>,
    /// Processed after (RFC 3339).
    #[param(rename = "created_at[gt]")]
    created_at_gt: Option<chrono::DateTime<chrono::Utc>>,
    /// Processed at or before (RFC 3339).
    #[param(rename = "created_at[lte]")]
    created_at_lte: Option<chrono::DateTime<chrono::Utc>>,
    /// Processed before (RFC 3339).
    #[param(rename = "created_at[lt]")]
    created_at_lt: Option<chrono::DateTime<chrono::Utc>>,
}

/// The query `stream` reads; described for the API document.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct StreamQuery {
    /// Replay what came after this event first (the `Last-Event-ID` header outranks it).
    last_event_id: Option<mnemo_api::EventId>,
}
