//! Memory stores: creating, patching, archiving and deleting them, and the lock every write to
//! a store's memories takes first.
//!
//! Lock order: a write to a store or to its memories takes the store's row lock
//! ([`StoreSql::lock_store`]) before it reads anything it judges — the store's state, its
//! memories' paths, its live count, its change position — so writers of one store take turns
//! while writers of different stores do not wait for each other. No store operation takes a
//! session's, environment's or work item's lock after it (the backends' documented order puts
//! stores last).

use mnemo_api::{MemoryStore, MemoryStoreId, WorkspaceId};

use super::webhooks::{WebhookSql, emit_one};
use super::{Clock, Micros, Seq};
use crate::row::ts;
use crate::rules::catalog;
use crate::rules::webhook::{Change, Resource};
use crate::{MemoryStorePatch, NewMemoryStore, Result};

/// A store locked for a write, with what such a write judges.
#[derive(Debug, Clone)]
pub struct LockedStore {
    pub store: MemoryStore,
    pub seq: Seq,
    /// Live memories, as the last writer left them.
    pub memory_count: u64,
}

/// SQL over memory stores.
pub trait StoreSql: Clock {
    /// Store `id` of workspace `ws` (archived or not). Unknown, or of another workspace: not
    /// found.
    async fn get_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore>;
    /// Store `id` of workspace `ws` and its live memory count, its row locked until the
    /// transaction ends (PostgreSQL: `FOR UPDATE`). Unknown, or of another workspace: not found.
    async fn lock_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<LockedStore>;
    /// Records a new store of workspace `ws`, created and updated at `now`.
    async fn insert_store(&self, ws: &WorkspaceId, id: &MemoryStoreId, new: &NewMemoryStore, now: Micros)
    -> Result<()>;
    /// Writes a store's name, description and metadata, updated at `now`.
    async fn update_store_row(&self, seq: Seq, store: &MemoryStore, now: Micros) -> Result<()>;
    /// Marks store `seq` archived (and updated) at `now`.
    async fn archive_store_row(&self, seq: Seq, now: Micros) -> Result<()>;
    /// Deletes store `seq` with its memories and versions.
    async fn delete_store_rows(&self, seq: Seq) -> Result<()>;
}

/// Creates a store, with its `memory_store.created` webhook event.
pub async fn create_store<S: StoreSql + WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    new: NewMemoryStore,
) -> Result<MemoryStore> {
    let id = MemoryStoreId::generate();
    let now = sql.now().await?;
    sql.insert_store(ws, &id, &new, now).await?;
    emit_one(sql, ws, Change::Created(Resource::MemoryStore), id.as_str()).await?;
    Ok(MemoryStore {
        id,
        name: new.name,
        description: new.description,
        metadata: new.metadata,
        created_at: ts(now),
        updated_at: ts(now),
        archived_at: None,
    })
}

/// Patches a store ([`catalog::update_store`]: an archived one refuses).
pub async fn update_store<S: StoreSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &MemoryStoreId,
    patch: MemoryStorePatch,
) -> Result<MemoryStore> {
    let locked = sql.lock_store(ws, id).await?;
    let mut store = catalog::update_store(&locked.store, patch)?;
    let now = sql.now().await?;
    sql.update_store_row(locked.seq, &store, now).await?;
    store.updated_at = ts(now);
    Ok(store)
}

/// Archives a store; archiving an archived one changes nothing (its webhook event says so). A
/// running dream's output store is refused ([`super::dreams::guard`]).
pub async fn archive_store<S: StoreSql + WebhookSql + super::DreamSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &MemoryStoreId,
) -> Result<MemoryStore> {
    let LockedStore { mut store, seq, .. } = sql.lock_store(ws, id).await?;
    super::dreams::guard(sql, ws, id.as_str(), "archive").await?;
    let already = store.archived_at.is_some();
    emit_one(sql, ws, Change::Archived { resource: Resource::MemoryStore, already }, id.as_str()).await?;
    if !already {
        let now = sql.now().await?;
        sql.archive_store_row(seq, now).await?;
        store.archived_at = Some(ts(now));
        store.updated_at = ts(now);
    }
    Ok(store)
}

/// Deletes a store with everything in it, archived or not.
pub async fn delete_store<S: StoreSql + WebhookSql + super::DreamSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &MemoryStoreId,
) -> Result<()> {
    let locked = sql.lock_store(ws, id).await?;
    super::dreams::guard(sql, ws, id.as_str(), "delete").await?;
    sql.delete_store_rows(locked.seq).await?;
    emit_one(sql, ws, Change::Deleted(Resource::MemoryStore), id.as_str()).await
}
