//! Agents and their versions.
//!
//! A write that judges an agent (an update against its latest version, an archive) first locks
//! the agent's row, so a `base` version is judged against the version no other writer is about
//! to replace.

use mnemo_api::{Agent, AgentId, AgentParams, AgentSpec};
use mnemo_store::rules::catalog;
use mnemo_store::{Cursor, Listing, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Tx, all, col, exec, failure, now, one, opt};
use crate::stores::page;
use crate::webhooks::emit_one;
use crate::{parse_id, ts, ts_opt};
use mnemo_store::rules::webhook::{Change, Resource};

/// The agent's row, locked until the transaction ends when `lock`: its row number and latest
/// version, and the agent without its spec.
async fn head(tx: &Tx<'_>, id: &AgentId, lock: bool) -> Result<(i64, u32, i64, i64, Option<i64>)> {
    let sql = if lock {
        "SELECT seq, latest_version, created_at, updated_at, archived_at FROM agents WHERE id = $1 FOR UPDATE"
    } else {
        "SELECT seq, latest_version, created_at, updated_at, archived_at FROM agents WHERE id = $1"
    };
    let row = opt(tx, sql, &[&id.as_str()]).await?.ok_or_else(|| StoreError::not_found("agent", id))?;
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
async fn load(tx: &Tx<'_>, id: &AgentId, version: Option<u32>, lock: bool) -> Result<(Agent, i64)> {
    let (seq, latest, created_at, updated_at, archived_at) = head(tx, id, lock).await?;
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

pub(crate) async fn get(tx: &Tx<'_>, id: &AgentId, version: Option<u32>) -> Result<Agent> {
    load(tx, id, version, false).await.map(|(a, _)| a)
}

pub(crate) async fn create(tx: &Tx<'_>, spec: &AgentSpec) -> Result<Agent> {
    let id = AgentId::generate();
    let now = now(tx).await?;
    let row = one(
        tx,
        "INSERT INTO agents (id, latest_version, created_at, updated_at) VALUES ($1, 1, $2, $2) RETURNING seq",
        &[&id.as_str(), &now],
    )
    .await?;
    let seq: i64 = col(&row, 0)?;
    let json = spec_json(spec)?;
    exec(
        tx,
        "INSERT INTO agent_versions (agent_seq, version, spec, created_at) VALUES ($1, 1, $2, $3)",
        &[&seq, &json, &now],
    )
    .await?;
    emit_one(tx, Change::Created(Resource::Agent), id.as_str()).await?;
    // The spec as stored, as every later read returns it.
    Ok(Agent { id, version: 1, spec: self::spec(&json)?, created_at: ts(now), updated_at: ts(now), archived_at: None })
}

/// A new version from `params` over `base`, which must be the latest version (judged with the
/// agent's row locked); a change that changes nothing returns the agent as it is.
pub(crate) async fn update(tx: &Tx<'_>, id: &AgentId, base: u32, params: &AgentParams) -> Result<Agent> {
    let (mut current, seq) = load(tx, id, None, true).await?;
    let spec = catalog::update_agent(&current, base, params)?;
    emit_one(tx, Change::Updated { resource: Resource::Agent, changed: spec.is_some() }, id.as_str()).await?;
    let Some(spec) = spec else { return Ok(current) };
    let version = current.version + 1;
    let now = now(tx).await?;
    let json = spec_json(&spec)?;
    exec(
        tx,
        "INSERT INTO agent_versions (agent_seq, version, spec, created_at) VALUES ($1, $2, $3, $4)",
        &[&seq, &i64::from(version), &json, &now],
    )
    .await?;
    exec(
        tx,
        "UPDATE agents SET latest_version = $1, updated_at = $2 WHERE seq = $3",
        &[&i64::from(version), &now, &seq],
    )
    .await?;
    current.version = version;
    current.spec = self::spec(&json)?;
    current.updated_at = ts(now);
    Ok(current)
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
    include_archived: bool,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Agent>> {
    let before = crate::stores::before(after)?;
    let rows = all(
        tx,
        "SELECT a.id, a.latest_version, v.spec, a.created_at, a.updated_at, a.archived_at, a.seq \
         FROM agents a JOIN agent_versions v ON v.agent_seq = a.seq AND v.version = a.latest_version \
         WHERE a.seq < $1 AND ($2 OR a.archived_at IS NULL) ORDER BY a.seq DESC LIMIT $3",
        &[&before, &include_archived, &(i64::from(limit) + 1)],
    )
    .await?;
    let rows = rows.iter().map(from_row).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
}

pub(crate) async fn archive(tx: &Tx<'_>, id: &AgentId) -> Result<Agent> {
    let (mut agent, seq) = load(tx, id, None, true).await?;
    emit_one(tx, Change::Archived { resource: Resource::Agent, already: agent.archived_at.is_some() }, id.as_str())
        .await?;
    if agent.archived_at.is_none() {
        let now = now(tx).await?;
        exec(tx, "UPDATE agents SET archived_at = $1, updated_at = $1 WHERE seq = $2", &[&now, &seq]).await?;
        agent.archived_at = Some(ts(now));
        agent.updated_at = ts(now);
    }
    Ok(agent)
}

impl mnemo_store::ops::AgentSql for crate::engine::Pg<'_, '_> {
    async fn get_agent(&self, id: &AgentId, version: Option<u32>) -> Result<Agent> {
        get(self, id, version).await
    }
}
