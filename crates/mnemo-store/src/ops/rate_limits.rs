//! Rate-limit buckets where every replica sees them (admin-api.md §8.9): one row per
//! (workspace, entry, limiter), read locked, refilled and taken from by
//! [`crate::rules::rate_limit::take`], and written back in one transaction. Two replicas
//! taking from one bucket queue on its row lock, so together they admit no more than one
//! process would: N plus the refill of the window.

use mnemo_api::{LimiterType, WorkspaceId};

use super::{Clock, Micros};
use crate::Result;
use crate::rules::rate_limit::{self, Bucket, Draw, Outcome};

/// Stored tokens are integers in millionths of a token, so every backend keeps them exactly
/// (and `mnemo db copy` moves them as integers).
const SCALE: f64 = 1_000_000.0;

/// One bucket's key.
#[derive(Debug, Clone, Copy)]
pub struct BucketKey<'a> {
    pub workspace: &'a WorkspaceId,
    /// A catalogue entry's id (`ratelimit_api`).
    pub entry: &'a str,
    pub limiter: &'a LimiterType,
}

/// A bucket as stored: tokens in millionths, and the time they were counted at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketRow {
    pub micro_tokens: i64,
    pub updated_at: Micros,
}

impl BucketRow {
    fn decode(self) -> Bucket {
        Bucket { tokens: self.micro_tokens as f64 / SCALE, updated_at: self.updated_at }
    }

    fn encode(bucket: Bucket) -> Self {
        // Rounded to the millionth: a bucket refilled to exactly one token stays one.
        Self { micro_tokens: (bucket.tokens * SCALE).round() as i64, updated_at: bucket.updated_at }
    }
}

/// SQL over the buckets.
pub trait RateLimitSql: Clock {
    /// The bucket `key`, its row locked until the transaction ends (PostgreSQL `FOR UPDATE`);
    /// a missing row is inserted as `missing` first (without failing when another transaction
    /// inserts it at once), so there is always a row to lock.
    async fn lock_bucket(&self, key: BucketKey<'_>, missing: BucketRow) -> Result<BucketRow>;
    /// Writes the bucket `key` (which [`Self::lock_bucket`] locked).
    async fn write_bucket(&self, key: BucketKey<'_>, row: BucketRow) -> Result<()>;
}

/// Draws `draw` from the bucket `key` of capacity `capacity` per minute, judged by the store's
/// clock once the row is locked (so a replica that waited for the lock counts after the one it
/// waited for). A refused draw still stores the refilled state.
pub async fn take<S: RateLimitSql>(sql: &S, key: BucketKey<'_>, capacity: u64, draw: Draw) -> Result<Outcome> {
    // Counted "long ago" at capacity: full, whatever the clock says now.
    let full = BucketRow { micro_tokens: (capacity as f64 * SCALE).round() as i64, updated_at: 0 };
    let stored = sql.lock_bucket(key, full).await?;
    let now = sql.now().await?;
    let (next, outcome) = rate_limit::take(Some(stored.decode()), capacity, now, draw);
    sql.write_bucket(key, BucketRow::encode(next)).await?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_tokens_round_trip_to_the_millionth() {
        #[rustfmt::skip]
        let rows: Vec<(&str, f64, i64)> = vec![
            ("a whole token", 1.0, 1_000_000),
            ("nothing", 0.0, 0),
            ("a refill just short of one rounds up to it", 0.999_999_9, 1_000_000),
            ("a fraction", 12.345_678, 12_345_678),
        ];
        for (rule, tokens, stored) in rows {
            let row = BucketRow::encode(Bucket { tokens, updated_at: 7 });
            assert_eq!(row, BucketRow { micro_tokens: stored, updated_at: 7 }, "rule: {rule}");
            assert!((row.decode().tokens - tokens).abs() < 1e-6, "rule: {rule}");
        }
    }
}
