//! Version retention as SQL primitives ([`ops::RetentionSql`]; what they mean is
//! [`ops::retention`]'s).

use mnemo_api::{MemoryStoreId, WorkspaceId};
use mnemo_store::ops::retention::AgedVersion;
use mnemo_store::rules::retention::VersionAge;
use mnemo_store::{Result, StoreError, ops};
use rusqlite::params;

use crate::engine::{Lite, backend, query_all, query_one};

impl ops::RetentionSql for Lite<'_> {
    async fn store_seq(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<i64> {
        query_one(
            self,
            "SELECT seq FROM memory_stores WHERE id = ?1 AND workspace_id = ?2",
            [id.as_str(), ws.as_str()],
            |r| r.get(0),
        )?
        .ok_or_else(|| StoreError::not_found("memory store", id))
    }

    async fn store_retention_row(&self, seq: i64) -> Result<Option<String>> {
        Ok(query_one(self, "SELECT version_retention FROM memory_stores WHERE seq = ?1", [seq], |r| r.get(0))?
            .flatten())
    }

    async fn set_store_retention_row(&self, seq: i64, retention: Option<&str>) -> Result<()> {
        self.prepare_cached("UPDATE memory_stores SET version_retention = ?2 WHERE seq = ?1")
            .and_then(|mut s| s.execute(params![seq, retention]))
            .map(drop)
            .map_err(backend)
    }

    async fn retention_rows(&self) -> Result<Vec<(String, String, Option<String>)>> {
        query_all(self, "SELECT workspace_id, id, version_retention FROM memory_stores ORDER BY seq", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
    }

    async fn try_hold_purge(&self) -> Result<bool> {
        // The one writer thread already excludes every other writer.
        Ok(true)
    }

    async fn aged_versions(&self, store: i64, after: i64, before: i64, limit: u32) -> Result<Vec<AgedVersion>> {
        query_all(
            self,
            "SELECT v.seq, v.created_at, COALESCE(m.version_seq = v.seq, 0), COALESCE(v.content_size_bytes, 0) \
             FROM memory_versions v LEFT JOIN memories m ON m.id = v.memory_id \
             WHERE v.store_seq = ?1 AND v.seq > ?2 AND v.created_at < ?3 ORDER BY v.seq LIMIT ?4",
            params![store, after, before, limit],
            |r| {
                Ok(AgedVersion {
                    seq: r.get(0)?,
                    age: VersionAge { created_at: r.get(1)?, current: r.get(2)? },
                    bytes: r.get::<_, i64>(3)?.max(0).unsigned_abs(),
                })
            },
        )
    }

    async fn delete_versions(&self, seqs: &[i64]) -> Result<u64> {
        let mut stmt = self.prepare_cached("DELETE FROM memory_versions WHERE seq = ?1").map_err(backend)?;
        let mut deleted = 0;
        for seq in seqs {
            deleted += stmt.execute([seq]).map_err(backend)? as u64;
        }
        Ok(deleted)
    }
}
