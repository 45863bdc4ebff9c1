//! `/v1/agents`: the configurations sessions run (versioned).

use axum::extract::{Path, State};
use mnemo_api::{Agent, AgentId, AgentParams, AgentSpec, Page, View};
use serde::Deserialize;

use super::{flag, page_cursor, page_limit, path_id};
use crate::auth::ApiKeyCaller;
use crate::extract::{Json, Query};
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

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

#[derive(Debug, Deserialize)]
pub(crate) struct VersionParam {
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

pub(crate) async fn retrieve(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Path(id): Path<String>,
    Query(q): Query<VersionParam>,
) -> Reply<Agent> {
    let id: AgentId = path_id("agent", &id)?;
    Ok(axum::Json(state.store.get_agent(&id, version(q.version.as_deref())?).await?))
}

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

pub(crate) async fn archive(State(state): State<AppState>, _: ApiKeyCaller, Path(id): Path<String>) -> Reply<Agent> {
    let id: AgentId = path_id("agent", &id)?;
    Ok(axum::Json(state.store.archive_agent(&id).await?))
}
