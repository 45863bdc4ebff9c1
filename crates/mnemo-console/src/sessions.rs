//! Sessions: the list, and a session's page with its transcript (live while it runs) and the
//! memory versions it wrote.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use askama::Template;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use mnemo_api::{EnvironmentId, LoggedEvent, Session, SessionId, SessionStatus};
use mnemo_http::{BadInput, FromQuery, Id, PageParam, Params, Query};
use mnemo_store::{ListEvents, ListMemoryVersions, ListSessions, SessionEvent, StoreError, Streamed};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use crate::Console;
use crate::auth::{Signed, encode_component};
use crate::page::{Chrome, PageError, Section, render};
use crate::text::{ActorView, actor, size, when};
use crate::transcript::{Entry, EntryFragment, entry};
use mnemo_store::rules::scope::Action;

/// Sessions per page of the list.
const PAGE: u32 = 50;
/// Events per page of a transcript.
const EVENTS_PAGE: u32 = 500;
/// Versions of each store shown on a session's page.
const VERSIONS_SHOWN: u32 = 20;
/// How often an idle live transcript says it is still there.
const PING_EVERY: Duration = Duration::from_secs(15);

#[derive(Debug)]
pub(crate) struct SessionRow {
    id: String,
    title: String,
    status: String,
    agent: String,
    environment: String,
    environment_href: String,
    stores: Vec<(String, String)>,
    created: String,
    archived: bool,
    /// The session's model tokens so far (sessions the agent loop runs), or empty.
    tokens: String,
}

#[derive(Debug, Template)]
#[template(path = "sessions.html")]
struct SessionsPage {
    chrome: Chrome,
    rows: Vec<SessionRow>,
    next: Option<String>,
    first_page: bool,
}

fn agent_name(agent: &Value) -> String {
    let name = agent.get("name").and_then(Value::as_str).unwrap_or("agent");
    match agent.get("version").and_then(Value::as_u64) {
        Some(v) => format!("{name} (v{v})"),
        None => name.to_owned(),
    }
}

/// Environment names by id, looked up once per page.
async fn environment_names(
    console: &Console,
    ws: &mnemo_api::WorkspaceId,
    ids: impl Iterator<Item = &EnvironmentId>,
) -> Result<HashMap<EnvironmentId, String>, PageError> {
    let mut names = HashMap::new();
    for id in ids {
        if names.contains_key(id) {
            continue;
        }
        let name = match console.store.get_environment(ws, id).await {
            Ok(env) => env.name,
            Err(StoreError::NotFound { .. } | StoreError::Coded { .. }) => format!("{id} (deleted)"),
            Err(err) => return Err(err.into()),
        };
        names.insert(id.clone(), name);
    }
    Ok(names)
}

fn session_row(s: &Session, environments: &HashMap<EnvironmentId, String>) -> SessionRow {
    SessionRow {
        id: s.id.to_string(),
        title: s.title.clone().unwrap_or_default(),
        status: s.status.as_str().to_owned(),
        agent: agent_name(&s.agent),
        environment: environments.get(&s.environment_id).cloned().unwrap_or_else(|| s.environment_id.to_string()),
        environment_href: format!("/console/environments/{}", s.environment_id),
        stores: s
            .resources
            .iter()
            .map(|r| {
                (
                    r.name.clone().unwrap_or_else(|| r.memory_store_id.to_string()),
                    format!("/console/stores/{}", r.memory_store_id),
                )
            })
            .collect(),
        created: when(&s.created_at),
        archived: s.archived_at.is_some(),
        tokens: crate::transcript::tokens_text(&s.usage).unwrap_or_default(),
    }
}

pub(crate) async fn list(
    State(console): State<Console>,
    who: Signed,
    Query(PageParam(after)): Query<PageParam>,
) -> Result<Response, PageError> {
    let first_page = after.is_none();
    let listing = console
        .store
        .list_sessions(
            &who.workspace,
            ListSessions { include_archived: true, limit: PAGE, after, ..ListSessions::default() },
        )
        .await?;
    let environments =
        environment_names(&console, &who.workspace, listing.items.iter().map(|s| &s.environment_id)).await?;
    let rows = listing.items.iter().map(|s| session_row(s, &environments)).collect();
    let next = listing.next.map(|c| format!("/console/sessions?page={}", encode_component(&c.encode())));
    Ok(render(&SessionsPage { chrome: who.chrome(Section::Sessions), rows, next, first_page }))
}

#[derive(Debug)]
pub(crate) struct Attached {
    name: String,
    href: String,
    access: String,
    mount_path: String,
}

#[derive(Debug)]
pub(crate) struct WrittenVersion {
    store: String,
    path: String,
    operation: &'static str,
    created: String,
    size: String,
    href: String,
}

#[derive(Debug, Template)]
#[template(path = "session.html")]
struct SessionPage {
    chrome: Chrome,
    session: SessionRow,
    stop_reason: String,
    attached: Vec<Attached>,
    entries: Vec<Entry>,
    /// Where the live stream of later events is (only on the transcript's last page).
    live: Option<String>,
    later: Option<String>,
    written: Vec<WrittenVersion>,
    written_more: Vec<(String, String)>,
    by: ActorView,
}

pub(crate) async fn session_page(
    State(console): State<Console>,
    who: Signed,
    Id(session_id): Id<SessionId>,
    Query(PageParam(after)): Query<PageParam>,
) -> Result<Response, PageError> {
    let session = console.store.get_session(&who.workspace, &session_id).await?;
    who.allow(Action::Session { session: &session_id, environment: &session.environment_id })?;
    let events = console
        .store
        .list_events(&who.workspace, &session_id, ListEvents { limit: EVENTS_PAGE, after, ..ListEvents::default() })
        .await?;
    let entries: Vec<Entry> = events.items.iter().map(|e| entry(e.seq, &e.event)).collect();
    let last_seq = events.items.last().map_or(0, |e| e.seq);
    let (live, later) = match &events.next {
        None => (Some(format!("/console/sessions/{session_id}/live?after={last_seq}")), None),
        Some(c) => (None, Some(format!("/console/sessions/{session_id}?page={}", encode_component(&c.encode())))),
    };
    let mut written = Vec::new();
    let mut written_more = Vec::new();
    for r in &session.resources {
        let store_name = r.name.clone().unwrap_or_else(|| r.memory_store_id.to_string());
        let versions = match console
            .store
            .list_memory_versions(
                &who.workspace,
                &r.memory_store_id,
                ListMemoryVersions {
                    session_id: Some(session_id.clone()),
                    ..ListMemoryVersions::newest(VERSIONS_SHOWN)
                },
            )
            .await
        {
            Ok(v) => v,
            // The store may have been deleted since the session attached it.
            Err(StoreError::NotFound { .. }) => continue,
            Err(err) => return Err(err.into()),
        };
        if versions.next.is_some() {
            written_more.push((
                store_name.clone(),
                format!("/console/stores/{}/history?session={session_id}", r.memory_store_id),
            ));
        }
        written.extend(versions.items.into_iter().map(|v| WrittenVersion {
            store: store_name.clone(),
            path: v.path.unwrap_or_else(|| "(redacted)".into()),
            operation: v.operation.as_str(),
            created: when(&v.created_at),
            size: v.content_size_bytes.map(size).unwrap_or_default(),
            href: format!("/console/stores/{}/versions/{}", r.memory_store_id, v.id),
        }));
    }
    let environments = environment_names(&console, &who.workspace, std::iter::once(&session.environment_id)).await?;
    let attached = session
        .resources
        .iter()
        .map(|r| Attached {
            name: r.name.clone().unwrap_or_else(|| r.memory_store_id.to_string()),
            href: format!("/console/stores/{}", r.memory_store_id),
            access: serde_json::to_value(r.access).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default(),
            mount_path: r.mount_path.clone().unwrap_or_default(),
        })
        .collect();
    let stop_reason = session.stop_reason.as_ref().map(|r| r.kind().replace('_', " ")).unwrap_or_default();
    Ok(render(&SessionPage {
        chrome: who.chrome(Section::Sessions),
        by: actor(Some(&mnemo_api::Actor::SessionActor { session_id: session_id.clone() })),
        session: session_row(&session, &environments),
        stop_reason,
        attached,
        entries,
        live,
        later,
        written,
        written_more,
    }))
}

/// Where a live transcript starts: after the event at `after`, the last one its page shows.
#[derive(Debug)]
pub(crate) struct LiveQuery {
    after: Option<i64>,
}

impl FromQuery for LiveQuery {
    const ONCE: &'static [&'static str] = &["after"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let after = q.one("after").map(|s| {
            s.parse().map_err(|_| {
                BadInput::Invalid(format!("after must be an event's position, a whole number (got `{s}`)"))
            })
        });
        Ok(Self { after: after.transpose()? })
    }
}

fn fragment(seq: i64, event: &LoggedEvent) -> Event {
    let e = entry(seq, event);
    let html = EntryFragment { e: &e }.render().unwrap_or_default();
    Event::default().event("entry").id(seq.to_string()).data(html)
}

/// The session's status after `event`, if it is a status change.
fn status_after(event: &mnemo_api::Event) -> Option<&str> {
    use mnemo_api::Event as E;
    Some(match event {
        E::StatusRunning => SessionStatus::Running.as_str(),
        E::StatusIdle(_) => SessionStatus::Idle.as_str(),
        E::StatusTerminated => SessionStatus::Terminated.as_str(),
        // A status this build does not know (a newer server wrote it) is still a status.
        E::Unknown(unknown) => unknown.kind().strip_prefix("session.status_")?,
        _ => return None,
    })
}

fn status_event(event: &mnemo_api::Event) -> Option<Event> {
    Some(Event::default().event("status").data(status_after(event)?))
}

/// Sends one event's fragment (and, for a status change, the new status); false once the
/// browser has gone.
async fn emit(tx: &tokio::sync::mpsc::Sender<Event>, e: &SessionEvent) -> bool {
    let status = status_event(&e.event.event);
    if tx.send(fragment(e.seq, &e.event)).await.is_err() {
        return false;
    }
    match status {
        Some(s) => tx.send(s).await.is_ok(),
        None => true,
    }
}

/// The answer to a live transcript past the stream limits: `429` with `retry-after`; the
/// browser's event source tries again.
fn too_many_streams(wait: std::time::Duration) -> Response {
    let secs = wait.as_secs().max(1);
    let mut response = (
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        "too many live views are open for this API key; close a transcript or retry later",
    )
        .into_response();
    response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(secs));
    response
}

/// The transcript's later events as they are appended: `entry` messages carry the rendered
/// fragment (ids are log positions, so a reconnect resumes where it stopped), `status` ones the
/// session's new status.
pub(crate) async fn live(
    State(console): State<Console>,
    signed: Signed,
    headers: HeaderMap,
    Id(session_id): Id<SessionId>,
    Query(q): Query<LiveQuery>,
) -> Result<Response, PageError> {
    let session = console.store.get_session(&signed.workspace, &session_id).await?;
    signed.allow(Action::Session { session: &session_id, environment: &session.environment_id })?;
    // A live transcript holds a connection like the API's streams, and counts with them.
    let slot = match console.hooks.open_stream(&signed.credential) {
        Ok(slot) => slot,
        Err(wait) => return Ok(too_many_streams(wait)),
    };
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<i64>().ok());
    let from = resume.or(q.after).unwrap_or(0);
    // Subscribe before reading what is already there, so nothing falls between the two.
    let mut rx = console.hooks.subscribe(&signed.workspace, &session_id).await?;
    let backlog = console.store.events_after(&signed.workspace, &session_id, from).await?;
    let (tx, out) = tokio::sync::mpsc::channel::<Event>(64);
    tokio::spawn(async move {
        // The stream's place is freed when it ends (the browser left, or it fell behind).
        let _slot = slot;
        let mut last = from;
        for e in backlog {
            last = e.seq;
            if !emit(&tx, &e).await {
                return;
            }
        }
        loop {
            let next = tokio::select! {
                next = rx.recv() => next,
                () = tx.closed() => return,
            };
            match next {
                Ok(e) if e.seq() <= last => {}
                Ok(Streamed::Logged(e)) => {
                    last = e.seq;
                    if !emit(&tx, &e).await {
                        return;
                    }
                }
                // The session is gone: nothing more will come.
                Ok(Streamed::Deleted { .. }) => return,
                // Fell behind or the feed ended: the browser reconnects from the last id it saw.
                Err(RecvError::Lagged(_) | RecvError::Closed) => return,
            }
        }
    });
    let stream: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> =
        Box::pin(futures::stream::unfold(out, |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) }));
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(PING_EVERY)).into_response())
}
