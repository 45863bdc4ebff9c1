//! Sessions: creation (snapshots, mount paths, the work item), reads, archive, delete.
//!
//! A write that reads a session's state and then changes it (an append, an update, a status
//! change, archive, delete) first locks the session's row with [`lock`] and holds it until it
//! commits: writers of one session take turns, and a session's events are numbered in commit
//! order. The session's row is the first lock such a writer takes (then the environment's, held
//! against deletion, then work items, then stores).

use std::collections::BTreeMap;

use mnemo_api::{Access, Event, EventId, EventPoster, LoggedEvent, MemoryStoreId, Session, SessionId, WorkData};
use mnemo_store::row::{SessionBody as Body, SessionColumns};
use mnemo_store::rules::{agent, catalog};
use mnemo_store::{ListSessions, Listing, NewSession, Result, StoreError};
use tokio_postgres::Row;

use crate::engine::{Tx, all, col, exec, now, one, opt};
use crate::stores::page;
use crate::webhooks::emit_one;
use crate::{agents, environments, rfc3339, stores, work};
use mnemo_store::rules::webhook::{Change, Outbox, Resource};

const COLUMNS: &str = "id, environment_id, body, status, created_at, updated_at, archived_at, seq";

fn from_row(r: &Row) -> Result<(Session, i64)> {
    let columns = SessionColumns {
        id: col(r, 0)?,
        environment_id: col(r, 1)?,
        status: col(r, 3)?,
        created_at: col(r, 4)?,
        updated_at: col(r, 5)?,
        archived_at: col(r, 6)?,
    };
    let body = Body::parse(&columns.id, &col::<String>(r, 2)?)?;
    Ok((body.into_session(&columns)?, col(r, 7)?))
}

/// The session and its row number, or not-found.
pub(crate) async fn get_with_seq(tx: &Tx<'_>, id: &SessionId) -> Result<(Session, i64)> {
    let row = opt(tx, &format!("SELECT {COLUMNS} FROM sessions WHERE id = $1"), &[&id.as_str()]).await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| StoreError::not_found("session", id))
}

/// Like [`get_with_seq`], and locks the session's row until the transaction ends: the writer
/// holding it is the only one judging and changing the session (its status, its log).
pub(crate) async fn lock(tx: &Tx<'_>, id: &SessionId) -> Result<(Session, i64)> {
    let row = opt(tx, &format!("SELECT {COLUMNS} FROM sessions WHERE id = $1 FOR UPDATE"), &[&id.as_str()]).await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| StoreError::not_found("session", id))
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

/// Creates a session; `true` when it queued a work item. The environment is held against
/// deletion until the session (and its work item) commits.
pub(crate) async fn create(tx: &Tx<'_>, new: &NewSession, lease_ttl: u64) -> Result<(Session, bool)> {
    let env = found(environments::hold(tx, &new.environment).await)?;
    let agent = agents::get(tx, &new.agent.id, new.agent.version).await;
    let mut stores_found = Vec::with_capacity(new.attachments.len());
    for a in &new.attachments {
        stores_found.push(found(stores::get(tx, &a.store).await)?);
    }
    let plan = catalog::plan_session(new, env.as_ref().map(|(e, _)| e), agent, &stores_found)?;
    let id = SessionId::generate();
    let now = now(tx).await?;
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
    let row = one(
        tx,
        &format!(
            "INSERT INTO sessions (id, environment_id, agent_id, body, status, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, 'idle', $5, $5) RETURNING {COLUMNS}"
        ),
        &[&id.as_str(), &new.environment.as_str(), &new.agent.id.as_str(), &body.to_json()?, &now],
    )
    .await?;
    let (session, seq) = from_row(&row)?;
    for a in &new.attachments {
        exec(
            tx,
            "INSERT INTO session_memory_stores (session_seq, memory_store_id, read_only) VALUES ($1, $2, $3)",
            &[&seq, &a.store.as_str(), &(a.access == Access::ReadOnly)],
        )
        .await?;
    }
    for event in &new.initial_events {
        let logged = LoggedEvent {
            id: EventId::generate(),
            event: event.clone(),
            processed_at: Some(rfc3339(now)),
            posted_by: Some(new.poster.clone()),
        };
        insert_event(tx, seq, &logged, now).await?;
    }
    let queued = match (plan.enqueue_work, env) {
        (true, Some((_, env_seq))) => {
            work::enqueue(tx, env_seq, &WorkData::session(&id), lease_ttl).await?;
            true
        }
        _ => false,
    };
    emit_one(tx, Change::Created(Resource::Session), id.as_str()).await?;
    Ok((session, queued))
}

/// Records one event processed at `processed_at`; returns its position in the log. The caller
/// holds the session's row lock (or created the session), so positions grow in commit order.
pub(crate) async fn insert_event(tx: &Tx<'_>, session_seq: i64, event: &LoggedEvent, processed_at: i64) -> Result<i64> {
    let row = one(
        tx,
        "INSERT INTO session_events (id, session_seq, type, body, processed_at) VALUES ($1, $2, $3, $4, $5) \
         RETURNING seq",
        &[&event.id.as_str(), &session_seq, &event.event.kind(), &event.to_json().to_string(), &processed_at],
    )
    .await?;
    col(&row, 0)
}

pub(crate) async fn list(tx: &Tx<'_>, q: &ListSessions) -> Result<Listing<Session>> {
    let before = crate::stores::before(q.after.as_ref())?;
    let rows = all(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM sessions s WHERE seq < $1 AND ($2 OR archived_at IS NULL) \
               AND ($3::text IS NULL OR agent_id = $3) \
               AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM session_memory_stores m \
                    WHERE m.session_seq = s.seq AND m.memory_store_id = $4)) \
               AND (cardinality($5::text[]) = 0 OR status = ANY($5)) \
               AND created_at >= $7 AND created_at <= $8 \
             ORDER BY seq DESC LIMIT $6"
        ),
        &[
            &before,
            &q.include_archived,
            &q.agent_id.as_ref().map(|a| a.as_str()),
            &q.memory_store_id.as_ref().map(MemoryStoreId::as_str),
            &q.statuses,
            &(i64::from(q.limit) + 1),
            &q.created_at_gte.map_or(i64::MIN, |t| t.timestamp_micros()),
            &q.created_at_lte.map_or(i64::MAX, |t| t.timestamp_micros()),
        ],
    )
    .await?;
    let rows = rows.iter().map(from_row).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, q.limit))
}

/// Archives a session: it terminates (an event says so) and its live work is stopped.
pub(crate) async fn archive(tx: &Tx<'_>, id: &SessionId) -> Result<Session> {
    let (session, seq) = lock(tx, id).await?;
    if session.archived_at.is_some() {
        return Ok(session);
    }
    let now = now(tx).await?;
    exec(
        tx,
        "UPDATE sessions SET archived_at = $1, updated_at = $1, status = 'terminated' WHERE seq = $2",
        &[&now, &seq],
    )
    .await?;
    let terminated = LoggedEvent {
        id: EventId::generate(),
        event: Event::StatusTerminated,
        processed_at: Some(rfc3339(now)),
        posted_by: Some(EventPoster::ServerActor),
    };
    insert_event(tx, seq, &terminated, now).await?;
    work::stop_session_work(tx, id).await?;
    let mut outbox = Outbox::default();
    outbox.record(Change::Logged(&terminated.event), id.as_str());
    outbox.record(Change::Archived { resource: Resource::Session, already: false }, id.as_str());
    crate::webhooks::emit(tx, outbox).await?;
    get_with_seq(tx, id).await.map(|(s, _)| s)
}

/// Deletes a session, its log and its attachments, after stopping its live work.
pub(crate) async fn delete(tx: &Tx<'_>, id: &SessionId) -> Result<()> {
    let (_, seq) = lock(tx, id).await?;
    work::stop_session_work(tx, id).await?;
    exec(tx, "DELETE FROM session_events WHERE session_seq = $1", &[&seq]).await?;
    exec(tx, "DELETE FROM session_memory_stores WHERE session_seq = $1", &[&seq]).await?;
    exec(tx, "DELETE FROM sessions WHERE seq = $1", &[&seq]).await?;
    emit_one(tx, Change::Deleted(Resource::Session), id.as_str()).await?;
    Ok(())
}

/// How a session may reach a store it has attached; `None` when it has not attached it.
pub(crate) async fn store_access(tx: &Tx<'_>, id: &SessionId, store: &MemoryStoreId) -> Result<Option<Access>> {
    let row = opt(
        tx,
        "SELECT m.read_only FROM session_memory_stores m JOIN sessions s ON s.seq = m.session_seq \
         WHERE s.id = $1 AND m.memory_store_id = $2",
        &[&id.as_str(), &store.as_str()],
    )
    .await?;
    row.map(|r| Ok(if col::<bool>(&r, 0)? { Access::ReadOnly } else { Access::ReadWrite })).transpose()
}

/// Claims (or renews) a session's turn lease under [`agent::claim`], its row locked.
pub(crate) async fn claim_turn(tx: &Tx<'_>, id: &SessionId, holder: &str, ttl_micros: i64) -> Result<bool> {
    let (_, seq) = lock(tx, id).await?;
    let current = turn_lease(tx, seq).await?;
    match agent::claim(current.as_ref(), holder, now(tx).await?, ttl_micros) {
        agent::Claim::Held => Ok(false),
        agent::Claim::Granted(lease) => {
            exec(
                tx,
                "UPDATE sessions SET turn_holder = $1, turn_expires_at = $2 WHERE seq = $3",
                &[&lease.holder, &lease.expires_at, &seq],
            )
            .await?;
            Ok(true)
        }
    }
}

/// Ends `holder`'s turn lease of a session, its row locked.
pub(crate) async fn release_turn(tx: &Tx<'_>, id: &SessionId, holder: &str) -> Result<()> {
    let (_, seq) = lock(tx, id).await?;
    if agent::releases(turn_lease(tx, seq).await?.as_ref(), holder) {
        exec(tx, "UPDATE sessions SET turn_holder = NULL, turn_expires_at = NULL WHERE seq = $1", &[&seq]).await?;
    }
    Ok(())
}

async fn turn_lease(tx: &Tx<'_>, seq: i64) -> Result<Option<agent::TurnLease>> {
    let row = one(tx, "SELECT turn_holder, turn_expires_at FROM sessions WHERE seq = $1", &[&seq]).await?;
    let holder: Option<String> = col(&row, 0)?;
    let expires_at: Option<i64> = col(&row, 1)?;
    Ok(holder.zip(expires_at).map(|(holder, expires_at)| agent::TurnLease { holder, expires_at }))
}

/// Updates a session's title and metadata, judged with its row locked.
pub(crate) async fn update(
    tx: &Tx<'_>,
    id: &SessionId,
    title: Option<Option<String>>,
    metadata: Option<&BTreeMap<String, Option<String>>>,
) -> Result<Session> {
    let (session, seq) = lock(tx, id).await?;
    let (title, metadata) = catalog::update_session(&session, title, metadata)?;
    let mut body = Body::of(&session);
    body.title = title;
    body.metadata = metadata;
    let now = now(tx).await?;
    let row = one(
        tx,
        &format!("UPDATE sessions SET body = $1, updated_at = $2 WHERE seq = $3 RETURNING {COLUMNS}"),
        &[&body.to_json()?, &now, &seq],
    )
    .await?;
    emit_one(tx, Change::Updated { resource: Resource::Session, changed: true }, id.as_str()).await?;
    from_row(&row).map(|(s, _)| s)
}
