//! `/v1/memory_stores/{store}/memory_versions`: list, retrieve, redact.

use axum::extract::{Path, State};
use mnemo_api::{MemoryStoreId, MemoryVersion, MemoryVersionId, Operation, Page, View};
use mnemo_store::ListMemoryVersions;
use serde::Deserialize;

use super::{page_cursor, page_limit, path_id, timestamp, view};
use crate::auth::MemoryCaller;
use crate::extract::Query;
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// Page size, 1–100 (default 20; at most 20 under `view=full`).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    limit: Option<String>,
    /// The `next_page` of the previous page.
    page: Option<String>,
    /// `basic` (no content; the default) or `full`.
    #[param(value_type = Option<mnemo_api::View>)]
    view: Option<String>,
    /// Only this memory's versions.
    #[param(value_type = Option<mnemo_api::MemoryId>)]
    memory_id: Option<String>,
    /// Only versions of this operation.
    #[param(value_type = Option<mnemo_api::Operation>)]
    operation: Option<String>,
    /// Only versions written through this session.
    #[param(value_type = Option<mnemo_api::SessionId>)]
    session_id: Option<String>,
    /// Only versions written with this API key.
    #[param(value_type = Option<mnemo_api::ApiKeyId>)]
    api_key_id: Option<String>,
    /// Only versions written by this service account.
    service_account_id: Option<String>,
    /// Created at or after (RFC 3339).
    #[serde(rename = "created_at[gte]")]
    #[param(value_type = Option<String>, format = DateTime)]
    created_at_gte: Option<String>,
    /// Created at or before (RFC 3339).
    #[serde(rename = "created_at[lte]")]
    #[param(value_type = Option<String>, format = DateTime)]
    created_at_lte: Option<String>,
}

/// An opaque filter (an id minted elsewhere, as the hosted API's service accounts are): any text
/// an id can be, so never a NUL byte or a control character (PostgreSQL cannot even compare
/// with a NUL, and answered `500`), nor longer than any id.
fn filter_text(name: &str, raw: Option<String>) -> Result<Option<String>, ApiError> {
    const MAX_ID_LEN: usize = 256;
    match raw {
        Some(s) if s.chars().any(char::is_control) => {
            Err(ApiError::invalid(format!("{name} must not contain control characters")))
        }
        Some(s) if s.len() > MAX_ID_LEN => {
            Err(ApiError::invalid(format!("{name} is longer than {MAX_ID_LEN} bytes, longer than any id")))
        }
        other => Ok(other),
    }
}

/// A filter id of the wrong shape matches nothing; it is still refused so typos surface.
fn filter_id<T: std::str::FromStr>(name: &str, raw: Option<&str>) -> Result<Option<T>, ApiError>
where
    T::Err: std::fmt::Display,
{
    raw.map(|s| s.parse().map_err(|e| ApiError::invalid(format!("{name}: {e}")))).transpose()
}

#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/memory_versions",
    operation_id = "memory_versions.list",
    tag = "memory versions",
    summary = "List memory versions, newest first",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ListParams),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::MemoryVersion>)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    _: MemoryCaller,
    Path(store): Path<String>,
    Query(q): Query<ListParams>,
) -> Reply<Page<MemoryVersion>> {
    let store: MemoryStoreId = path_id("memory store", &store)?;
    let view = view(q.view.as_deref(), View::Basic)?;
    let operation = q
        .operation
        .as_deref()
        .map(|s| {
            Operation::parse(s)
                .ok_or_else(|| ApiError::invalid(format!("operation must be created, modified or deleted (got `{s}`)")))
        })
        .transpose()?;
    let query = ListMemoryVersions {
        memory_id: filter_id("memory_id", q.memory_id.as_deref())?,
        operation,
        session_id: filter_id("session_id", q.session_id.as_deref())?,
        api_key_id: filter_id("api_key_id", q.api_key_id.as_deref())?,
        service_account_id: filter_text("service_account_id", q.service_account_id)?,
        created_at_gte: timestamp("created_at[gte]", q.created_at_gte.as_deref())?,
        created_at_lte: timestamp("created_at[lte]", q.created_at_lte.as_deref())?,
        limit: page_limit(q.limit.as_deref(), view)?,
        view,
        after: page_cursor(q.page.as_deref())?,
    };
    let listing = state.store.list_memory_versions(&store, query).await?;
    Ok(axum::Json(Page { data: listing.items, next_page: listing.next.map(|c| c.encode()) }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ViewParam {
    /// `full` (with content; the default) or `basic`.
    #[param(value_type = Option<mnemo_api::View>)]
    view: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/memory_versions/{version}",
    operation_id = "memory_versions.retrieve",
    tag = "memory versions",
    summary = "Retrieve a memory version",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ("version" = mnemo_api::MemoryVersionId, Path, description = "The memory version."), ViewParam),
    responses((status = 200, description = "OK.", body = mnemo_api::MemoryVersion)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    _: MemoryCaller,
    Path((store, version)): Path<(String, String)>,
    Query(q): Query<ViewParam>,
) -> Reply<MemoryVersion> {
    let store: MemoryStoreId = path_id("memory store", &store)?;
    let id: MemoryVersionId = path_id("memory version", &version)?;
    let view = view(q.view.as_deref(), View::Full)?;
    Ok(axum::Json(state.store.get_memory_version(&store, &id, view).await?))
}

#[utoipa::path(
    post,
    path = "/v1/memory_stores/{store}/memory_versions/{version}/redact",
    operation_id = "memory_versions.redact",
    tag = "memory versions",
    summary = "Redact a version: its content, path and digest are erased for good",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ("version" = mnemo_api::MemoryVersionId, Path, description = "The memory version.")),
    responses((status = 200, description = "The redacted version.", body = mnemo_api::MemoryVersion)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn redact(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Path((store, version)): Path<(String, String)>,
) -> Reply<MemoryVersion> {
    let store: MemoryStoreId = path_id("memory store", &store)?;
    let id: MemoryVersionId = path_id("memory version", &version)?;
    let version = state.store.redact_memory_version(&store, &id, caller.actor()).await?;
    tracing::info!(store.id = %store, version.id = %id, "redacted memory version");
    Ok(axum::Json(version))
}
