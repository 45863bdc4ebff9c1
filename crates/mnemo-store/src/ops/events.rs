//! Session events: appending to a session's log under its rules.

use std::collections::HashMap;

use mnemo_api::{
    Event, EventId, LoggedEvent, Session, SessionId, SessionStatus, ToolResult, Toolset, WorkData, WorkspaceId,
};

use super::environments::EnvironmentSql;
use super::webhooks::{WebhookSql, emit};
use super::work::{WorkSql, enqueue, has_live_work, settle_session};
use super::{Micros, Seq};
use crate::row::SessionBody;
use crate::rules::session::{CallKind, FreshIds, KnownCall, SessionView, Step, plan_append, referenced_calls};
use crate::rules::webhook::{Change, Outbox};
use crate::{Appended, EventAuthor, Result, SessionEvent};

/// A session and its row number.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub session: Session,
    pub seq: Seq,
}

/// SQL over sessions and their logs.
pub trait SessionSql: super::Clock {
    /// The session, its row locked until the transaction ends (PostgreSQL: `FOR UPDATE`), so
    /// what an append judges stays true while it writes and its events are numbered after every
    /// event already committed. Unknown, or another workspace's: not found.
    async fn lock_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<SessionRow>;
    /// The ids of the session's events of the given types not yet answered, in log order.
    async fn unanswered_events(&self, session: Seq, types: &[&str]) -> Result<Vec<EventId>>;
    /// The type of event `id` of the session's log and whether it was answered.
    async fn event_answered(&self, session: Seq, id: &EventId) -> Result<Option<(String, bool)>>;
    /// The first event of type `kind` whose top-level field `key` is `id`.
    async fn first_event_naming(
        &self,
        session: Seq,
        kind: &str,
        key: &str,
        id: &EventId,
    ) -> Result<Option<SessionEvent>>;
    /// Records an event processed at `processed_at`; its position in the log.
    async fn insert_event(&self, session: Seq, event: &LoggedEvent, processed_at: Micros) -> Result<Seq>;
    /// Marks event `id` of the session answered.
    async fn mark_answered(&self, session: Seq, id: &EventId) -> Result<()>;
    /// Writes a session's status and body.
    async fn update_session_state(
        &self,
        session: Seq,
        status: SessionStatus,
        body: &SessionBody,
        now: Micros,
    ) -> Result<()>;
}

/// A tool call of the log, with the result that answered it if one did.
async fn known_call<S: SessionSql>(sql: &S, session: Seq, id: &EventId) -> Result<Option<KnownCall>> {
    let Some((kind, answered)) = sql.event_answered(session, id).await? else { return Ok(None) };
    // Confirmations name their call too: an id of another type is simply no call.
    let Some(kind) = CallKind::of_type(&kind) else { return Ok(None) };
    let answer = if answered { recorded_result(sql, session, kind, id).await? } else { None };
    Ok(Some(KnownCall { kind, answered, answer }))
}

/// The result recorded for a call, if a result (not a denial) answered it.
async fn recorded_result<S: SessionSql>(
    sql: &S,
    session: Seq,
    kind: CallKind,
    id: &EventId,
) -> Result<Option<(ToolResult, SessionEvent)>> {
    let (result_type, key) = kind.result_type_and_key();
    let found = sql.first_event_naming(session, result_type, key, id).await?;
    Ok(found.and_then(|e| match &e.event.event {
        Event::UserToolResult(r) | Event::UserCustomToolResult(r) => Some((r.clone(), e)),
        _ => None,
    }))
}

/// Appends events: locks the session's row, loads what the session's rules need, plans with
/// [`plan_append`], and carries the plan out.
///
/// Locks, in order: the session's row, its environment's (held against deletion, since a work
/// item may be queued on it), then the session's lapsed work items as they are settled.
pub async fn append<S>(
    sql: &S,
    ws: &WorkspaceId,
    session: &SessionId,
    events: Vec<Event>,
    author: &EventAuthor,
    lease_ttl: u64,
) -> Result<Appended>
where
    S: SessionSql + EnvironmentSql + WorkSql + WebhookSql + super::DreamSql,
{
    let SessionRow { session: s, seq: session_seq } = sql.lock_session(ws, session).await?;
    if !matches!(author, EventAuthor::Server | EventAuthor::ServerTools) {
        // A dream's session is its runner's alone while the dream lasts.
        super::dreams::guard(sql, ws, session.as_str(), "post events to").await?;
    }
    let env = sql.hold_environment(ws, &s.environment_id).await?;
    let now = sql.now().await?;
    settle_session(sql, session, now).await?;
    let view = SessionView {
        id: session,
        status: s.status,
        archived: s.archived_at.is_some(),
        stop_reason: s.stop_reason.clone(),
        tools: Toolset::of_agent(&s.agent),
        open_calls: sql.unanswered_events(session_seq, &CallKind::CALL_TYPES).await?,
        self_hosted: env.environment.is_self_hosted(),
        has_live_work: has_live_work(sql, session).await?,
    };
    let mut known = HashMap::new();
    for id in referenced_calls(&events) {
        if let Some(call) = known_call(sql, session_seq, id).await? {
            known.insert(id.clone(), call);
        }
    }
    let plan = plan_append(&view, known, events, author, &mut FreshIds(mnemo_api::rfc3339_micros(now)))?;
    let mut appended = Appended::default();
    let mut outbox = Outbox::default();
    for step in plan.steps {
        match step {
            Step::Record { event, requested } => {
                outbox.record(Change::Logged(&event.event), session.as_str());
                let seq = sql.insert_event(session_seq, &event, now).await?;
                let stored = SessionEvent { seq, event };
                if requested {
                    appended.recorded.push(stored.clone());
                }
                appended.written.push(stored);
            }
            Step::MarkAnswered(id) => sql.mark_answered(session_seq, &id).await?,
            Step::Existing(event) => appended.recorded.push(event),
        }
    }
    if plan.status.is_some() || plan.stop_reason.is_some() || plan.usage.is_some() {
        let mut body = SessionBody::of(&s);
        if let Some(reason) = plan.stop_reason {
            body.stop_reason = Some(reason);
        }
        if let Some(usage) = plan.usage {
            body.usage = Some(body.usage.unwrap_or_default().plus(usage));
        }
        let status = plan.status.unwrap_or(s.status);
        sql.update_session_state(session_seq, status, &body, sql.now().await?).await?;
    }
    if plan.enqueue_work {
        enqueue(sql, env.seq, &WorkData::session(session), lease_ttl).await?;
        appended.enqueued_work = true;
    }
    emit(sql, ws, outbox).await?;
    Ok(appended)
}
