//! Console sessions: their rows as SQL primitives ([`ops::ConsoleSql`]; the operations are
//! [`ops::console`]'s).

use mnemo_api::ApiKeyId;
use mnemo_store::ops::{self, ConsoleKey, ConsoleRow};
use mnemo_store::{CredentialHash, Result};
use rusqlite::params;

use crate::engine::{Lite, backend, query_one};
use crate::parse_id;

impl ops::ConsoleSql for Lite<'_> {
    async fn hold_api_key(&self, id: &ApiKeyId) -> Result<Option<ConsoleKey>> {
        // The single writer excludes every other writer: reading is holding.
        let row = query_one(
            self,
            "SELECT k.seq, k.id, k.workspace_id, k.status, k.expires_at FROM api_keys k WHERE k.id = ?1",
            [id.as_str()],
            KeyColumns::read,
        )?;
        row.map(KeyColumns::decode).transpose()
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
        let row = query_one(
            self,
            "SELECT k.seq, k.id, k.workspace_id, k.status, k.expires_at, s.created_at, s.expires_at \
             FROM console_sessions s JOIN api_keys k ON k.seq = s.api_key_seq \
             WHERE s.secret_hash = ?1 AND s.revoked_at IS NULL AND s.expires_at > ?2",
            params![&hash[..], now],
            |r| Ok((KeyColumns::read(r)?, r.get(5)?, r.get(6)?)),
        )?;
        row.map(|(key, created_at, expires_at)| Ok(ConsoleRow { api_key: key.decode()?, created_at, expires_at }))
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

/// The key columns of a console lookup, as read.
struct KeyColumns(i64, String, String, String, Option<i64>);

impl KeyColumns {
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self(r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    }

    fn decode(self) -> Result<ConsoleKey> {
        let Self(seq, id, workspace, status, expires_at) = self;
        let status = mnemo_api::ApiKeyStatus::parse(&status).ok_or_else(|| {
            mnemo_store::StoreError::corrupt("api_keys", &id, "status", format!("unknown status `{status}`"))
        })?;
        Ok(ConsoleKey { seq, id: parse_id(&id)?, workspace: parse_id(&workspace)?, status, expires_at })
    }
}
