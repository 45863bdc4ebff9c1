//! Credentials: API keys and admin keys, and the lookup order by which a presented secret's
//! hash is resolved to a [`Principal`]: the credential and the workspace it is bound to.

use mnemo_api::{
    AdminKeyId, AdminPage, AdminPageQuery, ApiKey, ApiKeyCreator, ApiKeyId, ApiKeyScope, ApiKeyStatus, ApiKeyUpdate,
    CreatorType, EnvironmentId, EnvironmentKeyId, WorkspaceId,
};

use super::work::WorkSql;
use super::workspaces::{self, WorkspaceSql};
use super::{Clock, Micros, Seq};
use crate::row::{ts, ts_opt};
use crate::rules::api_key::{self as key_rule, Cap, authenticates};
use crate::{Credential, CredentialHash, Principal, Result, StoreError};

/// An API key's row as the Admin API reads it.
#[derive(Debug, Clone)]
pub struct ApiKeyRecord {
    pub seq: Seq,
    pub id: String,
    /// The key's name (`label`, as the first schema called it).
    pub label: String,
    pub workspace: String,
    /// The stored status (`expired` is judged at read time, [`key_rule::status_at`]).
    pub status: String,
    pub expires_at: Option<Micros>,
    /// The id of the person who minted it; `None` for a legacy, configured or admin-key-made key.
    pub created_by: Option<String>,
    pub partial_key_hint: Option<String>,
    pub created_at: Micros,
}

impl ApiKeyRecord {
    /// The key as the API shows it at `now`.
    pub fn decode(&self, default: &WorkspaceId, now: Micros) -> Result<ApiKey> {
        let stored = ApiKeyStatus::parse(&self.status).ok_or_else(|| {
            StoreError::corrupt("api_keys", &self.id, "status", format!("unknown status `{}`", self.status))
        })?;
        let name = if self.label.is_empty() { format!("key {}", self.seq) } else { self.label.clone() };
        let key = ApiKey {
            id: crate::row::parse_id(&self.id)?,
            name,
            status: stored,
            scope: ApiKeyScope::Workspace { workspace_id: crate::row::parse_id(&self.workspace)? },
            principal: None,
            created_by: self.created_by.clone().map(|id| ApiKeyCreator { id, kind: CreatorType::User }),
            created_at: ts(self.created_at),
            expires_at: ts_opt(self.expires_at),
            partial_key_hint: self.partial_key_hint.clone(),
            workspace_id: None,
        };
        Ok(key_rule::present(key, self.expires_at, default, now))
    }
}

/// An API key to record.
#[derive(Debug, Clone)]
pub struct NewApiKeyRow<'a> {
    pub id: &'a ApiKeyId,
    pub workspace: &'a WorkspaceId,
    pub hash: &'a CredentialHash,
    pub name: &'a str,
    pub expires_at: Option<Micros>,
    pub created_by: Option<&'a str>,
    pub partial_key_hint: &'a str,
    pub created_at: Micros,
}

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
    /// API keys (only `only`; only of `workspace`), in creation order. `lock`: the rows are
    /// locked until the transaction ends.
    async fn api_key_records(
        &self,
        only: Option<&ApiKeyId>,
        workspace: Option<&WorkspaceId>,
        lock: bool,
    ) -> Result<Vec<ApiKeyRecord>>;
    /// Records a minted API key.
    async fn insert_api_key(&self, row: NewApiKeyRow<'_>) -> Result<()>;
    /// Writes a key's name and status (`None`: unchanged).
    async fn set_api_key(&self, id: &ApiKeyId, name: Option<&str>, status: Option<ApiKeyStatus>) -> Result<()>;
    /// How many keys of `workspace` are `active` and not expired at `now`.
    async fn count_active_api_keys(&self, workspace: &WorkspaceId, now: Micros) -> Result<u64>;
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

/// [`ensure_api_key`] in workspace `ws`: a new key is bound to it (a known hash keeps its own).
pub async fn ensure_api_key_in<S: CredentialSql>(
    sql: &S,
    ws: &WorkspaceId,
    hash: &CredentialHash,
    label: &str,
) -> Result<ApiKeyId> {
    sql.insert_api_key_unless_known(&ApiKeyId::generate(), ws, hash, label, sql.now().await?).await?;
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

/// Which API keys a list shows.
#[derive(Debug, Clone)]
pub struct ListApiKeys {
    /// Only keys in this status (at the time of the request).
    pub status: Option<ApiKeyStatus>,
    pub workspace: Option<WorkspaceId>,
    /// Only keys minted by this person.
    pub created_by_user_id: Option<String>,
    pub page: AdminPageQuery,
}

fn count_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Mints an API key in an open workspace of this organization, with the hash and hint of its
/// secret, unless the workspace has [`Cap::Workspace`] active keys already. The workspace row
/// is locked first, so two mints cannot both take the last place.
pub async fn create_api_key<S: CredentialSql + WorkspaceSql>(
    sql: &S,
    new: &mnemo_api::NewApiKey,
    hash: &CredentialHash,
    hint: &str,
    created_by: Option<&str>,
) -> Result<ApiKey> {
    workspaces::check_takes_keys(sql, &new.workspace_id).await?;
    let now = sql.now().await?;
    key_rule::check_capacity(Cap::Workspace, count_u32(sql.count_active_api_keys(&new.workspace_id, now).await?))?;
    let id = ApiKeyId::generate();
    sql.insert_api_key(NewApiKeyRow {
        id: &id,
        workspace: &new.workspace_id,
        hash,
        name: &new.name,
        expires_at: new.expires_at.map(|t| t.timestamp_micros()),
        created_by,
        partial_key_hint: hint,
        created_at: now,
    })
    .await?;
    get_api_key(sql, &id).await
}

async fn record<S: CredentialSql>(sql: &S, id: &ApiKeyId, lock: bool) -> Result<ApiKeyRecord> {
    let mut rows = sql.api_key_records(Some(id), None, lock).await?;
    rows.pop().ok_or_else(|| StoreError::not_found("API key", id))
}

/// One API key as the API shows it now.
pub async fn get_api_key<S: CredentialSql>(sql: &S, id: &ApiKeyId) -> Result<ApiKey> {
    let default = sql.default_workspace().await?;
    record(sql, id, false).await?.decode(&default, sql.now().await?)
}

/// A page of API keys in creation order.
pub async fn list_api_keys<S: CredentialSql>(sql: &S, query: &ListApiKeys) -> Result<AdminPage<ApiKey>> {
    let default = sql.default_workspace().await?;
    let now = sql.now().await?;
    let mut shown = Vec::new();
    for row in sql.api_key_records(None, query.workspace.as_ref(), false).await? {
        if query.created_by_user_id.as_ref().is_some_and(|u| row.created_by.as_ref() != Some(u)) {
            continue;
        }
        let key = row.decode(&default, now)?;
        if query.status.is_some_and(|s| s != key.status) {
            continue;
        }
        shown.push(key);
    }
    workspaces::page(shown, |k| k.id.to_string(), &query.page)
}

/// Applies an update ([`key_rule::update`]); a reactivation counts the workspace's active keys
/// against its cap in the same transaction (the workspace row locked first). Answers the key
/// and whether it stopped authenticating (cached lookups must then be dropped).
pub async fn update_api_key<S: CredentialSql + WorkspaceSql>(
    sql: &S,
    id: &ApiKeyId,
    body: &ApiKeyUpdate,
) -> Result<(ApiKey, bool)> {
    let row = record(sql, id, false).await?;
    let workspace: WorkspaceId = crate::row::parse_id(&row.workspace)?;
    // Lock order: the workspace, then its key.
    let _ = sql.workspace_rows(Some(&workspace), true).await?;
    let row = record(sql, id, true).await?;
    let now = sql.now().await?;
    let stored = ApiKeyStatus::parse(&row.status).ok_or_else(|| {
        StoreError::corrupt("api_keys", &row.id, "status", format!("unknown status `{}`", row.status))
    })?;
    let change = key_rule::update(id.as_str(), stored, row.expires_at, body, now)?;
    if change.reactivates {
        key_rule::check_capacity(Cap::Workspace, count_u32(sql.count_active_api_keys(&workspace, now).await?))?;
    }
    if change.name.is_some() || change.status.is_some() {
        sql.set_api_key(id, change.name.as_deref(), change.status).await?;
    }
    Ok((get_api_key(sql, id).await?, change.revokes))
}
