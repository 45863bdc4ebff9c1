//! The organization, its workspaces and their rate-limit overrides, as SQL primitives
//! ([`ops::WorkspaceSql`]; what they mean is [`ops::workspaces`]'s).

use mnemo_api::{ApiKeyStatus, DeliveryStatus, SessionId, WorkState, Workspace, WorkspaceId};
use mnemo_store::ops::{self, workspaces::OverrideRow, workspaces::WorkspaceRow};
use mnemo_store::rules::workspace::ARCHIVED_DELIVERY_ERROR;
use mnemo_store::{Result, StoreError};
use rusqlite::params;

use crate::engine::{Lite, backend, query_one};
use crate::parse_id;

impl ops::WorkspaceSql for Lite<'_> {
    async fn insert_workspace(&self, row: ops::NewWorkspaceRow<'_>) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO workspaces (id, name, display_color, tags, data_residency, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![
                row.id.as_str(),
                row.name,
                row.display_color,
                row.tags,
                row.data_residency,
                row.created_at
            ])
        })
        .map_err(backend)?;
        Ok(())
    }

    /// SQLite's single writer excludes every other writer: nothing to lock.
    async fn workspace_rows(&self, only: Option<&WorkspaceId>, _lock: bool) -> Result<Vec<WorkspaceRow>> {
        let mut s = self
            .prepare_cached(
                "SELECT id, name, display_color, tags, data_residency, is_default, created_at, archived_at \
                 FROM workspaces WHERE (?1 IS NULL OR id = ?1) ORDER BY seq",
            )
            .map_err(backend)?;
        let rows = s
            .query_map([only.map(WorkspaceId::as_str)], |r| {
                Ok(WorkspaceRow {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    display_color: r.get(2)?,
                    tags: r.get(3)?,
                    data_residency: r.get(4)?,
                    is_default: r.get::<_, i64>(5)? == 1,
                    created_at: r.get(6)?,
                    archived_at: r.get(7)?,
                })
            })
            .map_err(backend)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(backend)
    }

    async fn write_workspace(&self, workspace: &Workspace, tags: &str, data_residency: &str) -> Result<()> {
        self.prepare_cached(
            "UPDATE workspaces SET name = ?2, display_color = ?3, tags = ?4, data_residency = ?5 WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![workspace.id.as_str(), workspace.name, workspace.display_color, tags, data_residency])
        })
        .map_err(backend)?;
        Ok(())
    }

    async fn archive_workspace_rows(&self, id: &WorkspaceId, at: i64) -> Result<Vec<SessionId>> {
        let ws = id.as_str();
        let run = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
            self.prepare_cached(sql).and_then(|mut s| s.execute(params)).map_err(backend)
        };
        run("UPDATE workspaces SET archived_at = ?2 WHERE id = ?1", &[&ws, &at])?;
        run("UPDATE api_keys SET status = ?2 WHERE workspace_id = ?1", &[&ws, &ApiKeyStatus::Archived.as_str()])?;
        run(
            "UPDATE environment_keys SET revoked_at = ?2 WHERE revoked_at IS NULL AND environment_seq IN \
             (SELECT seq FROM environments WHERE workspace_id = ?1)",
            &[&ws, &at],
        )?;
        run(
            "UPDATE webhook_deliveries SET status = ?4, next_attempt_at = NULL, finished_at = ?2, \
             last_error = ?3 WHERE status = ?5 AND endpoint_seq IN \
             (SELECT seq FROM webhook_endpoints WHERE workspace_id = ?1)",
            &[&ws, &at, &ARCHIVED_DELIVERY_ERROR, &DeliveryStatus::Failed.as_str(), &DeliveryStatus::Pending.as_str()],
        )?;
        let mut s = self
            .prepare_cached(
                "SELECT s.id FROM sessions s WHERE s.workspace_id = ?1 AND EXISTS \
                 (SELECT 1 FROM work_items w WHERE w.session_id = s.id AND w.state <> ?2) ORDER BY s.seq",
            )
            .map_err(backend)?;
        let ids = s.query_map([ws, WorkState::Stopped.as_str()], |r| r.get::<_, String>(0)).map_err(backend)?;
        ids.map(|id| parse_id(&id.map_err(backend)?)).collect()
    }

    async fn organization_row(&self) -> Result<(String, String)> {
        let row = query_one(self, "SELECT id, name FROM organization", [], |r| Ok((r.get(0)?, r.get(1)?)))?;
        row.ok_or_else(|| StoreError::backend("the database has no organization"))
    }

    async fn set_organization_name(&self, name: &str) -> Result<()> {
        self.prepare_cached("UPDATE organization SET name = ?1")
            .and_then(|mut s| s.execute([name]))
            .map_err(backend)?;
        Ok(())
    }

    async fn rate_limit_overrides(&self, workspace: &WorkspaceId) -> Result<Vec<OverrideRow>> {
        let mut s = self
            .prepare_cached(
                "SELECT entry_id, limiter, value FROM workspace_rate_limits WHERE workspace_id = ?1 \
                 ORDER BY entry_id, limiter",
            )
            .map_err(backend)?;
        let rows = s.query_map([workspace.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).map_err(backend)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(backend)
    }

    async fn set_rate_limit_overrides(
        &self,
        workspace: &WorkspaceId,
        entry: &str,
        values: &[(String, i64)],
    ) -> Result<()> {
        self.prepare_cached("DELETE FROM workspace_rate_limits WHERE workspace_id = ?1 AND entry_id = ?2")
            .and_then(|mut s| s.execute(params![workspace.as_str(), entry]))
            .map_err(backend)?;
        let mut insert = self
            .prepare_cached(
                "INSERT INTO workspace_rate_limits (workspace_id, entry_id, limiter, value) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(backend)?;
        for (limiter, value) in values {
            insert.execute(params![workspace.as_str(), entry, limiter, value]).map_err(backend)?;
        }
        Ok(())
    }
}
