//! Console sessions: people signed in to the web console, known by the hash of their cookie's
//! secret, acting as the API key they signed in with.

use mnemo_api::ApiKeyId;
use mnemo_store::{ConsoleSession, CredentialHash, Result, StoreError};
use rusqlite::{Connection, params};

use crate::engine::{backend, query_one};
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

pub(crate) fn create(
    c: &Connection,
    hash: &CredentialHash,
    api_key: &ApiKeyId,
    ttl_seconds: u64,
    now: i64,
) -> Result<ConsoleSession> {
    let key: Option<i64> =
        query_one(c, "SELECT seq FROM api_keys WHERE id = ?1 AND revoked_at IS NULL", [api_key.as_str()], |r| {
            r.get(0)
        })?;
    let key = key.ok_or_else(|| StoreError::not_found("api key", api_key))?;
    let cutoff = now.saturating_sub(KEPT_MICROS);
    c.prepare_cached("DELETE FROM console_sessions WHERE api_key_seq = ?1 AND (expires_at < ?2 OR revoked_at < ?2)")
        .and_then(|mut s| s.execute(params![key, cutoff]))
        .map_err(backend)?;
    let expires = expiry(now, ttl_seconds);
    c.prepare_cached(
        "INSERT INTO console_sessions (secret_hash, api_key_seq, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut s| s.execute(params![&hash[..], key, now, expires]))
    .map_err(backend)?;
    Ok(ConsoleSession { api_key: api_key.clone(), created_at: ts(now), expires_at: ts(expires) })
}

pub(crate) fn find(c: &Connection, hash: &CredentialHash, now: i64) -> Result<Option<ConsoleSession>> {
    let row: Option<(String, i64, i64)> = query_one(
        c,
        "SELECT k.id, s.created_at, s.expires_at FROM console_sessions s JOIN api_keys k ON k.seq = s.api_key_seq \
         WHERE s.secret_hash = ?1 AND s.revoked_at IS NULL AND k.revoked_at IS NULL AND s.expires_at > ?2",
        params![&hash[..], now],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    row.map(|(id, created, expires)| {
        Ok(ConsoleSession { api_key: parse_id(&id)?, created_at: ts(created), expires_at: ts(expires) })
    })
    .transpose()
}

pub(crate) fn revoke(c: &Connection, hash: &CredentialHash, now: i64) -> Result<()> {
    c.prepare_cached("UPDATE console_sessions SET revoked_at = ?1 WHERE secret_hash = ?2 AND revoked_at IS NULL")
        .and_then(|mut s| s.execute(params![now, &hash[..]]))
        .map_err(backend)?;
    Ok(())
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
