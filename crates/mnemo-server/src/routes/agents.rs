//! `/v1/agents`: the configurations sessions run (versioned).

use axum::extract::{Path, State};
use mnemo_api::{Agent, AgentId, AgentParams, AgentSpec, Page, View};
use serde::Deserialize;

use super::{flag, page_cursor, page_limit, path_id};
use crate::auth::ApiKeyCaller;
use crate::extract::{Json, Query};
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

#[utoipa::path(
    post,
    path = "/v1/agents",
    operation_id = "agents.create",
    tag = "agents",
    summary = "Create an agent",
    request_body = mnemo_api::AgentParams,
    responses((status = 200, description = "The new agent (version 1).", body = mnemo_api::Agent)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Json(body): Json<AgentParams>,
) -> Reply<Agent> {
    let spec = AgentSpec::from_params(&body).map_err(|e| ApiError::invalid(e.0))?;
    let agent = state.store.create_agent(spec).await?;
    tracing::info!(agent.id = %agent.id, "created agent");
    Ok(axum::Json(agent))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct VersionParam {
    /// This version instead of the latest.
    #[param(value_type = Option<u32>, minimum = 1)]
    version: Option<String>,
}

fn version(raw: Option<&str>) -> Result<Option<u32>, ApiError> {
    raw.map(|v| {
        v.parse::<u32>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| ApiError::invalid(format!("version must be a positive integer (got `{v}`)")))
    })
    .transpose()
}

#[utoipa::path(
    get,
    path = "/v1/agents/{agent}",
    operation_id = "agents.retrieve",
    tag = "agents",
    summary = "Retrieve an agent, at its latest or a given version",
    params(("agent" = mnemo_api::AgentId, Path, description = "The agent."), VersionParam),
    responses((status = 200, description = "OK.", body = mnemo_api::Agent)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Path(id): Path<String>,
    Query(q): Query<VersionParam>,
) -> Reply<Agent> {
    let id: AgentId = path_id("agent", &id)?;
    Ok(axum::Json(state.store.get_agent(&id, version(q.version.as_deref())?).await?))
}

#[utoipa::path(
    post,
    path = "/v1/agents/{agent}",
    operation_id = "agents.update",
    tag = "agents",
    summary = "Update an agent (a new version)",
    params(("agent" = mnemo_api::AgentId, Path, description = "The agent.")),
    request_body = mnemo_api::AgentParams,
    responses((status = 200, description = "The agent at its new version.", body = mnemo_api::Agent)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Path(id): Path<String>,
    Json(body): Json<AgentParams>,
) -> Reply<Agent> {
    let id: AgentId = path_id("agent", &id)?;
    let base = body
        .version
        .ok_or_else(|| ApiError::invalid("version is required: pass the version your change is based on"))?;
    Ok(axum::Json(state.store.update_agent(&id, base, body).await?))
}

#[utoipa::path(
    get,
    path = "/v1/agents",
    operation_id = "agents.list",
    tag = "agents",
    summary = "List agents",
    params(crate::openapi::ArchivableQuery),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::Agent>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Query(q): Query<super::ArchivableListParams>,
) -> Reply<Page<Agent>> {
    let listing = state
        .store
        .list_agents(
            flag("include_archived", q.include_archived.as_deref())?,
            page_limit(q.limit.as_deref(), View::Basic)?,
            page_cursor(q.page.as_deref())?,
        )
        .await?;
    Ok(axum::Json(Page { data: listing.items, next_page: listing.next.map(|c| c.encode()) }))
}

#[utoipa::path(
    post,
    path = "/v1/agents/{agent}/archive",
    operation_id = "agents.archive",
    tag = "agents",
    summary = "Archive an agent",
    params(("agent" = mnemo_api::AgentId, Path, description = "The agent.")),
    responses((status = 200, description = "The archived agent.", body = mnemo_api::Agent)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn archive(State(state): State<AppState>, _: ApiKeyCaller, Path(id): Path<String>) -> Reply<Agent> {
    let id: AgentId = path_id("agent", &id)?;
    Ok(axum::Json(state.store.archive_agent(&id).await?))
}
