//! Credentials: API keys and the lookups of every credential by its secret's hash, as SQL
//! primitives ([`ops::CredentialSql`]; which lookup wins is [`ops::credentials`]'s).

use mnemo_api::{ApiKeyId, EnvironmentId, EnvironmentKeyId};
use mnemo_store::ops;
use mnemo_store::{CredentialHash, Result};
use rusqlite::params;

use crate::engine::{Lite, backend, query_one};
use crate::{environments, parse_id};

impl ops::CredentialSql for Lite<'_> {
    async fn api_key_by_hash(&self, hash: &CredentialHash, live: bool) -> Result<Option<ApiKeyId>> {
        let id: Option<String> = query_one(
            self,
            "SELECT id FROM api_keys WHERE secret_hash = ?1 AND (NOT ?2 OR revoked_at IS NULL)",
            params![&hash[..], live],
            |r| r.get(0),
        )?;
        id.as_deref().map(parse_id).transpose()
    }

    async fn insert_api_key_unless_known(
        &self,
        id: &ApiKeyId,
        hash: &CredentialHash,
        label: &str,
        now: i64,
    ) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO api_keys (id, secret_hash, label, created_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (secret_hash) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![id.as_str(), &hash[..], label, now]))
        .map_err(backend)?;
        Ok(())
    }

    async fn count_live_api_keys(&self) -> Result<u64> {
        self.prepare_cached("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(backend)
    }

    async fn environment_key_by_hash(
        &self,
        hash: &CredentialHash,
    ) -> Result<Option<(EnvironmentKeyId, EnvironmentId)>> {
        environments::find_key(self, hash)
    }
}
