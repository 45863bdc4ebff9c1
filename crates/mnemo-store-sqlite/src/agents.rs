//! Agents and their versions: their rows as SQL primitives ([`ops::AgentSql`]; the operations
//! are [`ops::agents`]'s), reads and listings.

use mnemo_api::{Agent, AgentId, AgentSpec, WorkspaceId};
use mnemo_store::ops::{self, AgentRow};
use mnemo_store::{Cursor, Listing, Result, StoreError};
use rusqlite::{Connection, params};

use crate::engine::{Lite, backend, query_all, query_one};
use crate::stores::page;
use crate::{parse_id, ts, ts_opt};

/// Workspace `ws`'s agent at `version` (`None`: latest) and its row number; another workspace's
/// is not found.
fn load(c: &Connection, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<(Agent, i64)> {
    let row: Option<(i64, u32, i64, i64, Option<i64>)> = query_one(
        c,
        "SELECT seq, latest_version, created_at, updated_at, archived_at FROM agents WHERE id = ?1 AND workspace_id = ?2",
        [id.as_str(), ws.as_str()],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )?;
    let (seq, latest, created_at, updated_at, archived_at) = row.ok_or_else(|| StoreError::not_found("agent", id))?;
    let version = version.unwrap_or(latest);
    let spec: Option<String> = query_one(
        c,
        "SELECT spec FROM agent_versions WHERE agent_seq = ?1 AND version = ?2",
        params![seq, version],
        |r| r.get(0),
    )?;
    let spec =
        spec.ok_or_else(|| StoreError::NotFound { kind: "agent version", id: format!("{id} version {version}") })?;
    let spec: AgentSpec = serde_json::from_str(&spec)
        .map_err(|e| StoreError::corrupt("agent_versions", &format!("{id} version {version}"), "spec", e))?;
    Ok((
        Agent {
            id: id.clone(),
            version,
            spec,
            created_at: ts(created_at),
            updated_at: ts(updated_at),
            archived_at: ts_opt(archived_at),
        },
        seq,
    ))
}

pub(crate) fn get(c: &Connection, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent> {
    load(c, ws, id, version).map(|(a, _)| a)
}

pub(crate) fn list(
    c: &Connection,
    ws: &WorkspaceId,
    include_archived: bool,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Agent>> {
    let before = crate::stores::before(after)?;
    let ids: Vec<(String, i64)> = query_all(
        c,
        "SELECT id, seq FROM agents WHERE workspace_id = ?4 AND seq < ?1 AND (?2 OR archived_at IS NULL) \
         ORDER BY seq DESC LIMIT ?3",
        params![before, include_archived, i64::from(limit) + 1, ws.as_str()],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let rows =
        ids.into_iter().map(|(id, seq)| Ok((get(c, ws, &parse_id(&id)?, None)?, seq))).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
}

impl ops::AgentSql for Lite<'_> {
    async fn get_agent(&self, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent> {
        get(self, ws, id, version)
    }

    async fn lock_agent(&self, ws: &WorkspaceId, id: &AgentId) -> Result<AgentRow> {
        // The single writer excludes every other writer: reading is locking.
        let (agent, seq) = load(self, ws, id, None)?;
        Ok(AgentRow { agent, seq })
    }

    async fn insert_agent(&self, ws: &WorkspaceId, id: &AgentId, version: u32, now: i64) -> Result<i64> {
        self.prepare_cached(
            "INSERT INTO agents (id, latest_version, created_at, updated_at, workspace_id) VALUES (?1, ?2, ?3, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![id.as_str(), version, now, ws.as_str()]))
        .map_err(backend)?;
        Ok(self.last_insert_rowid())
    }

    async fn insert_agent_version(&self, agent: i64, version: u32, spec: &AgentSpec, now: i64) -> Result<()> {
        let spec = serde_json::to_string(spec).map_err(backend)?;
        self.prepare_cached(
            "INSERT INTO agent_versions (agent_seq, version, spec, created_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![agent, version, spec, now]))
        .map_err(backend)?;
        Ok(())
    }

    async fn set_latest_agent_version(&self, agent: i64, version: u32, now: i64) -> Result<()> {
        self.prepare_cached("UPDATE agents SET latest_version = ?1, updated_at = ?2 WHERE seq = ?3")
            .and_then(|mut s| s.execute(params![version, now, agent]))
            .map_err(backend)?;
        Ok(())
    }

    async fn archive_agent_row(&self, agent: i64, now: i64) -> Result<()> {
        self.prepare_cached("UPDATE agents SET archived_at = ?1, updated_at = ?1 WHERE seq = ?2")
            .and_then(|mut s| s.execute(params![now, agent]))
            .map_err(backend)?;
        Ok(())
    }
}
