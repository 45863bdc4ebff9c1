//! The organization, its workspaces and their rate-limit overrides, as SQL primitives
//! ([`ops::WorkspaceSql`]; what they mean is [`ops::workspaces`]'s).

use mnemo_api::{ApiKeyStatus, DeliveryStatus, SessionId, WorkState, Workspace, WorkspaceId};
use mnemo_store::ops::{self, workspaces::OverrideRow, workspaces::WorkspaceRow};
use mnemo_store::rules::workspace::ARCHIVED_DELIVERY_ERROR;
use mnemo_store::{Result, StoreError};

use crate::engine::{Pg, all, col, exec, opt};
use crate::parse_id;

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

    async fn workspace_rows(&self, only: Option<&WorkspaceId>, lock: bool) -> Result<Vec<WorkspaceRow>> {
        let sql = format!(
            "SELECT id, name, display_color, tags, data_residency, is_default, created_at, archived_at \
             FROM workspaces WHERE ($1::text IS NULL OR id = $1) ORDER BY seq{}",
            if lock { " FOR UPDATE" } else { "" }
        );
        let rows = all(self, &sql, &[&only.map(WorkspaceId::as_str)]).await?;
        rows.iter()
            .map(|r| {
                Ok(WorkspaceRow {
                    id: col(r, 0)?,
                    name: col(r, 1)?,
                    display_color: col(r, 2)?,
                    tags: col(r, 3)?,
                    data_residency: col(r, 4)?,
                    is_default: col(r, 5)?,
                    created_at: col(r, 6)?,
                    archived_at: col(r, 7)?,
                })
            })
            .collect()
    }

    async fn write_workspace(&self, workspace: &Workspace, tags: &str, data_residency: &str) -> Result<()> {
        exec(
            self,
            "UPDATE workspaces SET name = $2, display_color = $3, tags = $4, data_residency = $5 WHERE id = $1",
            &[&workspace.id.as_str(), &workspace.name, &workspace.display_color, &tags, &data_residency],
        )
        .await
        .map(drop)
    }

    async fn archive_workspace_rows(&self, id: &WorkspaceId, at: i64) -> Result<Vec<SessionId>> {
        let ws = id.as_str();
        exec(self, "UPDATE workspaces SET archived_at = $2 WHERE id = $1", &[&ws, &at]).await?;
        exec(self, "UPDATE api_keys SET status = $2 WHERE workspace_id = $1", &[&ws, &ApiKeyStatus::Archived.as_str()])
            .await?;
        exec(
            self,
            "UPDATE environment_keys SET revoked_at = $2 WHERE revoked_at IS NULL AND environment_seq IN \
             (SELECT seq FROM environments WHERE workspace_id = $1)",
            &[&ws, &at],
        )
        .await?;
        exec(
            self,
            "UPDATE webhook_deliveries SET status = $4, next_attempt_at = NULL, finished_at = $2, \
             last_error = $3 WHERE status = $5 AND endpoint_seq IN \
             (SELECT seq FROM webhook_endpoints WHERE workspace_id = $1)",
            &[&ws, &at, &ARCHIVED_DELIVERY_ERROR, &DeliveryStatus::Failed.as_str(), &DeliveryStatus::Pending.as_str()],
        )
        .await?;
        // Sessions before their items (ops::work's lock order).
        let rows = all(
            self,
            "SELECT s.id FROM sessions s WHERE s.workspace_id = $1 AND EXISTS \
             (SELECT 1 FROM work_items w WHERE w.session_id = s.id AND w.state <> $2) ORDER BY s.seq \
             FOR UPDATE OF s",
            &[&ws, &WorkState::Stopped.as_str()],
        )
        .await?;
        rows.iter().map(|r| parse_id(&col::<String>(r, 0)?)).collect()
    }

    async fn organization_row(&self) -> Result<(String, String)> {
        let row = opt(self, "SELECT id, name FROM organization", &[]).await?;
        let row = row.ok_or_else(|| StoreError::backend("the database has no organization"))?;
        Ok((col(&row, 0)?, col(&row, 1)?))
    }

    async fn set_organization_name(&self, name: &str) -> Result<()> {
        exec(self, "UPDATE organization SET name = $1", &[&name]).await.map(drop)
    }

    async fn rate_limit_overrides(&self, workspace: &WorkspaceId) -> Result<Vec<OverrideRow>> {
        let rows = all(
            self,
            "SELECT entry_id, limiter, value FROM workspace_rate_limits WHERE workspace_id = $1 \
             ORDER BY entry_id, limiter",
            &[&workspace.as_str()],
        )
        .await?;
        rows.iter().map(|r| Ok((col(r, 0)?, col(r, 1)?, col(r, 2)?))).collect()
    }

    async fn set_rate_limit_overrides(
        &self,
        workspace: &WorkspaceId,
        entry: &str,
        values: &[(String, i64)],
    ) -> Result<()> {
        exec(
            self,
            "DELETE FROM workspace_rate_limits WHERE workspace_id = $1 AND entry_id = $2",
            &[&workspace.as_str(), &entry],
        )
        .await?;
        for (limiter, value) in values {
            exec(
                self,
                "INSERT INTO workspace_rate_limits (workspace_id, entry_id, limiter, value) VALUES ($1, $2, $3, $4)",
                &[&workspace.as_str(), &entry, limiter, value],
            )
            .await?;
        }
        Ok(())
    }
}
