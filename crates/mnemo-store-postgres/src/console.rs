//! Console sessions: people signed in to the web console, known by the hash of their cookie's
//! secret, acting as the API key they signed in with. Expiry is judged by the database's clock.

use mnemo_api::ApiKeyId;
use mnemo_store::{ConsoleSession, CredentialHash, Result, StoreError};

use crate::engine::{Tx, col, exec, now, opt};
use crate::{parse_id, ts};

/// How long an expired or revoked session is kept before a sign-in by its key deletes it.
const KEPT_MICROS: i64 = 24 * 60 * 60 * 1_000_000;

/// When a session started at `now` with `ttl_seconds` ends (far in the future for an absurd
/// TTL, never before `now`).
fn expiry(now: i64, ttl_seconds: u64) -> i64 {
    // Year 9999: beyond it a timestamp cannot be shown.
    const LATEST: i64 = 253_402_300_799_000_000;
    let ttl = i64::try_from(ttl_seconds).unwrap_or(i64::MAX).saturating_mul(1_000_000);
    now.saturating_add(ttl).min(LATEST.max(now))
}

/// Starts a session for a live API key (locked against a concurrent revocation), first deleting
/// that key's sessions that ended more than a day ago.
pub(crate) async fn create(
    tx: &Tx<'_>,
    hash: &CredentialHash,
    api_key: &ApiKeyId,
    ttl_seconds: u64,
) -> Result<ConsoleSession> {
    let key = opt(tx, "SELECT seq FROM api_keys WHERE id = $1 AND revoked_at IS NULL FOR SHARE", &[&api_key.as_str()])
        .await?
        .ok_or_else(|| StoreError::not_found("api key", api_key))?;
    let key: i64 = col(&key, 0)?;
    let now = now(tx).await?;
    let cutoff = now.saturating_sub(KEPT_MICROS);
    exec(
        tx,
        "DELETE FROM console_sessions WHERE api_key_seq = $1 AND (expires_at < $2 OR revoked_at < $2)",
        &[&key, &cutoff],
    )
    .await?;
    let expires = expiry(now, ttl_seconds);
    exec(
        tx,
        "INSERT INTO console_sessions (secret_hash, api_key_seq, created_at, expires_at) VALUES ($1, $2, $3, $4)",
        &[&&hash[..], &key, &now, &expires],
    )
    .await?;
    Ok(ConsoleSession { api_key: api_key.clone(), created_at: ts(now), expires_at: ts(expires) })
}

pub(crate) async fn find(tx: &Tx<'_>, hash: &CredentialHash) -> Result<Option<ConsoleSession>> {
    let now = now(tx).await?;
    let row = opt(
        tx,
        "SELECT k.id, s.created_at, s.expires_at FROM console_sessions s JOIN api_keys k ON k.seq = s.api_key_seq \
         WHERE s.secret_hash = $1 AND s.revoked_at IS NULL AND k.revoked_at IS NULL AND s.expires_at > $2",
        &[&&hash[..], &now],
    )
    .await?;
    row.map(|r| {
        Ok(ConsoleSession {
            api_key: parse_id(&col::<String>(&r, 0)?)?,
            created_at: ts(col(&r, 1)?),
            expires_at: ts(col(&r, 2)?),
        })
    })
    .transpose()
}

/// Ends a live session; whether one was ended.
pub(crate) async fn revoke(tx: &Tx<'_>, hash: &CredentialHash) -> Result<bool> {
    let now = now(tx).await?;
    let ended = exec(
        tx,
        "UPDATE console_sessions SET revoked_at = $1 WHERE secret_hash = $2 AND revoked_at IS NULL",
        &[&now, &&hash[..]],
    )
    .await?;
    Ok(ended > 0)
}

#[cfg(test)]
mod tests {
    use super::expiry;

    #[test]
    fn an_absurd_ttl_still_expires_at_a_showable_time() {
        assert_eq!(expiry(5, 2), 2_000_005);
        assert_eq!(expiry(5, 0), 5);
        let far = expiry(5, u64::MAX);
        assert!(mnemo_store::row::ts(far).timestamp() > 0);
    }
}
