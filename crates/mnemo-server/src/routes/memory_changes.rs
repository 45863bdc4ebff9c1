//! `/v1/memory_stores/{store}/changes` (a mnemo extension): a store's change feed, as an SSE
//! stream or a JSON long poll. One entry per memory version, in the store's commit order,
//! never with content; the cursor is the version's position in the store.

use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use mnemo_api::{MemoryChangePage, MemoryStoreId, WorkspaceId};

use mnemo_http::{Id, Params, Query};

use mnemo_api::limits::{DEFAULT_FEED_PING_SECS, MAX_FEED_PING_SECS, MIN_FEED_PING_SECS};

use super::events::async_stream;
use crate::auth::MemoryCaller;
use crate::changes::{FEED_BATCH, Feed};
use crate::extract::Writer;
use crate::{ApiError, AppState};

/// Longest a JSON long poll waits for a change.
pub(crate) const MAX_WAIT_MS: u64 = 60_000;
/// How long a JSON long poll waits when `wait_ms` is not given.
const DEFAULT_WAIT_MS: u64 = 30_000;
const DEFAULT_JSON_LIMIT: u32 = 100;

fn cursor(raw: &str, name: &str) -> Result<i64, ApiError> {
    raw.trim()
        .parse::<i64>()
        .ok()
        .filter(|c| *c >= 0)
        .ok_or_else(|| ApiError::invalid(format!("{name} must be a cursor this feed handed out, or 0 (got `{raw}`)")))
}

/// The SSE stream's keep-alive interval: `ping` seconds (a long-lived client that hears of
/// silence late asks for fewer pings: each costs the server a wake-up and a write), else 15.
fn ping_every(raw: Option<&str>) -> Result<Duration, ApiError> {
    let Some(raw) = raw else { return Ok(Duration::from_secs(DEFAULT_FEED_PING_SECS)) };
    raw.trim()
        .parse::<u64>()
        .ok()
        .filter(|s| (MIN_FEED_PING_SECS..=MAX_FEED_PING_SECS).contains(s))
        .map(Duration::from_secs)
        .ok_or_else(|| {
            ApiError::invalid(format!(
                "ping must be whole seconds from {MIN_FEED_PING_SECS} to {MAX_FEED_PING_SECS} (got `{}`)",
                raw.escape_debug()
            ))
        })
}

/// Whether the stream carries small versions' content (`content=inline`).
fn wants_content(raw: Option<&str>) -> Result<bool, ApiError> {
    match raw {
        None => Ok(false),
        Some("inline") => Ok(true),
        Some(other) => Err(ApiError::invalid(format!("content must be `inline` (got `{}`)", other.escape_debug()))),
    }
}

/// Whether the caller asked for the JSON long-poll form (`format=json`). Not chosen by
/// `Accept`: SDK clients send `Accept: application/json` on streams too.
fn wants_json(format: Option<&str>) -> Result<bool, ApiError> {
    match format {
        None | Some("sse") => Ok(false),
        Some("json") => Ok(true),
        Some(other) => Err(ApiError::invalid(format!("format must be `json` or `sse` (got `{other}`)"))),
    }
}

#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/changes",
    operation_id = "memory_changes.changes",
    tag = "memory changes",
    summary = "Follow a store's changes: an SSE stream, or a JSON long poll with `format=json`",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ChangesQuery, ("Last-Event-ID" = Option<String>, Header, description = "The last `id` an SSE client saw; outranks `after`."), ("mnemo-writer" = Option<String>, Header, description = "The client's writer id (16–64 ASCII letters, digits, `-`, `_`): under `content=inline`, versions written under the same id come without their content.")),
    responses((status = 200, description = "Under `format=json`: the changes after the cursor (waiting up to `wait_ms` for one). Otherwise an SSE stream of `memory.created`, `memory.modified` and `memory.deleted` events whose data is a `MemoryChangeEvent` and whose `id` is the cursor, with `ping` keep-alives.", content((mnemo_api::MemoryChangePage = "application/json"), (mnemo_api::MemoryChangeEvent = "text/event-stream")))),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn changes(
    State(state): State<AppState>,
    caller: MemoryCaller,
    writer: Writer,
    headers: HeaderMap,
    Id(store): Id<MemoryStoreId>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let one = |name: &str| q.one(name);
    // A reconnecting SSE client sends the last id it saw; it outranks the URL's `after`.
    let after = match headers.get("last-event-id").and_then(|v| v.to_str().ok()).filter(|v| !v.trim().is_empty()) {
        Some(last) => Some(cursor(last, "Last-Event-ID")?),
        None => one("after").map(|a| cursor(a, "after")).transpose()?,
    };
    let json = wants_json(one("format"))?;
    let ping = ping_every(one("ping"))?;
    let inline = wants_content(one("content"))?;
    // Held while the feed or long poll lasts: one credential cannot take every connection.
    let slot = state.streams.open(caller.credential())?;
    if json {
        let wait = match one("wait_ms") {
            None => DEFAULT_WAIT_MS,
            Some(w) => w
                .parse::<u64>()
                .map_err(|_| ApiError::invalid(format!("wait_ms must be a whole number of milliseconds (got `{w}`)")))?
                .min(MAX_WAIT_MS),
        };
        let limit = mnemo_http::positive_limit(one("limit"), DEFAULT_JSON_LIMIT, mnemo_store::MAX_FEED_PAGE)?;
        let answer = long_poll(&state, caller.workspace()?, &store, after, Duration::from_millis(wait), limit).await;
        drop(slot);
        return answer.map(IntoResponse::into_response);
    }
    let mut feed =
        Feed::open(&*state.store, &state.changes, caller.workspace()?, &store, after, inline, writer.0).await?;
    // The first read happens here, so a store that is gone is a 404, not an empty stream.
    let first = feed.read(&*state.store, &state.changes, FEED_BATCH).await?;
    let (db, hub) = (state.store.clone(), state.changes.clone());
    let mut pings = state.pings.every(ping.as_secs());
    let stream = async_stream(move |mut emit| async move {
        let _slot = slot;
        let mut batch = first;
        loop {
            let full = batch.entries.len() as u32 >= FEED_BATCH;
            for entry in &batch.entries {
                if !emit.send(feed.event(entry)).await {
                    return;
                }
            }
            if !full {
                // Idle: a ping on every tick of the shared clock, until a change may be there.
                let woken = loop {
                    tokio::select! {
                        woken = feed.changed() => break woken,
                        () = emit.closed() => return,
                        ticked = pings.changed() => {
                            if ticked.is_err() || !emit.send(Event::default().event("ping").data("{}")).await {
                                return;
                            }
                        }
                    }
                };
                if !woken {
                    return;
                }
            }
            batch = match feed.read(&*db, &hub, FEED_BATCH).await {
                Ok(batch) => batch,
                Err(e) => {
                    // The client reconnects with the last id it saw and loses nothing.
                    tracing::warn!(memory_store.id = %feed_store(&feed), error = %e.chain(), "change feed read failed; closing");
                    return;
                }
            };
        }
    });
    // Pings come from the stream itself, on the shared clock (no per-stream keep-alive timer).
    Ok(Sse::new(stream).into_response())
}

fn feed_store(feed: &Feed) -> String {
    feed.store().to_string()
}

fn empty(feed: &Feed) -> axum::Json<MemoryChangePage> {
    axum::Json(MemoryChangePage { data: Vec::new(), next_cursor: feed.cursor().to_string() })
}

/// Answers as soon as there is at least one change after the cursor, or with none once `wait`
/// has passed.
async fn long_poll(
    state: &AppState,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    after: Option<i64>,
    wait: Duration,
    limit: u32,
) -> Result<axum::Json<MemoryChangePage>, ApiError> {
    let mut feed = Feed::open(&*state.store, &state.changes, ws, store, after, false, None).await?;
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let batch = feed.read(&*state.store, &state.changes, limit).await?;
        if !batch.entries.is_empty() {
            let next_cursor = feed.cursor().to_string();
            return Ok(axum::Json(MemoryChangePage {
                data: batch.entries.iter().map(|e| e.change.clone()).collect(),
                next_cursor,
            }));
        }
        match tokio::time::timeout_at(deadline, feed.changed()).await {
            Ok(true) => {}
            // The store is gone: this read says so.
            Ok(false) => {
                feed.read(&*state.store, &state.changes, limit).await?;
                return Ok(empty(&feed));
            }
            Err(_) => return Ok(empty(&feed)),
        }
    }
}

/// The query `changes` reads (by hand, from the raw query); described for the API document.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct ChangesQuery {
    /// Start after this cursor (`0`: from the beginning; default: from now on).
    after: Option<u64>,
    /// `sse` (the default) or `json` (one long poll).
    #[param(pattern = "^(sse|json)$")]
    format: Option<String>,
    /// Under `format=json`: how long to wait for a change, at most 60,000 ms (default 30,000).
    #[param(maximum = 60000)]
    wait_ms: Option<u64>,
    /// Under `format=json`: most changes per answer (default 100).
    #[param(minimum = 1)]
    limit: Option<u32>,
    /// `inline`: the SSE stream's entries of created or modified versions of at most 64 KiB
    /// carry the version's `content` (a mirror then needs no request per change), except those
    /// written under the stream's own `mnemo-writer` header.
    #[param(pattern = "^inline$")]
    content: Option<String>,
    /// The SSE stream's keep-alive interval in seconds, 5–300 (default 15). A client that
    /// treats a silent stream as dead only after several intervals may ask for fewer pings.
    #[param(minimum = 5, maximum = 300)]
    ping: Option<u64>,
}
