//! `/v1/agents`: the configurations sessions run (versioned).

use axum::extract::State;
use mnemo_api::{Agent, AgentId, AgentParams, AgentSpec, Page};
use mnemo_http::{ArchivablePaging, BadInput, FromQuery, Id, Params, Query};

use crate::auth::ApiKeyCaller;
use crate::extract::Json;
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
    ApiKeyCaller(caller): ApiKeyCaller,
    Json(body): Json<AgentParams>,
) -> Reply<Agent> {
    let spec = AgentSpec::from_params(&body).map_err(|e| ApiError::invalid(e.0))?;
    let agent = state.store.create_agent(caller.workspace()?, spec).await?;
    tracing::info!(agent.id = %agent.id, "created agent");
    Ok(axum::Json(agent))
}

#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct VersionParam {
    /// This version instead of the latest.
    #[param(minimum = 1)]
    version: Option<u32>,
}

impl FromQuery for VersionParam {
    const ONCE: &'static [&'static str] = &["version"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let version = q
            .one("version")
            .map(|v| {
                v.parse::<u32>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| BadInput::Invalid(format!("version must be a positive integer (got `{v}`)")))
            })
            .transpose()?;
        Ok(Self { version })
    }
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
    ApiKeyCaller(caller): ApiKeyCaller,
    Id(id): Id<AgentId>,
    Query(q): Query<VersionParam>,
) -> Reply<Agent> {
    Ok(axum::Json(state.store.get_agent(caller.workspace()?, &id, q.version).await?))
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
    ApiKeyCaller(caller): ApiKeyCaller,
    Id(id): Id<AgentId>,
    Json(body): Json<AgentParams>,
) -> Reply<Agent> {
    let base = body
        .version
        .ok_or_else(|| ApiError::invalid("version is required: pass the version your change is based on"))?;
    Ok(axum::Json(state.store.update_agent(caller.workspace()?, &id, base, body).await?))
}

#[utoipa::path(
    get,
    path = "/v1/agents",
    operation_id = "agents.list",
    tag = "agents",
    summary = "List agents",
    params(ArchivablePaging),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::Agent>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Query(q): Query<ArchivablePaging>,
) -> Reply<Page<Agent>> {
    Ok(axum::Json(mnemo_http::page(
        state.store.list_agents(caller.workspace()?, q.include_archived, q.limit, q.after).await?,
    )))
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
pub(crate) async fn archive(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Id(id): Id<AgentId>,
) -> Reply<Agent> {
    Ok(axum::Json(state.store.archive_agent(caller.workspace()?, &id).await?))
}
