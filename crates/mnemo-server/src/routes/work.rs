//! `/v1/environments/{environment}/work`: the self-hosted work queue.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use mnemo_api::{
    EnvironmentId, Page, StopWork, Work, WorkHeartbeat, WorkId, WorkQueueStats, WorkSecret, generate_secret,
};
use mnemo_http::{BadInput, FromQuery, Id, Paging, Params, Query, positive};
use mnemo_store::rules::scope::{Action, WorkOp};
use mnemo_store::{Credential, HeartbeatOutcome};
use serde::Deserialize;

use crate::auth::Caller;
use crate::extract::Json;
use crate::{ApiError, AppState, hash_credential};

type Reply<T> = Result<axum::Json<T>, ApiError>;

/// The prefix of sessions tokens.
const SESSIONS_TOKEN_PREFIX: &str = "sk-mnemo-sess-";
/// How long a polled but unacknowledged item stays hidden by default.
const DEFAULT_RECLAIM_MS: u64 = 5_000;

/// The environment a queue-wide call is about, once the scope rules let `caller` do `op` there.
fn queue(caller: &Caller, env: EnvironmentId, op: WorkOp) -> Result<EnvironmentId, ApiError> {
    caller.allow(Action::Work { environment: &env, item: None, op })?;
    Ok(env)
}

/// The item a call is about, once the scope rules let `caller` do `op` to it.
fn item(caller: &Caller, env: EnvironmentId, work: WorkId, op: WorkOp) -> Result<(EnvironmentId, WorkId), ApiError> {
    caller.allow(Action::Work { environment: &env, item: Some(&work), op })?;
    Ok((env, work))
}

#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct PollParams {
    /// Hold an empty poll open this long, 1–999 ms (default: answer at once).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 999)]
    block_ms: u64,
    /// Redeliver an item acknowledged by no one for this long (ms).
    #[param(value_type = Option<u64>, minimum = 1)]
    reclaim_older_than_ms: u64,
}

impl FromQuery for PollParams {
    const ONCE: &'static [&'static str] = &["block_ms", "reclaim_older_than_ms"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        Ok(Self {
            block_ms: positive("block_ms", q.one("block_ms"), Some(999))?.unwrap_or(0),
            reclaim_older_than_ms: positive("reclaim_older_than_ms", q.one("reclaim_older_than_ms"), None)?
                .unwrap_or(DEFAULT_RECLAIM_MS),
        })
    }
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
    Id(env): Id<EnvironmentId>,
    Query(q): Query<Params>,
) -> Result<Response, ApiError> {
    let env = queue(&caller, env, WorkOp::Take)?;
    let PollParams { block_ms: block, reclaim_older_than_ms: reclaim } = q.read()?;
    let worker = headers.get("anthropic-worker-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(block);
    loop {
        // Register for a wake-up before looking, so an item queued in between is not missed.
        let notified = state.work_signal.notified();
        let token = generate_secret(SESSIONS_TOKEN_PREFIX);
        if let Some(mut work) =
            state.store.poll_work(caller.workspace()?, &env, worker.clone(), reclaim, hash_credential(&token)).await?
        {
            work.secret = Some(WorkSecret { sessions_token: token.into() }.encode().into());
            if let Credential::EnvironmentKey { id, .. } = &caller.credential {
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
    Id(env): Id<EnvironmentId>,
    Id(work): Id<WorkId>,
) -> Reply<Work> {
    let (env, work) = item(&caller, env, work, WorkOp::Take)?;
    Ok(axum::Json(state.store.ack_work(caller.workspace()?, &env, &work).await?))
}

#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct HeartbeatParams {
    /// The last heartbeat this worker saw (`NO_HEARTBEAT` for the first).
    #[param(required = true, value_type = String)]
    expected_last_heartbeat: String,
    /// How long the lease should last from now (seconds).
    #[param(value_type = Option<u64>, minimum = 1)]
    desired_ttl_seconds: Option<u64>,
}

impl FromQuery for HeartbeatParams {
    const ONCE: &'static [&'static str] = &["expected_last_heartbeat", "desired_ttl_seconds"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let expected = q.one("expected_last_heartbeat").ok_or_else(|| {
            BadInput::Invalid("expected_last_heartbeat is required (`NO_HEARTBEAT` for the first heartbeat)".into())
        })?;
        Ok(Self {
            expected_last_heartbeat: expected.to_owned(),
            desired_ttl_seconds: positive("desired_ttl_seconds", q.one("desired_ttl_seconds"), None)?,
        })
    }
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
    Id(env): Id<EnvironmentId>,
    Id(work): Id<WorkId>,
    Query(q): Query<Params>,
) -> Result<axum::Json<WorkHeartbeat>, ApiError> {
    let (env, work) = item(&caller, env, work, WorkOp::Heartbeat)?;
    let q: HeartbeatParams = q.read()?;
    match state
        .store
        .heartbeat_work(caller.workspace()?, &env, &work, &q.expected_last_heartbeat, q.desired_ttl_seconds)
        .await?
    {
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
    Id(env): Id<EnvironmentId>,
    Id(work): Id<WorkId>,
    Json(body): Json<StopWork>,
) -> Reply<Work> {
    let (env, work) = item(&caller, env, work, WorkOp::Stop)?;
    let stopped = state.store.stop_work(caller.workspace()?, &env, &work, body.force.unwrap_or(false)).await?;
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
    Id(env): Id<EnvironmentId>,
    Id(work): Id<WorkId>,
) -> Reply<Work> {
    let (env, work) = item(&caller, env, work, WorkOp::Manage)?;
    Ok(axum::Json(state.store.get_work(caller.workspace()?, &env, &work).await?))
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
    Id(env): Id<EnvironmentId>,
    Id(work): Id<WorkId>,
    Json(body): Json<UpdateWork>,
) -> Reply<Work> {
    let (env, work) = item(&caller, env, work, WorkOp::Manage)?;
    let patch = body.metadata.ok_or_else(|| ApiError::invalid("metadata is required"))?;
    Ok(axum::Json(state.store.update_work_metadata(caller.workspace()?, &env, &work, patch).await?))
}

#[utoipa::path(
    get,
    path = "/v1/environments/{environment}/work",
    operation_id = "work.list",
    tag = "work",
    summary = "List an environment's work items",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment."), Paging),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::Work>)),
    security(("api_key" = []), ("api_key_bearer" = []), ("environment_key" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Id(env): Id<EnvironmentId>,
    Query(q): Query<Params>,
) -> Reply<Page<Work>> {
    let env = queue(&caller, env, WorkOp::Inspect)?;
    let paging: Paging = q.read()?;
    Ok(axum::Json(mnemo_http::page(
        state.store.list_work(caller.workspace()?, &env, paging.limit, paging.after).await?,
    )))
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
    Id(env): Id<EnvironmentId>,
) -> Reply<WorkQueueStats> {
    let env = queue(&caller, env, WorkOp::Inspect)?;
    Ok(axum::Json(state.store.work_stats(caller.workspace()?, &env).await?))
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
pub(crate) async fn healthcheck(
    State(state): State<AppState>,
    caller: Caller,
    Id(env): Id<EnvironmentId>,
) -> Reply<Work> {
    let env = queue(&caller, env, WorkOp::Manage)?;
    let work = state.store.enqueue_healthcheck(caller.workspace()?, &env).await?;
    state.work_signal.notify_waiters();
    Ok(axum::Json(work))
}
