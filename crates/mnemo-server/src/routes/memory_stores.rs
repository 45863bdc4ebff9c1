//! `/v1/memory_stores`: create, retrieve, update, list, archive, delete.

use axum::extract::State;
use mnemo_api::{
    CreateMemoryStore, MemoryStore, MemoryStoreDeleted, MemoryStoreId, Page, Timestamp, UpdateMemoryStore,
    validate_metadata, validate_store_description, validate_store_name,
};
use mnemo_http::{BadInput, FromQuery, Id, Paging, Params, Query, flag, timestamp};
use mnemo_store::{ListMemoryStores, MemoryStorePatch, NewMemoryStore};

use crate::auth::MemoryCaller;
use crate::extract::Json;
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
    caller: MemoryCaller,
    Json(body): Json<CreateMemoryStore>,
) -> Reply<MemoryStore> {
    validate_store_name(&body.name).map_err(invalid)?;
    let description = body.description.unwrap_or_default();
    validate_store_description(&description).map_err(invalid)?;
    let metadata = body.metadata.unwrap_or_default();
    validate_metadata(&metadata).map_err(invalid)?;
    let store = state
        .store
        .create_memory_store(caller.workspace()?, NewMemoryStore { name: body.name, description, metadata })
        .await?;
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
    caller: MemoryCaller,
    Id(id): Id<MemoryStoreId>,
) -> Reply<MemoryStore> {
    Ok(axum::Json(state.store.get_memory_store(caller.workspace()?, &id).await?))
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
    caller: MemoryCaller,
    Id(id): Id<MemoryStoreId>,
    Json(body): Json<UpdateMemoryStore>,
) -> Reply<MemoryStore> {
    if let Some(name) = &body.name {
        validate_store_name(name).map_err(invalid)?;
    }
    if let Some(description) = &body.description {
        validate_store_description(description).map_err(invalid)?;
    }
    let patch = MemoryStorePatch { name: body.name, description: body.description, metadata: body.metadata };
    Ok(axum::Json(state.store.update_memory_store(caller.workspace()?, &id, patch).await?))
}

/// The filters of the store list.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListFilters {
    /// Include archived stores (default `false`).
    #[param(value_type = Option<bool>)]
    include_archived: bool,
    /// Created at or after (RFC 3339).
    #[param(rename = "created_at[gte]", value_type = Option<String>, format = DateTime)]
    created_at_gte: Option<Timestamp>,
    /// Created at or before (RFC 3339).
    #[param(rename = "created_at[lte]", value_type = Option<String>, format = DateTime)]
    created_at_lte: Option<Timestamp>,
}

impl FromQuery for ListFilters {
    const ONCE: &'static [&'static str] = &["include_archived", "created_at[gte]", "created_at[lte]"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        Ok(Self {
            include_archived: flag("include_archived", q.one("include_archived"))?,
            created_at_gte: timestamp("created_at[gte]", q.one("created_at[gte]"))?,
            created_at_lte: timestamp("created_at[lte]", q.one("created_at[lte]"))?,
        })
    }
}

#[utoipa::path(
    get,
    path = "/v1/memory_stores",
    operation_id = "memory_stores.list",
    tag = "memory stores",
    summary = "List memory stores, newest first",
    params(Paging, ListFilters),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::MemoryStore>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Query(f): Query<ListFilters>,
    Query(paging): Query<Paging>,
) -> Reply<Page<MemoryStore>> {
    let query = ListMemoryStores {
        include_archived: f.include_archived,
        created_at_gte: f.created_at_gte,
        created_at_lte: f.created_at_lte,
        limit: paging.limit,
        after: paging.after,
    };
    Ok(axum::Json(mnemo_http::page(state.store.list_memory_stores(caller.workspace()?, query).await?)))
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
    caller: MemoryCaller,
    Id(id): Id<MemoryStoreId>,
) -> Reply<MemoryStore> {
    let store = state.store.archive_memory_store(caller.workspace()?, &id).await?;
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
    caller: MemoryCaller,
    Id(id): Id<MemoryStoreId>,
) -> Reply<MemoryStoreDeleted> {
    state.store.delete_memory_store(caller.workspace()?, &id).await?;
    tracing::info!(store.id = %id, "deleted memory store");
    Ok(axum::Json(MemoryStoreDeleted { id }))
}
