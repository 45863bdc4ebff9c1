//! Version retention (issue 35 item 3): a store's own window, and purging the versions past it
//! in bounded batches. Which versions go is [`crate::rules::retention`]'s; each batch is one short
//! transaction that takes the purge's own lock (one replica purges at a time) but never the
//! store's row lock, so writers of the store never wait for a purge: a version a purge judges
//! is never made current again (a write makes a new version; a restore copies an old one into a
//! new version), so a concurrent write cannot turn a purgeable version into a kept one.

use mnemo_api::{MemoryStoreId, WorkspaceId};

use super::stores::StoreSql;
use super::{Micros, Seq};
use crate::rules::retention::{self, Retention, VersionAge};
use crate::{Result, StoreError};

/// One store as a purge pass sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionStore {
    pub workspace: WorkspaceId,
    pub store: MemoryStoreId,
    /// The store's own retention; `None`: the server's.
    pub own: Option<Retention>,
}

/// One version a purge looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgedVersion {
    pub seq: Seq,
    pub age: VersionAge,
    /// Its content's size in bytes (0 for a deletion), what purging it frees.
    pub bytes: u64,
}

/// What one purge batch did in one store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeBatch {
    /// Versions deleted.
    pub versions: u64,
    /// Their content bytes.
    pub bytes: u64,
    /// Where the next batch of this store starts (the last version looked at): pass it back.
    pub next_after: Seq,
    /// Whether the store has no more versions past the cutoff after this batch.
    pub done: bool,
    /// Whether it kept a version past the cutoff (a live memory's newest).
    pub skipped: bool,
}

/// SQL over version retention.
pub trait RetentionSql: StoreSql {
    /// The position of store `id` of workspace `ws`, without locking it. Unknown, or of another
    /// workspace: not found.
    async fn store_seq(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<Seq>;
    /// The store's own retention, as stored (`None`: the server's).
    async fn store_retention_row(&self, seq: Seq) -> Result<Option<String>>;
    /// Sets (or, with `None`, clears) the store's own retention.
    async fn set_store_retention_row(&self, seq: Seq, retention: Option<&str>) -> Result<()>;
    /// Every store (archived ones too) with its own retention as stored, in creation order.
    async fn retention_rows(&self) -> Result<Vec<(String, String, Option<String>)>>;
    /// Takes the purge's lock until the transaction ends, if no other transaction holds it
    /// (PostgreSQL: a transaction-scoped advisory lock, so one replica purges at a time);
    /// `false`: another holds it.
    async fn try_hold_purge(&self) -> Result<bool>;
    /// Up to `limit` versions of store `store` after position `after` created before `before`,
    /// in position order, each with whether it is its memory's current version.
    async fn aged_versions(&self, store: Seq, after: Seq, before: Micros, limit: u32) -> Result<Vec<AgedVersion>>;
    /// Deletes these versions.
    async fn delete_versions(&self, seqs: &[Seq]) -> Result<u64>;
}

fn parse_own(store: &str, raw: Option<String>) -> Result<Option<Retention>> {
    raw.map(|r| {
        r.parse::<Retention>().map_err(|e| StoreError::corrupt("memory_stores", &store, "version_retention", e))
    })
    .transpose()
}

/// Store `id`'s own retention (`None`: the server's).
pub async fn get<S: RetentionSql>(sql: &S, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<Option<Retention>> {
    let seq = sql.store_seq(ws, id).await?;
    parse_own(id.as_str(), sql.store_retention_row(seq).await?)
}

/// Sets store `id`'s own retention (`None`: back to the server's).
pub async fn set<S: RetentionSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &MemoryStoreId,
    own: Option<Retention>,
) -> Result<Option<Retention>> {
    let locked = sql.lock_store(ws, id).await?;
    sql.set_store_retention_row(locked.seq, own.map(|r| r.to_string()).as_deref()).await?;
    Ok(own)
}

/// Every store with its own retention, for a purge pass.
pub async fn stores<S: RetentionSql>(sql: &S) -> Result<Vec<RetentionStore>> {
    sql.retention_rows()
        .await?
        .into_iter()
        .map(|(workspace, store, own)| {
            Ok(RetentionStore {
                own: parse_own(&store, own)?,
                workspace: crate::row::parse_id(&workspace)?,
                store: crate::row::parse_id(&store)?,
            })
        })
        .collect()
}

/// One purge batch in store `id` under `retention`: at most `limit` versions after position
/// `after` are looked at, and those [`retention::purgeable`] deleted. `None`: another
/// transaction holds the purge's lock (another replica is purging); try later.
pub async fn purge_batch<S: RetentionSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &MemoryStoreId,
    retention: Retention,
    after: Seq,
    limit: u32,
) -> Result<Option<PurgeBatch>> {
    let done = PurgeBatch { next_after: after, done: true, ..PurgeBatch::default() };
    let Some(cutoff) = retention::cutoff(sql.now().await?, retention) else { return Ok(Some(done)) };
    if !sql.try_hold_purge().await? {
        return Ok(None);
    }
    // The store's id and workspace, read without its row lock (writers keep writing).
    let seq = match sql.store_seq(ws, id).await {
        Ok(seq) => seq,
        // Deleted since the pass listed it: nothing left to purge.
        Err(StoreError::NotFound { .. }) => return Ok(Some(done)),
        Err(e) => return Err(e),
    };
    let aged = sql.aged_versions(seq, after, cutoff, limit).await?;
    let mut batch = PurgeBatch {
        next_after: aged.last().map_or(after, |v| v.seq),
        done: aged.len() < limit as usize,
        ..PurgeBatch::default()
    };
    let mut doomed = Vec::with_capacity(aged.len());
    for version in &aged {
        if retention::purgeable(version.age, cutoff) {
            doomed.push(version.seq);
            batch.bytes += version.bytes;
        } else {
            batch.skipped = true;
        }
    }
    batch.versions = sql.delete_versions(&doomed).await?;
    Ok(Some(batch))
}
