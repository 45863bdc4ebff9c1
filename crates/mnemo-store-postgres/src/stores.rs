//! Memory stores.
//!
//! A write that judges a store or its memories (paths, the cap, the change counter) first locks
//! the store's row ([`ops::StoreSql::lock_store`], the order [`mnemo_store::ops::stores`]
//! documents), so writers of one store take turns while writers of different stores do not
//! wait for each other.

use std::collections::{BTreeMap, HashMap};

use mnemo_api::{MemoryStore, MemoryStoreId, WorkspaceId};
use mnemo_store::ops::{self, LockedStore};
use mnemo_store::{ListMemoryStores, Listing, MemoryStoreUsage, NewMemoryStore, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Pg, Tx, all, col, exec, opt};
pub(crate) use mnemo_store::row::{before, page};

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

/// Store `id` of workspace `ws` and its row number, or not-found (a store of another workspace
/// included: its existence never shows).
pub(crate) async fn get_with_seq(tx: &Tx<'_>, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<(MemoryStore, i64)> {
    let row = opt(
        tx,
        &format!("SELECT {COLUMNS} FROM memory_stores WHERE id = $1 AND workspace_id = $2"),
        &[&id.as_str(), &ws.as_str()],
    )
    .await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| StoreError::not_found("memory store", id))
}

pub(crate) async fn get(tx: &Tx<'_>, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
    get_with_seq(tx, ws, id).await.map(|(s, _)| s)
}

fn metadata_json(m: &BTreeMap<String, String>) -> String {
    serde_json::to_string(m).expect("a map of strings serialises")
}

/// The position of the store's newest version: moves on every change, because every change
/// writes a version while holding the store's lock (so positions grow in commit order).
pub(crate) async fn change_seq(tx: &Tx<'_>, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<i64> {
    let (_, seq) = get_with_seq(tx, ws, id).await?;
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
/// is a `NUMERIC`, hence the cast back. A store of another workspace is absent, as an unknown one is.
pub(crate) async fn usage(
    tx: &Tx<'_>,
    ws: &WorkspaceId,
    ids: &[MemoryStoreId],
) -> Result<HashMap<MemoryStoreId, MemoryStoreUsage>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let ids: Vec<&str> = ids.iter().map(MemoryStoreId::as_str).collect();
    let rows = all(
        tx,
        "SELECT s.id, u.memories, u.bytes FROM memory_stores s \
         CROSS JOIN LATERAL (SELECT count(*) AS memories, COALESCE(sum(m.content_size_bytes), 0)::int8 AS bytes \
                             FROM memories m WHERE m.store_seq = s.seq) u \
         WHERE s.id = ANY($1::text[]) AND s.workspace_id = $2",
        &[&ids, &ws.as_str()],
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

pub(crate) async fn list(tx: &Tx<'_>, ws: &WorkspaceId, q: &ListMemoryStores) -> Result<Listing<MemoryStore>> {
    let before = before(q.after.as_ref())?;
    let rows = all(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM memory_stores \
             WHERE workspace_id = $6 AND seq < $1 AND ($2 OR archived_at IS NULL) \
               AND created_at >= $3 AND created_at <= $4 \
             ORDER BY seq DESC LIMIT $5"
        ),
        &[
            &before,
            &q.include_archived,
            &q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            &q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
            &(i64::from(q.limit) + 1),
            &ws.as_str(),
        ],
    )
    .await?;
    let rows = rows.iter().map(from_row).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, q.limit))
}

impl ops::StoreSql for Pg<'_, '_> {
    async fn get_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
        get(self, ws, id).await
    }

    /// `FOR UPDATE`: the writer holding it is the only one judging and changing the store and
    /// its memories; the memory count is read in the same round trip.
    async fn lock_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<LockedStore> {
        let row = opt(
            self,
            &format!(
                "SELECT {COLUMNS}, memory_count FROM memory_stores WHERE id = $1 AND workspace_id = $2 FOR UPDATE"
            ),
            &[&id.as_str(), &ws.as_str()],
        )
        .await?
        .ok_or_else(|| StoreError::not_found("memory store", id))?;
        let (store, seq) = from_row(&row)?;
        let count: i64 = col(&row, 8)?;
        let memory_count =
            u64::try_from(count).map_err(|e| StoreError::corrupt("memory_stores", &store.id, "memory_count", e))?;
        Ok(LockedStore { store, seq, memory_count })
    }

    async fn insert_store(&self, ws: &WorkspaceId, id: &MemoryStoreId, new: &NewMemoryStore, now: i64) -> Result<()> {
        exec(
            self,
            "INSERT INTO memory_stores (id, workspace_id, name, description, metadata, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $6)",
            &[&id.as_str(), &ws.as_str(), &new.name, &new.description, &metadata_json(&new.metadata), &now],
        )
        .await
        .map(drop)
    }

    async fn update_store_row(&self, seq: i64, store: &MemoryStore, now: i64) -> Result<()> {
        exec(
            self,
            "UPDATE memory_stores SET name = $1, description = $2, metadata = $3, updated_at = $4 WHERE seq = $5",
            &[&store.name, &store.description, &metadata_json(&store.metadata), &now, &seq],
        )
        .await
        .map(drop)
    }

    async fn archive_store_row(&self, seq: i64, now: i64) -> Result<()> {
        exec(self, "UPDATE memory_stores SET archived_at = $1, updated_at = $1 WHERE seq = $2", &[&now, &seq])
            .await
            .map(drop)
    }

    async fn delete_store_rows(&self, seq: i64) -> Result<()> {
        // Children first: cheaper than cascading through foreign keys row by row.
        exec(self, "DELETE FROM memories WHERE store_seq = $1", &[&seq]).await?;
        exec(self, "DELETE FROM memory_versions WHERE store_seq = $1", &[&seq]).await?;
        exec(self, "DELETE FROM memory_stores WHERE seq = $1", &[&seq]).await?;
        Ok(())
    }
}
