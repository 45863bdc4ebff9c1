//! `/v1/sessions`: create (with memory-store resources and, on a self-hosted environment, a
//! work item), retrieve, list, archive, delete.

use axum::extract::State;
use mnemo_api::{
    AgentId, AgentParams, CreateSession, EnvironmentId, Event, MAX_MEMORY_INSTRUCTIONS_CHARS,
    MAX_SESSION_MEMORY_STORES, MemoryStoreId, Session, SessionDeleted, SessionId, Timestamp, View, validate_metadata,
};
use mnemo_http::{BadInput, FromQuery, Id, Paging, Params, Query, filter_id, flag, time_range};
use mnemo_store::rules::scope::{self, Action};
use mnemo_store::{AgentRef, Attachment, ListSessions, NewSession};
use serde::Serialize;
use serde_json::Value;

use crate::auth::{ApiKeyCaller, Caller};
use crate::extract::Json;
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

/// Most events a session may be created with.
const MAX_INITIAL_EVENTS: usize = 50;

fn agent_ref(agent: &Value) -> Result<AgentRef, ApiError> {
    let parse_id = |s: &str| s.parse().map_err(|_| ApiError::invalid(format!("agent `{s}` not found")));
    match agent {
        Value::String(id) => Ok(AgentRef { id: parse_id(id)?, version: None, overrides: None }),
        Value::Object(o) => {
            let id = o.get("id").and_then(Value::as_str).ok_or_else(|| ApiError::invalid("agent.id is required"))?;
            let version = match o.get("version") {
                None | Some(Value::Null) => None,
                Some(v) => Some(
                    v.as_u64()
                        .filter(|n| *n >= 1)
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| ApiError::invalid("agent.version must be a positive integer"))?,
                ),
            };
            let overrides = match o.get("type").and_then(Value::as_str) {
                Some("agent") => None,
                Some("agent_with_overrides") => Some(
                    serde_json::from_value::<AgentParams>(Value::Object(o.clone()))
                        .map_err(|e| ApiError::invalid(format!("invalid agent overrides: {e}")))?,
                ),
                other => {
                    return Err(ApiError::invalid(format!(
                        "agent.type must be `agent` or `agent_with_overrides` (got {other:?})"
                    )));
                }
            };
            Ok(AgentRef { id: parse_id(id)?, version, overrides })
        }
        _ => Err(ApiError::invalid("agent must be an agent id or an object")),
    }
}

#[utoipa::path(
    post,
    path = "/v1/sessions",
    operation_id = "sessions.create",
    tag = "sessions",
    summary = "Create a session (on a self-hosted environment, this queues its work item)",
    request_body = mnemo_api::CreateSession,
    responses((status = 200, description = "The new session.", body = mnemo_api::Session)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Json(body): Json<CreateSession>,
) -> Reply<Session> {
    let poster = scope::event_author(&caller.credential)
        .map(|author| author.poster())
        .ok_or_else(|| ApiError::permission("this endpoint needs an API key"))?;
    let environment: EnvironmentId = body
        .environment_id
        .parse()
        .map_err(|_| ApiError::invalid(format!("environment `{}` not found", body.environment_id)))?;
    let mut attachments = Vec::new();
    for r in &body.resources {
        if r.kind != "memory_store" {
            return Err(ApiError::invalid(format!(
                "Environment {environment} is a self-hosted environment. `resources` are not supported with self-hosted environments."
            )));
        }
        let raw = r.memory_store_id.as_deref().ok_or_else(|| ApiError::invalid("memory_store_id is required"))?;
        let store: MemoryStoreId =
            raw.parse().map_err(|_| ApiError::invalid(format!("memory store `{raw}` not found")))?;
        if let Some(i) = &r.instructions
            && i.chars().count() > MAX_MEMORY_INSTRUCTIONS_CHARS
        {
            return Err(ApiError::invalid(format!(
                "instructions for memory store `{store}` exceed {MAX_MEMORY_INSTRUCTIONS_CHARS} characters"
            )));
        }
        attachments.push(Attachment {
            store,
            access: r.access.unwrap_or_default(),
            instructions: r.instructions.clone(),
        });
    }
    if attachments.len() > MAX_SESSION_MEMORY_STORES {
        return Err(ApiError::invalid(format!(
            "a session accepts at most {MAX_SESSION_MEMORY_STORES} memory stores (got {})",
            attachments.len()
        )));
    }
    let metadata = body.metadata.unwrap_or_default();
    validate_metadata(&metadata).map_err(|e| ApiError::invalid(e.0))?;
    if body.initial_events.len() > MAX_INITIAL_EVENTS {
        return Err(ApiError::invalid(format!("at most {MAX_INITIAL_EVENTS} initial_events are accepted")));
    }
    let initial_events = super::events::parse_events("initial_events", body.initial_events)?;
    for (i, event) in initial_events.iter().enumerate() {
        if !matches!(event, Event::UserMessage(_) | Event::UserDefineOutcome(_)) {
            return Err(ApiError::invalid(format!(
                "initial_events[{i}]: initial_events accept only user.message and user.define_outcome (got {})",
                event.kind()
            )));
        }
    }
    let new = NewSession {
        agent: agent_ref(&body.agent)?,
        environment,
        attachments,
        title: body.title,
        metadata,
        budget: body.budget,
        initial_events,
        poster,
        mount_root: state.memory_mount_root.to_string(),
    };
    let ws = caller.workspace()?;
    let session = state.store.create_session(ws, new).await?;
    tracing::info!(session.id = %session.id, environment.id = %session.environment_id, "created session");
    state.work_signal.notify_waiters();
    state.wake_agent(ws, &session.id);
    Ok(axum::Json(session))
}

/// A session, if the caller may see it: API keys see every session, environment keys those of
/// their environment, sessions tokens their own session.
pub(crate) async fn visible_session(state: &AppState, caller: &Caller, id: &SessionId) -> Result<Session, ApiError> {
    let session = state.store.get_session(caller.workspace()?, id).await?;
    caller.allow(Action::Session { session: id, environment: &session.environment_id })?;
    Ok(session)
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{session}",
    operation_id = "sessions.retrieve",
    tag = "sessions",
    summary = "Retrieve a session",
    params(("session" = mnemo_api::SessionId, Path, description = "The session.")),
    responses((status = 200, description = "OK.", body = mnemo_api::Session)),
    security(("api_key" = []), ("api_key_bearer" = []), ("environment_key" = []), ("sessions_token" = [])),
)]
pub(crate) async fn retrieve(State(state): State<AppState>, caller: Caller, Id(id): Id<SessionId>) -> Reply<Session> {
    Ok(axum::Json(visible_session(&state, &caller, &id).await?))
}

/// A page of sessions (the sessions list is bidirectional: `prev_page` too).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct SessionPage {
    data: Vec<Session>,
    next_page: Option<String>,
    prev_page: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/sessions",
    operation_id = "sessions.list",
    tag = "sessions",
    summary = "List sessions, newest first",
    params(SessionsQuery),
    responses((status = 200, description = "OK.", body = SessionPage)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Query(q): Query<SessionFilter>,
) -> Reply<SessionPage> {
    let query = ListSessions {
        created_at_gte: q.created_at_gte,
        created_at_lte: q.created_at_lte,
        agent_id: q.agent_id,
        memory_store_id: q.memory_store_id,
        statuses: q.statuses,
        include_archived: q.include_archived,
        limit: q.paging.limit,
        after: q.paging.after,
    };
    let page = mnemo_http::page(state.store.list_sessions(caller.workspace()?, query).await?);
    Ok(axum::Json(SessionPage { data: page.data, next_page: page.next_page, prev_page: None }))
}

/// The session list's query, as [`SessionsQuery`] describes it. A parameter given twice counts
/// once, as it always has here.
#[derive(Debug)]
pub(crate) struct SessionFilter {
    statuses: Vec<String>,
    created_at_gte: Option<Timestamp>,
    created_at_lte: Option<Timestamp>,
    agent_id: Option<AgentId>,
    memory_store_id: Option<MemoryStoreId>,
    include_archived: bool,
    paging: Paging,
}

impl FromQuery for SessionFilter {
    const ONCE: &'static [&'static str] = &[];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let statuses = q.all(&["statuses[]", "statuses"]);
        for s in &statuses {
            if !matches!(s.as_str(), "idle" | "running" | "rescheduling" | "terminated") {
                return Err(BadInput::Invalid(format!(
                    "statuses accepts idle, running, rescheduling and terminated (got `{s}`)"
                )));
            }
        }
        let (created_at_gte, created_at_lte) = time_range(q, "created_at")?;
        Ok(Self {
            statuses,
            created_at_gte,
            created_at_lte,
            agent_id: filter_id("agent_id", q.one("agent_id"))?,
            memory_store_id: filter_id("memory_store_id", q.one("memory_store_id"))?,
            include_archived: flag("include_archived", q.one("include_archived"))?,
            paging: Paging::parse(q, View::Basic)?,
        })
    }
}

/// Body of `POST /v1/sessions/{id}`: `title` (`null` clears it) and a `metadata` patch.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
pub(crate) struct UpdateSession {
    /// The new title; `null` clears it.
    #[serde(default, deserialize_with = "some")]
    #[schema(value_type = Option<String>)]
    title: Option<Option<String>>,
    /// A patch: a string upserts the key, `null` removes it.
    #[serde(default)]
    metadata: Option<std::collections::BTreeMap<String, Option<String>>>,
    /// Refused: vaults cannot be changed after creation.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    vault_ids: Option<Value>,
}

fn some<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{session}",
    operation_id = "sessions.update",
    tag = "sessions",
    summary = "Update a session's title or metadata",
    params(("session" = mnemo_api::SessionId, Path, description = "The session.")),
    request_body = UpdateSession,
    responses((status = 200, description = "The updated session.", body = mnemo_api::Session)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Id(id): Id<SessionId>,
    Json(body): Json<UpdateSession>,
) -> Reply<Session> {
    if body.vault_ids.is_some() {
        return Err(ApiError::invalid("vault_ids cannot be changed"));
    }
    Ok(axum::Json(state.store.update_session(caller.workspace()?, &id, body.title, body.metadata).await?))
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{session}/archive",
    operation_id = "sessions.archive",
    tag = "sessions",
    summary = "Archive a session",
    params(("session" = mnemo_api::SessionId, Path, description = "The session.")),
    responses((status = 200, description = "The archived session.", body = mnemo_api::Session)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn archive(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Id(id): Id<SessionId>,
) -> Reply<Session> {
    let session = state.store.archive_session(caller.workspace()?, &id).await?;
    state.hub.catch_up(&*state.store, &id).await;
    state.auth.forget_all();
    Ok(axum::Json(session))
}

#[utoipa::path(
    delete,
    path = "/v1/sessions/{session}",
    operation_id = "sessions.delete",
    tag = "sessions",
    summary = "Delete a session",
    params(("session" = mnemo_api::SessionId, Path, description = "The session.")),
    responses((status = 200, description = "OK.", body = mnemo_api::SessionDeleted)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Id(id): Id<SessionId>,
) -> Reply<SessionDeleted> {
    state.store.delete_session(caller.workspace()?, &id).await?;
    state.hub.deleted(&id);
    state.auth.forget_all();
    Ok(axum::Json(SessionDeleted { id }))
}

/// The query `list` reads (by hand, from the raw query); described for the API document.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct SessionsQuery {
    /// Page size, 1–100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u32>,
    /// The `next_page` of the previous page.
    page: Option<String>,
    /// Only sessions of this agent.
    agent_id: Option<mnemo_api::AgentId>,
    /// Only sessions with this memory store attached.
    memory_store_id: Option<mnemo_api::MemoryStoreId>,
    /// Only sessions in these statuses (`idle`, `running`, `rescheduling`, `terminated`).
    #[param(rename = "statuses[]")]
    statuses: Option<Vec<mnemo_api::SessionStatus>>,
    /// Include archived sessions (default `false`).
    include_archived: Option<bool>,
    /// Created at or after (RFC 3339); `created_at[gt]`, `[lte]` and `[lt]` work alike.
    #[param(rename = "created_at[gte]")]
    created_at_gte: Option<chrono::DateTime<chrono::Utc>>,
    /// Created after (RFC 3339).
    #[param(rename = "created_at[gt]")]
    created_at_gt: Option<chrono::DateTime<chrono::Utc>>,
    /// Created at or before (RFC 3339).
    #[param(rename = "created_at[lte]")]
    created_at_lte: Option<chrono::DateTime<chrono::Utc>>,
    /// Created before (RFC 3339).
    #[param(rename = "created_at[lt]")]
    created_at_lt: Option<chrono::DateTime<chrono::Utc>>,
}
