//! Session events: the log, and appending to it under the session's rules.

use std::collections::HashMap;

use mnemo_api::{Event, EventId, SessionId, SessionStatus, ToolResult, WorkData};
use mnemo_store::rules::session::{CallKind, FreshIds, KnownCall, SessionView, Step, plan_append, referenced_calls};
use mnemo_store::rules::webhook::{Change, Outbox};
use mnemo_store::{Appended, Cursor, EventAuthor, ListEvents, Listing, Result, SessionEvent, StoreError};
use rusqlite::{Connection, params};
use serde_json::Value;

use crate::engine::{backend, failure, query_one};
use crate::{now_micros, parse_id, rfc3339, sessions, work};

fn rows(c: &Connection, sql: &str, p: impl rusqlite::Params) -> Result<Vec<SessionEvent>> {
    c.prepare_cached(sql)
        .and_then(|mut s| {
            s.query_map(p, |r| {
                let body: String = r.get(1)?;
                Ok(SessionEvent { seq: r.get(0)?, body: serde_json::from_str(&body).unwrap_or(Value::Null) })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(backend)
}

pub(crate) fn list(c: &Connection, session: &SessionId, q: &ListEvents) -> Result<Listing<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(c, session)?;
    let types = serde_json::to_string(&q.types).map_err(backend)?;
    let (bound, order, cmp) = match (&q.after, q.descending) {
        (None, false) => (i64::MIN, "ASC", ">"),
        (None, true) => (i64::MAX, "DESC", "<"),
        (Some(Cursor::After(s)), false) => (*s, "ASC", ">"),
        (Some(Cursor::Before(s)), true) => (*s, "DESC", "<"),
        _ => return Err(StoreError::InvalidCursor),
    };
    let mut events = rows(
        c,
        &format!(
            "SELECT seq, body FROM session_events WHERE session_seq = ?1 AND seq {cmp} ?2 \
             AND (?3 = '[]' OR type IN (SELECT value FROM json_each(?3))) \
             AND COALESCE(processed_at, 0) >= ?5 AND COALESCE(processed_at, 0) <= ?6 ORDER BY seq {order} LIMIT ?4"
        ),
        params![
            seq,
            bound,
            types,
            i64::from(q.limit) + 1,
            q.processed_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            q.processed_lte.map_or(i64::MAX, |t| t.timestamp_micros())
        ],
    )?;
    let more = events.len() > q.limit as usize;
    events.truncate(q.limit as usize);
    let next =
        more.then(|| events.last().map(|e| if q.descending { Cursor::Before(e.seq) } else { Cursor::After(e.seq) }));
    Ok(Listing { items: events, next: next.flatten() })
}

pub(crate) fn after(c: &Connection, session: &SessionId, after: i64) -> Result<Vec<SessionEvent>> {
    let (_, seq) = sessions::get_with_seq(c, session)?;
    rows(
        c,
        "SELECT seq, body FROM session_events WHERE session_seq = ?1 AND seq > ?2 ORDER BY seq",
        params![seq, after],
    )
}

/// The unanswered tool calls of a session, in log order.
fn open_calls(c: &Connection, session_seq: i64) -> Result<Vec<EventId>> {
    let ids = c
        .prepare_cached(
            "SELECT id FROM session_events WHERE session_seq = ?1 AND type IN ('agent.tool_use', 'agent.custom_tool_use') \
             AND answered = 0 ORDER BY seq",
        )
        .and_then(|mut s| s.query_map([session_seq], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>())
        .map_err(backend)?;
    ids.iter().map(|id| parse_id(id)).collect()
}

/// A tool call of the log, with the result that answered it if one did.
fn known_call(c: &Connection, session_seq: i64, id: &EventId) -> Result<Option<KnownCall>> {
    let call: Option<(String, bool)> = query_one(
        c,
        "SELECT type, answered FROM session_events WHERE id = ?1 AND session_seq = ?2",
        params![id.as_str(), session_seq],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let Some((kind, answered)) = call else { return Ok(None) };
    // Confirmations name their call too: an id of another type is simply no call.
    let Some(kind) = CallKind::of_type(&kind) else { return Ok(None) };
    let answer = if answered { recorded_result(c, session_seq, kind, id)? } else { None };
    Ok(Some(KnownCall { kind, answered, answer }))
}

/// The result recorded for a call, if a result (not a denial) answered it.
fn recorded_result(
    c: &Connection,
    session_seq: i64,
    kind: CallKind,
    id: &EventId,
) -> Result<Option<(ToolResult, SessionEvent)>> {
    let (result_type, key) = kind.result_type_and_key();
    let found = rows(
        c,
        &format!(
            "SELECT seq, body FROM session_events WHERE session_seq = ?1 AND type = ?2 \
             AND json_extract(body, '$.{key}') = ?3 ORDER BY seq LIMIT 1"
        ),
        params![session_seq, result_type, id.as_str()],
    )?;
    Ok(found.into_iter().next().and_then(|e| match Event::parse(e.body.clone()) {
        Ok(Event::UserToolResult(r) | Event::UserCustomToolResult(r)) => Some((r, e)),
        _ => None,
    }))
}

/// Appends events: loads what the session's rules need, plans with
/// [`mnemo_store::rules::session::plan_append`], and carries the plan out.
pub(crate) fn append(
    c: &Connection,
    session: &SessionId,
    events: Vec<Event>,
    author: &EventAuthor,
    lease_ttl: u64,
) -> Result<Appended> {
    let (s, session_seq) = sessions::get_with_seq(c, session)?;
    let (env, env_seq) = crate::environments::get_with_seq(c, &s.environment_id)?;
    let now = now_micros();
    work::settle_session(c, session, now)?;
    let view = SessionView {
        id: session,
        status: SessionStatus::parse(&s.status)
            .ok_or_else(|| failure(format!("session `{session}` has an unknown status `{}`", s.status)))?,
        archived: s.archived_at.is_some(),
        stop_reason: s.stop_reason.clone().and_then(|r| serde_json::from_value(r).ok()),
        agent: &s.agent,
        open_calls: open_calls(c, session_seq)?,
        self_hosted: env.is_self_hosted(),
        has_live_work: work::has_live_work(c, session)?,
    };
    let mut known = HashMap::new();
    for id in referenced_calls(&events) {
        if let Some(call) = known_call(c, session_seq, id)? {
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
                let stored =
                    SessionEvent { seq: sessions::insert_event(c, session_seq, &event, now)?, body: event.to_json() };
                if requested {
                    appended.recorded.push(stored.clone());
                }
                appended.written.push(stored);
            }
            Step::MarkAnswered(id) => {
                c.prepare_cached("UPDATE session_events SET answered = 1 WHERE id = ?1 AND session_seq = ?2")
                    .and_then(|mut st| st.execute(params![id.as_str(), session_seq]))
                    .map_err(backend)?;
            }
            Step::Existing(event) => appended.recorded.push(event),
        }
    }
    if plan.status.is_some() || plan.stop_reason.is_some() || plan.usage.is_some() {
        sessions::set_status(c, session_seq, plan.status, plan.stop_reason, plan.usage)?;
    }
    if plan.enqueue_work {
        work::enqueue(c, env_seq, &WorkData::session(session), lease_ttl)?;
        appended.enqueued_work = true;
    }
    crate::webhooks::emit(c, outbox, now)?;
    Ok(appended)
}
