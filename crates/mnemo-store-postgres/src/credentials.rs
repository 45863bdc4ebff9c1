//! Credentials: API keys and the lookups of every credential by its secret's hash, as SQL
//! primitives ([`ops::CredentialSql`]; which lookup wins is [`ops::credentials`]'s).

use mnemo_api::{ApiKeyId, EnvironmentId, EnvironmentKeyId};
use mnemo_store::ops;
use mnemo_store::{CredentialHash, Result, StoreError};

use crate::engine::{Pg, col, exec, one, opt};
use crate::{environments, parse_id};

impl ops::CredentialSql for Pg<'_, '_> {
    async fn api_key_by_hash(&self, hash: &CredentialHash, live: bool) -> Result<Option<ApiKeyId>> {
        let row = opt(
            self,
            "SELECT id FROM api_keys WHERE secret_hash = $1 AND (NOT $2 OR revoked_at IS NULL)",
            &[&&hash[..], &live],
        )
        .await?;
        row.map(|r| parse_id(&col::<String>(&r, 0)?)).transpose()
    }

    async fn insert_api_key_unless_known(
        &self,
        id: &ApiKeyId,
        hash: &CredentialHash,
        label: &str,
        now: i64,
    ) -> Result<()> {
        exec(
            self,
            "INSERT INTO api_keys (id, secret_hash, label, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (secret_hash) DO NOTHING",
            &[&id.as_str(), &&hash[..], &label, &now],
        )
        .await
        .map(drop)
    }

    async fn count_live_api_keys(&self) -> Result<u64> {
        let row = one(self, "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL", &[]).await?;
        let n: i64 = col(&row, 0)?;
        u64::try_from(n).map_err(|_| StoreError::backend(format!("a count of {n} API keys")))
    }

    async fn environment_key_by_hash(
        &self,
        hash: &CredentialHash,
    ) -> Result<Option<(EnvironmentKeyId, EnvironmentId)>> {
        environments::find_key(self, hash).await
    }
}
