//! Console sessions: their rows as SQL primitives ([`ops::ConsoleSql`]; the operations are
//! [`ops::console`]'s).

use mnemo_api::ApiKeyId;
use mnemo_store::ops::{self, ConsoleRow};
use mnemo_store::{CredentialHash, Result};
use rusqlite::params;

use crate::engine::{Lite, backend, query_one};
use crate::parse_id;

impl ops::ConsoleSql for Lite<'_> {
    async fn hold_live_api_key(&self, id: &ApiKeyId) -> Result<Option<i64>> {
        // The single writer excludes every other writer: reading is holding.
        query_one(self, "SELECT seq FROM api_keys WHERE id = ?1 AND revoked_at IS NULL", [id.as_str()], |r| r.get(0))
    }

    async fn delete_console_sessions_ended_before(&self, key: i64, cutoff: i64) -> Result<()> {
        self.prepare_cached(
            "DELETE FROM console_sessions WHERE api_key_seq = ?1 AND (expires_at < ?2 OR revoked_at < ?2)",
        )
        .and_then(|mut s| s.execute(params![key, cutoff]))
        .map_err(backend)?;
        Ok(())
    }

    async fn insert_console_session(
        &self,
        hash: &CredentialHash,
        key: i64,
        created_at: i64,
        expires_at: i64,
    ) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO console_sessions (secret_hash, api_key_seq, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![&hash[..], key, created_at, expires_at]))
        .map_err(backend)?;
        Ok(())
    }

    async fn find_console_session(&self, hash: &CredentialHash, now: i64) -> Result<Option<ConsoleRow>> {
        let row: Option<(String, i64, i64)> = query_one(
            self,
            "SELECT k.id, s.created_at, s.expires_at FROM console_sessions s JOIN api_keys k ON k.seq = s.api_key_seq \
             WHERE s.secret_hash = ?1 AND s.revoked_at IS NULL AND k.revoked_at IS NULL AND s.expires_at > ?2",
            params![&hash[..], now],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        row.map(|(id, created_at, expires_at)| Ok(ConsoleRow { api_key: parse_id(&id)?, created_at, expires_at }))
            .transpose()
    }

    async fn revoke_console_session(&self, hash: &CredentialHash, now: i64) -> Result<bool> {
        let ended = self
            .prepare_cached("UPDATE console_sessions SET revoked_at = ?1 WHERE secret_hash = ?2 AND revoked_at IS NULL")
            .and_then(|mut s| s.execute(params![now, &hash[..]]))
            .map_err(backend)?;
        Ok(ended > 0)
    }
}
