//! Console sessions: their rows as SQL primitives ([`ops::ConsoleSql`]; the operations are
//! [`ops::console`]'s). Expiry is judged on the database's clock.

use mnemo_api::ApiKeyId;
use mnemo_store::ops::{self, ConsoleRow};
use mnemo_store::{CredentialHash, Result};

use crate::engine::{Pg, col, exec, opt};
use crate::parse_id;

impl ops::ConsoleSql for Pg<'_, '_> {
    async fn hold_live_api_key(&self, id: &ApiKeyId) -> Result<Option<i64>> {
        let row = opt(self, "SELECT seq FROM api_keys WHERE id = $1 AND revoked_at IS NULL FOR SHARE", &[&id.as_str()])
            .await?;
        row.map(|r| col(&r, 0)).transpose()
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
            "SELECT k.id, s.created_at, s.expires_at FROM console_sessions s JOIN api_keys k ON k.seq = s.api_key_seq \
             WHERE s.secret_hash = $1 AND s.revoked_at IS NULL AND k.revoked_at IS NULL AND s.expires_at > $2",
            &[&&hash[..], &now],
        )
        .await?;
        row.map(|r| {
            Ok(ConsoleRow {
                api_key: parse_id(&col::<String>(&r, 0)?)?,
                created_at: col(&r, 1)?,
                expires_at: col(&r, 2)?,
            })
        })
        .transpose()
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
