//! Memory stores.
//!
//! A write that judges a store's memories (paths, the cap, the change counter) first locks the
//! store's row with [`lock`], so writers of one store take turns while writers of different
//! stores do not wait for each other.

use std::collections::{BTreeMap, HashMap};

use mnemo_api::{MemoryStore, MemoryStoreId};
use mnemo_store::rules::catalog;
use mnemo_store::{ListMemoryStores, Listing, MemoryStorePatch, MemoryStoreUsage, NewMemoryStore, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Tx, all, col, exec, now, opt};
use crate::webhooks::emit_one;
pub(crate) use mnemo_store::row::{before, page};
use mnemo_store::rules::webhook::{Change, Resource};

use crate::{parse_id, ts, ts_opt};

const COLUMNS: &str = "id, name, description, metadata, created_at, updated_at, archived_at, seq";

fn from_row(r: &Row) -> Result<(MemoryStore, i64)> {
    let metadata: String = col(r, 3)?;
    Ok((
        MemoryStore {
            id: parse_id(&col::<String>(r, 0)?)?,
            name: col(r, 1)?,
            description: col(r, 2)?,
            metadata: serde_json::from_str(&metadata).unwrap_or_default(),
            created_at: ts(col(r, 4)?),
            updated_at: ts(col(r, 5)?),
            archived_at: ts_opt(col(r, 6)?),
        },
        col(r, 7)?,
    ))
}

/// The store and its row number, or not-found.
pub(crate) async fn get_with_seq(tx: &Tx<'_>, id: &MemoryStoreId) -> Result<(MemoryStore, i64)> {
    let row = opt(tx, &format!("SELECT {COLUMNS} FROM memory_stores WHERE id = $1"), &[&id.as_str()]).await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| StoreError::not_found("memory store", id))
}

/// Like [`get_with_seq`], and locks the store's row until the transaction ends: the writer
/// holding it is the only one judging and changing the store's memories.
pub(crate) async fn lock(tx: &Tx<'_>, id: &MemoryStoreId) -> Result<(MemoryStore, i64)> {
    let row =
        opt(tx, &format!("SELECT {COLUMNS} FROM memory_stores WHERE id = $1 FOR UPDATE"), &[&id.as_str()]).await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| StoreError::not_found("memory store", id))
}

/// A store locked for a write to its memories, with what such a write judges, read in the
/// same round trip as the lock.
pub(crate) struct Locked {
    pub(crate) store: MemoryStore,
    pub(crate) seq: i64,
    /// Live memories, as the last writer left them.
    pub(crate) memory_count: i64,
    /// The database's clock as the lock was asked for (a wait for the lock may follow it).
    pub(crate) now: i64,
}

/// Locks the store's row like [`lock`], reading its memory count and the database's clock with
/// it: a memory write holds the lock for as few round trips as it can.
pub(crate) async fn lock_for_memories(tx: &Tx<'_>, id: &MemoryStoreId) -> Result<Locked> {
    let row = opt(
        tx,
        &format!(
            "SELECT {COLUMNS}, memory_count, (extract(epoch FROM clock_timestamp()) * 1000000)::int8 \
             FROM memory_stores WHERE id = $1 FOR UPDATE"
        ),
        &[&id.as_str()],
    )
    .await?
    .ok_or_else(|| StoreError::not_found("memory store", id))?;
    let (store, seq) = from_row(&row)?;
    Ok(Locked { store, seq, memory_count: col(&row, 8)?, now: col(&row, 9)? })
}

pub(crate) async fn get(tx: &Tx<'_>, id: &MemoryStoreId) -> Result<MemoryStore> {
    get_with_seq(tx, id).await.map(|(s, _)| s)
}

fn metadata_json(m: &BTreeMap<String, String>) -> String {
    serde_json::to_string(m).expect("a map of strings serialises")
}

pub(crate) async fn create(tx: &Tx<'_>, new: NewMemoryStore) -> Result<MemoryStore> {
    let id = MemoryStoreId::generate();
    let now = now(tx).await?;
    exec(
        tx,
        "INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $5)",
        &[&id.as_str(), &new.name, &new.description, &metadata_json(&new.metadata), &now],
    )
    .await?;
    emit_one(tx, Change::Created(Resource::MemoryStore), id.as_str()).await?;
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

pub(crate) async fn update(tx: &Tx<'_>, id: &MemoryStoreId, patch: MemoryStorePatch) -> Result<MemoryStore> {
    let (current, seq) = lock(tx, id).await?;
    let mut store = catalog::update_store(&current, patch)?;
    let now = now(tx).await?;
    exec(
        tx,
        "UPDATE memory_stores SET name = $1, description = $2, metadata = $3, updated_at = $4 WHERE seq = $5",
        &[&store.name, &store.description, &metadata_json(&store.metadata), &now, &seq],
    )
    .await?;
    store.updated_at = ts(now);
    Ok(store)
}

pub(crate) async fn archive(tx: &Tx<'_>, id: &MemoryStoreId) -> Result<MemoryStore> {
    let (mut store, seq) = lock(tx, id).await?;
    emit_one(
        tx,
        Change::Archived { resource: Resource::MemoryStore, already: store.archived_at.is_some() },
        id.as_str(),
    )
    .await?;
    if store.archived_at.is_none() {
        let now = now(tx).await?;
        exec(tx, "UPDATE memory_stores SET archived_at = $1, updated_at = $1 WHERE seq = $2", &[&now, &seq]).await?;
        store.archived_at = Some(ts(now));
        store.updated_at = ts(now);
    }
    Ok(store)
}

pub(crate) async fn delete(tx: &Tx<'_>, id: &MemoryStoreId) -> Result<()> {
    let (_, seq) = lock(tx, id).await?;
    // Children first: cheaper than cascading through foreign keys row by row.
    exec(tx, "DELETE FROM memories WHERE store_seq = $1", &[&seq]).await?;
    exec(tx, "DELETE FROM memory_versions WHERE store_seq = $1", &[&seq]).await?;
    exec(tx, "DELETE FROM memory_stores WHERE seq = $1", &[&seq]).await?;
    emit_one(tx, Change::Deleted(Resource::MemoryStore), id.as_str()).await?;
    Ok(())
}

/// The position of the store's newest version: moves on every change, because every change
/// writes a version while holding the store's lock (so positions grow in commit order).
pub(crate) async fn change_seq(tx: &Tx<'_>, id: &MemoryStoreId) -> Result<i64> {
    let (_, seq) = get_with_seq(tx, id).await?;
    let row = crate::engine::one(tx, "SELECT COALESCE(MAX(seq), 0) FROM memory_versions WHERE store_seq = $1", &[&seq])
        .await?;
    col(&row, 0)
}

/// Live memories and their bytes for each of `ids` that exists, in one statement.
///
/// The `memories` rows hold exactly the live memories and each one's current content size, so
/// no version row (and so no content) is read. The `LATERAL` aggregate is summed per store from
/// the `(store_seq, path)` index, so a call costs the memories of the stores asked for: a plain
/// `LEFT JOIN … GROUP BY` let the planner hash-join a full scan of every store's memories (about
/// 7x slower for 20 stores of 500 holding 110,000 memories). An aggregate without `GROUP BY`
/// always yields a row, so a store without memories is answered as 0 and 0; `sum` of a `BIGINT`
/// is a `NUMERIC`, hence the cast back.
pub(crate) async fn usage(tx: &Tx<'_>, ids: &[MemoryStoreId]) -> Result<HashMap<MemoryStoreId, MemoryStoreUsage>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let ids: Vec<&str> = ids.iter().map(MemoryStoreId::as_str).collect();
    let rows = all(
        tx,
        "SELECT s.id, u.memories, u.bytes FROM memory_stores s \
         CROSS JOIN LATERAL (SELECT count(*) AS memories, COALESCE(sum(m.content_size_bytes), 0)::int8 AS bytes \
                             FROM memories m WHERE m.store_seq = s.seq) u \
         WHERE s.id = ANY($1::text[])",
        &[&ids],
    )
    .await?;
    rows.iter()
        .map(|r| {
            let (memories, bytes): (i64, i64) = (col(r, 1)?, col(r, 2)?);
            let usage = MemoryStoreUsage { memories: memories.max(0) as u64, bytes: bytes.max(0) as u64 };
            Ok((parse_id(&col::<String>(r, 0)?)?, usage))
        })
        .collect()
}

pub(crate) async fn list(tx: &Tx<'_>, q: &ListMemoryStores) -> Result<Listing<MemoryStore>> {
    let before = before(q.after.as_ref())?;
    let rows = all(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM memory_stores \
             WHERE seq < $1 AND ($2 OR archived_at IS NULL) \
               AND created_at >= $3 AND created_at <= $4 \
             ORDER BY seq DESC LIMIT $5"
        ),
        &[
            &before,
            &q.include_archived,
            &q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            &q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
            &(i64::from(q.limit) + 1),
        ],
    )
    .await?;
    let rows = rows.iter().map(from_row).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, q.limit))
}

impl mnemo_store::ops::StoreSql for crate::engine::Pg<'_, '_> {
    async fn get_store(&self, id: &MemoryStoreId) -> Result<MemoryStore> {
        get(self, id).await
    }
}
