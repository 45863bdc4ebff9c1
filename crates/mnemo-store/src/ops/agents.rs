//! Agents and their versions: creation, versioned updates and archive, written once over
//! [`AgentSql`].
//!
//! A write that judges an agent (an update against its latest version, an archive) first locks
//! the agent's row ([`AgentSql::lock_agent`]), so a `base` version is judged against the version
//! no other writer is about to replace.

use mnemo_api::{Agent, AgentId, AgentParams, AgentSpec, WorkspaceId};

use super::webhooks::{WebhookSql, emit_one};
use super::{Clock, Micros, Seq};
use crate::Result;
use crate::rules::catalog;
use crate::rules::lifecycle::{FIRST_AGENT_VERSION, next_agent_version};
use crate::rules::webhook::{Change, Resource};

/// An agent at its latest version, and its row number.
#[derive(Debug, Clone)]
pub struct AgentRow {
    pub agent: Agent,
    pub seq: Seq,
}

/// SQL over agents and their versions.
pub trait AgentSql: Clock {
    /// Version `version` of workspace `ws`'s agent (`None`: its latest). Unknown, or another
    /// workspace's: not found.
    async fn get_agent(&self, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent>;
    /// The agent at its latest version, its row locked until the transaction ends (PostgreSQL:
    /// `FOR UPDATE`). Unknown, or another workspace's: not found.
    async fn lock_agent(&self, ws: &WorkspaceId, id: &AgentId) -> Result<AgentRow>;
    /// Inserts an agent of workspace `ws` whose latest version is `version`; its row number.
    async fn insert_agent(&self, ws: &WorkspaceId, id: &AgentId, version: u32, now: Micros) -> Result<Seq>;
    /// Records version `version` of agent `agent`.
    async fn insert_agent_version(&self, agent: Seq, version: u32, spec: &AgentSpec, now: Micros) -> Result<()>;
    /// Makes `version` agent `agent`'s latest.
    async fn set_latest_agent_version(&self, agent: Seq, version: u32, now: Micros) -> Result<()>;
    /// Marks agent `agent` archived at `now`.
    async fn archive_agent_row(&self, agent: Seq, now: Micros) -> Result<()>;
}

/// Creates an agent at its first version ([`FIRST_AGENT_VERSION`]); returns it as stored, as
/// every later read returns it.
pub async fn create<S: AgentSql + WebhookSql>(sql: &S, ws: &WorkspaceId, spec: &AgentSpec) -> Result<Agent> {
    let id = AgentId::generate();
    let now = sql.now().await?;
    let seq = sql.insert_agent(ws, &id, FIRST_AGENT_VERSION, now).await?;
    sql.insert_agent_version(seq, FIRST_AGENT_VERSION, spec, now).await?;
    emit_one(sql, ws, Change::Created(Resource::Agent), id.as_str()).await?;
    sql.get_agent(ws, &id, None).await
}

/// A new version from `params` over `base`, which must be the latest version
/// ([`catalog::update_agent`], judged with the agent's row locked), numbered
/// [`next_agent_version`]; a change that changes nothing returns the agent as it is.
pub async fn update<S: AgentSql + WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &AgentId,
    base: u32,
    params: &AgentParams,
) -> Result<Agent> {
    let AgentRow { agent: current, seq } = sql.lock_agent(ws, id).await?;
    let spec = catalog::update_agent(&current, base, params)?;
    emit_one(sql, ws, Change::Updated { resource: Resource::Agent, changed: spec.is_some() }, id.as_str()).await?;
    let Some(spec) = spec else { return Ok(current) };
    let version = next_agent_version(current.version)?;
    let now = sql.now().await?;
    sql.insert_agent_version(seq, version, &spec, now).await?;
    sql.set_latest_agent_version(seq, version, now).await?;
    sql.get_agent(ws, id, None).await
}

/// Archives an agent (its row locked); archiving an archived agent changes nothing but still
/// says so in a webhook.
pub async fn archive<S: AgentSql + WebhookSql>(sql: &S, ws: &WorkspaceId, id: &AgentId) -> Result<Agent> {
    let AgentRow { agent, seq } = sql.lock_agent(ws, id).await?;
    let already = agent.archived_at.is_some();
    emit_one(sql, ws, Change::Archived { resource: Resource::Agent, already }, id.as_str()).await?;
    if already {
        return Ok(agent);
    }
    sql.archive_agent_row(seq, sql.now().await?).await?;
    sql.get_agent(ws, id, None).await
}
