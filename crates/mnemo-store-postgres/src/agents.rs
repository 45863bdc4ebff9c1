//! Agents and their versions: their rows as SQL primitives ([`ops::AgentSql`]; the operations
//! are [`ops::agents`]'s), reads and listings. [`ops::AgentSql::lock_agent`] locks the agent's
//! row (`FOR UPDATE`), so an update's `base` version is judged against the version no other
//! writer is about to replace.

use mnemo_api::{Agent, AgentId, AgentSpec, WorkspaceId};
use mnemo_store::ops::{self, AgentRow};
use mnemo_store::{Cursor, Listing, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Pg, Tx, all, col, exec, failure, one, opt};
use crate::stores::page;
use crate::{parse_id, ts, ts_opt};

/// Workspace `ws`'s agent's row (another workspace's is not found), locked until the
/// transaction ends when `lock`: its row number and latest version, and the agent without its
/// spec.
async fn head(tx: &Tx<'_>, ws: &WorkspaceId, id: &AgentId, lock: bool) -> Result<(i64, u32, i64, i64, Option<i64>)> {
    let sql = if lock {
        "SELECT seq, latest_version, created_at, updated_at, archived_at FROM agents \
         WHERE id = $1 AND workspace_id = $2 FOR UPDATE"
    } else {
        "SELECT seq, latest_version, created_at, updated_at, archived_at FROM agents WHERE id = $1 AND workspace_id = $2"
    };
    let row = opt(tx, sql, &[&id.as_str(), &ws.as_str()]).await?.ok_or_else(|| StoreError::not_found("agent", id))?;
    Ok((col(&row, 0)?, version(col(&row, 1)?)?, col(&row, 2)?, col(&row, 3)?, col(&row, 4)?))
}

fn version(v: i64) -> Result<u32> {
    u32::try_from(v).map_err(|_| failure(format!("malformed agent version {v} in the database")))
}

fn spec(json: &str) -> Result<AgentSpec> {
    serde_json::from_str(json).map_err(|e| failure(format!("malformed agent spec in the database: {e}")))
}

fn spec_json(spec: &AgentSpec) -> Result<String> {
    serde_json::to_string(spec).map_err(|e| failure(format!("agent spec: {e}")))
}

/// An agent at `version` (the latest when `None`) and its row number; the agent's row is
/// locked when `lock`.
async fn load(tx: &Tx<'_>, ws: &WorkspaceId, id: &AgentId, version: Option<u32>, lock: bool) -> Result<(Agent, i64)> {
    let (seq, latest, created_at, updated_at, archived_at) = head(tx, ws, id, lock).await?;
    let version = version.unwrap_or(latest);
    let row =
        opt(tx, "SELECT spec FROM agent_versions WHERE agent_seq = $1 AND version = $2", &[&seq, &i64::from(version)])
            .await?
            .ok_or_else(|| StoreError::NotFound { kind: "agent version", id: format!("{id} version {version}") })?;
    Ok((
        Agent {
            id: id.clone(),
            version,
            spec: spec(&col::<String>(&row, 0)?)?,
            created_at: ts(created_at),
            updated_at: ts(updated_at),
            archived_at: ts_opt(archived_at),
        },
        seq,
    ))
}

pub(crate) async fn get(tx: &Tx<'_>, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent> {
    load(tx, ws, id, version, false).await.map(|(a, _)| a)
}

fn from_row(r: &Row) -> Result<(Agent, i64)> {
    Ok((
        Agent {
            id: parse_id(&col::<String>(r, 0)?)?,
            version: version(col(r, 1)?)?,
            spec: spec(&col::<String>(r, 2)?)?,
            created_at: ts(col(r, 3)?),
            updated_at: ts(col(r, 4)?),
            archived_at: ts_opt(col(r, 5)?),
        },
        col(r, 6)?,
    ))
}

pub(crate) async fn list(
    tx: &Tx<'_>,
    ws: &WorkspaceId,
    include_archived: bool,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Agent>> {
    let before = crate::stores::before(after)?;
    let rows = all(
        tx,
        "SELECT a.id, a.latest_version, v.spec, a.created_at, a.updated_at, a.archived_at, a.seq \
         FROM agents a JOIN agent_versions v ON v.agent_seq = a.seq AND v.version = a.latest_version \
         WHERE a.workspace_id = $4 AND a.seq < $1 AND ($2 OR a.archived_at IS NULL) ORDER BY a.seq DESC LIMIT $3",
        &[&before, &include_archived, &(i64::from(limit) + 1), &ws.as_str()],
    )
    .await?;
    let rows = rows.iter().map(from_row).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
}

impl ops::AgentSql for Pg<'_, '_> {
    async fn get_agent(&self, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent> {
        get(self, ws, id, version).await
    }

    async fn lock_agent(&self, ws: &WorkspaceId, id: &AgentId) -> Result<AgentRow> {
        let (agent, seq) = load(self, ws, id, None, true).await?;
        Ok(AgentRow { agent, seq })
    }

    async fn insert_agent(&self, ws: &WorkspaceId, id: &AgentId, version: u32, now: i64) -> Result<i64> {
        let row = one(
            self,
            "INSERT INTO agents (id, latest_version, created_at, updated_at, workspace_id) \
             VALUES ($1, $2, $3, $3, $4) RETURNING seq",
            &[&id.as_str(), &i64::from(version), &now, &ws.as_str()],
        )
        .await?;
        col(&row, 0)
    }

    async fn insert_agent_version(&self, agent: i64, version: u32, spec: &AgentSpec, now: i64) -> Result<()> {
        exec(
            self,
            "INSERT INTO agent_versions (agent_seq, version, spec, created_at) VALUES ($1, $2, $3, $4)",
            &[&agent, &i64::from(version), &spec_json(spec)?, &now],
        )
        .await
        .map(drop)
    }

    async fn set_latest_agent_version(&self, agent: i64, version: u32, now: i64) -> Result<()> {
        exec(
            self,
            "UPDATE agents SET latest_version = $1, updated_at = $2 WHERE seq = $3",
            &[&i64::from(version), &now, &agent],
        )
        .await
        .map(drop)
    }

    async fn archive_agent_row(&self, agent: i64, now: i64) -> Result<()> {
        exec(self, "UPDATE agents SET archived_at = $1, updated_at = $1 WHERE seq = $2", &[&now, &agent])
            .await
            .map(drop)
    }
}
