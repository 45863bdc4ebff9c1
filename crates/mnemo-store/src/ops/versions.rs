//! Memory versions: the immutable audit trail, and its one mutation, redaction.

use mnemo_api::{Actor, MemoryId, MemoryStoreId, MemoryVersion, MemoryVersionId, WorkspaceId};

use super::stores::StoreSql;
use super::{Micros, Seq};
use crate::row::ts;
use crate::rules::memory::{check_redactable, redacted};
use crate::{Result, StoreError};

/// A version and its row number (its position in the store's change feed).
#[derive(Debug, Clone)]
pub struct VersionRow {
    pub version: MemoryVersion,
    pub seq: Seq,
}

/// SQL over memory versions.
pub trait VersionSql: StoreSql {
    /// Version `id` of the store, with its content.
    async fn load_version(
        &self,
        store: &MemoryStoreId,
        store_seq: Seq,
        id: &MemoryVersionId,
    ) -> Result<Option<VersionRow>>;
    /// The version memory `memory` of store `store_seq` holds now; `None` once it is deleted.
    async fn current_version(&self, store_seq: Seq, memory: &MemoryId) -> Result<Option<MemoryVersionId>>;
    /// Writes version `seq` as `version` holds it after redaction: its path, content, digest and
    /// size (cleared by [`redacted`]), and its redactor, redacted at `now`.
    async fn write_redaction(&self, seq: Seq, version: &MemoryVersion, now: Micros) -> Result<()>;
}

/// Redacts a version ([`redacted`]); redacting a redacted version answers with it as it is.
/// Under the store's lock ([`StoreSql::lock_store`], taken before the version and the memory's
/// current version are read), so no concurrent write can make the version current (or stop it
/// being current) while this judges: the current version is refused ([`check_redactable`]).
pub async fn redact<S: VersionSql>(
    sql: &S,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    id: &MemoryVersionId,
    actor: &Actor,
) -> Result<MemoryVersion> {
    let locked = sql.lock_store(ws, store).await?;
    let VersionRow { version, seq } =
        sql.load_version(store, locked.seq, id).await?.ok_or_else(|| StoreError::not_found("memory version", id))?;
    if version.redacted_at.is_some() {
        return Ok(version);
    }
    let current = sql.current_version(locked.seq, &version.memory_id).await?;
    check_redactable(&version, current.as_ref())?;
    let now = sql.now().await?;
    let version = redacted(version, actor, ts(now));
    sql.write_redaction(seq, &version, now).await?;
    Ok(version)
}
