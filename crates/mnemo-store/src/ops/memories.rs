//! Memories: creating, changing (content and path) and deleting them, each writing one version.
//!
//! Every write first locks its store ([`StoreSql::lock_store`]) and only then reads the memory,
//! the paths or the count it judges: writers of one store take turns, so two creates racing for
//! one path (or for the last slot under the cap), or two updates with one `content_sha256`
//! precondition, cannot both pass, and the store's version positions grow in commit order.

use mnemo_api::{
    Actor, Memory, MemoryId, MemoryPath, MemoryStoreId, MemoryVersionId, Operation, WorkspaceId, content_sha256,
};

use super::stores::{LockedStore, StoreSql};
use super::{Micros, Seq};
use crate::row::ts;
use crate::rules::memory::{self as rules, Blocker, CreateFacts, Overlap, Update};
use crate::{MemoryChange, MemoryWriteOp, Result, StoreError};

/// A memory and its row number.
#[derive(Debug, Clone)]
pub struct MemoryRow {
    pub memory: Memory,
    pub seq: Seq,
}

/// A version to append.
#[derive(Debug, Clone, Copy)]
pub struct NewVersion<'a> {
    pub id: &'a MemoryVersionId,
    pub memory_id: &'a MemoryId,
    pub operation: Operation,
    pub path: &'a str,
    /// Text and its digest; `None` for a deletion.
    pub content: Option<(&'a str, &'a str)>,
    pub actor: &'a Actor,
}

/// Where and when a version landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Its position in the store's change feed.
    pub seq: Seq,
    /// Its time, read after the store's lock was granted (so times grow with positions).
    pub at: Micros,
}

/// SQL over memories. Each write appends its version and changes the memory's row in one step
/// (PostgreSQL: one statement), keeping the store's live count (`memory_count`) with them.
pub trait MemorySql: StoreSql {
    /// The first memory of store `store` (other than row `except`) that overlaps the path, in
    /// the order [`Overlap`] names blockers: at or above it, else the first below it.
    async fn find_blocker(&self, store: Seq, overlap: &Overlap<'_>, except: Option<Seq>) -> Result<Option<Blocker>>;
    /// Memory `id` of the store, with its current content if `with_content`.
    async fn load_memory(
        &self,
        store: &MemoryStoreId,
        store_seq: Seq,
        id: &MemoryId,
        with_content: bool,
    ) -> Result<Option<MemoryRow>>;
    /// Appends `version` (a creation) and records the memory it creates, counting it live.
    async fn insert_memory(&self, store: Seq, version: &NewVersion<'_>) -> Result<Written>;
    /// Appends `version` (a modification) and points memory `memory` at it: its path, digest,
    /// size and update time become the version's.
    async fn rewrite_memory(&self, store: Seq, memory: Seq, version: &NewVersion<'_>) -> Result<Written>;
    /// Appends `version` (a deletion) and removes memory `memory`, counting it no longer live.
    async fn remove_memory(&self, store: Seq, memory: Seq, version: &NewVersion<'_>) -> Result<Written>;
}

/// Creates a memory at `path`, judged by [`rules::check_create`] under the store's lock; the
/// memory and its version's position.
pub async fn create_memory<S: MemorySql>(
    sql: &S,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    path: &MemoryPath,
    content: String,
    actor: &Actor,
    limit: u32,
) -> Result<(Memory, Seq)> {
    let LockedStore { store: s, seq: store_seq, memory_count } = sql.lock_store(ws, store).await?;
    let blocker = sql.find_blocker(store_seq, &Overlap::of(path), None).await?;
    rules::check_create(path, CreateFacts { store: &s, blocker, live_memories: memory_count, limit })?;
    let id = MemoryId::generate();
    let version_id = MemoryVersionId::generate();
    let sha = content_sha256(content.as_bytes());
    let version = NewVersion {
        id: &version_id,
        memory_id: &id,
        operation: Operation::Created,
        path: path.as_str(),
        content: Some((&content, &sha)),
        actor,
    };
    let written = sql.insert_memory(store_seq, &version).await?;
    let memory = Memory {
        id,
        memory_store_id: store.clone(),
        path: path.to_string(),
        content_size_bytes: content.len() as u64,
        content: Some(content),
        content_sha256: sha,
        memory_version_id: version_id,
        created_at: ts(written.at),
        updated_at: ts(written.at),
    };
    Ok((memory, written.seq))
}

/// Changes a memory's content, path or both. Checks, first failing wins: the store is writable,
/// the memory exists, the `content_sha256` precondition holds against the memory as the last
/// writer left it ([`rules::plan_update`]; a retry of an applied update writes nothing and
/// answers `None` for the position), and a new path is free.
pub async fn update_memory<S: MemorySql>(
    sql: &S,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    id: &MemoryId,
    change: MemoryChange,
    actor: &Actor,
) -> Result<(Memory, Option<Seq>)> {
    let locked = sql.lock_store(ws, store).await?;
    rules::check_writable(&locked.store)?;
    // The current content is read only for a move, which keeps it (rules::plan_update).
    let with_content = change.content.is_none();
    let MemoryRow { mut memory, seq } = sql
        .load_memory(store, locked.seq, id, with_content)
        .await?
        .ok_or_else(|| StoreError::not_found("memory", id))?;
    let (content, sha, moved_to) = match rules::plan_update(&memory, change)? {
        Update::Unchanged { content } => {
            memory.content = Some(content);
            return Ok((memory, None));
        }
        Update::Write { content, sha256, moved_to } => (content, sha256, moved_to),
    };
    if let Some(to) = &moved_to {
        rules::check_path_free(to, sql.find_blocker(locked.seq, &Overlap::of(to), Some(seq)).await?)?;
    }
    let path = moved_to.map_or_else(|| memory.path.clone(), |p| p.to_string());
    let version_id = MemoryVersionId::generate();
    let version = NewVersion {
        id: &version_id,
        memory_id: id,
        operation: Operation::Modified,
        path: &path,
        content: Some((&content, &sha)),
        actor,
    };
    let written = sql.rewrite_memory(locked.seq, seq, &version).await?;
    memory.path = path;
    memory.content_sha256 = sha;
    memory.content_size_bytes = content.len() as u64;
    memory.content = Some(content);
    memory.memory_version_id = version_id;
    memory.updated_at = ts(written.at);
    Ok((memory, Some(written.seq)))
}

/// Deletes a memory, leaving a `deleted` version; its position. An archived store's memories
/// may be deleted (archiving stops new content, not clean-up). Checks: the memory exists, then
/// the `content_sha256` precondition.
pub async fn delete_memory<S: MemorySql>(
    sql: &S,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    id: &MemoryId,
    expected_sha256: Option<&str>,
    actor: &Actor,
) -> Result<Seq> {
    let locked = sql.lock_store(ws, store).await?;
    let MemoryRow { memory, seq } =
        sql.load_memory(store, locked.seq, id, false).await?.ok_or_else(|| StoreError::not_found("memory", id))?;
    rules::check_precondition(expected_sha256, &memory.content_sha256)?;
    let version_id = MemoryVersionId::generate();
    let version = NewVersion {
        id: &version_id,
        memory_id: id,
        operation: Operation::Deleted,
        path: &memory.path,
        content: None,
        actor,
    };
    Ok(sql.remove_memory(locked.seq, seq, &version).await?.seq)
}

/// One write of a batch ([`Store::write_memories`](crate::Store::write_memories)), as its own
/// operation does it; the position of the version it wrote, if it wrote one.
pub async fn write_memory<S: MemorySql>(
    sql: &S,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    write: MemoryWriteOp,
    actor: &Actor,
    limit: u32,
) -> Result<(Memory, Option<Seq>)> {
    match write {
        MemoryWriteOp::Create { path, content } => {
            create_memory(sql, ws, store, &path, content, actor, limit).await.map(|(m, seq)| (m, Some(seq)))
        }
        MemoryWriteOp::Update { id, change } => update_memory(sql, ws, store, &id, change, actor).await,
    }
}
