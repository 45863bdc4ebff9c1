//! Sessions: creation, title and metadata updates, archive, delete and the agent loop's turn
//! lease, each written once over [`SessionRowSql`].
//!
//! Every operation that changes an existing session first locks its row
//! ([`SessionSql::lock_session`]) and holds it until it commits, as an append does: writers of one
//! session take turns, and what an operation judged stays true while it writes. The session's
//! row is the first lock such a writer takes; then the environment's (held against deletion),
//! then work items, then stores.

use std::collections::BTreeMap;

use mnemo_api::{
    Access, AgentId, EnvironmentId, EventId, LoggedEvent, MemoryStoreId, Session, SessionId, WorkData, WorkspaceId,
};

use super::agents::AgentSql;
use super::credentials::CredentialSql;
use super::environments::EnvironmentSql;
use super::events::{SessionRow, SessionSql};
use super::stores::StoreSql;
use super::webhooks::{WebhookSql, emit, emit_one};
use super::work::{WorkSql, enqueue, stop_session_work};
use super::{Micros, Seq, found};
use crate::row::SessionBody;
use crate::rules::agent::{self, TurnLease};
use crate::rules::catalog;
use crate::rules::lifecycle::{self, NEW_SESSION_STATUS};
use crate::rules::webhook::{Change, Outbox, Resource};
use crate::{NewSession, Result};

/// A session row to insert.
#[derive(Debug, Clone)]
pub struct NewSessionRow<'a> {
    pub workspace: &'a WorkspaceId,
    pub id: &'a SessionId,
    pub environment: &'a EnvironmentId,
    pub agent: &'a AgentId,
    pub body: &'a SessionBody,
    pub status: mnemo_api::SessionStatus,
    pub created_at: Micros,
}

/// SQL over session rows (their log is [`SessionSql`]'s).
pub trait SessionRowSql: SessionSql {
    /// Inserts a session; its row number.
    async fn insert_session(&self, new: &NewSessionRow<'_>) -> Result<Seq>;
    /// Attaches a memory store to session `session`.
    async fn attach_store(&self, session: Seq, store: &MemoryStoreId, access: Access) -> Result<()>;
    /// Writes a session's body (its status unchanged).
    async fn update_session_body(&self, session: Seq, body: &SessionBody, now: Micros) -> Result<()>;
    /// Marks a session archived at `now`, in `status`.
    async fn archive_session_row(&self, session: Seq, status: mnemo_api::SessionStatus, now: Micros) -> Result<()>;
    /// Deletes a session, its log and its attachments.
    async fn delete_session_row(&self, session: Seq) -> Result<()>;
    /// The session's turn lease, if one was ever taken and not released.
    async fn turn_lease(&self, session: Seq) -> Result<Option<TurnLease>>;
    /// Writes (`None`: clears) the session's turn lease.
    async fn set_turn_lease(&self, session: Seq, lease: Option<&TurnLease>) -> Result<()>;
    /// How workspace `ws`'s session `id` may reach `store`; `None` when it has not attached it
    /// (or is unknown, or another workspace's).
    async fn store_access(&self, ws: &WorkspaceId, id: &SessionId, store: &MemoryStoreId) -> Result<Option<Access>>;
}

/// A new session, and whether it queued a work item.
#[derive(Debug, Clone)]
pub struct Created {
    pub session: Session,
    pub queued_work: bool,
}

/// Creates a session in workspace `ws`: resolves its environment (held against deletion until
/// the session and its work item commit), agent and stores — each looked up in `ws`, so another
/// workspace's is refused exactly as an unknown id — plans it with [`catalog::plan_session`], and
/// writes the row, its attachments, its initial events, its work item (a self-hosted
/// environment) and its webhook.
pub async fn create<S>(sql: &S, ws: &WorkspaceId, new: &NewSession, lease_ttl: u64) -> Result<Created>
where
    S: SessionRowSql + EnvironmentSql + AgentSql + StoreSql + WorkSql + WebhookSql + CredentialSql,
{
    let env = found(sql.hold_environment(ws, &new.environment).await)?;
    let agent = sql.get_agent(ws, &new.agent.id, new.agent.version).await;
    let mut stores = Vec::with_capacity(new.attachments.len());
    for a in &new.attachments {
        stores.push(found(sql.get_store(ws, &a.store).await)?);
    }
    let plan = catalog::plan_session(new, env.as_ref().map(|e| &e.environment), agent, &stores)?;
    let id = SessionId::generate();
    let now = sql.now().await?;
    let body = SessionBody {
        title: new.title.clone(),
        metadata: new.metadata.clone(),
        agent: plan.agent,
        memory_prompt: plan.memory_prompt,
        usage: None,
        resources: plan.resources,
        budget: new.budget.clone(),
        stop_reason: None,
    };
    let seq = sql
        .insert_session(&NewSessionRow {
            workspace: ws,
            id: &id,
            environment: &new.environment,
            agent: &new.agent.id,
            body: &body,
            status: NEW_SESSION_STATUS,
            created_at: now,
        })
        .await?;
    for a in &new.attachments {
        sql.attach_store(seq, &a.store, a.access).await?;
    }
    for event in &new.initial_events {
        let logged = LoggedEvent {
            id: EventId::generate(),
            event: event.clone(),
            processed_at: Some(mnemo_api::rfc3339_micros(now)),
            posted_by: Some(new.poster.clone()),
        };
        sql.insert_event(seq, &logged, now).await?;
    }
    let queued_work = match (plan.enqueue_work, env) {
        (true, Some(env)) => {
            enqueue(sql, env.seq, &WorkData::session(&id), lease_ttl).await?;
            true
        }
        _ => false,
    };
    emit_one(sql, ws, Change::Created(Resource::Session), id.as_str()).await?;
    // The row is this transaction's own: reading it back is not waiting.
    Ok(Created { session: sql.lock_session(ws, &id).await?.session, queued_work })
}

/// Updates a session's title and metadata ([`catalog::update_session`]), judged with its row
/// locked.
pub async fn update<S: SessionRowSql + WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &SessionId,
    title: Option<Option<String>>,
    metadata: Option<&BTreeMap<String, Option<String>>>,
) -> Result<Session> {
    let SessionRow { session, seq } = sql.lock_session(ws, id).await?;
    let (title, metadata) = catalog::update_session(&session, title, metadata)?;
    let mut body = SessionBody::of(&session);
    body.title = title;
    body.metadata = metadata;
    sql.update_session_body(seq, &body, sql.now().await?).await?;
    emit_one(sql, ws, Change::Updated { resource: Resource::Session, changed: true }, id.as_str()).await?;
    Ok(sql.lock_session(ws, id).await?.session)
}

/// Archives a session: archiving terminates it ([`lifecycle::archive_session`]) — its status, an
/// event in its log, its work force-stopped and the webhooks of both — once; archiving it again
/// returns it as it is.
///
/// Locks, in order: the session's row, then its work items not yet stopped.
pub async fn archive<S: SessionRowSql + WorkSql + WebhookSql + super::DreamSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &SessionId,
) -> Result<Session> {
    let SessionRow { session, seq } = sql.lock_session(ws, id).await?;
    super::dreams::guard(sql, ws, id.as_str(), "archive").await?;
    let Some(end) = lifecycle::archive_session(session.archived_at.is_some()) else { return Ok(session) };
    let now = sql.now().await?;
    sql.archive_session_row(seq, end.status, now).await?;
    let terminated = LoggedEvent {
        id: EventId::generate(),
        event: end.event,
        processed_at: Some(mnemo_api::rfc3339_micros(now)),
        posted_by: Some(end.poster),
    };
    sql.insert_event(seq, &terminated, now).await?;
    if end.force_stop_work {
        stop_session_work(sql, id).await?;
    }
    let mut outbox = Outbox::default();
    outbox.record(Change::Logged(&terminated.event), id.as_str());
    outbox.record(Change::Archived { resource: Resource::Session, already: false }, id.as_str());
    emit(sql, ws, outbox).await?;
    Ok(sql.lock_session(ws, id).await?.session)
}

/// Deletes a session, its log and its attachments, after force-stopping its work.
///
/// Locks, in order: the session's row, then its work items not yet stopped.
pub async fn delete<S: SessionRowSql + WorkSql + WebhookSql + super::DreamSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &SessionId,
) -> Result<()> {
    let SessionRow { seq, .. } = sql.lock_session(ws, id).await?;
    super::dreams::guard(sql, ws, id.as_str(), "delete").await?;
    stop_session_work(sql, id).await?;
    sql.delete_session_row(seq).await?;
    emit_one(sql, ws, Change::Deleted(Resource::Session), id.as_str()).await
}

/// Claims (or renews) a session's turn lease for `ttl_micros` under [`agent::claim`], its row
/// locked; whether the caller holds it.
pub async fn claim_turn<S: SessionRowSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &SessionId,
    holder: &str,
    ttl_micros: i64,
) -> Result<bool> {
    let SessionRow { seq, .. } = sql.lock_session(ws, id).await?;
    let current = sql.turn_lease(seq).await?;
    match agent::claim(current.as_ref(), holder, sql.now().await?, ttl_micros) {
        agent::Claim::Held => Ok(false),
        agent::Claim::Granted(lease) => {
            sql.set_turn_lease(seq, Some(&lease)).await?;
            Ok(true)
        }
    }
}

/// Ends `holder`'s turn lease of a session ([`agent::releases`]), its row locked.
pub async fn release_turn<S: SessionRowSql>(sql: &S, ws: &WorkspaceId, id: &SessionId, holder: &str) -> Result<()> {
    let SessionRow { seq, .. } = sql.lock_session(ws, id).await?;
    if agent::releases(sql.turn_lease(seq).await?.as_ref(), holder) {
        sql.set_turn_lease(seq, None).await?;
    }
    Ok(())
}
