//! Version retention as SQL primitives ([`ops::RetentionSql`]; what they mean is
//! [`ops::retention`]'s).

use mnemo_api::{MemoryStoreId, WorkspaceId};
use mnemo_store::ops::retention::AgedVersion;
use mnemo_store::rules::retention::VersionAge;
use mnemo_store::{Result, StoreError, ops};

use crate::engine::{Pg, all, col, exec, one, opt};

impl ops::RetentionSql for Pg<'_, '_> {
    async fn store_seq(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<i64> {
        opt(self, "SELECT seq FROM memory_stores WHERE id = $1 AND workspace_id = $2", &[&id.as_str(), &ws.as_str()])
            .await?
            .map(|r| col(&r, 0))
            .transpose()?
            .ok_or_else(|| StoreError::not_found("memory store", id))
    }

    async fn store_retention_row(&self, seq: i64) -> Result<Option<String>> {
        opt(self, "SELECT version_retention FROM memory_stores WHERE seq = $1", &[&seq])
            .await?
            .map(|r| col::<Option<String>>(&r, 0))
            .transpose()
            .map(Option::flatten)
    }

    async fn set_store_retention_row(&self, seq: i64, retention: Option<&str>) -> Result<()> {
        exec(self, "UPDATE memory_stores SET version_retention = $2 WHERE seq = $1", &[&seq, &retention])
            .await
            .map(drop)
    }

    async fn retention_rows(&self) -> Result<Vec<(String, String, Option<String>)>> {
        all(self, "SELECT workspace_id, id, version_retention FROM memory_stores ORDER BY seq", &[])
            .await?
            .iter()
            .map(|r| Ok((col(r, 0)?, col(r, 1)?, col(r, 2)?)))
            .collect()
    }

    async fn try_hold_purge(&self) -> Result<bool> {
        // Transaction-scoped: one replica's batch at a time; the others skip rather than queue.
        col(
            &one(
                self,
                "SELECT pg_try_advisory_xact_lock(hashtext('mnemo purge ' || current_setting('search_path')))",
                &[],
            )
            .await?,
            0,
        )
    }

    async fn aged_versions(&self, store: i64, after: i64, before: i64, limit: u32) -> Result<Vec<AgedVersion>> {
        all(
            self,
            "SELECT v.seq, v.created_at, COALESCE(m.version_seq = v.seq, false), COALESCE(v.content_size_bytes, 0) \
             FROM memory_versions v LEFT JOIN memories m ON m.id = v.memory_id \
             WHERE v.store_seq = $1 AND v.seq > $2 AND v.created_at < $3 ORDER BY v.seq LIMIT $4",
            &[&store, &after, &before, &i64::from(limit)],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(AgedVersion {
                seq: col(r, 0)?,
                age: VersionAge { created_at: col(r, 1)?, current: col(r, 2)? },
                bytes: col::<i64>(r, 3)?.max(0).unsigned_abs(),
            })
        })
        .collect()
    }

    async fn delete_versions(&self, seqs: &[i64]) -> Result<u64> {
        if seqs.is_empty() {
            return Ok(0);
        }
        exec(self, "DELETE FROM memory_versions WHERE seq = ANY($1)", &[&seqs]).await
    }
}
