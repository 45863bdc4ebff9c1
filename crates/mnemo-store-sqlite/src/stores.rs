//! Memory stores.

use std::collections::BTreeMap;

use mnemo_api::{MemoryStore, MemoryStoreId};
use mnemo_store::rules::catalog;
use mnemo_store::{ListMemoryStores, Listing, MemoryStorePatch, NewMemoryStore, Result, StoreError};
use rusqlite::{Connection, Row, params};

use crate::engine::{backend, query_one};
pub(crate) use mnemo_store::row::{before, page};

use crate::{now_micros, parse_id, ts, ts_opt};

const COLUMNS: &str = "id, name, description, metadata, created_at, updated_at, archived_at, seq";

fn from_row(r: &Row<'_>) -> rusqlite::Result<(MemoryStore, i64)> {
    let id: String = r.get(0)?;
    let metadata: String = r.get(3)?;
    Ok((
        MemoryStore {
            id: parse_id(&id).map_err(|e| rusqlite::Error::InvalidColumnName(e.to_string()))?,
            name: r.get(1)?,
            description: r.get(2)?,
            metadata: serde_json::from_str(&metadata).unwrap_or_default(),
            created_at: ts(r.get(4)?),
            updated_at: ts(r.get(5)?),
            archived_at: ts_opt(r.get(6)?),
        },
        r.get(7)?,
    ))
}

/// The store and its row number, or not-found.
pub(crate) fn get_with_seq(c: &Connection, id: &MemoryStoreId) -> Result<(MemoryStore, i64)> {
    query_one(c, &format!("SELECT {COLUMNS} FROM memory_stores WHERE id = ?1"), [id.as_str()], from_row)?
        .ok_or_else(|| StoreError::not_found("memory store", id))
}

pub(crate) fn get(c: &Connection, id: &MemoryStoreId) -> Result<MemoryStore> {
    get_with_seq(c, id).map(|(s, _)| s)
}

fn metadata_json(m: &BTreeMap<String, String>) -> String {
    serde_json::to_string(m).expect("a map of strings serialises")
}

pub(crate) fn create(c: &Connection, new: NewMemoryStore) -> Result<MemoryStore> {
    let id = MemoryStoreId::generate();
    let now = now_micros();
    c.prepare_cached(
        "INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
    )
    .and_then(|mut s| s.execute(params![id.as_str(), new.name, new.description, metadata_json(&new.metadata), now]))
    .map_err(backend)?;
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

pub(crate) fn update(c: &Connection, id: &MemoryStoreId, patch: MemoryStorePatch) -> Result<MemoryStore> {
    let (current, seq) = get_with_seq(c, id)?;
    let mut store = catalog::update_store(&current, patch)?;
    let now = now_micros();
    c.execute(
        "UPDATE memory_stores SET name = ?1, description = ?2, metadata = ?3, updated_at = ?4 WHERE seq = ?5",
        params![store.name, store.description, metadata_json(&store.metadata), now, seq],
    )
    .map_err(backend)?;
    store.updated_at = ts(now);
    Ok(store)
}

pub(crate) fn archive(c: &Connection, id: &MemoryStoreId) -> Result<MemoryStore> {
    let (mut store, seq) = get_with_seq(c, id)?;
    if store.archived_at.is_none() {
        let now = now_micros();
        c.execute("UPDATE memory_stores SET archived_at = ?1, updated_at = ?1 WHERE seq = ?2", params![now, seq])
            .map_err(backend)?;
        store.archived_at = Some(ts(now));
        store.updated_at = ts(now);
    }
    Ok(store)
}

pub(crate) fn delete(c: &Connection, id: &MemoryStoreId) -> Result<()> {
    let (_, seq) = get_with_seq(c, id)?;
    // Children first: cheaper than cascading through foreign keys row by row.
    c.execute("DELETE FROM memories WHERE store_seq = ?1", [seq]).map_err(backend)?;
    c.execute("DELETE FROM memory_versions WHERE store_seq = ?1", [seq]).map_err(backend)?;
    c.execute("DELETE FROM memory_stores WHERE seq = ?1", [seq]).map_err(backend)?;
    Ok(())
}

pub(crate) fn list(c: &Connection, q: &ListMemoryStores) -> Result<Listing<MemoryStore>> {
    let before = crate::stores::before(q.after.as_ref())?;
    let mut stmt = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM memory_stores \
             WHERE seq < ?1 AND (?2 OR archived_at IS NULL) \
               AND created_at >= ?3 AND created_at <= ?4 \
             ORDER BY seq DESC LIMIT ?5"
        ))
        .map_err(backend)?;
    let rows = stmt
        .query_map(
            params![
                before,
                q.include_archived,
                q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
                q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
                i64::from(q.limit) + 1
            ],
            from_row,
        )
        .map_err(backend)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(backend)?;
    Ok(page(rows, q.limit))
}
