//! Console sessions: their rows as SQL primitives ([`ops::ConsoleSql`]; the operations are
//! [`ops::console`]'s). Expiry is judged on the database's clock.

use mnemo_api::ApiKeyId;
use mnemo_store::ops::{self, ConsoleKey, ConsoleRow};
use mnemo_store::{CredentialHash, Result};

use crate::engine::{Pg, col, exec, opt};
use crate::parse_id;

impl ops::ConsoleSql for Pg<'_, '_> {
    async fn hold_api_key(&self, id: &ApiKeyId) -> Result<Option<ConsoleKey>> {
        let row = opt(
            self,
            "SELECT k.seq, k.id, k.workspace_id, k.status, k.expires_at FROM api_keys k WHERE k.id = $1 FOR SHARE",
            &[&id.as_str()],
        )
        .await?;
        row.map(|r| key(&r)).transpose()
    }

    async fn delete_console_sessions_ended_before(&self, key: i64, cutoff: i64) -> Result<()> {
        exec(
            self,
            "DELETE FROM console_sessions WHERE api_key_seq = $1 AND (expires_at < $2 OR revoked_at < $2)",
            &[&key, &cutoff],
        )
        .await
        .map(drop)
    }

    async fn insert_console_session(
        &self,
        hash: &CredentialHash,
        key: i64,
        created_at: i64,
        expires_at: i64,
    ) -> Result<()> {
        exec(
            self,
            "INSERT INTO console_sessions (secret_hash, api_key_seq, created_at, expires_at) VALUES ($1, $2, $3, $4)",
            &[&&hash[..], &key, &created_at, &expires_at],
        )
        .await
        .map(drop)
    }

    async fn find_console_session(&self, hash: &CredentialHash, now: i64) -> Result<Option<ConsoleRow>> {
        let row = opt(
            self,
            "SELECT k.seq, k.id, k.workspace_id, k.status, k.expires_at, s.created_at, s.expires_at \
             FROM console_sessions s JOIN api_keys k ON k.seq = s.api_key_seq \
             WHERE s.secret_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > $2",
            &[&&hash[..], &now],
        )
        .await?;
        row.map(|r| Ok(ConsoleRow { api_key: key(&r)?, created_at: col(&r, 5)?, expires_at: col(&r, 6)? })).transpose()
    }

    async fn revoke_console_session(&self, hash: &CredentialHash, now: i64) -> Result<bool> {
        let ended = exec(
            self,
            "UPDATE console_sessions SET revoked_at = $1 WHERE secret_hash = $2 AND revoked_at IS NULL",
            &[&now, &&hash[..]],
        )
        .await?;
        Ok(ended > 0)
    }
}

/// The key of a console lookup: its first five columns.
fn key(r: &tokio_postgres::Row) -> Result<ConsoleKey> {
    let id: String = col(r, 1)?;
    let status: String = col(r, 3)?;
    let status = mnemo_api::ApiKeyStatus::parse(&status).ok_or_else(|| {
        mnemo_store::StoreError::corrupt("api_keys", &id, "status", format!("unknown status `{status}`"))
    })?;
    Ok(ConsoleKey {
        seq: col(r, 0)?,
        id: parse_id(&id)?,
        workspace: parse_id(&col::<String>(r, 2)?)?,
        status,
        expires_at: col(r, 4)?,
    })
}
