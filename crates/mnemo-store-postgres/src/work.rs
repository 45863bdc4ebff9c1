//! The self-hosted work queue: SQL for delivery, leases, stops and the sessions tokens bound
//! to each delivery. Every transition is decided by [`mnemo_store::rules::work::Lease`]; this
//! module loads leases, writes them back and revokes tokens, each call inside the caller's
//! transaction and on the database's clock ([`crate::engine::now`]).
//!
//! Several replicas write at once, so every transition first locks the item's row and judges
//! the lease as it stands once locked:
//!
//! - a poll claims a queued item with `FOR UPDATE SKIP LOCKED`, oldest first, so two pollers
//!   are never handed the same item and never wait for each other;
//! - expiry locks the lapsed items it changes (the sweeps skip items another transaction
//!   holds; a session's settlement waits for them);
//! - acknowledgement, heartbeats, stops and metadata updates lock the item (`FOR UPDATE`)
//!   before judging it.
//!
//! A session's row is locked before its items (see [`crate::engine`]); nothing here locks a
//! session, so callers that hold one (appends, archive, delete) keep that order.

use std::collections::BTreeMap;

use mnemo_api::{EnvironmentId, SessionId, Work, WorkData, WorkId, WorkQueueStats, WorkState};
use mnemo_store::rules;
use mnemo_store::rules::catalog;
use mnemo_store::rules::work::{Change, Heartbeat, Lease};
use mnemo_store::{CredentialHash, Cursor, ErrorCode, HeartbeatOutcome, Listing, Result, StoreError};
use tokio_postgres::Row;

use mnemo_store::ops::{self, NewWork, WorkFilter};

use crate::engine::{Param, Pg, Tx, all, backend, col, exec, failure, now, one, opt};
use crate::stores::page;
use crate::{environments, parse_id, rfc3339, rfc3339_opt};

/// Microseconds since the epoch on the database's clock.
pub(crate) type Micros = i64;

/// A worker counts as polling for this long after its last poll.
const POLLING_WINDOW_MICROS: i64 = 30_000_000;

const COLUMNS: &str = "w.id, e.id, w.state, w.data, w.metadata, w.created_at, w.acknowledged_at, w.started_at, \
                       w.latest_heartbeat_at, w.stop_requested_at, w.stopped_at, w.seq, w.last_heartbeat, \
                       w.ttl_seconds, w.pending_until, w.lease_expires_at";

/// Locks the selected items (never their environment) until the transaction ends.
const LOCK: &str = "FOR UPDATE OF w";
/// Locks the selected items, passing over those another transaction holds.
const LOCK_SKIP: &str = "FOR UPDATE OF w SKIP LOCKED";

/// A work row: the item as the API shows it, its lease, and its row number.
use mnemo_store::ops::WorkRow as Item;

fn from_row(r: &Row) -> Result<Item> {
    let state: String = col(r, 2)?;
    let data: String = col(r, 3)?;
    let metadata: String = col(r, 4)?;
    let id: WorkId = parse_id(&col::<String>(r, 0)?)?;
    let state = WorkState::parse(&state).ok_or_else(|| failure(format!("work item `{id}` has state `{state}`")))?;
    let lease = Lease {
        id: id.clone(),
        state,
        pending_until: col(r, 14)?,
        lease_expires_at: col(r, 15)?,
        last_heartbeat: col(r, 12)?,
        ttl_seconds: u64::try_from(col::<i64>(r, 13)?).unwrap_or(0),
        acknowledged_at: col(r, 6)?,
        started_at: col(r, 7)?,
        latest_heartbeat_at: col(r, 8)?,
        stop_requested_at: col(r, 9)?,
        stopped_at: col(r, 10)?,
    };
    Ok(Item {
        work: Work {
            environment_id: parse_id(&col::<String>(r, 1)?)?,
            state,
            data: serde_json::from_str(&data)
                .map_err(|e| failure(format!("work item `{id}` has malformed data: {e}")))?,
            secret: None,
            metadata: serde_json::from_str(&metadata).unwrap_or_default(),
            created_at: rfc3339(col(r, 5)?),
            acknowledged_at: rfc3339_opt(lease.acknowledged_at),
            started_at: rfc3339_opt(lease.started_at),
            latest_heartbeat_at: rfc3339_opt(lease.latest_heartbeat_at),
            stop_requested_at: rfc3339_opt(lease.stop_requested_at),
            stopped_at: rfc3339_opt(lease.stopped_at),
            id,
        },
        lease,
        seq: col(r, 11)?,
    })
}

/// The SQL reading item `$1` of environment `$2`, then `lock`.
fn by_id(lock: &str) -> String {
    format!(
        "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq \
         WHERE w.id = $1 AND e.id = $2 {lock}"
    )
}

/// Item `id` of `env`, or not-found; no lock (a reader's view, or a writer's re-read).
async fn read(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId) -> Result<Item> {
    let row = opt(tx, &by_id(""), &[&id.as_str(), &env.as_str()]).await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| StoreError::not_found("work item", id))
}

/// Item `id` of `env`, or not-found, its row locked until the transaction ends: the writer
/// holding it is the only one judging and changing the item's lease.
async fn load(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId) -> Result<Item> {
    let row = opt(tx, &by_id(LOCK), &[&id.as_str(), &env.as_str()]).await?;
    row.as_ref().map(from_row).transpose()?.ok_or_else(|| StoreError::not_found("work item", id))
}

/// The items matching `filter` (SQL over `w`), in queue order, then `lock`.
fn select(filter: &str, lock: &str) -> String {
    format!(
        "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq \
         WHERE {filter} ORDER BY w.seq {lock}"
    )
}

/// Items matching `filter` (SQL over `w`), in queue order, locked as `lock` says.
async fn load_where(tx: &Tx<'_>, filter: &str, lock: &str, params: &[Param<'_>]) -> Result<Vec<Item>> {
    all(tx, &select(filter, lock), params).await?.iter().map(from_row).collect()
}

/// The first item matching `filter`, in queue order, that `wanted` accepts. Rows are fetched
/// one at a time through a portal and the scan stops there, so a deep queue costs only the
/// items skipped, and a `lock` takes only the rows fetched (those passed over stay locked
/// until the transaction ends).
async fn first_where(
    tx: &Tx<'_>,
    filter: &str,
    lock: &str,
    params: &[Param<'_>],
    wanted: impl Fn(&Item) -> bool,
) -> Result<Option<Item>> {
    let stmt = tx.prepare_cached(&select(filter, lock)).await.map_err(backend)?;
    let portal = tx.bind(&stmt, params).await.map_err(backend)?;
    loop {
        let rows = tx.query_portal(&portal, 1).await.map_err(backend)?;
        let Some(row) = rows.first() else { return Ok(None) };
        let item = from_row(row)?;
        if wanted(&item) {
            return Ok(Some(item));
        }
    }
}

/// Writes a transition back: the lease's columns, and the death of the item's tokens. The
/// caller holds the item's row lock.
async fn apply(tx: &Tx<'_>, seq: i64, change: &Change, now: Micros) -> Result<()> {
    let l = &change.lease;
    let ttl = i64::try_from(l.ttl_seconds).unwrap_or(i64::MAX);
    exec(
        tx,
        "UPDATE work_items SET state = $1, pending_until = $2, lease_expires_at = $3, last_heartbeat = $4, \
         ttl_seconds = $5, acknowledged_at = $6, started_at = $7, latest_heartbeat_at = $8, \
         stop_requested_at = $9, stopped_at = $10 WHERE seq = $11",
        &[
            &l.state.as_str(),
            &l.pending_until,
            &l.lease_expires_at,
            &l.last_heartbeat,
            &ttl,
            &l.acknowledged_at,
            &l.started_at,
            &l.latest_heartbeat_at,
            &l.stop_requested_at,
            &l.stopped_at,
            &seq,
        ],
    )
    .await?;
    if change.revoke_tokens {
        exec(tx, "UPDATE session_tokens SET revoked_at = $1 WHERE work_seq = $2 AND revoked_at IS NULL", &[&now, &seq])
            .await?;
    }
    Ok(())
}

/// Applies expiry to `item` (whose row the caller has locked) at `now` and returns it as it
/// then stands.
async fn settle(tx: &Tx<'_>, mut item: Item, now: Micros) -> Result<Item> {
    if let Some(change) = item.lease.expire(now) {
        apply(tx, item.seq, &change, now).await?;
        tracing::info!(work.id = %item.lease.id, state = change.lease.state.as_str(), "work lease expired");
        item.lease = change.lease;
        item.work.state = item.lease.state;
        item.work.stopped_at = rfc3339_opt(item.lease.stopped_at);
    }
    Ok(item)
}

/// The items that may have lapsed by `$1` (see `Lease::expire`); the rule decides.
const LAPSED: &str = "w.state IN ('starting', 'active', 'stopping') \
                      AND COALESCE(w.lease_expires_at, w.pending_until, 0) < $1";

/// Applies expiry to every expirable item of one environment (`Some`) or of all; returns how
/// many changed. Each lapsed item is locked before it is judged; one another transaction holds
/// is passed over (that transaction judges it, or the next sweep does).
pub(crate) async fn expire(tx: &Tx<'_>, environment_seq: Option<i64>, now: Micros) -> Result<u64> {
    let items = match environment_seq {
        Some(env) => load_where(tx, &format!("{LAPSED} AND w.environment_seq = $2"), LOCK_SKIP, &[&now, &env]).await?,
        None => load_where(tx, LAPSED, LOCK_SKIP, &[&now]).await?,
    };
    let mut changed = 0;
    for item in items {
        if item.lease.expire(now).is_some() {
            settle(tx, item, now).await?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// Queues a work item whose lease, once acknowledged, lasts `ttl` seconds between heartbeats.
pub(crate) async fn enqueue(tx: &Tx<'_>, environment_seq: i64, data: &WorkData, ttl: u64) -> Result<WorkId> {
    ops::work::enqueue(&Pg(tx), environment_seq, data, ttl).await
}

impl ops::WorkSql for Pg<'_, '_> {
    async fn work_where(&self, filter: WorkFilter<'_>) -> Result<Vec<Item>> {
        match filter {
            // The caller holds the session's row lock; the lapsed items are locked (waiting for
            // any other holder) so the judgement that follows sees them settled.
            WorkFilter::LapsedOfSession { session, now } => {
                let lapsed = format!("{LAPSED} AND w.session_id = $2");
                load_where(self, &lapsed, LOCK, &[&now, &session.as_str()]).await
            }
            WorkFilter::UnstoppedOfSession(session) => {
                load_where(self, "w.session_id = $1 AND w.state != 'stopped'", LOCK, &[&session.as_str()]).await
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
                let lapsed = format!("{LAPSED} AND w.session_id = $2");
                first_where(self, &lapsed, LOCK, &[&now, &session.as_str()], |i| wanted(&i.lease)).await
            }
            WorkFilter::UnstoppedOfSession(session) => {
                let unstopped = "w.session_id = $1 AND w.state != 'stopped'";
                first_where(self, unstopped, "", &[&session.as_str()], |i| wanted(&i.lease)).await
            }
        }
    }

    async fn apply_lease(&self, seq: i64, change: &Change, now: Micros) -> Result<()> {
        apply(self, seq, change, now).await
    }

    async fn insert_work(&self, new: &NewWork<'_>) -> Result<()> {
        exec(
            self,
            "INSERT INTO work_items (id, environment_seq, session_id, data, state, metadata, created_at, ttl_seconds) \
             VALUES ($1, $2, $3, $4, $5, '{}', $6, $7)",
            &[
                &new.id.as_str(),
                &new.environment,
                &new.session,
                &serde_json::to_string(new.data).map_err(|e| failure(format!("serialise work data: {e}")))?,
                &new.state.as_str(),
                &new.created_at,
                &i64::try_from(new.ttl_seconds).unwrap_or(i64::MAX),
            ],
        )
        .await
        .map(drop)
    }
}

/// The environment's row number, if it has a work queue (only a self-hosted one does); it is
/// held ([`environments::hold`]) so the rows a poll or an enqueue then writes never reference a
/// deleted environment (a concurrent delete finishes first, and the environment is not found).
async fn self_hosted(tx: &Tx<'_>, env: &EnvironmentId) -> Result<i64> {
    let (environment, env_seq) = environments::hold(tx, env).await?;
    rules::work::check_has_queue(&environment)?;
    Ok(env_seq)
}

/// The queued items of environment `$1` that may be deliverable at `$2` (see
/// `Lease::deliverable`); the rule decides.
const DELIVERABLE: &str = "w.environment_seq = $1 AND w.state = 'queued' \
                           AND (w.pending_until IS NULL OR w.pending_until < $2)";

/// Delivers the oldest deliverable item of `env` (after expiring its lapsed ones) and binds a
/// sessions token to the delivery. The item is claimed with `FOR UPDATE SKIP LOCKED`: an item
/// another poller is claiming is passed over, so concurrent polls get different items without
/// waiting for each other.
pub(crate) async fn poll(
    tx: &Tx<'_>,
    env: &EnvironmentId,
    worker_id: Option<&str>,
    reclaim_ms: u64,
    token_hash: &CredentialHash,
) -> Result<Option<Work>> {
    let env_seq = self_hosted(tx, env).await?;
    let now = now(tx).await?;
    expire(tx, Some(env_seq), now).await?;
    let deliverable = |i: &Item| i.lease.deliverable(now);
    let claimed = first_where(tx, DELIVERABLE, LOCK_SKIP, &[&env_seq, &now], deliverable).await?;
    if let Some(item) = &claimed {
        apply(tx, item.seq, &item.lease.deliver(now, reclaim_ms), now).await?;
        let session = (item.work.data.kind == "session").then(|| item.work.data.id.clone());
        exec(
            tx,
            "INSERT INTO session_tokens (secret_hash, work_seq, session_id, created_at) VALUES ($1, $2, $3, $4)",
            &[&&token_hash[..], &item.seq, &session.unwrap_or_default(), &now],
        )
        .await?;
    }
    // Last: the upsert locks the worker's row until commit, and a poll by the same worker on
    // another replica waits for it (never the other way round, so never a deadlock). The
    // later poll wins even if it commits first.
    if let Some(worker) = worker_id {
        exec(
            tx,
            "INSERT INTO worker_polls (environment_seq, worker_id, last_poll_at) VALUES ($1, $2, $3) \
             ON CONFLICT (environment_seq, worker_id) \
             DO UPDATE SET last_poll_at = GREATEST(worker_polls.last_poll_at, excluded.last_poll_at)",
            &[&env_seq, &worker, &now],
        )
        .await?;
    }
    Ok(claimed.map(|item| item.work))
}

/// Acknowledges a delivery, judged once the item's row is locked.
pub(crate) async fn ack(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId) -> Result<Work> {
    let item = load(tx, env, id).await?;
    let now = now(tx).await?;
    apply(tx, item.seq, &item.lease.ack(now)?, now).await?;
    get(tx, env, id).await
}

/// A conditional heartbeat, judged (after expiry) once the item's row is locked, so of two
/// heartbeats echoing the same value only the first extends the lease.
pub(crate) async fn heartbeat(
    tx: &Tx<'_>,
    env: &EnvironmentId,
    id: &WorkId,
    expected: &str,
    desired_ttl: Option<u64>,
) -> Result<HeartbeatOutcome> {
    let now = now(tx).await?;
    let item = settle(tx, load(tx, env, id).await?, now).await?;
    Ok(match item.lease.heartbeat(expected, desired_ttl, now) {
        Heartbeat::Beat(change, answer) => {
            apply(tx, item.seq, &change, now).await?;
            HeartbeatOutcome::Beat(answer)
        }
        Heartbeat::Report(answer) => HeartbeatOutcome::Beat(answer),
        Heartbeat::Refuse(current) => HeartbeatOutcome::PreconditionFailed(current),
    })
}

/// Stops an item (forced or graceful), judged (after expiry) once its row is locked.
pub(crate) async fn stop(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId, force: bool) -> Result<Work> {
    let now = now(tx).await?;
    let item = settle(tx, load(tx, env, id).await?, now).await?;
    apply(tx, item.seq, &item.lease.stop(force, now)?, now).await?;
    get(tx, env, id).await
}

/// Force-stops every live item of a session (archive, delete). The caller holds the session's
/// row lock; the items are locked in queue order, waiting for any other holder, and judged as
/// they then stand.
pub(crate) async fn stop_session_work(tx: &Tx<'_>, session: &SessionId) -> Result<()> {
    ops::work::stop_session_work(&Pg(tx), session).await
}

pub(crate) async fn get(tx: &Tx<'_>, env: &EnvironmentId, id: &WorkId) -> Result<Work> {
    read(tx, env, id).await.map(|i| i.work)
}

/// Patches an item's metadata; the item's row is locked so concurrent patches both apply.
pub(crate) async fn update_metadata(
    tx: &Tx<'_>,
    env: &EnvironmentId,
    id: &WorkId,
    patch: &BTreeMap<String, Option<String>>,
) -> Result<Work> {
    let item = load(tx, env, id).await?;
    let metadata = catalog::patch_metadata(&item.work.metadata, patch, Some(ErrorCode::InvalidMetadata))?;
    let metadata = serde_json::to_string(&metadata).map_err(|e| failure(format!("serialise work metadata: {e}")))?;
    exec(tx, "UPDATE work_items SET metadata = $1 WHERE seq = $2", &[&metadata, &item.seq]).await?;
    get(tx, env, id).await
}

pub(crate) async fn list(
    tx: &Tx<'_>,
    env: &EnvironmentId,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<Work>> {
    let (_, env_seq) = environments::get_with_seq(tx, env).await?;
    let before = crate::stores::before(after)?;
    let rows = all(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM work_items w JOIN environments e ON e.seq = w.environment_seq \
             WHERE w.environment_seq = $1 AND w.seq < $2 ORDER BY w.seq DESC LIMIT $3"
        ),
        &[&env_seq, &before, &(i64::from(limit) + 1)],
    )
    .await?;
    let items = rows.iter().map(|r| from_row(r).map(|i| (i.work, i.seq))).collect::<Result<Vec<_>>>()?;
    Ok(page(items, limit))
}

pub(crate) async fn stats(tx: &Tx<'_>, env: &EnvironmentId) -> Result<WorkQueueStats> {
    let (_, env_seq) = environments::get_with_seq(tx, env).await?;
    let now = now(tx).await?;
    let queued = load_where(tx, "w.environment_seq = $1 AND w.state = 'queued'", "", &[&env_seq]).await?;
    let depth = queued.iter().filter(|i| i.lease.deliverable(now)).count() as u64;
    let oldest = queued.iter().map(|i| i.work.created_at.clone()).min();
    let workers = one(
        tx,
        "SELECT COUNT(*) FROM worker_polls WHERE environment_seq = $1 AND last_poll_at >= $2",
        &[&env_seq, &(now - POLLING_WINDOW_MICROS)],
    )
    .await?;
    Ok(WorkQueueStats {
        depth,
        pending: queued.len() as u64 - depth,
        oldest_queued_at: oldest,
        workers_polling: Some(u64::try_from(col::<i64>(&workers, 0)?).unwrap_or(0)),
    })
}

/// The live sessions token hashing to `hash`: its work item, session and environment. A token
/// dies with its item's lease ([`Lease::token_alive`]), judged by the database's clock whether
/// or not expiry has been written.
pub(crate) async fn find_token(
    tx: &Tx<'_>,
    hash: &CredentialHash,
) -> Result<Option<(WorkId, Option<SessionId>, EnvironmentId)>> {
    let found = opt(
        tx,
        "SELECT work_seq, session_id FROM session_tokens WHERE secret_hash = $1 AND revoked_at IS NULL",
        &[&&hash[..]],
    )
    .await?;
    let Some(token) = found else { return Ok(None) };
    let (work_seq, session): (i64, String) = (col(&token, 0)?, col(&token, 1)?);
    let Some(row) = opt(tx, &select("w.seq = $1", ""), &[&work_seq]).await? else { return Ok(None) };
    let item = from_row(&row)?;
    if !item.lease.token_alive(now(tx).await?) {
        return Ok(None);
    }
    let session = (!session.is_empty()).then(|| parse_id(&session)).transpose()?;
    Ok(Some((item.work.id, session, item.work.environment_id)))
}

/// Whether a session has a live item. The caller holds the session's row lock, and only a
/// writer holding it queues a session's item, so the answer holds until it commits (expiry and
pub(crate) async fn enqueue_healthcheck(tx: &Tx<'_>, env: &EnvironmentId, ttl: u64) -> Result<Work> {
    let env_seq = self_hosted(tx, env).await?;
    let data = WorkData {
        kind: "healthcheck".into(),
        id: format!("hc_{}", WorkId::generate().as_str().trim_start_matches("work_")),
    };
    let id = enqueue(tx, env_seq, &data, ttl).await?;
    get(tx, env, &id).await
}
