//! Memory stores.

use std::collections::{BTreeMap, HashMap};

use mnemo_api::{MemoryStore, MemoryStoreId, WorkspaceId};
use mnemo_store::ops::{self, LockedStore};
use mnemo_store::{ListMemoryStores, Listing, MemoryStoreUsage, NewMemoryStore, Result, StoreError};
use rusqlite::{Connection, Row, params};

use crate::engine::{Lite, backend, query_all, query_one};
pub(crate) use mnemo_store::row::{before, page};

use crate::{parse_id, ts, ts_opt};

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

/// Store `id` of workspace `ws` and its row number, or not-found (a store of another workspace
/// included: its existence never shows).
pub(crate) fn get_with_seq(c: &Connection, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<(MemoryStore, i64)> {
    query_one(
        c,
        &format!("SELECT {COLUMNS} FROM memory_stores WHERE id = ?1 AND workspace_id = ?2"),
        [id.as_str(), ws.as_str()],
        from_row,
    )?
    .ok_or_else(|| StoreError::not_found("memory store", id))
}

pub(crate) fn get(c: &Connection, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
    get_with_seq(c, ws, id).map(|(s, _)| s)
}

fn metadata_json(m: &BTreeMap<String, String>) -> String {
    serde_json::to_string(m).expect("a map of strings serialises")
}

pub(crate) fn list(c: &Connection, ws: &WorkspaceId, q: &ListMemoryStores) -> Result<Listing<MemoryStore>> {
    let before = crate::stores::before(q.after.as_ref())?;
    let rows = query_all(
        c,
        &format!(
            "SELECT {COLUMNS} FROM memory_stores \
             WHERE workspace_id = ?6 AND seq < ?1 AND (?2 OR archived_at IS NULL) \
               AND created_at >= ?3 AND created_at <= ?4 \
             ORDER BY seq DESC LIMIT ?5"
        ),
        params![
            before,
            q.include_archived,
            q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
            i64::from(q.limit) + 1,
            ws.as_str()
        ],
        from_row,
    )?;
    Ok(page(rows, q.limit))
}

/// The stores' memories are summed from their `memories` rows, which hold exactly the live
/// memories and each one's current content size: no version row (and so no content) is read.
/// Stores come from their `id` index, their memories from the `(store_seq, path)` index, so the
/// cost is one index range per store asked for, never a scan of other stores' memories. A store
/// without memories is still answered (the `LEFT JOIN`), as 0 and 0. Grouping by `s.id` (not
/// `s.seq`) lets the groups arrive in the order the `id` index hands the stores out, so no
/// temporary B-tree sorts the joined rows (the test below holds the plan to that). A store of
/// another workspace is absent, as an unknown one is.
const USAGE: &str = "SELECT s.id, count(m.seq), COALESCE(sum(m.content_size_bytes), 0) \
                     FROM memory_stores s LEFT JOIN memories m ON m.store_seq = s.seq \
                     WHERE s.id IN (SELECT value FROM json_each(?1)) AND s.workspace_id = ?2 \
                     GROUP BY s.id";

/// Live memories and their bytes for each of `ids` that exists, in one statement.
pub(crate) fn usage(
    c: &Connection,
    ws: &WorkspaceId,
    ids: &[MemoryStoreId],
) -> Result<HashMap<MemoryStoreId, MemoryStoreUsage>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let ids = serde_json::to_string(&ids.iter().map(MemoryStoreId::as_str).collect::<Vec<_>>()).map_err(backend)?;
    let mut stmt = c.prepare_cached(USAGE).map_err(backend)?;
    let rows = stmt
        .query_map([ids.as_str(), ws.as_str()], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
        })
        .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
        .map_err(backend)?;
    rows.into_iter()
        .map(|(id, memories, bytes)| {
            let usage = MemoryStoreUsage { memories: memories.max(0) as u64, bytes: bytes.max(0) as u64 };
            Ok((parse_id(&id)?, usage))
        })
        .collect()
}

/// SQLite's single writer excludes every other writer, so [`lock_store`](ops::StoreSql::lock_store)
/// only reads.
impl ops::StoreSql for Lite<'_> {
    async fn get_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
        get(self, ws, id)
    }

    async fn lock_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<LockedStore> {
        let (store, seq, count) = query_one(
            self,
            &format!("SELECT {COLUMNS}, memory_count FROM memory_stores WHERE id = ?1 AND workspace_id = ?2"),
            [id.as_str(), ws.as_str()],
            |r| Ok((from_row(r)?, r.get::<_, i64>(8)?)),
        )?
        .map(|((store, seq), count)| (store, seq, count))
        .ok_or_else(|| StoreError::not_found("memory store", id))?;
        let memory_count =
            u64::try_from(count).map_err(|e| StoreError::corrupt("memory_stores", &store.id, "memory_count", e))?;
        Ok(LockedStore { store, seq, memory_count })
    }

    async fn insert_store(&self, ws: &WorkspaceId, id: &MemoryStoreId, new: &NewMemoryStore, now: i64) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO memory_stores (id, workspace_id, name, description, metadata, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![id.as_str(), ws.as_str(), new.name, new.description, metadata_json(&new.metadata), now])
        })
        .map(drop)
        .map_err(backend)
    }

    async fn update_store_row(&self, seq: i64, store: &MemoryStore, now: i64) -> Result<()> {
        self.execute(
            "UPDATE memory_stores SET name = ?1, description = ?2, metadata = ?3, updated_at = ?4 WHERE seq = ?5",
            params![store.name, store.description, metadata_json(&store.metadata), now, seq],
        )
        .map(drop)
        .map_err(backend)
    }

    async fn archive_store_row(&self, seq: i64, now: i64) -> Result<()> {
        self.execute("UPDATE memory_stores SET archived_at = ?1, updated_at = ?1 WHERE seq = ?2", params![now, seq])
            .map(drop)
            .map_err(backend)
    }

    async fn delete_store_rows(&self, seq: i64) -> Result<()> {
        // Children first: cheaper than cascading through foreign keys row by row.
        self.execute("DELETE FROM memories WHERE store_seq = ?1", [seq]).map_err(backend)?;
        self.execute("DELETE FROM memory_versions WHERE store_seq = ?1", [seq]).map_err(backend)?;
        self.execute("DELETE FROM memory_stores WHERE seq = ?1", [seq]).map_err(backend)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use mnemo_api::{Actor, MemoryPath};
    use mnemo_store::Operations;
    use mnemo_store::{NewMemoryStore, Store};
    use rusqlite::params;

    use super::USAGE;
    use crate::engine::backend;
    use crate::{Durability, SqliteSettings, SqliteStore};

    /// The query plan of [`USAGE`], one `detail` per line.
    fn plan(c: &rusqlite::Connection, ids: &str, ws: &str) -> Vec<String> {
        let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {USAGE}")).unwrap();
        stmt.query_map([ids, ws], |r| r.get::<_, String>(3)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
    }

    #[tokio::test]
    async fn usage_searches_the_stores_asked_for_and_their_memories_by_index() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = SqliteSettings::from_url(&format!("sqlite://{}/db.sqlite", dir.path().display())).unwrap();
        settings.durability = Durability::Normal;
        let s = SqliteStore::open(&settings).unwrap();
        let new = |name: &str| NewMemoryStore { name: name.into(), description: String::new(), metadata: [].into() };
        let ws = s.default_workspace().await.unwrap();
        let big = s.create_memory_store(&ws, new("big")).await.unwrap().id;
        let small = s.create_memory_store(&ws, new("small")).await.unwrap().id;
        let actor = Actor::ApiActor { api_key_id: "apikey_plan".parse().unwrap() };
        s.create_memory(&ws, &small, MemoryPath::parse("/a").unwrap(), "abc".into(), actor).await.unwrap();
        // 10,000 memory rows in one store, written directly: the plan is what is under test.
        let (big_id, in_ws) = (big.clone(), ws.clone());
        s.engine
            .write(move |c| {
                let (_, seq) = super::get_with_seq(c, &in_ws, &big_id)?;
                let mut insert = c
                    .prepare(
                        "INSERT INTO memories (id, store_seq, path, content_sha256, content_size_bytes, \
                         version_seq, version_id, created_at, updated_at) VALUES (?1, ?2, ?3, '', ?4, 0, '', 0, 0)",
                    )
                    .map_err(backend)?;
                for i in 0..10_000_i64 {
                    insert.execute(params![format!("mem_{i}"), seq, format!("/m/{i}"), i % 100]).map_err(backend)?;
                }
                Ok(())
            })
            .await
            .unwrap();
        let ids = serde_json::to_string(&[big.as_str(), small.as_str()]).unwrap();
        // With and without the statistics `PRAGMA optimize` may gather on close.
        for analyzed in [false, true] {
            let (ids, ws) = (ids.clone(), ws.to_string());
            if analyzed {
                s.engine.write(|c| c.execute_batch("ANALYZE").map_err(backend)).await.unwrap();
            }
            let plan = s.engine.read(move |c| Ok(plan(c, &ids, &ws))).await.unwrap();
            let has = |needle: &str| plan.iter().any(|line| line.contains(needle));
            // By id (the row is read for its workspace).
            assert!(has("SEARCH s USING INDEX sqlite_autoindex_memory_stores_1 (id=?)"), "{plan:#?}");
            assert!(has("SEARCH m USING INDEX sqlite_autoindex_memories_2 (store_seq=?)"), "{plan:#?}");
            assert!(
                plan.iter().all(|line| !line.starts_with("SCAN") || line.starts_with("SCAN json_each")),
                "no table is scanned whole: {plan:#?}"
            );
            assert!(!has("TEMP B-TREE"), "nothing is sorted: {plan:#?}");
            assert!(!has("memory_versions") && !has(" v "), "no version (and no content) is read: {plan:#?}");
        }
        let usage = s.memory_store_usage(&ws, &[big.clone(), small.clone()]).await.unwrap();
        assert_eq!((usage[&big].memories, usage[&big].bytes), (10_000, 100 * (0..100).sum::<u64>()));
        assert_eq!((usage[&small].memories, usage[&small].bytes), (1, 3));
    }
}
