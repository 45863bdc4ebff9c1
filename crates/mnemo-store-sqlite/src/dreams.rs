//! Dreams as SQL primitives ([`ops::DreamSql`]; what they mean is [`ops::dreams`]'s).

use mnemo_api::{Actor, DreamId, DreamStatus, MemoryStoreId, WorkspaceId};
use mnemo_store::ops::dreams::{DreamRow, ListDreams};
use mnemo_store::{Result, ops};
use rusqlite::params;

use crate::engine::{Lite, backend, query_all, query_one};

const COLUMNS: &str = "seq, workspace_id, body, lease_holder, lease_expires_at, idempotency_key, request_sha256";

type Raw = (i64, String, String, Option<String>, Option<i64>, Option<String>, Option<String>);

fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
}

fn decode((seq, ws, body, holder, expires, key, sha): Raw) -> Result<DreamRow> {
    DreamRow::decode(seq, &ws, &body, (holder, expires), (key, sha))
}

/// Statuses as the JSON array `json_each` reads.
fn names(statuses: &[DreamStatus]) -> Result<String> {
    serde_json::to_string(&statuses.iter().map(|s| s.as_str()).collect::<Vec<_>>()).map_err(backend)
}

fn decode_all(rows: Vec<Raw>) -> Result<Vec<DreamRow>> {
    rows.into_iter().map(decode).collect()
}

impl ops::DreamSql for Lite<'_> {
    async fn insert_dream(&self, row: &DreamRow) -> Result<i64> {
        let c = row.columns()?;
        self.prepare_cached(
            "INSERT INTO dreams (id, workspace_id, status, input_store_id, update_existing, output_store_id, \
             session_id, created_at, archived_at, lease_holder, lease_expires_at, idempotency_key, request_sha256, body) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        )
        .and_then(|mut s| {
            s.execute(params![
                c.id,
                c.workspace_id,
                c.status,
                c.input_store_id,
                c.update_existing,
                c.output_store_id,
                c.session_id,
                c.created_at,
                c.archived_at,
                c.lease_holder,
                c.lease_expires_at,
                c.idempotency_key,
                c.request_sha256,
                c.body
            ])
        })
        .map_err(backend)?;
        Ok(self.last_insert_rowid())
    }

    async fn find_dream(&self, ws: &WorkspaceId, id: &DreamId) -> Result<Option<DreamRow>> {
        query_one(
            self,
            &format!("SELECT {COLUMNS} FROM dreams WHERE id = ?1 AND workspace_id = ?2"),
            [id.as_str(), ws.as_str()],
            read,
        )?
        .map(decode)
        .transpose()
    }

    async fn lock_dream(&self, ws: &WorkspaceId, id: &DreamId) -> Result<Option<DreamRow>> {
        // The one writer thread already excludes every other writer.
        self.find_dream(ws, id).await
    }

    async fn write_dream(&self, row: &DreamRow) -> Result<()> {
        let c = row.columns()?;
        self.prepare_cached(
            "UPDATE dreams SET status = ?2, output_store_id = ?3, session_id = ?4, archived_at = ?5, \
             lease_holder = ?6, lease_expires_at = ?7, body = ?8 WHERE seq = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                row.seq,
                c.status,
                c.output_store_id,
                c.session_id,
                c.archived_at,
                c.lease_holder,
                c.lease_expires_at,
                c.body
            ])
        })
        .map(drop)
        .map_err(backend)
    }

    async fn list_dream_rows(&self, ws: &WorkspaceId, q: &ListDreams) -> Result<Vec<DreamRow>> {
        let before = mnemo_store::row::before(q.after.as_ref())?;
        let statuses = names(&q.statuses)?;
        decode_all(query_all(
            self,
            &format!(
                "SELECT {COLUMNS} FROM dreams WHERE workspace_id = ?1 AND seq < ?2 AND (?3 OR archived_at IS NULL) \
                   AND (?4 = '[]' OR status IN (SELECT value FROM json_each(?4))) \
                   AND created_at >= ?5 AND created_at <= ?6 ORDER BY seq DESC LIMIT ?7"
            ),
            params![
                ws.as_str(),
                before,
                q.include_archived,
                statuses,
                q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
                q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
                i64::from(q.limit) + 1
            ],
            read,
        )?)
    }

    async fn count_dreams(&self, ws: &WorkspaceId, status: DreamStatus) -> Result<u64> {
        let n: i64 = query_one(
            self,
            "SELECT count(*) FROM dreams WHERE workspace_id = ?1 AND status = ?2",
            [ws.as_str(), status.as_str()],
            |r| r.get(0),
        )?
        .unwrap_or(0);
        Ok(n.unsigned_abs())
    }

    async fn update_dreams_on(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        statuses: &[DreamStatus],
    ) -> Result<Vec<DreamRow>> {
        decode_all(query_all(
            self,
            &format!(
                "SELECT {COLUMNS} FROM dreams WHERE workspace_id = ?1 AND input_store_id = ?2 AND update_existing \
                   AND (status IN (SELECT value FROM json_each(?3)) OR lease_holder IS NOT NULL)"
            ),
            params![ws.as_str(), store.as_str(), names(statuses)?],
            read,
        )?)
    }

    async fn runnable_dreams(
        &self,
        now: i64,
        statuses: &[DreamStatus],
        limit: u32,
    ) -> Result<Vec<(WorkspaceId, DreamId)>> {
        let rows: Vec<(String, String)> = query_all(
            self,
            "SELECT workspace_id, id FROM dreams WHERE status IN (SELECT value FROM json_each(?2)) \
               AND (lease_expires_at IS NULL OR lease_expires_at <= ?1) ORDER BY seq LIMIT ?3",
            params![now, names(statuses)?, limit],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        rows.into_iter()
            .map(|(ws, id)| Ok((mnemo_store::row::parse_id(&ws)?, mnemo_store::row::parse_id(&id)?)))
            .collect()
    }

    async fn held_dreams(&self, now: i64, statuses: &[DreamStatus]) -> Result<u64> {
        let n: i64 = query_one(
            self,
            "SELECT count(*) FROM dreams WHERE status IN (SELECT value FROM json_each(?2)) AND lease_expires_at > ?1",
            params![now, names(statuses)?],
            |r| r.get(0),
        )?
        .unwrap_or(0);
        Ok(n.unsigned_abs())
    }

    async fn dream_by_idempotency_key(&self, ws: &WorkspaceId, key: &str) -> Result<Option<DreamRow>> {
        query_one(
            self,
            &format!("SELECT {COLUMNS} FROM dreams WHERE workspace_id = ?1 AND idempotency_key = ?2"),
            [ws.as_str(), key],
            read,
        )?
        .map(decode)
        .transpose()
    }

    async fn store_contents(&self, store: i64) -> Result<Vec<(String, String)>> {
        query_all(
            self,
            "SELECT m.path, COALESCE(v.content, '') FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
             WHERE m.store_seq = ?1 ORDER BY m.path",
            [store],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    async fn versions_by(&self, store: i64, actor: &Actor) -> Result<u64> {
        let (kind, id) = mnemo_store::row::actor_columns(actor);
        let n: i64 = query_one(
            self,
            "SELECT count(*) FROM memory_versions WHERE store_seq = ?1 AND actor_kind = ?2 AND actor_id = ?3",
            params![store, kind, id],
            |r| r.get(0),
        )?
        .unwrap_or(0);
        Ok(n.unsigned_abs())
    }

    async fn active_dream_using(
        &self,
        ws: &WorkspaceId,
        id: &str,
        statuses: &[DreamStatus],
    ) -> Result<Option<DreamId>> {
        let found: Option<String> = query_one(
            self,
            "SELECT id FROM dreams WHERE workspace_id = ?1 AND status IN (SELECT value FROM json_each(?3)) \
               AND ((output_store_id = ?2 AND NOT update_existing) OR session_id = ?2) LIMIT 1",
            params![ws.as_str(), id, names(statuses)?],
            |r| r.get(0),
        )?;
        found.map(|id| mnemo_store::row::parse_id(&id)).transpose()
    }
}
