//! Dreams as SQL primitives ([`ops::DreamSql`]; what they mean is [`ops::dreams`]'s).

use mnemo_api::{Actor, DreamId, DreamStatus, MemoryStoreId, WorkspaceId};
use mnemo_store::ops::dreams::{DreamRow, ListDreams};
use mnemo_store::{Result, ops};
use tokio_postgres::Row;

use crate::engine::{Pg, all, col, exec, one, opt, text_bytes};

const COLUMNS: &str = "seq, workspace_id, body, lease_holder, lease_expires_at, idempotency_key, request_sha256";

fn decode(r: &Row) -> Result<DreamRow> {
    DreamRow::decode(
        col(r, 0)?,
        &col::<String>(r, 1)?,
        &col::<String>(r, 2)?,
        (col(r, 3)?, col(r, 4)?),
        (col(r, 5)?, col(r, 6)?),
    )
}

fn names(statuses: &[DreamStatus]) -> Vec<&'static str> {
    statuses.iter().map(|s| s.as_str()).collect()
}

fn count(r: &Row) -> Result<u64> {
    Ok(col::<i64>(r, 0)?.unsigned_abs())
}

impl ops::DreamSql for Pg<'_, '_> {
    async fn insert_dream(&self, row: &DreamRow) -> Result<i64> {
        let c = row.columns()?;
        col(
            &one(
                self,
                "INSERT INTO dreams (id, workspace_id, status, input_store_id, update_existing, output_store_id, \
                 session_id, created_at, archived_at, lease_holder, lease_expires_at, idempotency_key, request_sha256, body) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING seq",
                &[
                    &c.id,
                    &c.workspace_id,
                    &c.status,
                    &c.input_store_id,
                    &c.update_existing,
                    &c.output_store_id,
                    &c.session_id,
                    &c.created_at,
                    &c.archived_at,
                    &c.lease_holder,
                    &c.lease_expires_at,
                    &c.idempotency_key,
                    &c.request_sha256,
                    &c.body,
                ],
            )
            .await?,
            0,
        )
    }

    async fn find_dream(&self, ws: &WorkspaceId, id: &DreamId) -> Result<Option<DreamRow>> {
        opt(
            self,
            &format!("SELECT {COLUMNS} FROM dreams WHERE id = $1 AND workspace_id = $2"),
            &[&id.as_str(), &ws.as_str()],
        )
        .await?
        .as_ref()
        .map(decode)
        .transpose()
    }

    async fn lock_dream(&self, ws: &WorkspaceId, id: &DreamId) -> Result<Option<DreamRow>> {
        opt(
            self,
            &format!("SELECT {COLUMNS} FROM dreams WHERE id = $1 AND workspace_id = $2 FOR UPDATE"),
            &[&id.as_str(), &ws.as_str()],
        )
        .await?
        .as_ref()
        .map(decode)
        .transpose()
    }

    async fn write_dream(&self, row: &DreamRow) -> Result<()> {
        let c = row.columns()?;
        exec(
            self,
            "UPDATE dreams SET status = $2, output_store_id = $3, session_id = $4, archived_at = $5, \
             lease_holder = $6, lease_expires_at = $7, body = $8 WHERE seq = $1",
            &[
                &row.seq,
                &c.status,
                &c.output_store_id,
                &c.session_id,
                &c.archived_at,
                &c.lease_holder,
                &c.lease_expires_at,
                &c.body,
            ],
        )
        .await
        .map(drop)
    }

    async fn list_dream_rows(&self, ws: &WorkspaceId, q: &ListDreams) -> Result<Vec<DreamRow>> {
        let before = mnemo_store::row::before(q.after.as_ref())?;
        let statuses = names(&q.statuses);
        let limit = i64::from(q.limit) + 1;
        let after = q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros());
        let until = q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros());
        all(
            self,
            &format!(
                "SELECT {COLUMNS} FROM dreams WHERE workspace_id = $1 AND seq < $2 AND ($3 OR archived_at IS NULL) \
                   AND (cardinality($4::text[]) = 0 OR status = ANY($4)) \
                   AND created_at >= $5 AND created_at <= $6 ORDER BY seq DESC LIMIT $7"
            ),
            &[&ws.as_str(), &before, &q.include_archived, &statuses, &after, &until, &limit],
        )
        .await?
        .iter()
        .map(decode)
        .collect()
    }

    async fn count_dreams(&self, ws: &WorkspaceId, status: DreamStatus) -> Result<u64> {
        count(
            &one(
                self,
                "SELECT count(*) FROM dreams WHERE workspace_id = $1 AND status = $2",
                &[&ws.as_str(), &status.as_str()],
            )
            .await?,
        )
    }

    async fn update_dreams_on(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        statuses: &[DreamStatus],
    ) -> Result<Vec<DreamRow>> {
        all(
            self,
            &format!(
                "SELECT {COLUMNS} FROM dreams WHERE workspace_id = $1 AND input_store_id = $2 AND update_existing \
                   AND (status = ANY($3) OR lease_holder IS NOT NULL)"
            ),
            &[&ws.as_str(), &store.as_str(), &names(statuses)],
        )
        .await?
        .iter()
        .map(decode)
        .collect()
    }

    async fn runnable_dreams(
        &self,
        now: i64,
        statuses: &[DreamStatus],
        limit: u32,
    ) -> Result<Vec<(WorkspaceId, DreamId)>> {
        all(
            self,
            "SELECT workspace_id, id FROM dreams WHERE status = ANY($2) \
               AND (lease_expires_at IS NULL OR lease_expires_at <= $1) ORDER BY seq LIMIT $3",
            &[&now, &names(statuses), &i64::from(limit)],
        )
        .await?
        .iter()
        .map(|r| {
            Ok((mnemo_store::row::parse_id(&col::<String>(r, 0)?)?, mnemo_store::row::parse_id(&col::<String>(r, 1)?)?))
        })
        .collect()
    }

    async fn held_dreams(&self, now: i64, statuses: &[DreamStatus]) -> Result<u64> {
        count(
            &one(
                self,
                "SELECT count(*) FROM dreams WHERE status = ANY($2) AND lease_expires_at > $1",
                &[&now, &names(statuses)],
            )
            .await?,
        )
    }

    async fn dream_by_idempotency_key(&self, ws: &WorkspaceId, key: &str) -> Result<Option<DreamRow>> {
        opt(
            self,
            &format!("SELECT {COLUMNS} FROM dreams WHERE workspace_id = $1 AND idempotency_key = $2"),
            &[&ws.as_str(), &key],
        )
        .await?
        .as_ref()
        .map(decode)
        .transpose()
    }

    async fn store_contents(&self, store: i64) -> Result<Vec<(String, String)>> {
        all(
            self,
            "SELECT m.path, v.content FROM memories m JOIN memory_versions v ON v.seq = m.version_seq \
             WHERE m.store_seq = $1 ORDER BY m.path COLLATE \"C\"",
            &[&store],
        )
        .await?
        .iter()
        .map(|r| Ok((col(r, 0)?, text_bytes(r, 1)?.unwrap_or_default())))
        .collect()
    }

    async fn versions_by(&self, store: i64, actor: &Actor) -> Result<u64> {
        let (kind, id) = mnemo_store::row::actor_columns(actor);
        count(
            &one(
                self,
                "SELECT count(*) FROM memory_versions WHERE store_seq = $1 AND actor_kind = $2 AND actor_id = $3",
                &[&store, &kind, &id],
            )
            .await?,
        )
    }

    async fn active_dream_using(
        &self,
        ws: &WorkspaceId,
        id: &str,
        statuses: &[DreamStatus],
    ) -> Result<Option<DreamId>> {
        opt(
            self,
            "SELECT id FROM dreams WHERE workspace_id = $1 AND status = ANY($3) \
               AND ((output_store_id = $2 AND NOT update_existing) OR session_id = $2) LIMIT 1",
            &[&ws.as_str(), &id, &names(statuses)],
        )
        .await?
        .map(|r| mnemo_store::row::parse_id(&col::<String>(&r, 0)?))
        .transpose()
    }
}
