//! `/v1/environments/{environment}/work`: the self-hosted work queue.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use mnemo_api::{
    EnvironmentId, Page, StopWork, View, Work, WorkHeartbeat, WorkId, WorkQueueStats, WorkSecret, generate_secret,
};
use mnemo_store::rules::scope::{Action, WorkOp};
use mnemo_store::{Credential, HeartbeatOutcome};
use serde::Deserialize;

use super::{page_cursor, page_limit, path_id};
use crate::auth::Caller;
use crate::extract::{Json, Query};
use crate::{ApiError, AppState, hash_credential};

type Reply<T> = Result<axum::Json<T>, ApiError>;

/// The prefix of sessions tokens.
const SESSIONS_TOKEN_PREFIX: &str = "sk-mnemo-sess-";
/// How long a polled but unacknowledged item stays hidden by default.
const DEFAULT_RECLAIM_MS: u64 = 5_000;

fn environment_id(env: &str) -> Result<EnvironmentId, ApiError> {
    env.parse()
        .map_err(|_| ApiError::not_found(format!("environment `{env}` not found")).with_code("environment_not_found"))
}

/// The environment a queue-wide call is about, once the scope rules let `caller` do `op` there.
fn queue(caller: &Caller, env: &str, op: WorkOp) -> Result<EnvironmentId, ApiError> {
    let env = environment_id(env)?;
    caller.allow(Action::Work { environment: &env, item: None, op })?;
    Ok(env)
}

/// The item a call is about, once the scope rules let `caller` do `op` to it.
fn item(caller: &Caller, env: &str, work: &str, op: WorkOp) -> Result<(EnvironmentId, WorkId), ApiError> {
    let (env, work) = (environment_id(env)?, path_id("work item", work)?);
    caller.allow(Action::Work { environment: &env, item: Some(&work), op })?;
    Ok((env, work))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct PollParams {
    /// Hold an empty poll open this long, 1–999 ms (default: answer at once).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 999)]
    block_ms: Option<String>,
    /// Redeliver an item acknowledged by no one for this long (ms).
    #[param(value_type = Option<u64>, minimum = 1)]
    reclaim_older_than_ms: Option<String>,
}

fn positive(name: &str, raw: Option<&str>, max: Option<u64>) -> Result<Option<u64>, ApiError> {
    raw.map(|s| {
        s.parse::<u64>().ok().filter(|n| *n >= 1 && max.is_none_or(|m| *n <= m)).ok_or_else(|| {
            let range = max.map_or_else(|| "at least 1".to_owned(), |m| format!("from 1 to {m}"));
            ApiError::invalid(format!("{name} must be an integer {range} (got `{s}`)"))
        })
    })
    .transpose()
}

/// Claims the oldest deliverable item, holding an empty poll open up to `block_ms`. An empty
/// answer is the JSON `null` (the reference poller cannot read a 204 or an empty body).
#[utoipa::path(
    get,
    path = "/v1/environments/{environment}/work/poll",
    operation_id = "work.poll",
    tag = "work",
    summary = "Claim the oldest deliverable work item, waiting up to `block_ms`",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment."), PollParams, ("anthropic-worker-id" = Option<String>, Header, description = "Names the polling worker.")),
    responses((status = 200, description = "The claimed item with its `secret` (a sessions token), or `null` when none came within `block_ms`.", body = Option<mnemo_api::Work>)),
    security(("environment_key" = [])),
)]
pub(crate) async fn poll(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(env): Path<String>,
    Query(q): Query<PollParams>,
) -> Result<Response, ApiError> {
    let env = queue(&caller, &env, WorkOp::Take)?;
    let block = positive("block_ms", q.block_ms.as_deref(), Some(999))?.unwrap_or(0);
    let reclaim =
        positive("reclaim_older_than_ms", q.reclaim_older_than_ms.as_deref(), None)?.unwrap_or(DEFAULT_RECLAIM_MS);
    let worker = headers.get("anthropic-worker-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(block);
    loop {
        // Register for a wake-up before looking, so an item queued in between is not missed.
        let notified = state.work_signal.notified();
        let token = generate_secret(SESSIONS_TOKEN_PREFIX);
        if let Some(mut work) = state.store.poll_work(&env, worker.clone(), reclaim, hash_credential(&token)).await? {
            work.secret = Some(WorkSecret { sessions_token: token.into() }.encode());
            if let Credential::EnvironmentKey { id, .. } = &caller.0 {
                tracing::info!(work.id = %work.id, environment.id = %env, environment_key.id = %id, "delivered work item");
            }
            return Ok(axum::Json(work).into_response());
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            let mut empty = axum::Json(serde_json::Value::Null).into_response();
            empty.extensions_mut().insert(crate::request::Routine);
            return Ok(empty);
        }
    }
}

#[utoipa::path(
    post,
    path = "/v1/environments/{environment}/work/{work}/ack",
    operation_id = "work.ack",
    tag = "work",
    summary = "Acknowledge a delivered item",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment."), ("work" = mnemo_api::WorkId, Path, description = "The work item.")),
    responses((status = 200, description = "OK.", body = mnemo_api::Work)),
    security(("environment_key" = [])),
)]
pub(crate) async fn ack(
    State(state): State<AppState>,
    caller: Caller,
    Path((env, work)): Path<(String, String)>,
) -> Reply<Work> {
    let (env, work) = item(&caller, &env, &work, WorkOp::Take)?;
    Ok(axum::Json(state.store.ack_work(&env, &work).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct HeartbeatParams {
    /// The last heartbeat this worker saw (`NO_HEARTBEAT` for the first).
    #[param(required = true, value_type = String)]
    expected_last_heartbeat: Option<String>,
    /// How long the lease should last from now (seconds).
    #[param(value_type = Option<u64>, minimum = 1)]
    desired_ttl_seconds: Option<String>,
}

#[utoipa::path(
    post,
    path = "/v1/environments/{environment}/work/{work}/heartbeat",
    operation_id = "work.heartbeat",
    tag = "work",
    summary = "Extend an item's lease",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment."), ("work" = mnemo_api::WorkId, Path, description = "The work item."), HeartbeatParams),
    responses((status = 200, description = "OK.", body = mnemo_api::WorkHeartbeat), (status = 412, description = "`expected_last_heartbeat` does not match (`details.error_code`: `heartbeat_precondition_failed`, with `current_state`).", body = mnemo_api::ErrorEnvelope)),
    security(("environment_key" = []), ("sessions_token" = [])),
)]
pub(crate) async fn heartbeat(
    State(state): State<AppState>,
    caller: Caller,
    Path((env, work)): Path<(String, String)>,
    Query(q): Query<HeartbeatParams>,
) -> Result<axum::Json<WorkHeartbeat>, ApiError> {
    let (env, work) = item(&caller, &env, &work, WorkOp::Heartbeat)?;
    let expected = q.expected_last_heartbeat.as_deref().ok_or_else(|| {
        ApiError::invalid("expected_last_heartbeat is required (`NO_HEARTBEAT` for the first heartbeat)")
    })?;
    let ttl = positive("desired_ttl_seconds", q.desired_ttl_seconds.as_deref(), None)?;
    match state.store.heartbeat_work(&env, &work, expected, ttl).await? {
        HeartbeatOutcome::Beat(beat) => Ok(axum::Json(beat)),
        HeartbeatOutcome::PreconditionFailed(current) => Err(ApiError::precondition_failed(
            "expected_last_heartbeat does not match; another worker may hold the lease",
            "heartbeat_precondition_failed",
            serde_json::json!({ "current_state": current }),
        )),
    }
}

#[utoipa::path(
    post,
    path = "/v1/environments/{environment}/work/{work}/stop",
    operation_id = "work.stop",
    tag = "work",
    summary = "Stop an item",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment."), ("work" = mnemo_api::WorkId, Path, description = "The work item.")),
    request_body = mnemo_api::StopWork,
    responses((status = 200, description = "The item, stopping or stopped.", body = mnemo_api::Work)),
    security(("api_key" = []), ("api_key_bearer" = []), ("environment_key" = []), ("sessions_token" = [])),
)]
pub(crate) async fn stop(
    State(state): State<AppState>,
    caller: Caller,
    Path((env, work)): Path<(String, String)>,
    Json(body): Json<StopWork>,
) -> Reply<Work> {
    let (env, work) = item(&caller, &env, &work, WorkOp::Stop)?;
    let stopped = state.store.stop_work(&env, &work, body.force.unwrap_or(false)).await?;
    tracing::info!(work.id = %work, state = stopped.state.as_str(), "stopped work item");
    Ok(axum::Json(stopped))
}

#[utoipa::path(
    get,
    path = "/v1/environments/{environment}/work/{work}",
    operation_id = "work.retrieve",
    tag = "work",
    summary = "Retrieve a work item",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment."), ("work" = mnemo_api::WorkId, Path, description = "The work item.")),
    responses((status = 200, description = "OK.", body = mnemo_api::Work)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    caller: Caller,
    Path((env, work)): Path<(String, String)>,
) -> Reply<Work> {
    let (env, work) = item(&caller, &env, &work, WorkOp::Manage)?;
    Ok(axum::Json(state.store.get_work(&env, &work).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct UpdateWork {
    /// A patch: a string upserts the key, `null` removes it.
    #[schema(required)]
    metadata: Option<BTreeMap<String, Option<String>>>,
}

#[utoipa::path(
    post,
    path = "/v1/environments/{environment}/work/{work}",
    operation_id = "work.update",
    tag = "work",
    summary = "Patch a work item's metadata",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment."), ("work" = mnemo_api::WorkId, Path, description = "The work item.")),
    request_body = UpdateWork,
    responses((status = 200, description = "The updated item.", body = mnemo_api::Work)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path((env, work)): Path<(String, String)>,
    Json(body): Json<UpdateWork>,
) -> Reply<Work> {
    let (env, work) = item(&caller, &env, &work, WorkOp::Manage)?;
    let patch = body.metadata.ok_or_else(|| ApiError::invalid("metadata is required"))?;
    Ok(axum::Json(state.store.update_work_metadata(&env, &work, patch).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// Page size, 1–100 (default 20).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    limit: Option<String>,
    /// The `next_page` of the previous page.
    page: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/environments/{environment}/work",
    operation_id = "work.list",
    tag = "work",
    summary = "List an environment's work items",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment."), ListParams),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::Work>)),
    security(("api_key" = []), ("api_key_bearer" = []), ("environment_key" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(env): Path<String>,
    Query(q): Query<ListParams>,
) -> Reply<Page<Work>> {
    let env = queue(&caller, &env, WorkOp::Inspect)?;
    let listing = state
        .store
        .list_work(&env, page_limit(q.limit.as_deref(), View::Basic)?, page_cursor(q.page.as_deref())?)
        .await?;
    Ok(axum::Json(Page { data: listing.items, next_page: listing.next.map(|c| c.encode()) }))
}

#[utoipa::path(
    get,
    path = "/v1/environments/{environment}/work/stats",
    operation_id = "work.stats",
    tag = "work",
    summary = "Work queue statistics (a mnemo extension)",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment.")),
    responses((status = 200, description = "OK.", body = mnemo_api::WorkQueueStats)),
    security(("api_key" = []), ("api_key_bearer" = []), ("environment_key" = [])),
)]
pub(crate) async fn stats(
    State(state): State<AppState>,
    caller: Caller,
    Path(env): Path<String>,
) -> Reply<WorkQueueStats> {
    let env = queue(&caller, &env, WorkOp::Inspect)?;
    Ok(axum::Json(state.store.work_stats(&env).await?))
}

/// Queues a `healthcheck` item (a mnemo extension; API key): a way to check that a worker is
/// polling and acknowledging.
#[utoipa::path(
    post,
    path = "/v1/environments/{environment}/work/healthcheck",
    operation_id = "work.healthcheck",
    tag = "work",
    summary = "Queue a healthcheck item (a mnemo extension)",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment.")),
    responses((status = 200, description = "The queued healthcheck item.", body = mnemo_api::Work)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn healthcheck(State(state): State<AppState>, caller: Caller, Path(env): Path<String>) -> Reply<Work> {
    let env = queue(&caller, &env, WorkOp::Manage)?;
    let work = state.store.enqueue_healthcheck(&env).await?;
    state.work_signal.notify_waiters();
    Ok(axum::Json(work))
}
