//! Credentials: API keys, admin keys and the lookups of every credential by its secret's
//! hash, as SQL primitives ([`ops::CredentialSql`]; which lookup wins is [`ops::credentials`]'s).

use mnemo_api::{AdminKeyId, ApiKeyId, ApiKeyStatus, EnvironmentId, EnvironmentKeyId, WorkspaceId};
use mnemo_store::ops::{self, credentials::ApiKeyRow};
use mnemo_store::{CredentialHash, Result, StoreError};

use crate::engine::{Pg, col, exec, one, opt};
use crate::parse_id;

/// A count as the API reports it.
fn count(n: i64, what: &str) -> Result<u64> {
    u64::try_from(n).map_err(|_| StoreError::backend(format!("a count of {n} {what}")))
}

impl ops::CredentialSql for Pg<'_, '_> {
    async fn api_key_by_hash(&self, hash: &CredentialHash) -> Result<Option<ApiKeyRow>> {
        let row = opt(
            self,
            "SELECT id, workspace_id, status, expires_at FROM api_keys WHERE secret_hash = $1",
            &[&&hash[..]],
        )
        .await?;
        let Some(row) = row else { return Ok(None) };
        let id: String = col(&row, 0)?;
        let status: String = col(&row, 2)?;
        let status = ApiKeyStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("api_keys", &id, "status", format!("unknown status `{status}`")))?;
        Ok(Some(ApiKeyRow {
            id: parse_id(&id)?,
            workspace: parse_id(&col::<String>(&row, 1)?)?,
            status,
            expires_at: col(&row, 3)?,
        }))
    }

    async fn insert_api_key_unless_known(
        &self,
        id: &ApiKeyId,
        workspace: &WorkspaceId,
        hash: &CredentialHash,
        label: &str,
        now: i64,
    ) -> Result<()> {
        exec(
            self,
            "INSERT INTO api_keys (id, workspace_id, secret_hash, label, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (secret_hash) DO NOTHING",
            &[&id.as_str(), &workspace.as_str(), &&hash[..], &label, &now],
        )
        .await
        .map(drop)
    }

    async fn count_api_keys_in(&self, status: ApiKeyStatus) -> Result<u64> {
        let row = one(self, "SELECT count(*) FROM api_keys WHERE status = $1", &[&status.as_str()]).await?;
        count(col(&row, 0)?, "API keys")
    }

    async fn admin_key_by_hash(&self, hash: &CredentialHash) -> Result<Option<AdminKeyId>> {
        let row =
            opt(self, "SELECT id FROM admin_keys WHERE secret_hash = $1 AND revoked_at IS NULL", &[&&hash[..]]).await?;
        row.map(|r| parse_id(&col::<String>(&r, 0)?)).transpose()
    }

    async fn insert_admin_key_unless_known(
        &self,
        id: &AdminKeyId,
        hash: &CredentialHash,
        name: &str,
        now: i64,
    ) -> Result<()> {
        exec(
            self,
            "INSERT INTO admin_keys (id, secret_hash, name, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (secret_hash) DO NOTHING",
            &[&id.as_str(), &&hash[..], &name, &now],
        )
        .await
        .map(drop)
    }

    async fn count_live_admin_keys(&self) -> Result<u64> {
        let row = one(self, "SELECT count(*) FROM admin_keys WHERE revoked_at IS NULL", &[]).await?;
        count(col(&row, 0)?, "admin keys")
    }

    async fn environment_key_by_hash(
        &self,
        hash: &CredentialHash,
    ) -> Result<Option<(EnvironmentKeyId, EnvironmentId, WorkspaceId)>> {
        let row = opt(
            self,
            "SELECT k.id, e.id, e.workspace_id FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
             WHERE k.secret_hash = $1 AND k.revoked_at IS NULL",
            &[&&hash[..]],
        )
        .await?;
        row.map(|r| {
            Ok((
                parse_id(&col::<String>(&r, 0)?)?,
                parse_id(&col::<String>(&r, 1)?)?,
                parse_id(&col::<String>(&r, 2)?)?,
            ))
        })
        .transpose()
    }

    async fn environment_workspace(&self, environment: &EnvironmentId) -> Result<Option<WorkspaceId>> {
        let row = opt(self, "SELECT workspace_id FROM environments WHERE id = $1", &[&environment.as_str()]).await?;
        row.map(|r| parse_id(&col::<String>(&r, 0)?)).transpose()
    }

    async fn default_workspace(&self) -> Result<WorkspaceId> {
        let row = opt(self, "SELECT id FROM workspaces WHERE is_default", &[]).await?;
        let row = row.ok_or_else(|| StoreError::backend("the database has no Default workspace"))?;
        parse_id(&col::<String>(&row, 0)?)
    }
}

impl ops::WorkspaceSql for Pg<'_, '_> {
    async fn insert_workspace(&self, row: ops::NewWorkspaceRow<'_>) -> Result<()> {
        exec(
            self,
            "INSERT INTO workspaces (id, name, display_color, tags, data_residency, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[&row.id.as_str(), &row.name, &row.display_color, &row.tags, &row.data_residency, &row.created_at],
        )
        .await
        .map(drop)
    }

    async fn organization(&self) -> Result<mnemo_store::Organization> {
        let row = opt(self, "SELECT id, name FROM organization LIMIT 1", &[]).await?;
        let row = row.ok_or_else(|| StoreError::backend("the database has no organization"))?;
        Ok(mnemo_store::Organization { id: col(&row, 0)?, name: col(&row, 1)? })
    }
}
