//! The self-hosted work queue: every transition decided by [`Lease`], written back through
//! [`WorkSql`].
//!
//! Several writers may work on one queue at once (PostgreSQL replicas), so every transition
//! judges a lease only once the item's row is locked, and the order of locks is part of each
//! operation: a session's row (held by the caller) before its items; an environment (held,
//! never locked) before its items; items before the worker's poll record. A poll and the
//! expiry sweep *claim* rows — they pass over rows another writer holds, so two pollers are
//! never handed the same item and never wait for each other; every other transition *locks*
//! its item and waits. SQLite's single writer excludes every other writer already, and its
//! primitives lock nothing.

use std::collections::BTreeMap;

use mnemo_api::{EnvironmentId, SessionId, Work, WorkData, WorkId, WorkQueueStats, WorkState, WorkspaceId};

use super::environments::EnvironmentSql;
use super::{Clock, Micros, Seq};
use crate::row::rfc3339_opt;
use crate::rules::catalog::patch_metadata;
use crate::rules::work::{self as rule, Change, Heartbeat, Lease};
use crate::{CredentialHash, ErrorCode, HeartbeatOutcome, Result, StoreError};

/// A work item as stored: the item as the API shows it, its lease, and its row number.
#[derive(Debug, Clone)]
pub struct WorkRow {
    pub work: Work,
    pub lease: Lease,
    pub seq: Seq,
}

/// Which work items a query reads, in queue order (oldest first). A filter only narrows: the
/// rule judges every row it selects.
#[derive(Debug, Clone, Copy)]
pub enum WorkFilter<'a> {
    /// Item `id`, if it belongs to `environment` and that environment to workspace `ws`.
    Item { ws: &'a WorkspaceId, environment: &'a EnvironmentId, id: &'a WorkId },
    /// The item with row number `seq`.
    Seq(Seq),
    /// Items of one environment (`None`: of every environment) in a state that can lapse
    /// ([`LAPSING_STATES`](rule::LAPSING_STATES)) whose hold (`lease_expires_at`, else
    /// `pending_until`; none at all counts as the epoch) ended before `now`.
    Lapsed { environment: Option<Seq>, now: Micros },
    /// A session's items selected as [`WorkFilter::Lapsed`] selects an environment's.
    LapsedOfSession { session: &'a SessionId, now: Micros },
    /// A session's items not yet [`WorkState::Stopped`].
    UnstoppedOfSession(&'a SessionId),
    /// An environment's items in [`DELIVERABLE_STATE`](rule::DELIVERABLE_STATE) whose delivery
    /// window (`pending_until`) is absent or ended before `now`.
    Deliverable { environment: Seq, now: Micros },
    /// An environment's items in [`DELIVERABLE_STATE`](rule::DELIVERABLE_STATE), delivered or
    /// not.
    Queued { environment: Seq },
}

/// A work item to queue.
#[derive(Debug, Clone)]
pub struct NewWork<'a> {
    pub id: &'a WorkId,
    pub environment: Seq,
    /// The session it serves, if it serves one.
    pub session: Option<&'a str>,
    pub data: &'a WorkData,
    pub state: WorkState,
    pub ttl_seconds: u64,
    pub created_at: Micros,
}

/// A live sessions token as stored: the row number of the item whose delivery minted it, and
/// the session it was minted for (none for a healthcheck).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToken {
    pub work: Seq,
    pub session: Option<SessionId>,
}

/// SQL over work items, the sessions tokens bound to their deliveries, and workers' polls.
///
/// The item readers differ only in what they lock: `read_*`/`first_work` nothing; `lock_work`
/// each selected row, waiting for any other holder (PostgreSQL: `FOR UPDATE OF w`, never the
/// environment's row); `claim_*` the selected rows no other transaction holds, passing over
/// the rest (PostgreSQL: `FOR UPDATE OF w SKIP LOCKED`). Rows stay locked until the transaction
/// ends.
pub trait WorkSql: Clock {
    /// The items `filter` selects, in queue order, unlocked (a reader's look, or a writer's
    /// re-read of rows it already holds).
    async fn read_work(&self, filter: WorkFilter<'_>) -> Result<Vec<WorkRow>>;
    /// The items `filter` selects, in queue order, each locked, waiting for another holder: the
    /// judgement that follows sees them as that holder left them.
    async fn lock_work(&self, filter: WorkFilter<'_>) -> Result<Vec<WorkRow>>;
    /// The items `filter` selects that no other transaction holds, in queue order, each locked;
    /// one another transaction holds is passed over without waiting.
    async fn claim_work(&self, filter: WorkFilter<'_>) -> Result<Vec<WorkRow>>;
    /// The first item `filter` selects, in queue order, whose lease `wanted` accepts, unlocked;
    /// rows are read one at a time and the scan stops there, so a deep queue costs only what it
    /// skips.
    async fn first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<WorkRow>>;
    /// Like [`WorkSql::first_work`], claiming as it scans: every row it reads that no other
    /// transaction holds is locked (those `wanted` passed over too), and one another
    /// transaction holds is passed over without waiting.
    async fn claim_first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<WorkRow>>;
    /// Writes a lease back to item `seq`, and with [`Change::revoke_tokens`] revokes the item's
    /// live sessions tokens at `now`. The caller holds the item's row.
    async fn apply_lease(&self, seq: Seq, change: &Change, now: Micros) -> Result<()>;
    /// Queues an item.
    async fn insert_work(&self, new: &NewWork<'_>) -> Result<()>;
    /// Writes item `seq`'s metadata. The caller holds the item's row.
    async fn set_work_metadata(&self, seq: Seq, metadata: &BTreeMap<String, String>) -> Result<()>;
    /// Binds a sessions token (by its hash) to the delivery of item `work` made at `now`.
    async fn insert_session_token(
        &self,
        hash: &CredentialHash,
        work: Seq,
        session: Option<&str>,
        now: Micros,
    ) -> Result<()>;
    /// The unrevoked sessions token hashing to `hash`, if there is one.
    async fn find_session_token(&self, hash: &CredentialHash) -> Result<Option<StoredToken>>;
    /// Records that `worker` polled environment `environment` at `now`; a record of a later
    /// poll is kept (of two writers, the earlier one to commit may carry the later time). On
    /// PostgreSQL the worker's record stays locked until the transaction ends, so a poll by the
    /// same worker elsewhere waits for it.
    async fn record_poll(&self, environment: Seq, worker: &str, now: Micros) -> Result<()>;
    /// The least hold (`lease_expires_at`, else `pending_until`, else 0) of the items in
    /// [`LAPSING_STATES`](crate::rules::work::LAPSING_STATES): the moment after which the next
    /// one lapses, as the [`WorkFilter::Lapsed`] filter compares it; `None` without such items.
    async fn earliest_lapse(&self) -> Result<Option<Micros>>;
    /// How many workers last polled environment `environment` at or after `since`.
    async fn workers_polled_since(&self, environment: Seq, since: Micros) -> Result<u64>;
    /// The row number of workspace `ws`'s environment, unlocked (a reader's look). Unknown, or
    /// of another workspace: not found.
    async fn environment_seq(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Seq>;
}

/// The one item `filter` selects (an [`WorkFilter::Item`]), or not-found.
fn only(id: &WorkId, rows: Vec<WorkRow>) -> Result<WorkRow> {
    rows.into_iter().next().ok_or_else(|| StoreError::not_found("work item", id))
}

/// Item `id` of `environment` as it stands, unlocked; not-found if it is not that
/// environment's.
pub async fn get<S: WorkSql>(sql: &S, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work> {
    Ok(only(id, sql.read_work(WorkFilter::Item { ws, environment, id }).await?)?.work)
}

/// Item `id` of `environment`, its row locked: this writer alone judges and changes its lease
/// until it commits.
async fn lock<S: WorkSql>(sql: &S, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<WorkRow> {
    only(id, sql.lock_work(WorkFilter::Item { ws, environment, id }).await?)
}

/// The row number of `environment`'s queue (an environment of workspace `ws`), the environment held against deletion so the rows
/// written under it never reference a deleted one: unknown, not found; not self-hosted, it has
/// no queue ([`rule::check_has_queue`]).
async fn queue_of<S: EnvironmentSql>(sql: &S, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<Seq> {
    let held = sql.hold_environment(ws, environment).await?;
    rule::check_has_queue(&held.environment)?;
    Ok(held.seq)
}

/// Applies expiry to `item` at `now` and returns it as it then stands.
pub async fn settle<S: WorkSql>(sql: &S, mut item: WorkRow, now: Micros) -> Result<WorkRow> {
    if let Some(change) = item.lease.expire(now) {
        sql.apply_lease(item.seq, &change, now).await?;
        tracing::info!(work.id = %item.lease.id, state = change.lease.state.as_str(), "work lease expired");
        item.lease = change.lease;
        item.work.state = item.lease.state;
        item.work.stopped_at = rfc3339_opt(item.lease.stopped_at);
    }
    Ok(item)
}

/// Applies expiry to a session's lapsed items (before judging whether it has a live one). The
/// caller holds the session's row; the items are locked after it, waiting for another holder.
pub async fn settle_session<S: WorkSql>(sql: &S, session: &SessionId, now: Micros) -> Result<()> {
    for item in sql.lock_work(WorkFilter::LapsedOfSession { session, now }).await? {
        settle(sql, item, now).await?;
    }
    Ok(())
}

/// Force-stops every item of a session not yet stopped (archive, delete). The caller holds the
/// session's row; the items are locked after it in queue order, and judged as they then stand.
pub async fn stop_session_work<S: WorkSql>(sql: &S, session: &SessionId) -> Result<()> {
    let now = sql.now().await?;
    for item in sql.lock_work(WorkFilter::UnstoppedOfSession(session)).await? {
        sql.apply_lease(item.seq, &item.lease.stop(true, now)?, now).await?;
    }
    Ok(())
}

/// Whether a session has a live item ([`Lease::is_live`]). The caller holds the session's row,
/// and only a writer holding it queues a session's item, so the answer holds until it commits.
pub async fn has_live_work<S: WorkSql>(sql: &S, session: &SessionId) -> Result<bool> {
    Ok(sql.first_work(WorkFilter::UnstoppedOfSession(session), &Lease::is_live).await?.is_some())
}

/// Queues a work item on environment `environment` whose lease, once acknowledged, lasts `ttl`
/// seconds between heartbeats.
pub async fn enqueue<S: WorkSql>(sql: &S, environment: Seq, data: &WorkData, ttl: u64) -> Result<WorkId> {
    let id = WorkId::generate();
    let lease = Lease::queued(id.clone(), ttl);
    let now = sql.now().await?;
    sql.insert_work(&NewWork {
        id: &id,
        environment,
        session: data.session_id(),
        data,
        state: lease.state,
        ttl_seconds: lease.ttl_seconds,
        created_at: now,
    })
    .await?;
    Ok(id)
}

/// Applies expiry at `now` to every lapsed item of one environment (`Some`) or of all, and
/// returns how many changed. The lapsed items are claimed: one another writer holds is passed
/// over (that writer judges it, or the next sweep does).
pub async fn expire<S: WorkSql>(sql: &S, environment: Option<Seq>, now: Micros) -> Result<u64> {
    let mut changed = 0;
    for item in sql.claim_work(WorkFilter::Lapsed { environment, now }).await? {
        if item.lease.expire(now).is_some() {
            settle(sql, item, now).await?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// How long until the next item lapses by the store's clock (zero once one has), `None` while
/// no item can: the expiry sweep sleeps that long rather than polling.
pub async fn next_lapse<S: WorkSql>(sql: &S) -> Result<Option<std::time::Duration>> {
    let now = sql.now().await?;
    let Some(at) = sql.earliest_lapse().await? else { return Ok(None) };
    // Lapsed once its hold is before `now` (`Lease::expire`): one microsecond after it.
    let wait = at.saturating_add(1).saturating_sub(now);
    Ok(Some(std::time::Duration::from_micros(u64::try_from(wait).unwrap_or(0))))
}

/// The expiry sweep over every queue, now; how many items changed.
pub async fn expire_all<S: WorkSql>(sql: &S) -> Result<u64> {
    let now = sql.now().await?;
    expire(sql, None, now).await
}

/// A worker's poll of `environment`'s queue: expires its lapsed items, then delivers the oldest
/// deliverable one ([`Lease::deliver`], hidden from other polls for `reclaim_ms`) and binds the
/// sessions token hashing to `token_hash` to that delivery. The item is claimed, so concurrent
/// polls get different items without waiting for each other. `worker`'s poll is recorded last:
/// its record's lock is the last one taken, so two polls of one worker never deadlock.
pub async fn poll<S: WorkSql + EnvironmentSql>(
    sql: &S,
    ws: &WorkspaceId,
    environment: &EnvironmentId,
    worker: Option<&str>,
    reclaim_ms: u64,
    token_hash: &CredentialHash,
) -> Result<Option<Work>> {
    let queue = queue_of(sql, ws, environment).await?;
    let now = Clock::now(sql).await?;
    expire(sql, Some(queue), now).await?;
    let deliverable = |lease: &Lease| lease.deliverable(now);
    let filter = WorkFilter::Deliverable { environment: queue, now };
    let claimed = sql.claim_first_work(filter, &deliverable).await?;
    if let Some(item) = &claimed {
        sql.apply_lease(item.seq, &item.lease.deliver(now, reclaim_ms), now).await?;
        sql.insert_session_token(token_hash, item.seq, item.work.data.session_id(), now).await?;
    }
    if let Some(worker) = worker {
        sql.record_poll(queue, worker, now).await?;
    }
    Ok(claimed.map(|item| item.work))
}

/// Acknowledges a delivery ([`Lease::ack`]), judged once the item's row is locked.
pub async fn ack<S: WorkSql>(sql: &S, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work> {
    let item = lock(sql, ws, environment, id).await?;
    let now = sql.now().await?;
    sql.apply_lease(item.seq, &item.lease.ack(now)?, now).await?;
    get(sql, ws, environment, id).await
}

/// A conditional heartbeat ([`Lease::heartbeat`]), judged after expiry once the item's row is
/// locked, so of two heartbeats echoing the same value only the first extends the lease.
pub async fn heartbeat<S: WorkSql>(
    sql: &S,
    ws: &WorkspaceId,
    environment: &EnvironmentId,
    id: &WorkId,
    expected: &str,
    desired_ttl: Option<u64>,
) -> Result<HeartbeatOutcome> {
    let now = sql.now().await?;
    let item = settle(sql, lock(sql, ws, environment, id).await?, now).await?;
    Ok(match item.lease.heartbeat(expected, desired_ttl, now) {
        Heartbeat::Beat(change, answer) => {
            sql.apply_lease(item.seq, &change, now).await?;
            HeartbeatOutcome::Beat(answer)
        }
        Heartbeat::Report(answer) => HeartbeatOutcome::Beat(answer),
        Heartbeat::Refuse(current) => HeartbeatOutcome::PreconditionFailed(current),
    })
}

/// Stops an item, forced or graceful ([`Lease::stop`]), judged after expiry once its row is
/// locked.
pub async fn stop<S: WorkSql>(
    sql: &S,
    ws: &WorkspaceId,
    environment: &EnvironmentId,
    id: &WorkId,
    force: bool,
) -> Result<Work> {
    let now = sql.now().await?;
    let item = settle(sql, lock(sql, ws, environment, id).await?, now).await?;
    sql.apply_lease(item.seq, &item.lease.stop(force, now)?, now).await?;
    get(sql, ws, environment, id).await
}

/// Patches an item's metadata; its row is locked first, so concurrent patches both apply.
pub async fn update_metadata<S: WorkSql>(
    sql: &S,
    ws: &WorkspaceId,
    environment: &EnvironmentId,
    id: &WorkId,
    patch: &BTreeMap<String, Option<String>>,
) -> Result<Work> {
    let item = lock(sql, ws, environment, id).await?;
    let metadata = patch_metadata(&item.work.metadata, patch, Some(ErrorCode::InvalidMetadata))?;
    sql.set_work_metadata(item.seq, &metadata).await?;
    get(sql, ws, environment, id).await
}

/// Queues a healthcheck on `environment` ([`rule::healthcheck`]) whose lease, once
/// acknowledged, lasts `ttl` seconds between heartbeats.
pub async fn enqueue_healthcheck<S: WorkSql + EnvironmentSql>(
    sql: &S,
    ws: &WorkspaceId,
    environment: &EnvironmentId,
    ttl: u64,
) -> Result<Work> {
    let queue = queue_of(sql, ws, environment).await?;
    let id = enqueue(sql, queue, &rule::healthcheck(&WorkId::generate()), ttl).await?;
    get(sql, ws, environment, &id).await
}

/// The statistics of `environment`'s queue now ([`rule::queue_stats`]); any environment has
/// them (an empty queue's, if it is not self-hosted).
pub async fn stats<S: WorkSql>(sql: &S, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<WorkQueueStats> {
    let queue = sql.environment_seq(ws, environment).await?;
    let now = sql.now().await?;
    let queued = sql.read_work(WorkFilter::Queued { environment: queue }).await?;
    let workers = sql.workers_polled_since(queue, rule::polling_since(now)).await?;
    Ok(rule::queue_stats(queued.iter().map(|i| (&i.lease, i.work.created_at.as_str())), workers, now))
}

/// Whom a live sessions token authenticates: the item whose delivery minted it, the session it
/// serves (none for a healthcheck), and the item's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenHolder {
    pub work: WorkId,
    pub session: Option<SessionId>,
    pub environment: EnvironmentId,
}

/// The holder of the live sessions token hashing to `hash`. A token dies with its item's lease
/// ([`Lease::token_alive`]), judged now whether or not expiry has been written; a revoked
/// token, or one whose item is gone, is no token.
pub async fn find_token<S: WorkSql>(sql: &S, hash: &CredentialHash) -> Result<Option<TokenHolder>> {
    let Some(token) = sql.find_session_token(hash).await? else { return Ok(None) };
    let Some(item) = sql.read_work(WorkFilter::Seq(token.work)).await?.into_iter().next() else { return Ok(None) };
    if !item.lease.token_alive(sql.now().await?) {
        return Ok(None);
    }
    Ok(Some(TokenHolder { work: item.work.id, session: token.session, environment: item.work.environment_id }))
}

#[cfg(test)]
mod tests;
