//! Credentials: API keys, admin keys and the lookups of every credential by its secret's
//! hash, as SQL primitives ([`ops::CredentialSql`]; which lookup wins is [`ops::credentials`]'s).

use mnemo_api::{AdminKeyId, ApiKeyId, ApiKeyStatus, EnvironmentId, EnvironmentKeyId, WorkspaceId};
use mnemo_store::ops::{
    self,
    credentials::{ApiKeyRecord, ApiKeyRow, NewApiKeyRow},
};
use mnemo_store::{CredentialHash, Result, StoreError};
use rusqlite::params;

use crate::engine::{Lite, backend, query_all, query_one};
use crate::parse_id;

impl ops::CredentialSql for Lite<'_> {
    async fn api_key_by_hash(&self, hash: &CredentialHash) -> Result<Option<ApiKeyRow>> {
        let row: Option<(String, String, String, Option<i64>)> = query_one(
            self,
            "SELECT id, workspace_id, status, expires_at FROM api_keys WHERE secret_hash = ?1",
            params![&hash[..]],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        let Some((id, workspace, status, expires_at)) = row else { return Ok(None) };
        let status = ApiKeyStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("api_keys", &id, "status", format!("unknown status `{status}`")))?;
        Ok(Some(ApiKeyRow { id: parse_id(&id)?, workspace: parse_id(&workspace)?, status, expires_at }))
    }

    async fn insert_api_key_unless_known(
        &self,
        id: &ApiKeyId,
        workspace: &WorkspaceId,
        hash: &CredentialHash,
        label: &str,
        now: i64,
    ) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO api_keys (id, workspace_id, secret_hash, label, created_at) VALUES (?1, ?2, ?3, ?4, ?5) \
             ON CONFLICT (secret_hash) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![id.as_str(), workspace.as_str(), &hash[..], label, now]))
        .map_err(backend)?;
        Ok(())
    }

    async fn count_api_keys_in(&self, status: ApiKeyStatus) -> Result<u64> {
        self.prepare_cached("SELECT count(*) FROM api_keys WHERE status = ?1")
            .and_then(|mut s| s.query_row([status.as_str()], |r| r.get(0)))
            .map_err(backend)
    }

    async fn admin_key_by_hash(&self, hash: &CredentialHash) -> Result<Option<AdminKeyId>> {
        let id: Option<String> = query_one(
            self,
            "SELECT id FROM admin_keys WHERE secret_hash = ?1 AND revoked_at IS NULL",
            params![&hash[..]],
            |r| r.get(0),
        )?;
        id.as_deref().map(parse_id).transpose()
    }

    async fn insert_admin_key_unless_known(
        &self,
        id: &AdminKeyId,
        hash: &CredentialHash,
        name: &str,
        now: i64,
    ) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO admin_keys (id, secret_hash, name, created_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (secret_hash) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![id.as_str(), &hash[..], name, now]))
        .map_err(backend)?;
        Ok(())
    }

    async fn count_live_admin_keys(&self) -> Result<u64> {
        self.prepare_cached("SELECT count(*) FROM admin_keys WHERE revoked_at IS NULL")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(backend)
    }

    async fn environment_key_by_hash(
        &self,
        hash: &CredentialHash,
    ) -> Result<Option<(EnvironmentKeyId, EnvironmentId, WorkspaceId)>> {
        let row: Option<(String, String, String)> = query_one(
            self,
            "SELECT k.id, e.id, e.workspace_id FROM environment_keys k JOIN environments e ON e.seq = k.environment_seq \
             WHERE k.secret_hash = ?1 AND k.revoked_at IS NULL",
            [&hash[..]],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        row.map(|(k, e, w)| Ok((parse_id(&k)?, parse_id(&e)?, parse_id(&w)?))).transpose()
    }

    async fn environment_workspace(&self, environment: &EnvironmentId) -> Result<Option<WorkspaceId>> {
        let id: Option<String> =
            query_one(self, "SELECT workspace_id FROM environments WHERE id = ?1", [environment.as_str()], |r| {
                r.get(0)
            })?;
        id.as_deref().map(parse_id).transpose()
    }

    async fn default_workspace(&self) -> Result<WorkspaceId> {
        let id: Option<String> = query_one(self, "SELECT id FROM workspaces WHERE is_default = 1", [], |r| r.get(0))?;
        let id = id.ok_or_else(|| StoreError::backend("the database has no Default workspace"))?;
        parse_id(&id)
    }

    async fn api_key_records(
        &self,
        only: Option<&ApiKeyId>,
        workspace: Option<&WorkspaceId>,
        _lock: bool,
    ) -> Result<Vec<ApiKeyRecord>> {
        query_all(
            self,
            "SELECT seq, id, label, workspace_id, status, expires_at, created_by, partial_key_hint, created_at \
             FROM api_keys WHERE (?1 IS NULL OR id = ?1) AND (?2 IS NULL OR workspace_id = ?2) ORDER BY seq",
            params![only.map(ApiKeyId::as_str), workspace.map(WorkspaceId::as_str)],
            |r| {
                Ok(ApiKeyRecord {
                    seq: r.get(0)?,
                    id: r.get(1)?,
                    label: r.get(2)?,
                    workspace: r.get(3)?,
                    status: r.get(4)?,
                    expires_at: r.get(5)?,
                    created_by: r.get(6)?,
                    partial_key_hint: r.get(7)?,
                    created_at: r.get(8)?,
                })
            },
        )
    }

    async fn insert_api_key(&self, row: NewApiKeyRow<'_>) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO api_keys (id, workspace_id, secret_hash, label, expires_at, created_by, partial_key_hint, \
             created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .and_then(|mut s| {
            s.execute(params![
                row.id.as_str(),
                row.workspace.as_str(),
                &row.hash[..],
                row.name,
                row.expires_at,
                row.created_by,
                row.partial_key_hint,
                row.created_at
            ])
        })
        .map_err(backend)?;
        Ok(())
    }

    async fn set_api_key(&self, id: &ApiKeyId, name: Option<&str>, status: Option<ApiKeyStatus>) -> Result<()> {
        self.prepare_cached(
            "UPDATE api_keys SET label = coalesce(?2, label), status = coalesce(?3, status) WHERE id = ?1",
        )
        .and_then(|mut s| s.execute(params![id.as_str(), name, status.map(ApiKeyStatus::as_str)]))
        .map_err(backend)?;
        Ok(())
    }

    async fn count_active_api_keys(&self, workspace: &WorkspaceId, now: i64) -> Result<u64> {
        self.prepare_cached(
            "SELECT count(*) FROM api_keys WHERE workspace_id = ?1 AND status = ?3 \
             AND (expires_at IS NULL OR expires_at > ?2)",
        )
        .and_then(|mut s| s.query_row(params![workspace.as_str(), now, ApiKeyStatus::Active.as_str()], |r| r.get(0)))
        .map_err(backend)
    }
}
