//! The self-hosted work queue: delivery with reclaim, leases kept by conditional heartbeats,
//! stops, and the sessions tokens bound to each delivery.
//!
//! Every transition runs on the single writer thread, so two pollers can never be handed the
//! same item and two heartbeats can never both match one expectation.

use std::collections::BTreeMap;

use mnemo_api::{
    EnvironmentId, SessionId, Work, WorkData, WorkHeartbeat, WorkId, WorkLeaseState, WorkQueueStats, WorkState,
    validate_metadata,
};
use mnemo_store::{CredentialHash, Cursor, HeartbeatOutcome, Listing, Result, StoreError};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::engine::backend;
use crate::stores::page;
use crate::{environments, now_micros, parse_id, rfc3339, rfc3339_opt};

/// The first heartbeat's expectation.
pub(crate) const NO_HEARTBEAT: &str = "NO_HEARTBEAT";
/// Bounds on a requested lease.
const MIN_TTL: u64 = 1;
const MAX_TTL: u64 = 3_600;
/// A worker counts as polling for this long after its last poll.
const POLLING_WINDOW_MICROS: i64 = 30_000_000;

const COLUMNS: &str = "w.id, e.id, w.state, w.data, w.metadata, w.created_at, w.acknowledged_at, w.started_at, \
                       w.latest_heartbeat_at, w.stop_requested_at, w.stopped_at, w.seq, w.last_heartbeat, \
                       w.ttl_seconds, w.pending_until, w.session_id";

/// A work row with its bookkeeping.
struct Row_ {
    work: Work,
    seq: i64,
    last_heartbeat: Option<String>,
    ttl: u64,
    pending_until: Option<i64>,
    session_id: Option<String>,
}

fn from_row(r: &Row<'_>) -> rusqlite::Result<Row_> {
    let bad = |e: String| rusqlite::Error::InvalidColumnName(e);
    let state: String = r.get(2)?;
    let data: String = r.get(3)?;
    let metadata: String = r.get(4)?;
    Ok(Row_ {
        work: Work {
            id: parse_id(&r.get::<_, String>(0)?).map_err(|e| bad(e.to_string()))?,
            environment_id: parse_id(&r.get::<_, String>(1)?).map_err(|e| bad(e.to_string()))?,
            state: WorkState::parse(&state).ok_or_else(|| bad(format!("work state {state}")))?,
            data: serde_json::from_str(&data).map_err(|e| bad(e.to_string()))?,
            secret: None,
            metadata: serde_json::from_str(&metadata).unwrap_or_default(),
            created_at: rfc3339(r.get(5)?),
            acknowledged_at: rfc3339_opt(r.get(6)?),
            started_at: rfc3339_opt(r.get(7)?),
            latest_heartbeat_at: rfc3339_opt(r.get(8)?),
            stop_requested_at: rfc3339_opt(r.get(9)?),
            stopped_at: rfc3339_opt(r.get(10)?),
        },
        seq: r.get(11)?,
        last_heartbeat: r.get(12)?,
        ttl: r.get::<_, i64>(13)?.max(0) as u64,
        pending_until: r.get(14)?,
        session_id: r.get(15)?,
    })
}

fn load(c: &Connection, env: &EnvironmentId, id: &WorkId) -> Result<Row_> {
    c.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq WHERE w.id = ?1 AND e.id = ?2"
    ))
    .and_then(|mut s| s.query_row(params![id.as_str(), env.as_str()], from_row).optional())
    .map_err(backend)?
    .ok_or_else(|| StoreError::not_found("work item", id))
}

/// Queues a work item whose lease, once acknowledged, lasts `ttl` seconds between heartbeats.
pub(crate) fn enqueue(c: &Connection, environment_seq: i64, data: &WorkData, ttl: u64) -> Result<WorkId> {
    let id = WorkId::generate();
    let session = (data.kind == "session").then(|| data.id.clone());
    c.execute(
        "INSERT INTO work_items (id, environment_seq, session_id, data, state, metadata, created_at, ttl_seconds) \
         VALUES (?1, ?2, ?3, ?4, 'queued', '{}', ?5, ?6)",
        params![
            id.as_str(),
            environment_seq,
            session,
            serde_json::to_string(data).map_err(backend)?,
            now_micros(),
            ttl as i64
        ],
    )
    .map_err(backend)?;
    Ok(id)
}

fn revoke_tokens(c: &Connection, work_seq: i64, now: i64) -> Result<()> {
    c.execute(
        "UPDATE session_tokens SET revoked_at = ?1 WHERE work_seq = ?2 AND revoked_at IS NULL",
        params![now, work_seq],
    )
    .map_err(backend)?;
    Ok(())
}

/// Returns to the queue every leased item whose lease ran out; their tokens die with the lease.
fn expire_leases(c: &Connection, environment_seq: i64, now: i64) -> Result<()> {
    let expired: Vec<i64> = c
        .prepare_cached(
            "SELECT seq FROM work_items WHERE environment_seq = ?1 AND state IN ('starting', 'active') \
             AND lease_expires_at IS NOT NULL AND lease_expires_at < ?2",
        )
        .and_then(|mut s| {
            s.query_map(params![environment_seq, now], |r| r.get(0))?.collect::<rusqlite::Result<Vec<i64>>>()
        })
        .map_err(backend)?;
    for seq in expired {
        c.execute(
            "UPDATE work_items SET state = 'queued', lease_expires_at = NULL, last_heartbeat = NULL, pending_until = NULL \
             WHERE seq = ?1",
            [seq],
        )
        .map_err(backend)?;
        revoke_tokens(c, seq, now)?;
        tracing::info!(work_seq = seq, "work lease expired; the item is queued again");
    }
    Ok(())
}

pub(crate) fn poll(
    c: &Connection,
    env: &EnvironmentId,
    worker_id: Option<&str>,
    reclaim_ms: u64,
    token_hash: &CredentialHash,
) -> Result<Option<Work>> {
    let (environment, env_seq) = environments::get_with_seq(c, env)?;
    if !environment.is_self_hosted() {
        return Err(StoreError::Invalid(format!("environment `{env}` is not self-hosted; it has no work queue")));
    }
    let now = now_micros();
    if let Some(worker) = worker_id {
        c.execute(
            "INSERT INTO worker_polls (environment_seq, worker_id, last_poll_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (environment_seq, worker_id) DO UPDATE SET last_poll_at = excluded.last_poll_at",
            params![env_seq, worker, now],
        )
        .map_err(backend)?;
    }
    expire_leases(c, env_seq, now)?;
    let next: Option<(i64, String)> = c
        .prepare_cached(
            "SELECT seq, id FROM work_items WHERE environment_seq = ?1 AND state = 'queued' \
             AND (pending_until IS NULL OR pending_until < ?2) ORDER BY seq LIMIT 1",
        )
        .and_then(|mut s| s.query_row(params![env_seq, now], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(backend)?;
    let Some((seq, id)) = next else { return Ok(None) };
    let reclaim_micros = i64::try_from(reclaim_ms.saturating_mul(1000)).unwrap_or(i64::MAX);
    c.execute(
        "UPDATE work_items SET pending_until = ?1 WHERE seq = ?2",
        params![now.saturating_add(reclaim_micros), seq],
    )
    .map_err(backend)?;
    // A new delivery: the previous delivery's token (never acked) is dead.
    revoke_tokens(c, seq, now)?;
    let row = load(c, env, &parse_id(&id)?)?;
    c.execute(
        "INSERT INTO session_tokens (secret_hash, work_seq, session_id, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![&token_hash[..], seq, row.session_id.clone().unwrap_or_default(), now],
    )
    .map_err(backend)?;
    Ok(Some(row.work))
}

pub(crate) fn ack(c: &Connection, env: &EnvironmentId, id: &WorkId) -> Result<Work> {
    let row = load(c, env, id)?;
    let now = now_micros();
    if row.work.state != WorkState::Queued || row.pending_until.is_none_or(|until| until < now) {
        return Err(StoreError::Conflict(format!(
            "work item `{id}` is not waiting for an acknowledgement (state {}); poll again",
            row.work.state.as_str()
        )));
    }
    c.execute(
        "UPDATE work_items SET state = 'starting', acknowledged_at = ?1, pending_until = NULL, lease_expires_at = ?2 \
         WHERE seq = ?3",
        params![now, now + (row.ttl as i64) * 1_000_000, row.seq],
    )
    .map_err(backend)?;
    load(c, env, id).map(|r| r.work)
}

fn lease_state(row: &Row_) -> WorkLeaseState {
    WorkLeaseState {
        last_heartbeat: row.last_heartbeat.clone(),
        lease_extended: false,
        state: row.work.state,
        ttl_seconds: row.ttl,
    }
}

pub(crate) fn heartbeat(
    c: &Connection,
    env: &EnvironmentId,
    id: &WorkId,
    expected: &str,
    desired_ttl: Option<u64>,
) -> Result<HeartbeatOutcome> {
    let now = now_micros();
    let (_, env_seq) = environments::get_with_seq(c, env)?;
    expire_leases(c, env_seq, now)?;
    let row = load(c, env, id)?;
    match row.work.state {
        // A stop is always learned through a normal answer.
        WorkState::Stopping | WorkState::Stopped => {
            return Ok(HeartbeatOutcome::Beat(WorkHeartbeat {
                last_heartbeat: row.last_heartbeat.clone().unwrap_or_default(),
                ttl_seconds: row.ttl,
                lease_extended: false,
                state: row.work.state,
            }));
        }
        // Not leased (never acked, or the lease ran out and the item went back to the queue).
        WorkState::Queued => return Ok(HeartbeatOutcome::PreconditionFailed(lease_state(&row))),
        WorkState::Starting | WorkState::Active => {}
    }
    let stored = row.last_heartbeat.as_deref().unwrap_or(NO_HEARTBEAT);
    if expected != stored {
        return Ok(HeartbeatOutcome::PreconditionFailed(lease_state(&row)));
    }
    let ttl = desired_ttl.map_or(row.ttl, |t| t.clamp(MIN_TTL, MAX_TTL));
    // Unique per heartbeat, so a stale echo can never match a newer one.
    let mut beat_at = now;
    let mut beat = rfc3339(beat_at);
    if Some(beat.as_str()) == row.last_heartbeat.as_deref() {
        beat_at += 1;
        beat = rfc3339(beat_at);
    }
    c.execute(
        "UPDATE work_items SET state = 'active', last_heartbeat = ?1, latest_heartbeat_at = ?2, \
         started_at = COALESCE(started_at, ?2), lease_expires_at = ?3, ttl_seconds = ?4 WHERE seq = ?5",
        params![beat, beat_at, beat_at + (ttl as i64) * 1_000_000, ttl as i64, row.seq],
    )
    .map_err(backend)?;
    Ok(HeartbeatOutcome::Beat(WorkHeartbeat {
        last_heartbeat: beat,
        ttl_seconds: ttl,
        lease_extended: true,
        state: WorkState::Active,
    }))
}

pub(crate) fn stop(c: &Connection, env: &EnvironmentId, id: &WorkId, force: bool) -> Result<Work> {
    let row = load(c, env, id)?;
    if row.work.state == WorkState::Stopped {
        return Err(StoreError::Conflict(format!("work item `{id}` is already stopped")));
    }
    let now = now_micros();
    if force {
        c.execute(
            "UPDATE work_items SET state = 'stopped', stopped_at = ?1, pending_until = NULL, lease_expires_at = NULL \
             WHERE seq = ?2",
            params![now, row.seq],
        )
        .map_err(backend)?;
        revoke_tokens(c, row.seq, now)?;
    } else {
        c.execute(
            "UPDATE work_items SET state = 'stopping', stop_requested_at = COALESCE(stop_requested_at, ?1) WHERE seq = ?2",
            params![now, row.seq],
        )
        .map_err(backend)?;
    }
    load(c, env, id).map(|r| r.work)
}

/// Force-stops every live item of a session (archive, delete).
pub(crate) fn stop_session_work(c: &Connection, session: &SessionId) -> Result<()> {
    let now = now_micros();
    let live: Vec<i64> = c
        .prepare_cached("SELECT seq FROM work_items WHERE session_id = ?1 AND state != 'stopped'")
        .and_then(|mut s| s.query_map([session.as_str()], |r| r.get(0))?.collect::<rusqlite::Result<Vec<i64>>>())
        .map_err(backend)?;
    for seq in live {
        c.execute("UPDATE work_items SET state = 'stopped', stopped_at = ?1 WHERE seq = ?2", params![now, seq])
            .map_err(backend)?;
        revoke_tokens(c, seq, now)?;
    }
    Ok(())
}

pub(crate) fn get(c: &Connection, env: &EnvironmentId, id: &WorkId) -> Result<Work> {
    load(c, env, id).map(|r| r.work)
}

pub(crate) fn update_metadata(
    c: &Connection,
    env: &EnvironmentId,
    id: &WorkId,
    patch: &BTreeMap<String, Option<String>>,
) -> Result<Work> {
    let row = load(c, env, id)?;
    let mut metadata = row.work.metadata.clone();
    for (k, v) in patch {
        match v {
            Some(v) => metadata.insert(k.clone(), v.clone()),
            None => metadata.remove(k),
        };
    }
    validate_metadata(&metadata).map_err(|e| StoreError::Coded { code: "invalid_metadata", message: e.0 })?;
    c.execute(
        "UPDATE work_items SET metadata = ?1 WHERE seq = ?2",
        params![serde_json::to_string(&metadata).map_err(backend)?, row.seq],
    )
    .map_err(backend)?;
    get(c, env, id)
}

pub(crate) fn list(c: &Connection, env: &EnvironmentId, limit: u32, after: Option<&Cursor>) -> Result<Listing<Work>> {
    let (_, env_seq) = environments::get_with_seq(c, env)?;
    let before = crate::stores::before(after)?;
    let rows = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq \
             WHERE w.environment_seq = ?1 AND w.seq < ?2 ORDER BY w.seq DESC LIMIT ?3"
        ))
        .and_then(|mut s| {
            s.query_map(params![env_seq, before, i64::from(limit) + 1], from_row)?.collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(backend)?;
    Ok(page(rows.into_iter().map(|r| (r.work, r.seq)).collect(), limit))
}

pub(crate) fn stats(c: &Connection, env: &EnvironmentId) -> Result<WorkQueueStats> {
    let (_, env_seq) = environments::get_with_seq(c, env)?;
    let now = now_micros();
    let (depth, pending, oldest): (u64, u64, Option<i64>) = c
        .query_row(
            "SELECT \
               COUNT(*) FILTER (WHERE pending_until IS NULL OR pending_until < ?2), \
               COUNT(*) FILTER (WHERE pending_until >= ?2), \
               MIN(created_at) \
             FROM work_items WHERE environment_seq = ?1 AND state = 'queued'",
            params![env_seq, now],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .map_err(backend)?;
    let workers: u64 = c
        .query_row(
            "SELECT COUNT(*) FROM worker_polls WHERE environment_seq = ?1 AND last_poll_at >= ?2",
            params![env_seq, now - POLLING_WINDOW_MICROS],
            |r| r.get(0),
        )
        .map_err(backend)?;
    Ok(WorkQueueStats { depth, pending, oldest_queued_at: rfc3339_opt(oldest), workers_polling: Some(workers) })
}

/// The live sessions token hashing to `hash`: its work item, session and environment.
pub(crate) fn find_token(c: &Connection, hash: &CredentialHash) -> Result<Option<(WorkId, SessionId, EnvironmentId)>> {
    let row: Option<(String, String, String)> = c
        .prepare_cached(
            "SELECT w.id, t.session_id, e.id FROM session_tokens t JOIN work_items w ON w.seq = t.work_seq \
             JOIN environments e ON e.seq = w.environment_seq \
             WHERE t.secret_hash = ?1 AND t.revoked_at IS NULL AND w.state != 'stopped'",
        )
        .and_then(|mut s| s.query_row([&hash[..]], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .map_err(backend)?;
    row.map(|(w, s, e)| Ok((parse_id(&w)?, parse_id(&s)?, parse_id(&e)?))).transpose()
}

/// Whether a session has an item that is not stopped.
pub(crate) fn has_live_work(c: &Connection, session: &SessionId) -> Result<bool> {
    c.query_row(
        "SELECT EXISTS (SELECT 1 FROM work_items WHERE session_id = ?1 AND state != 'stopped')",
        [session.as_str()],
        |r| r.get(0),
    )
    .map_err(backend)
}

pub(crate) fn enqueue_healthcheck(c: &Connection, env: &EnvironmentId, ttl: u64) -> Result<Work> {
    let (environment, env_seq) = environments::get_with_seq(c, env)?;
    if !environment.is_self_hosted() {
        return Err(StoreError::Invalid(format!("environment `{env}` is not self-hosted; it has no work queue")));
    }
    let data = WorkData {
        kind: "healthcheck".into(),
        id: format!("hc_{}", WorkId::generate().as_str().trim_start_matches("work_")),
    };
    let id = enqueue(c, env_seq, &data, ttl)?;
    get(c, env, &id)
}
