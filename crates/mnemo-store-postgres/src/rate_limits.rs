//! Rate-limit buckets' SQL primitives ([`ops::RateLimitSql`]): the row is made to exist, then
//! locked `FOR UPDATE`, so replicas taking from one bucket queue on it.

use mnemo_store::Result;
use mnemo_store::ops::{self, BucketKey, BucketRow};

use crate::engine::{Pg, col, exec, one};

impl ops::RateLimitSql for Pg<'_, '_> {
    async fn lock_bucket(&self, key: BucketKey<'_>, missing: BucketRow) -> Result<BucketRow> {
        let (ws, entry, limiter) = (key.workspace.as_str(), key.entry, key.limiter.as_str());
        exec(
            self,
            "INSERT INTO rate_limit_buckets (workspace_id, entry_id, limiter, tokens, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            &[&ws, &entry, &limiter, &missing.micro_tokens, &missing.updated_at],
        )
        .await?;
        let row = one(
            self,
            "SELECT tokens, updated_at FROM rate_limit_buckets \
             WHERE workspace_id = $1 AND entry_id = $2 AND limiter = $3 FOR UPDATE",
            &[&ws, &entry, &limiter],
        )
        .await?;
        Ok(BucketRow { micro_tokens: col(&row, 0)?, updated_at: col(&row, 1)? })
    }

    async fn write_bucket(&self, key: BucketKey<'_>, row: BucketRow) -> Result<()> {
        exec(
            self,
            "UPDATE rate_limit_buckets SET tokens = $4, updated_at = $5 \
             WHERE workspace_id = $1 AND entry_id = $2 AND limiter = $3",
            &[&key.workspace.as_str(), &key.entry, &key.limiter.as_str(), &row.micro_tokens, &row.updated_at],
        )
        .await
        .map(drop)
    }
}
