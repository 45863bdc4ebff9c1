//! Credentials: API keys, admin keys and the lookups of every credential by its secret's
//! hash, as SQL primitives ([`ops::CredentialSql`]; which lookup wins is [`ops::credentials`]'s).

use mnemo_api::{AdminKeyId, ApiKeyId, ApiKeyStatus, EnvironmentId, EnvironmentKeyId, WorkspaceId};
use mnemo_store::ops::{
    self,
    credentials::{ApiKeyRecord, ApiKeyRow, NewApiKeyRow},
};
use mnemo_store::{CredentialHash, Result, StoreError};

use crate::engine::{Pg, all, col, exec, one, opt};
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
    async fn api_key_records(
        &self,
        only: Option<&ApiKeyId>,
        workspace: Option<&WorkspaceId>,
        lock: bool,
    ) -> Result<Vec<ApiKeyRecord>> {
        let sql = format!(
            "SELECT seq, id, label, workspace_id, status, expires_at, created_by, partial_key_hint, created_at \
             FROM api_keys WHERE ($1::text IS NULL OR id = $1) AND ($2::text IS NULL OR workspace_id = $2) \
             ORDER BY seq{}",
            if lock { " FOR UPDATE" } else { "" }
        );
        let rows = all(self, &sql, &[&only.map(ApiKeyId::as_str), &workspace.map(WorkspaceId::as_str)]).await?;
        rows.iter()
            .map(|r| {
                Ok(ApiKeyRecord {
                    seq: col(r, 0)?,
                    id: col(r, 1)?,
                    label: col(r, 2)?,
                    workspace: col(r, 3)?,
                    status: col(r, 4)?,
                    expires_at: col(r, 5)?,
                    created_by: col(r, 6)?,
                    partial_key_hint: col(r, 7)?,
                    created_at: col(r, 8)?,
                })
            })
            .collect()
    }

    async fn insert_api_key(&self, row: NewApiKeyRow<'_>) -> Result<()> {
        exec(
            self,
            "INSERT INTO api_keys (id, workspace_id, secret_hash, label, expires_at, created_by, partial_key_hint, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &row.id.as_str(),
                &row.workspace.as_str(),
                &&row.hash[..],
                &row.name,
                &row.expires_at,
                &row.created_by,
                &row.partial_key_hint,
                &row.created_at,
            ],
        )
        .await
        .map(drop)
    }

    async fn set_api_key(&self, id: &ApiKeyId, name: Option<&str>, status: Option<ApiKeyStatus>) -> Result<()> {
        exec(
            self,
            "UPDATE api_keys SET label = coalesce($2, label), status = coalesce($3, status) WHERE id = $1",
            &[&id.as_str(), &name, &status.map(ApiKeyStatus::as_str)],
        )
        .await
        .map(drop)
    }

    async fn count_active_api_keys(&self, workspace: &WorkspaceId, now: i64) -> Result<u64> {
        let row = one(
            self,
            "SELECT count(*) FROM api_keys WHERE workspace_id = $1 AND status = $3 \
             AND (expires_at IS NULL OR expires_at > $2)",
            &[&workspace.as_str(), &now, &ApiKeyStatus::Active.as_str()],
        )
        .await?;
        count(col(&row, 0)?, "API keys")
    }
}
