//! Sessions: creation (snapshots, mount paths, the work item), reads, archive, delete.

use std::collections::BTreeMap;

use mnemo_api::{Access, Event, EventId, EventPoster, LoggedEvent, MemoryStoreId, Session, SessionId, WorkData};
use mnemo_store::row::{SessionBody as Body, SessionColumns};
use mnemo_store::rules::{agent, catalog};
use mnemo_store::{ListSessions, Listing, NewSession, Result, StoreError};
use rusqlite::{Connection, Row, params};

use crate::engine::{backend, query_one};
use crate::stores::page;
use crate::webhooks::emit_one;
use crate::{agents, environments, now_micros, rfc3339, stores, work};
use mnemo_store::rules::webhook::{Change, Outbox, Resource};

const COLUMNS: &str = "id, environment_id, body, status, created_at, updated_at, archived_at, seq";

/// A session row's columns and its body's text, read as they are; [`decode`] makes the
/// session of them (a row that cannot be read back is an error naming it, not a default).
fn from_row(r: &Row<'_>) -> rusqlite::Result<(SessionColumns, String, i64)> {
    let columns = SessionColumns {
        id: r.get(0)?,
        environment_id: r.get(1)?,
        status: r.get(3)?,
        created_at: r.get(4)?,
        updated_at: r.get(5)?,
        archived_at: r.get(6)?,
    };
    Ok((columns, r.get(2)?, r.get(7)?))
}

/// The session a row read by [`from_row`] holds.
fn decode((columns, body, seq): (SessionColumns, String, i64)) -> Result<(Session, i64)> {
    Ok((Body::parse(&columns.id, &body)?.into_session(&columns)?, seq))
}

pub(crate) fn get_with_seq(c: &Connection, id: &SessionId) -> Result<(Session, i64)> {
    query_one(c, &format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1"), [id.as_str()], from_row)?
        .map(decode)
        .transpose()?
        .ok_or_else(|| StoreError::not_found("session", id))
}

/// `None` for an object that does not exist; any other failure stays a failure.
fn found<T>(lookup: Result<T>) -> Result<Option<T>> {
    match lookup {
        Ok(object) => Ok(Some(object)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(StoreError::Coded { code, .. }) if code.is_not_found() => Ok(None),
        Err(other) => Err(other),
    }
}

pub(crate) fn create(c: &Connection, new: &NewSession, lease_ttl: u64) -> Result<Session> {
    let env = found(environments::get_with_seq(c, &new.environment))?;
    let agent = agents::get(c, &new.agent.id, new.agent.version);
    let stores_found = new.attachments.iter().map(|a| found(stores::get(c, &a.store))).collect::<Result<Vec<_>>>()?;
    let plan = catalog::plan_session(new, env.as_ref().map(|(e, _)| e), agent, &stores_found)?;
    let id = SessionId::generate();
    let now = now_micros();
    let body = Body {
        title: new.title.clone(),
        metadata: new.metadata.clone(),
        agent: plan.agent,
        memory_prompt: plan.memory_prompt,
        usage: None,
        resources: plan.resources,
        budget: new.budget.clone(),
        stop_reason: None,
    };
    c.execute(
        "INSERT INTO sessions (id, environment_id, agent_id, body, status, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, 'idle', ?5, ?5)",
        params![id.as_str(), new.environment.as_str(), new.agent.id.as_str(), body.to_json()?, now],
    )
    .map_err(backend)?;
    let seq = c.last_insert_rowid();
    for a in &new.attachments {
        c.execute(
            "INSERT INTO session_memory_stores (session_seq, memory_store_id, read_only) VALUES (?1, ?2, ?3)",
            params![seq, a.store.as_str(), a.access == Access::ReadOnly],
        )
        .map_err(backend)?;
    }
    for event in &new.initial_events {
        let logged = LoggedEvent {
            id: EventId::generate(),
            event: event.clone(),
            processed_at: Some(rfc3339(now)),
            posted_by: Some(new.poster.clone()),
        };
        insert_event(c, seq, &logged, now)?;
    }
    if let (true, Some((_, env_seq))) = (plan.enqueue_work, env) {
        work::enqueue(c, env_seq, &WorkData::session(&id), lease_ttl)?;
    }
    emit_one(c, Change::Created(Resource::Session), id.as_str())?;
    get_with_seq(c, &id).map(|(s, _)| s)
}

/// Records one event processed at `processed_at`; returns its position in the log.
pub(crate) fn insert_event(c: &Connection, session_seq: i64, event: &LoggedEvent, processed_at: i64) -> Result<i64> {
    c.prepare_cached(
        "INSERT INTO session_events (id, session_seq, type, body, processed_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| {
        s.execute(params![
            event.id.as_str(),
            session_seq,
            event.event.kind(),
            event.to_json().to_string(),
            processed_at
        ])
    })
    .map_err(backend)?;
    Ok(c.last_insert_rowid())
}

pub(crate) fn list(c: &Connection, q: &ListSessions) -> Result<Listing<Session>> {
    let before = crate::stores::before(q.after.as_ref())?;
    let statuses = serde_json::to_string(&q.statuses).map_err(backend)?;
    let mut stmt = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM sessions s WHERE seq < ?1 AND (?2 OR archived_at IS NULL) \
               AND (?3 IS NULL OR agent_id = ?3) \
               AND (?4 IS NULL OR EXISTS (SELECT 1 FROM session_memory_stores m WHERE m.session_seq = s.seq AND m.memory_store_id = ?4)) \
               AND (?5 = '[]' OR status IN (SELECT value FROM json_each(?5))) \
               AND created_at >= ?7 AND created_at <= ?8 \
             ORDER BY seq DESC LIMIT ?6"
        ))
        .map_err(backend)?;
    let rows = stmt
        .query_map(
            params![
                before,
                q.include_archived,
                q.agent_id.as_ref().map(|a| a.as_str()),
                q.memory_store_id.as_ref().map(MemoryStoreId::as_str),
                statuses,
                i64::from(q.limit) + 1,
                q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
                q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros())
            ],
            from_row,
        )
        .map_err(backend)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(backend)?;
    Ok(page(rows.into_iter().map(decode).collect::<Result<Vec<_>>>()?, q.limit))
}

pub(crate) fn archive(c: &Connection, id: &SessionId) -> Result<Session> {
    let (session, seq) = get_with_seq(c, id)?;
    if session.archived_at.is_none() {
        let now = now_micros();
        let mut outbox = Outbox::default();
        c.execute(
            "UPDATE sessions SET archived_at = ?1, updated_at = ?1, status = 'terminated' WHERE seq = ?2",
            params![now, seq],
        )
        .map_err(backend)?;
        let terminated = LoggedEvent {
            id: EventId::generate(),
            event: Event::StatusTerminated,
            processed_at: Some(rfc3339(now)),
            posted_by: Some(EventPoster::ServerActor),
        };
        insert_event(c, seq, &terminated, now)?;
        work::stop_session_work(c, id)?;
        outbox.record(Change::Logged(&terminated.event), id.as_str());
        outbox.record(Change::Archived { resource: Resource::Session, already: false }, id.as_str());
        crate::webhooks::emit(c, outbox, now)?;
    }
    get_with_seq(c, id).map(|(s, _)| s)
}

pub(crate) fn delete(c: &Connection, id: &SessionId) -> Result<()> {
    let (_, seq) = get_with_seq(c, id)?;
    work::stop_session_work(c, id)?;
    c.execute("DELETE FROM session_events WHERE session_seq = ?1", [seq]).map_err(backend)?;
    c.execute("DELETE FROM session_memory_stores WHERE session_seq = ?1", [seq]).map_err(backend)?;
    c.execute("DELETE FROM sessions WHERE seq = ?1", [seq]).map_err(backend)?;
    emit_one(c, Change::Deleted(Resource::Session), id.as_str())?;
    Ok(())
}

pub(crate) fn store_access(c: &Connection, id: &SessionId, store: &MemoryStoreId) -> Result<Option<Access>> {
    let read_only: Option<bool> = query_one(
        c,
        "SELECT m.read_only FROM session_memory_stores m JOIN sessions s ON s.seq = m.session_seq \
             WHERE s.id = ?1 AND m.memory_store_id = ?2",
        params![id.as_str(), store.as_str()],
        |r| r.get(0),
    )?;
    Ok(read_only.map(|ro| if ro { Access::ReadOnly } else { Access::ReadWrite }))
}

/// Claims (or renews) a session's turn lease under [`agent::claim`].
pub(crate) fn claim_turn(c: &Connection, id: &SessionId, holder: &str, ttl_micros: i64) -> Result<bool> {
    let (_, seq) = get_with_seq(c, id)?;
    let current = turn_lease(c, seq)?;
    match agent::claim(current.as_ref(), holder, now_micros(), ttl_micros) {
        agent::Claim::Held => Ok(false),
        agent::Claim::Granted(lease) => {
            c.execute(
                "UPDATE sessions SET turn_holder = ?1, turn_expires_at = ?2 WHERE seq = ?3",
                params![lease.holder, lease.expires_at, seq],
            )
            .map_err(backend)?;
            Ok(true)
        }
    }
}

/// Ends `holder`'s turn lease of a session.
pub(crate) fn release_turn(c: &Connection, id: &SessionId, holder: &str) -> Result<()> {
    let (_, seq) = get_with_seq(c, id)?;
    if agent::releases(turn_lease(c, seq)?.as_ref(), holder) {
        c.execute("UPDATE sessions SET turn_holder = NULL, turn_expires_at = NULL WHERE seq = ?1", [seq])
            .map_err(backend)?;
    }
    Ok(())
}

fn turn_lease(c: &Connection, seq: i64) -> Result<Option<agent::TurnLease>> {
    let (holder, expires_at): (Option<String>, Option<i64>) = c
        .query_row("SELECT turn_holder, turn_expires_at FROM sessions WHERE seq = ?1", [seq], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(backend)?;
    Ok(holder.zip(expires_at).map(|(holder, expires_at)| agent::TurnLease { holder, expires_at }))
}

pub(crate) fn update(
    c: &Connection,
    id: &SessionId,
    title: Option<Option<String>>,
    metadata: Option<&BTreeMap<String, Option<String>>>,
) -> Result<Session> {
    let (session, seq) = get_with_seq(c, id)?;
    let (title, metadata) = catalog::update_session(&session, title, metadata)?;
    let body: String = c.query_row("SELECT body FROM sessions WHERE seq = ?1", [seq], |r| r.get(0)).map_err(backend)?;
    let mut body = Body::parse(id.as_str(), &body)?;
    body.title = title;
    body.metadata = metadata;
    c.execute(
        "UPDATE sessions SET body = ?1, updated_at = ?2 WHERE seq = ?3",
        params![body.to_json()?, now_micros(), seq],
    )
    .map_err(backend)?;
    emit_one(c, Change::Updated { resource: Resource::Session, changed: true }, id.as_str())?;
    get_with_seq(c, id).map(|(s, _)| s)
}
