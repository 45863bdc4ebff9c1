//! Session events: the log, and appending to it under the session's rules.
//!
//! An append locks the session's row first ([`sessions::lock`]) and holds it until it commits,
//! so what it judges (the status, the open tool calls, whether work is live) stays true while
//! it writes, and the events it writes are numbered after every event already committed: a
//! reader that has seen position `n` of a log never later finds an event before `n`.

use std::collections::HashMap;

use mnemo_api::{Event, EventId, SessionId, SessionStatus, ToolResult, WorkData};
use mnemo_store::rules::session::{CallKind, FreshIds, KnownCall, SessionView, Step, plan_append, referenced_calls};
use mnemo_store::rules::webhook::{Change, Outbox};
use mnemo_store::{Appended, Cursor, EventAuthor, ListEvents, Listing, Result, SessionEvent, StoreError};
use serde_json::Value;

use crate::engine::{Param, Tx, all, col, exec, failure, now, opt};
use crate::{environments, parse_id, rfc3339, sessions, work};

/// The events `sql` finds, as `(seq, body)` rows.
async fn rows(tx: &Tx<'_>, sql: &str, params: &[Param<'_>]) -> Result<Vec<SessionEvent>> {
    all(tx, sql, params)
        .await?
        .iter()
        .map(|r| {
            let body: String = col(r, 1)?;
            Ok(SessionEvent { seq: col(r, 0)?, body: serde_json::from_str(&body).unwrap_or(Value::Null) })
        })
        .collect()
}

pub(crate) async fn list(tx: &Tx<'_>, session: &SessionId, q: &ListEvents) -> Result<Listing<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(tx, session).await?;
    let (bound, order, cmp) = match (&q.after, q.descending) {
        (None, false) => (i64::MIN, "ASC", ">"),
        (None, true) => (i64::MAX, "DESC", "<"),
        (Some(Cursor::After(s)), false) => (*s, "ASC", ">"),
        (Some(Cursor::Before(s)), true) => (*s, "DESC", "<"),
        _ => return Err(StoreError::InvalidCursor),
    };
    let mut events = rows(
        tx,
        &format!(
            "SELECT seq, body FROM session_events WHERE session_seq = $1 AND seq {cmp} $2 \
             AND (cardinality($3::text[]) = 0 OR type = ANY($3)) \
             AND COALESCE(processed_at, 0) >= $5 AND COALESCE(processed_at, 0) <= $6 ORDER BY seq {order} LIMIT $4"
        ),
        &[
            &seq,
            &bound,
            &q.types,
            &(i64::from(q.limit) + 1),
            &q.processed_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            &q.processed_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
        ],
    )
    .await?;
    let more = events.len() > q.limit as usize;
    events.truncate(q.limit as usize);
    let next =
        more.then(|| events.last().map(|e| if q.descending { Cursor::Before(e.seq) } else { Cursor::After(e.seq) }));
    Ok(Listing { items: events, next: next.flatten() })
}

/// Every event of a session after position `after`, in log order.
pub(crate) async fn after(tx: &Tx<'_>, session: &SessionId, after: i64) -> Result<Vec<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(tx, session).await?;
    rows(tx, "SELECT seq, body FROM session_events WHERE session_seq = $1 AND seq > $2 ORDER BY seq", &[&seq, &after])
        .await
}

/// The unanswered tool calls of a session, in log order.
async fn open_calls(tx: &Tx<'_>, session_seq: i64) -> Result<Vec<EventId>> {
    let rows = all(
        tx,
        "SELECT id FROM session_events WHERE session_seq = $1 AND type IN ('agent.tool_use', 'agent.custom_tool_use') \
         AND NOT answered ORDER BY seq",
        &[&session_seq],
    )
    .await?;
    rows.iter().map(|r| parse_id(&col::<String>(r, 0)?)).collect()
}

/// A tool call of the log, with the result that answered it if one did.
async fn known_call(tx: &Tx<'_>, session_seq: i64, id: &EventId) -> Result<Option<KnownCall>> {
    let row = opt(
        tx,
        "SELECT type, answered FROM session_events WHERE id = $1 AND session_seq = $2",
        &[&id.as_str(), &session_seq],
    )
    .await?;
    let Some(row) = row else { return Ok(None) };
    let (kind, answered): (String, bool) = (col(&row, 0)?, col(&row, 1)?);
    // Confirmations name their call too: an id of another type is simply no call.
    let Some(kind) = CallKind::of_type(&kind) else { return Ok(None) };
    let answer = if answered { recorded_result(tx, session_seq, kind, id).await? } else { None };
    Ok(Some(KnownCall { kind, answered, answer }))
}

/// The result recorded for a call, if a result (not a denial) answered it.
async fn recorded_result(
    tx: &Tx<'_>,
    session_seq: i64,
    kind: CallKind,
    id: &EventId,
) -> Result<Option<(ToolResult, SessionEvent)>> {
    let (result_type, key) = kind.result_type_and_key();
    let found = rows(
        tx,
        &format!(
            "SELECT seq, body FROM session_events WHERE session_seq = $1 AND type = $2 \
             AND (body::jsonb ->> '{key}') = $3 ORDER BY seq LIMIT 1"
        ),
        &[&session_seq, &result_type, &id.as_str()],
    )
    .await?;
    Ok(found.into_iter().next().and_then(|e| match Event::parse(e.body.clone()) {
        Ok(Event::UserToolResult(r) | Event::UserCustomToolResult(r)) => Some((r, e)),
        _ => None,
    }))
}

/// Appends events: locks the session's row, loads what the session's rules need, plans with
/// [`mnemo_store::rules::session::plan_append`], and carries the plan out.
///
/// Locks, in order: the session's row, its environment's (held against deletion, since a work
/// item may be queued on it), then the session's lapsed work items as they are settled.
pub(crate) async fn append(
    tx: &Tx<'_>,
    session: &SessionId,
    events: Vec<Event>,
    author: &EventAuthor,
    lease_ttl: u64,
) -> Result<Appended> {
    let (s, session_seq) = sessions::lock(tx, session).await?;
    let (env, env_seq) = environments::hold(tx, &s.environment_id).await?;
    let now = now(tx).await?;
    work::settle_session(tx, session, now).await?;
    let view = SessionView {
        id: session,
        status: SessionStatus::parse(&s.status)
            .ok_or_else(|| failure(format!("session `{session}` has an unknown status `{}`", s.status)))?,
        archived: s.archived_at.is_some(),
        stop_reason: s.stop_reason.clone().and_then(|r| serde_json::from_value(r).ok()),
        agent: &s.agent,
        open_calls: open_calls(tx, session_seq).await?,
        self_hosted: env.is_self_hosted(),
        has_live_work: work::has_live_work(tx, session).await?,
    };
    let mut known = HashMap::new();
    for id in referenced_calls(&events) {
        if let Some(call) = known_call(tx, session_seq, id).await? {
            known.insert(id.clone(), call);
        }
    }
    let plan = plan_append(&view, known, events, author, &mut FreshIds(rfc3339(now)))?;
    let mut appended = Appended::default();
    let mut outbox = Outbox::default();
    for step in plan.steps {
        match step {
            Step::Record { event, requested } => {
                outbox.record(Change::Logged(&event.event), session.as_str());
                let seq = sessions::insert_event(tx, session_seq, &event, now).await?;
                let stored = SessionEvent { seq, body: event.to_json() };
                if requested {
                    appended.recorded.push(stored.clone());
                }
                appended.written.push(stored);
            }
            Step::MarkAnswered(id) => {
                exec(
                    tx,
                    "UPDATE session_events SET answered = TRUE WHERE id = $1 AND session_seq = $2",
                    &[&id.as_str(), &session_seq],
                )
                .await?;
            }
            Step::Existing(event) => appended.recorded.push(event),
        }
    }
    if plan.status.is_some() || plan.stop_reason.is_some() || plan.usage.is_some() {
        sessions::set_status(tx, &s, session_seq, plan.status, plan.stop_reason, plan.usage).await?;
    }
    if plan.enqueue_work {
        work::enqueue(tx, env_seq, &WorkData::session(session), lease_ttl).await?;
        appended.enqueued_work = true;
    }
    crate::webhooks::emit(tx, outbox).await?;
    Ok(appended)
}
