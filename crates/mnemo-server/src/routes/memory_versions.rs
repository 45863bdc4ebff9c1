//! `/v1/memory_stores/{store}/memory_versions`: list, retrieve, redact.

use axum::extract::State;
use mnemo_api::{
    ApiKeyId, MemoryId, MemoryStoreId, MemoryVersion, MemoryVersionId, Operation, Page, SessionId, Timestamp, View,
};
use mnemo_http::{BadInput, FromQuery, Id, Params, Query, ViewPaging, ViewParam, filter_id, timestamp};
use mnemo_store::ListMemoryVersions;

use crate::auth::MemoryCaller;
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

/// What the version list is narrowed to.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListFilters {
    /// Only this memory's versions.
    #[param(value_type = Option<mnemo_api::MemoryId>)]
    memory_id: Option<MemoryId>,
    /// Only versions of this operation.
    #[param(value_type = Option<mnemo_api::Operation>)]
    operation: Option<Operation>,
    /// Only versions written through this session.
    #[param(value_type = Option<mnemo_api::SessionId>)]
    session_id: Option<SessionId>,
    /// Only versions written with this API key.
    #[param(value_type = Option<mnemo_api::ApiKeyId>)]
    api_key_id: Option<ApiKeyId>,
    /// Only versions written by this service account.
    service_account_id: Option<String>,
    /// Created at or after (RFC 3339).
    #[param(rename = "created_at[gte]", value_type = Option<String>, format = DateTime)]
    created_at_gte: Option<Timestamp>,
    /// Created at or before (RFC 3339).
    #[param(rename = "created_at[lte]", value_type = Option<String>, format = DateTime)]
    created_at_lte: Option<Timestamp>,
}

impl FromQuery for ListFilters {
    const ONCE: &'static [&'static str] = &[
        "memory_id",
        "operation",
        "session_id",
        "api_key_id",
        "service_account_id",
        "created_at[gte]",
        "created_at[lte]",
    ];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let operation = q
            .one("operation")
            .map(|s| {
                Operation::parse(s).ok_or_else(|| {
                    BadInput::Invalid(format!("operation must be created, modified or deleted (got `{s}`)"))
                })
            })
            .transpose()?;
        Ok(Self {
            memory_id: filter_id("memory_id", q.one("memory_id"))?,
            operation,
            session_id: filter_id("session_id", q.one("session_id"))?,
            api_key_id: filter_id("api_key_id", q.one("api_key_id"))?,
            service_account_id: filter_text("service_account_id", q.one("service_account_id"))?,
            created_at_gte: timestamp("created_at[gte]", q.one("created_at[gte]"))?,
            created_at_lte: timestamp("created_at[lte]", q.one("created_at[lte]"))?,
        })
    }
}

/// An opaque filter (an id minted elsewhere, as the hosted API's service accounts are): any text
/// an id can be, so never a NUL byte or a control character (PostgreSQL cannot even compare
/// with a NUL, and answered `500`), nor longer than any id.
fn filter_text(name: &str, raw: Option<&str>) -> Result<Option<String>, BadInput> {
    const MAX_ID_LEN: usize = 256;
    match raw {
        Some(s) if s.chars().any(char::is_control) => {
            Err(BadInput::Invalid(format!("{name} must not contain control characters")))
        }
        Some(s) if s.len() > MAX_ID_LEN => {
            Err(BadInput::Invalid(format!("{name} is longer than {MAX_ID_LEN} bytes, longer than any id")))
        }
        other => Ok(other.map(str::to_owned)),
    }
}

#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/memory_versions",
    operation_id = "memory_versions.list",
    tag = "memory versions",
    summary = "List memory versions, newest first",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ViewPaging, ListFilters),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::MemoryVersion>)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Id(store): Id<MemoryStoreId>,
    Query(paging): Query<ViewPaging>,
    Query(f): Query<ListFilters>,
) -> Reply<Page<MemoryVersion>> {
    let query = ListMemoryVersions {
        memory_id: f.memory_id,
        operation: f.operation,
        session_id: f.session_id,
        api_key_id: f.api_key_id,
        service_account_id: f.service_account_id,
        created_at_gte: f.created_at_gte,
        created_at_lte: f.created_at_lte,
        limit: paging.limit,
        view: paging.view,
        after: paging.after,
    };
    Ok(axum::Json(mnemo_http::page(state.store.list_memory_versions(caller.workspace()?, &store, query).await?)))
}

/// `view` of one version, described for the API document (read as a [`ViewParam`]).
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct VersionView {
    /// `full` (with content; the default) or `basic`.
    view: Option<View>,
}

#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/memory_versions/{version}",
    operation_id = "memory_versions.retrieve",
    tag = "memory versions",
    summary = "Retrieve a memory version",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ("version" = mnemo_api::MemoryVersionId, Path, description = "The memory version."), VersionView),
    responses((status = 200, description = "OK.", body = mnemo_api::MemoryVersion)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Id(store): Id<MemoryStoreId>,
    Id(id): Id<MemoryVersionId>,
    Query(view): Query<ViewParam>,
) -> Reply<MemoryVersion> {
    Ok(axum::Json(state.store.get_memory_version(caller.workspace()?, &store, &id, view.or(View::Full)).await?))
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
    Id(store): Id<MemoryStoreId>,
    Id(id): Id<MemoryVersionId>,
) -> Reply<MemoryVersion> {
    let version = state.store.redact_memory_version(caller.workspace()?, &store, &id, caller.actor()).await?;
    state.changes.redacted(&store);
    tracing::info!(store.id = %store, version.id = %id, "redacted memory version");
    Ok(axum::Json(version))
}
