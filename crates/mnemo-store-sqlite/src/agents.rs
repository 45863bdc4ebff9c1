//! Agents and their versions.

use mnemo_api::{Agent, AgentId, AgentParams, AgentSpec};
use mnemo_store::rules::catalog;
use mnemo_store::{Cursor, Listing, Result, StoreError};
use rusqlite::{Connection, params};

use crate::engine::{backend, query_one};
use crate::stores::page;
use crate::webhooks::emit_one;
use crate::{now_micros, parse_id, ts, ts_opt};
use mnemo_store::rules::webhook::{Change, Resource};

fn load(c: &Connection, id: &AgentId, version: Option<u32>) -> Result<(Agent, i64)> {
    let row: Option<(i64, u32, i64, i64, Option<i64>)> = query_one(
        c,
        "SELECT seq, latest_version, created_at, updated_at, archived_at FROM agents WHERE id = ?1",
        [id.as_str()],
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
    let spec: AgentSpec = serde_json::from_str(&spec).map_err(backend)?;
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

pub(crate) fn get(c: &Connection, id: &AgentId, version: Option<u32>) -> Result<Agent> {
    load(c, id, version).map(|(a, _)| a)
}

pub(crate) fn create(c: &Connection, spec: &AgentSpec) -> Result<Agent> {
    let id = AgentId::generate();
    let now = now_micros();
    c.execute(
        "INSERT INTO agents (id, latest_version, created_at, updated_at) VALUES (?1, 1, ?2, ?2)",
        params![id.as_str(), now],
    )
    .map_err(backend)?;
    let seq = c.last_insert_rowid();
    c.execute(
        "INSERT INTO agent_versions (agent_seq, version, spec, created_at) VALUES (?1, 1, ?2, ?3)",
        params![seq, serde_json::to_string(spec).map_err(backend)?, now],
    )
    .map_err(backend)?;
    emit_one(c, Change::Created(Resource::Agent), id.as_str())?;
    get(c, &id, None)
}

pub(crate) fn update(c: &Connection, id: &AgentId, base: u32, params_: &AgentParams) -> Result<Agent> {
    let (current, seq) = load(c, id, None)?;
    let spec = catalog::update_agent(&current, base, params_)?;
    emit_one(c, Change::Updated { resource: Resource::Agent, changed: spec.is_some() }, id.as_str())?;
    let Some(spec) = spec else { return Ok(current) };
    let version = current.version + 1;
    let now = now_micros();
    c.execute(
        "INSERT INTO agent_versions (agent_seq, version, spec, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![seq, version, serde_json::to_string(&spec).map_err(backend)?, now],
    )
    .map_err(backend)?;
    c.execute("UPDATE agents SET latest_version = ?1, updated_at = ?2 WHERE seq = ?3", params![version, now, seq])
        .map_err(backend)?;
    get(c, id, None)
}

pub(crate) fn list(
    c: &Connection,
    include_archived: bool,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Agent>> {
    let before = crate::stores::before(after)?;
    let ids: Vec<(String, i64)> = c
        .prepare_cached(
            "SELECT id, seq FROM agents WHERE seq < ?1 AND (?2 OR archived_at IS NULL) ORDER BY seq DESC LIMIT ?3",
        )
        .and_then(|mut s| {
            s.query_map(params![before, include_archived, i64::from(limit) + 1], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(backend)?;
    let rows =
        ids.into_iter().map(|(id, seq)| Ok((get(c, &parse_id(&id)?, None)?, seq))).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
}

pub(crate) fn archive(c: &Connection, id: &AgentId) -> Result<Agent> {
    let (agent, seq) = load(c, id, None)?;
    emit_one(c, Change::Archived { resource: Resource::Agent, already: agent.archived_at.is_some() }, id.as_str())?;
    if agent.archived_at.is_none() {
        c.execute("UPDATE agents SET archived_at = ?1, updated_at = ?1 WHERE seq = ?2", params![now_micros(), seq])
            .map_err(backend)?;
    }
    get(c, id, None)
}

impl mnemo_store::ops::AgentSql for crate::engine::Lite<'_> {
    async fn get_agent(&self, id: &AgentId, version: Option<u32>) -> Result<Agent> {
        get(self, id, version)
    }
}
