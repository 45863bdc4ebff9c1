//! The self-hosted work queue: SQL for delivery, leases, stops and the sessions tokens bound
//! to each delivery. Every transition is decided by [`mnemo_store::rules::work::Lease`]; this
//! module loads leases, writes them back and revokes tokens, each call inside the writer's
//! transaction, so two pollers can never be handed the same item.

use std::collections::BTreeMap;

use mnemo_api::{EnvironmentId, SessionId, Work, WorkData, WorkId, WorkQueueStats, WorkState};
use mnemo_store::rules;
use mnemo_store::rules::catalog;
use mnemo_store::rules::work::{Change, Heartbeat, Lease, Micros};
use mnemo_store::{CredentialHash, Cursor, ErrorCode, HeartbeatOutcome, Listing, Result, StoreError};
use rusqlite::{Connection, Row, named_params, params};

use crate::engine::{Lite, backend, query_one};
use crate::stores::page;
use crate::{environments, now_micros, parse_id, rfc3339, rfc3339_opt};
use mnemo_store::ops::{self, NewWork, WorkFilter, run_ready};

/// A worker counts as polling for this long after its last poll.
const POLLING_WINDOW_MICROS: i64 = 30_000_000;

const COLUMNS: &str = "w.id, e.id, w.state, w.data, w.metadata, w.created_at, w.acknowledged_at, w.started_at, \
                       w.latest_heartbeat_at, w.stop_requested_at, w.stopped_at, w.seq, w.last_heartbeat, \
                       w.ttl_seconds, w.pending_until, w.lease_expires_at";

use mnemo_store::ops::WorkRow as Item;

fn from_row(r: &Row<'_>) -> rusqlite::Result<Item> {
    let bad = |e: String| rusqlite::Error::InvalidColumnName(e);
    let state: String = r.get(2)?;
    let data: String = r.get(3)?;
    let metadata: String = r.get(4)?;
    let id: WorkId = parse_id(&r.get::<_, String>(0)?).map_err(|e| bad(e.to_string()))?;
    let state = WorkState::parse(&state).ok_or_else(|| bad(format!("work state {state}")))?;
    let lease = Lease {
        id: id.clone(),
        state,
        pending_until: r.get(14)?,
        lease_expires_at: r.get(15)?,
        last_heartbeat: r.get(12)?,
        ttl_seconds: r.get::<_, i64>(13)?.max(0) as u64,
        acknowledged_at: r.get(6)?,
        started_at: r.get(7)?,
        latest_heartbeat_at: r.get(8)?,
        stop_requested_at: r.get(9)?,
        stopped_at: r.get(10)?,
    };
    Ok(Item {
        work: Work {
            id,
            environment_id: parse_id(&r.get::<_, String>(1)?).map_err(|e| bad(e.to_string()))?,
            state,
            data: serde_json::from_str(&data).map_err(|e| bad(e.to_string()))?,
            secret: None,
            metadata: serde_json::from_str(&metadata).unwrap_or_default(),
            created_at: rfc3339(r.get(5)?),
            acknowledged_at: rfc3339_opt(lease.acknowledged_at),
            started_at: rfc3339_opt(lease.started_at),
            latest_heartbeat_at: rfc3339_opt(lease.latest_heartbeat_at),
            stop_requested_at: rfc3339_opt(lease.stop_requested_at),
            stopped_at: rfc3339_opt(lease.stopped_at),
        },
        lease,
        seq: r.get(11)?,
    })
}

fn load(c: &Connection, env: &EnvironmentId, id: &WorkId) -> Result<Item> {
    query_one(c, &format!(
        "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq WHERE w.id = ?1 AND e.id = ?2"
    ), params![id.as_str(), env.as_str()], from_row)?
    .ok_or_else(|| StoreError::not_found("work item", id))
}

/// The items matching `filter` (SQL over `w`), in queue order.
fn select(filter: &str) -> String {
    format!(
        "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq WHERE {filter} ORDER BY w.seq"
    )
}

/// Items matching `filter` (SQL over `w`), in queue order.
fn load_where(c: &Connection, filter: &str, p: impl rusqlite::Params) -> Result<Vec<Item>> {
    c.prepare_cached(&select(filter))
        .and_then(|mut s| s.query_map(p, from_row)?.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(backend)
}

/// The first item matching `filter`, in queue order, that `wanted` accepts; rows are read one at
/// a time and the scan stops there, so a deep queue costs only the items skipped.
fn first_where(
    c: &Connection,
    filter: &str,
    p: impl rusqlite::Params,
    wanted: impl Fn(&Item) -> bool,
) -> Result<Option<Item>> {
    let mut stmt = c.prepare_cached(&select(filter)).map_err(backend)?;
    let mut rows = stmt.query(p).map_err(backend)?;
    while let Some(row) = rows.next().map_err(backend)? {
        let item = from_row(row).map_err(backend)?;
        if wanted(&item) {
            return Ok(Some(item));
        }
    }
    Ok(None)
}

/// Writes a transition back: the lease's columns, and the death of the item's tokens.
fn apply(c: &Connection, seq: i64, change: &Change, now: Micros) -> Result<()> {
    let l = &change.lease;
    c.prepare_cached(
        "UPDATE work_items SET state = ?1, pending_until = ?2, lease_expires_at = ?3, last_heartbeat = ?4, \
         ttl_seconds = ?5, acknowledged_at = ?6, started_at = ?7, latest_heartbeat_at = ?8, \
         stop_requested_at = ?9, stopped_at = ?10 WHERE seq = ?11",
    )
    .and_then(|mut s| {
        s.execute(params![
            l.state.as_str(),
            l.pending_until,
            l.lease_expires_at,
            l.last_heartbeat,
            l.ttl_seconds as i64,
            l.acknowledged_at,
            l.started_at,
            l.latest_heartbeat_at,
            l.stop_requested_at,
            l.stopped_at,
            seq
        ])
    })
    .map_err(backend)?;
    if change.revoke_tokens {
        c.prepare_cached("UPDATE session_tokens SET revoked_at = ?1 WHERE work_seq = ?2 AND revoked_at IS NULL")
            .and_then(|mut s| s.execute(params![now, seq]))
            .map_err(backend)?;
    }
    Ok(())
}

/// Applies expiry to `item` at `now` and returns it as it then stands.
fn settle(c: &Connection, mut item: Item, now: Micros) -> Result<Item> {
    if let Some(change) = item.lease.expire(now) {
        apply(c, item.seq, &change, now)?;
        tracing::info!(work.id = %item.lease.id, state = change.lease.state.as_str(), "work lease expired");
        item.lease = change.lease;
        item.work.state = item.lease.state;
        item.work.stopped_at = rfc3339_opt(item.lease.stopped_at);
    }
    Ok(item)
}

/// The states in which an item can expire.
/// The items that may have lapsed by `?now` (see `Lease::expire`); the rule decides.
const LAPSED: &str = "w.state IN ('starting', 'active', 'stopping') \
                      AND COALESCE(w.lease_expires_at, w.pending_until, 0) < :now";

/// Applies expiry to every expirable item of one environment (`Some`) or of all; returns how
/// many changed.
pub(crate) fn expire(c: &Connection, environment_seq: Option<i64>, now: Micros) -> Result<u64> {
    let items = match environment_seq {
        Some(env) => {
            load_where(c, &format!("w.environment_seq = :env AND {LAPSED}"), named_params! {":env": env, ":now": now})?
        }
        None => load_where(c, LAPSED, named_params! {":now": now})?,
    };
    let mut changed = 0;
    for item in items {
        if item.lease.expire(now).is_some() {
            settle(c, item, now)?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// Queues a work item whose lease, once acknowledged, lasts `ttl` seconds between heartbeats.
pub(crate) fn enqueue(c: &Connection, environment_seq: i64, data: &WorkData, ttl: u64) -> Result<WorkId> {
    run_ready(ops::work::enqueue(&Lite(c), environment_seq, data, ttl))
}

impl ops::WorkSql for Lite<'_> {
    async fn work_where(&self, filter: WorkFilter<'_>) -> Result<Vec<Item>> {
        match filter {
            WorkFilter::LapsedOfSession { session, now } => {
                let lapsed = format!("w.session_id = :session AND {LAPSED}");
                load_where(self, &lapsed, named_params! {":session": session.as_str(), ":now": now})
            }
            WorkFilter::UnstoppedOfSession(session) => {
                load_where(self, "w.session_id = ?1 AND w.state != 'stopped'", [session.as_str()])
            }
        }
    }

    async fn first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<Item>> {
        match filter {
            WorkFilter::LapsedOfSession { session, now } => {
                let lapsed = format!("w.session_id = :session AND {LAPSED}");
                first_where(self, &lapsed, named_params! {":session": session.as_str(), ":now": now}, |i| {
                    wanted(&i.lease)
                })
            }
            WorkFilter::UnstoppedOfSession(session) => {
                first_where(self, "w.session_id = ?1 AND w.state != 'stopped'", [session.as_str()], |i| {
                    wanted(&i.lease)
                })
            }
        }
    }

    async fn apply_lease(&self, seq: i64, change: &Change, now: Micros) -> Result<()> {
        apply(self, seq, change, now)
    }

    async fn insert_work(&self, new: &NewWork<'_>) -> Result<()> {
        self.execute(
            "INSERT INTO work_items (id, environment_seq, session_id, data, state, metadata, created_at, ttl_seconds) \
             VALUES (?1, ?2, ?3, ?4, ?5, '{}', ?6, ?7)",
            params![
                new.id.as_str(),
                new.environment,
                new.session,
                serde_json::to_string(new.data).map_err(backend)?,
                new.state.as_str(),
                new.created_at,
                i64::try_from(new.ttl_seconds).unwrap_or(i64::MAX)
            ],
        )
        .map_err(backend)?;
        Ok(())
    }
}

fn self_hosted(c: &Connection, env: &EnvironmentId) -> Result<i64> {
    let (environment, env_seq) = environments::get_with_seq(c, env)?;
    rules::work::check_has_queue(&environment)?;
    Ok(env_seq)
}

pub(crate) fn poll(
    c: &Connection,
    env: &EnvironmentId,
    worker_id: Option<&str>,
    reclaim_ms: u64,
    token_hash: &CredentialHash,
) -> Result<Option<Work>> {
    let env_seq = self_hosted(c, env)?;
    let now = now_micros();
    if let Some(worker) = worker_id {
        c.execute(
            "INSERT INTO worker_polls (environment_seq, worker_id, last_poll_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (environment_seq, worker_id) DO UPDATE SET last_poll_at = excluded.last_poll_at",
            params![env_seq, worker, now],
        )
        .map_err(backend)?;
    }
    expire(c, Some(env_seq), now)?;
    let deliverable = |i: &Item| i.lease.deliverable(now);
    let queued = "w.environment_seq = ?1 AND w.state = 'queued'";
    let Some(mut item) = first_where(c, queued, [env_seq], deliverable)? else { return Ok(None) };
    apply(c, item.seq, &item.lease.deliver(now, reclaim_ms), now)?;
    let session = (item.work.data.kind == "session").then(|| item.work.data.id.clone());
    c.execute(
        "INSERT INTO session_tokens (secret_hash, work_seq, session_id, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![&token_hash[..], item.seq, session.unwrap_or_default(), now],
    )
    .map_err(backend)?;
    item.work.secret = None;
    Ok(Some(item.work))
}

pub(crate) fn ack(c: &Connection, env: &EnvironmentId, id: &WorkId) -> Result<Work> {
    let item = load(c, env, id)?;
    let now = now_micros();
    apply(c, item.seq, &item.lease.ack(now)?, now)?;
    get(c, env, id)
}

pub(crate) fn heartbeat(
    c: &Connection,
    env: &EnvironmentId,
    id: &WorkId,
    expected: &str,
    desired_ttl: Option<u64>,
) -> Result<HeartbeatOutcome> {
    let now = now_micros();
    let item = settle(c, load(c, env, id)?, now)?;
    Ok(match item.lease.heartbeat(expected, desired_ttl, now) {
        Heartbeat::Beat(change, answer) => {
            apply(c, item.seq, &change, now)?;
            HeartbeatOutcome::Beat(answer)
        }
        Heartbeat::Report(answer) => HeartbeatOutcome::Beat(answer),
        Heartbeat::Refuse(current) => HeartbeatOutcome::PreconditionFailed(current),
    })
}

pub(crate) fn stop(c: &Connection, env: &EnvironmentId, id: &WorkId, force: bool) -> Result<Work> {
    let now = now_micros();
    let item = settle(c, load(c, env, id)?, now)?;
    apply(c, item.seq, &item.lease.stop(force, now)?, now)?;
    get(c, env, id)
}

/// Force-stops every live item of a session (archive, delete).
pub(crate) fn stop_session_work(c: &Connection, session: &SessionId) -> Result<()> {
    run_ready(ops::work::stop_session_work(&Lite(c), session))
}

pub(crate) fn get(c: &Connection, env: &EnvironmentId, id: &WorkId) -> Result<Work> {
    load(c, env, id).map(|i| i.work)
}

pub(crate) fn update_metadata(
    c: &Connection,
    env: &EnvironmentId,
    id: &WorkId,
    patch: &BTreeMap<String, Option<String>>,
) -> Result<Work> {
    let row = load(c, env, id)?;
    let metadata = catalog::patch_metadata(&row.work.metadata, patch, Some(ErrorCode::InvalidMetadata))?;
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
    let queued = load_where(c, "w.environment_seq = ?1 AND w.state = 'queued'", [env_seq])?;
    let depth = queued.iter().filter(|i| i.lease.deliverable(now)).count() as u64;
    let oldest = queued.iter().map(|i| i.work.created_at.clone()).min();
    let workers: u64 = c
        .query_row(
            "SELECT COUNT(*) FROM worker_polls WHERE environment_seq = ?1 AND last_poll_at >= ?2",
            params![env_seq, now - POLLING_WINDOW_MICROS],
            |r| r.get(0),
        )
        .map_err(backend)?;
    Ok(WorkQueueStats {
        depth,
        pending: queued.len() as u64 - depth,
        oldest_queued_at: oldest,
        workers_polling: Some(workers),
    })
}

/// The live sessions token hashing to `hash`: its work item, session and environment. A token
/// dies with its item's lease ([`Lease::token_alive`]), whether or not expiry has been written.
pub(crate) fn find_token(
    c: &Connection,
    hash: &CredentialHash,
) -> Result<Option<(WorkId, Option<SessionId>, EnvironmentId)>> {
    let found: Option<(i64, String)> = query_one(
        c,
        "SELECT work_seq, session_id FROM session_tokens WHERE secret_hash = ?1 AND revoked_at IS NULL",
        [&hash[..]],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let Some((work_seq, session)) = found else { return Ok(None) };
    let Some(item) = first_where(c, "w.seq = ?1", [work_seq], |_| true)? else { return Ok(None) };
    if !item.lease.token_alive(now_micros()) {
        return Ok(None);
    }
    let session = (!session.is_empty()).then(|| parse_id(&session)).transpose()?;
    Ok(Some((item.work.id, session, item.work.environment_id)))
}

pub(crate) fn enqueue_healthcheck(c: &Connection, env: &EnvironmentId, ttl: u64) -> Result<Work> {
    let env_seq = self_hosted(c, env)?;
    let data = WorkData {
        kind: "healthcheck".into(),
        id: format!("hc_{}", WorkId::generate().as_str().trim_start_matches("work_")),
    };
    let id = enqueue(c, env_seq, &data, ttl)?;
    get(c, env, &id)
}
