//! `/v1/memory_stores`: create, retrieve, update, list, archive, delete.

use axum::extract::{Path, State};
use mnemo_api::{
    CreateMemoryStore, MemoryStore, MemoryStoreDeleted, MemoryStoreId, Page, UpdateMemoryStore, View,
    validate_metadata, validate_store_description, validate_store_name,
};
use mnemo_store::{ListMemoryStores, MemoryStorePatch, NewMemoryStore};
use serde::Deserialize;

use super::{flag, page_cursor, page_limit, path_id, timestamp};
use crate::auth::MemoryCaller;
use crate::extract::{Json, Query};
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

fn invalid(e: mnemo_api::Invalid) -> ApiError {
    ApiError::invalid(e.0)
}

#[utoipa::path(
    post,
    path = "/v1/memory_stores",
    operation_id = "memory_stores.create",
    tag = "memory stores",
    summary = "Create a memory store",
    request_body = mnemo_api::CreateMemoryStore,
    responses((status = 200, description = "The new store.", body = mnemo_api::MemoryStore)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    _: MemoryCaller,
    Json(body): Json<CreateMemoryStore>,
) -> Reply<MemoryStore> {
    validate_store_name(&body.name).map_err(invalid)?;
    let description = body.description.unwrap_or_default();
    validate_store_description(&description).map_err(invalid)?;
    let metadata = body.metadata.unwrap_or_default();
    validate_metadata(&metadata).map_err(invalid)?;
    let store = state.store.create_memory_store(NewMemoryStore { name: body.name, description, metadata }).await?;
    tracing::info!(store.id = %store.id, "created memory store");
    Ok(axum::Json(store))
}

#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}",
    operation_id = "memory_stores.retrieve",
    tag = "memory stores",
    summary = "Retrieve a memory store",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store.")),
    responses((status = 200, description = "OK.", body = mnemo_api::MemoryStore)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    _: MemoryCaller,
    Path(store): Path<String>,
) -> Reply<MemoryStore> {
    let id: MemoryStoreId = path_id("memory store", &store)?;
    Ok(axum::Json(state.store.get_memory_store(&id).await?))
}

#[utoipa::path(
    post,
    path = "/v1/memory_stores/{store}",
    operation_id = "memory_stores.update",
    tag = "memory stores",
    summary = "Update a memory store (name, description, a metadata patch)",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store.")),
    request_body = mnemo_api::UpdateMemoryStore,
    responses((status = 200, description = "The updated store.", body = mnemo_api::MemoryStore)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    _: MemoryCaller,
    Path(store): Path<String>,
    Json(body): Json<UpdateMemoryStore>,
) -> Reply<MemoryStore> {
    let id: MemoryStoreId = path_id("memory store", &store)?;
    if let Some(name) = &body.name {
        validate_store_name(name).map_err(invalid)?;
    }
    if let Some(description) = &body.description {
        validate_store_description(description).map_err(invalid)?;
    }
    let patch = MemoryStorePatch { name: body.name, description: body.description, metadata: body.metadata };
    Ok(axum::Json(state.store.update_memory_store(&id, patch).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// Page size, 1–100 (default 20; at most 20 under `view=full`).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    limit: Option<String>,
    /// The `next_page` of the previous page.
    page: Option<String>,
    /// Include archived stores (default `false`).
    #[param(value_type = Option<bool>)]
    include_archived: Option<String>,
    /// Created at or after (RFC 3339).
    #[serde(rename = "created_at[gte]")]
    #[param(value_type = Option<String>, format = DateTime)]
    created_at_gte: Option<String>,
    /// Created at or before (RFC 3339).
    #[serde(rename = "created_at[lte]")]
    #[param(value_type = Option<String>, format = DateTime)]
    created_at_lte: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/memory_stores",
    operation_id = "memory_stores.list",
    tag = "memory stores",
    summary = "List memory stores, newest first",
    params(ListParams),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::MemoryStore>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    _: MemoryCaller,
    Query(q): Query<ListParams>,
) -> Reply<Page<MemoryStore>> {
    let query = ListMemoryStores {
        include_archived: flag("include_archived", q.include_archived.as_deref())?,
        created_at_gte: timestamp("created_at[gte]", q.created_at_gte.as_deref())?,
        created_at_lte: timestamp("created_at[lte]", q.created_at_lte.as_deref())?,
        limit: page_limit(q.limit.as_deref(), View::Basic)?,
        after: page_cursor(q.page.as_deref())?,
    };
    let listing = state.store.list_memory_stores(query).await?;
    Ok(axum::Json(Page { data: listing.items, next_page: listing.next.map(|c| c.encode()) }))
}

#[utoipa::path(
    post,
    path = "/v1/memory_stores/{store}/archive",
    operation_id = "memory_stores.archive",
    tag = "memory stores",
    summary = "Archive a memory store (it becomes read-only)",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store.")),
    responses((status = 200, description = "The archived store.", body = mnemo_api::MemoryStore)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn archive(
    State(state): State<AppState>,
    _: MemoryCaller,
    Path(store): Path<String>,
) -> Reply<MemoryStore> {
    let id: MemoryStoreId = path_id("memory store", &store)?;
    let store = state.store.archive_memory_store(&id).await?;
    tracing::info!(store.id = %id, "archived memory store");
    Ok(axum::Json(store))
}

#[utoipa::path(
    delete,
    path = "/v1/memory_stores/{store}",
    operation_id = "memory_stores.delete",
    tag = "memory stores",
    summary = "Delete a memory store and everything in it",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store.")),
    responses((status = 200, description = "OK.", body = mnemo_api::MemoryStoreDeleted)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    _: MemoryCaller,
    Path(store): Path<String>,
) -> Reply<MemoryStoreDeleted> {
    let id: MemoryStoreId = path_id("memory store", &store)?;
    state.store.delete_memory_store(&id).await?;
    tracing::info!(store.id = %id, "deleted memory store");
    Ok(axum::Json(MemoryStoreDeleted { id }))
}
