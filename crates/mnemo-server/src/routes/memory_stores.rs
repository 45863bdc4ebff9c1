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

pub(crate) async fn retrieve(
    State(state): State<AppState>,
    _: MemoryCaller,
    Path(store): Path<String>,
) -> Reply<MemoryStore> {
    let id: MemoryStoreId = path_id("memory store", &store)?;
    Ok(axum::Json(state.store.get_memory_store(&id).await?))
}

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

#[derive(Debug, Deserialize)]
pub(crate) struct ListParams {
    limit: Option<String>,
    page: Option<String>,
    include_archived: Option<String>,
    #[serde(rename = "created_at[gte]")]
    created_at_gte: Option<String>,
    #[serde(rename = "created_at[lte]")]
    created_at_lte: Option<String>,
}

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
