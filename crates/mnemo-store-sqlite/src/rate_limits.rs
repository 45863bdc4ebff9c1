//! Rate-limit buckets' SQL primitives ([`ops::RateLimitSql`]). The writer thread already
//! excludes every other writer, so reading the row is locking it.

use mnemo_store::Result;
use mnemo_store::ops::{self, BucketKey, BucketRow};
use rusqlite::params;

use crate::engine::{Lite, backend, failure, query_one};

impl ops::RateLimitSql for Lite<'_> {
    async fn lock_bucket(&self, key: BucketKey<'_>, missing: BucketRow) -> Result<BucketRow> {
        let k = (key.workspace.as_str(), key.entry, key.limiter.as_str());
        self.prepare_cached(
            "INSERT INTO rate_limit_buckets (workspace_id, entry_id, limiter, tokens, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![k.0, k.1, k.2, missing.micro_tokens, missing.updated_at]))
        .map_err(backend)?;
        query_one(
            self,
            "SELECT tokens, updated_at FROM rate_limit_buckets WHERE workspace_id = ?1 AND entry_id = ?2 AND limiter = ?3",
            params![k.0, k.1, k.2],
            |r| Ok(BucketRow { micro_tokens: r.get(0)?, updated_at: r.get(1)? }),
        )?
        .ok_or_else(|| failure("a rate-limit bucket vanished within its transaction"))
    }

    async fn write_bucket(&self, key: BucketKey<'_>, row: BucketRow) -> Result<()> {
        self.prepare_cached(
            "UPDATE rate_limit_buckets SET tokens = ?4, updated_at = ?5 \
             WHERE workspace_id = ?1 AND entry_id = ?2 AND limiter = ?3",
        )
        .and_then(|mut s| {
            s.execute(params![
                key.workspace.as_str(),
                key.entry,
                key.limiter.as_str(),
                row.micro_tokens,
                row.updated_at
            ])
        })
        .map_err(backend)?;
        Ok(())
    }
}
