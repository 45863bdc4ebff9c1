//! Credentials: API keys and admin keys, and the lookup order by which a presented secret's
//! hash is resolved to a [`Principal`]: the credential and the workspace it is bound to.

use mnemo_api::{AdminKeyId, ApiKeyId, ApiKeyStatus, EnvironmentId, EnvironmentKeyId, WorkspaceId};

use super::work::WorkSql;
use super::{Clock, Micros};
use crate::rules::api_key::authenticates;
use crate::{Credential, CredentialHash, Principal, Result, StoreError};

/// An API key as its lookup finds it.
#[derive(Debug, Clone)]
pub struct ApiKeyRow {
    pub id: ApiKeyId,
    pub workspace: WorkspaceId,
    pub status: ApiKeyStatus,
    pub expires_at: Option<Micros>,
}

/// SQL over API keys and admin keys, and the lookups of every kind of credential by its
/// secret's hash.
pub trait CredentialSql: Clock {
    /// The API key with secret `hash`, whatever its status.
    async fn api_key_by_hash(&self, hash: &CredentialHash) -> Result<Option<ApiKeyRow>>;
    /// Records an API key of `workspace` unless one with secret `hash` exists.
    async fn insert_api_key_unless_known(
        &self,
        id: &ApiKeyId,
        workspace: &WorkspaceId,
        hash: &CredentialHash,
        label: &str,
        now: Micros,
    ) -> Result<()>;
    /// How many API keys are in `status`.
    async fn count_api_keys_in(&self, status: ApiKeyStatus) -> Result<u64>;
    /// The admin key with secret `hash`, unless it is revoked.
    async fn admin_key_by_hash(&self, hash: &CredentialHash) -> Result<Option<AdminKeyId>>;
    /// Records an admin key unless one with secret `hash` exists.
    async fn insert_admin_key_unless_known(
        &self,
        id: &AdminKeyId,
        hash: &CredentialHash,
        name: &str,
        now: Micros,
    ) -> Result<()>;
    /// How many admin keys are not revoked.
    async fn count_live_admin_keys(&self) -> Result<u64>;
    /// The environment key with secret `hash` that is not revoked, its environment and that
    /// environment's workspace.
    async fn environment_key_by_hash(
        &self,
        hash: &CredentialHash,
    ) -> Result<Option<(EnvironmentKeyId, EnvironmentId, WorkspaceId)>>;
    /// The workspace of an environment (of a sessions token's work item).
    async fn environment_workspace(&self, environment: &EnvironmentId) -> Result<Option<WorkspaceId>>;
    /// The Default workspace every server has (made by the schema's migration).
    async fn default_workspace(&self) -> Result<WorkspaceId>;
}

/// The usable API key with secret `hash`.
pub async fn find_api_key<S: CredentialSql>(sql: &S, hash: &CredentialHash) -> Result<Option<ApiKeyId>> {
    let Some(key) = sql.api_key_by_hash(hash).await? else { return Ok(None) };
    Ok(authenticates(key.status, key.expires_at, sql.now().await?).then_some(key.id))
}

/// The API key with secret `hash`, created in the Default workspace with `label` if there is
/// none (whatever its status: a deactivated secret stays deactivated).
pub async fn ensure_api_key<S: CredentialSql>(sql: &S, hash: &CredentialHash, label: &str) -> Result<ApiKeyId> {
    let workspace = sql.default_workspace().await?;
    ensure_api_key_in(sql, &workspace, hash, label).await
}

/// The API key with secret `hash`, created in `workspace` with `label` if there is none (a known
/// secret keeps its key, its workspace and its status).
pub async fn ensure_api_key_in<S: CredentialSql>(
    sql: &S,
    workspace: &WorkspaceId,
    hash: &CredentialHash,
    label: &str,
) -> Result<ApiKeyId> {
    sql.insert_api_key_unless_known(&ApiKeyId::generate(), workspace, hash, label, sql.now().await?).await?;
    let key = sql.api_key_by_hash(hash).await?;
    key.map(|k| k.id).ok_or_else(|| StoreError::backend("an API key just written is gone"))
}

/// How many API keys are active.
pub async fn count_api_keys<S: CredentialSql>(sql: &S) -> Result<u64> {
    sql.count_api_keys_in(ApiKeyStatus::Active).await
}

/// The admin key with secret `hash`, created with `name` if there is none (a revoked secret
/// stays revoked).
pub async fn ensure_admin_key<S: CredentialSql>(sql: &S, hash: &CredentialHash, name: &str) -> Result<AdminKeyId> {
    sql.insert_admin_key_unless_known(&AdminKeyId::generate(), hash, name, sql.now().await?).await?;
    sql.admin_key_by_hash(hash).await?.ok_or_else(|| StoreError::backend("an admin key just written is revoked"))
}

/// What a presented secret is, by its hash, and the workspace it is bound to. The lookup
/// order: a usable API key, then a live admin key, then a live environment key, then a
/// sessions token that still authenticates ([`Lease::token_alive`](crate::rules::work::Lease::token_alive) at
/// the transaction's clock: its item not stopped, its delivery or lease not lapsed). A secret
/// that is none of these is `None`.
pub async fn resolve_credential<S: CredentialSql + WorkSql>(
    sql: &S,
    hash: &CredentialHash,
) -> Result<Option<Principal>> {
    if let Some(key) = sql.api_key_by_hash(hash).await? {
        if !authenticates(key.status, key.expires_at, sql.now().await?) {
            return Ok(None);
        }
        return Ok(Some(Principal { credential: Credential::ApiKey(key.id), workspace: Some(key.workspace) }));
    }
    if let Some(id) = sql.admin_key_by_hash(hash).await? {
        return Ok(Some(Principal { credential: Credential::AdminKey(id), workspace: None }));
    }
    if let Some((id, environment, workspace)) = sql.environment_key_by_hash(hash).await? {
        let credential = Credential::EnvironmentKey { id, environment };
        return Ok(Some(Principal { credential, workspace: Some(workspace) }));
    }
    let Some(token) = super::work::find_token(sql, hash).await? else { return Ok(None) };
    // An item's environment is never deleted under it (deletion waits for its items).
    let Some(workspace) = sql.environment_workspace(&token.environment).await? else { return Ok(None) };
    let credential =
        Credential::SessionToken { work: token.work, session: token.session, environment: token.environment };
    Ok(Some(Principal { credential, workspace: Some(workspace) }))
}
