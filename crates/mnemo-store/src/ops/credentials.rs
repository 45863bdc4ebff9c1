//! Credentials: API keys, and the lookup order by which a presented secret's hash is resolved.

use mnemo_api::{ApiKeyId, EnvironmentId, EnvironmentKeyId};

use super::work::WorkSql;
use super::{Clock, Micros};
use crate::{Credential, CredentialHash, Result};

/// SQL over API keys, and the lookups of every kind of credential by its secret's hash.
pub trait CredentialSql: Clock {
    /// The API key with secret `hash`, unless it is revoked (`live`).
    async fn api_key_by_hash(&self, hash: &CredentialHash, live: bool) -> Result<Option<ApiKeyId>>;
    /// Records an API key unless one with secret `hash` exists.
    async fn insert_api_key_unless_known(
        &self,
        id: &ApiKeyId,
        hash: &CredentialHash,
        label: &str,
        now: Micros,
    ) -> Result<()>;
    /// How many API keys are not revoked.
    async fn count_live_api_keys(&self) -> Result<u64>;
    /// The environment key with secret `hash` that is not revoked, and its environment.
    async fn environment_key_by_hash(&self, hash: &CredentialHash)
    -> Result<Option<(EnvironmentKeyId, EnvironmentId)>>;
}

/// The live API key with secret `hash`.
pub async fn find_api_key<S: CredentialSql>(sql: &S, hash: &CredentialHash) -> Result<Option<ApiKeyId>> {
    sql.api_key_by_hash(hash, true).await
}

/// The API key with secret `hash`, created with `label` if there is none (revoked or not: a
/// revoked secret stays revoked).
pub async fn ensure_api_key<S: CredentialSql>(sql: &S, hash: &CredentialHash, label: &str) -> Result<ApiKeyId> {
    let fresh = ApiKeyId::generate();
    sql.insert_api_key_unless_known(&fresh, hash, label, sql.now().await?).await?;
    sql.api_key_by_hash(hash, false).await?.ok_or_else(|| crate::StoreError::backend("an API key just written is gone"))
}

/// How many API keys are live.
pub async fn count_api_keys<S: CredentialSql>(sql: &S) -> Result<u64> {
    sql.count_live_api_keys().await
}

/// What a presented secret is, by its hash. The lookup order: a live API key, then a live
/// environment key, then a sessions token that still authenticates ([`Lease::token_alive`](crate::rules::work::Lease::token_alive) at
/// the transaction's clock: its item not stopped, its delivery or lease not lapsed). A secret
/// that is none of these is `None`.
pub async fn resolve_credential<S: CredentialSql + WorkSql>(
    sql: &S,
    hash: &CredentialHash,
) -> Result<Option<Credential>> {
    if let Some(id) = sql.api_key_by_hash(hash, true).await? {
        return Ok(Some(Credential::ApiKey(id)));
    }
    if let Some((id, environment)) = sql.environment_key_by_hash(hash).await? {
        return Ok(Some(Credential::EnvironmentKey { id, environment }));
    }
    let Some(token) = super::work::find_token(sql, hash).await? else { return Ok(None) };
    Ok(Some(Credential::SessionToken { work: token.work, session: token.session, environment: token.environment }))
}
