//! The self-hosted work queue: every transition decided by [`Lease`], written back through
//! [`WorkSql`].

use mnemo_api::{SessionId, Work, WorkData, WorkId, WorkState};

use super::{Clock, Micros, Seq};
use crate::Result;
use crate::row::rfc3339_opt;
use crate::rules::work::{Change, Lease};

/// A work item as stored: the item as the API shows it, its lease, and its row number.
#[derive(Debug, Clone)]
pub struct WorkRow {
    pub work: Work,
    pub lease: Lease,
    pub seq: Seq,
}

/// Which work items a query reads, in queue order.
#[derive(Debug, Clone, Copy)]
pub enum WorkFilter<'a> {
    /// A session's items in a state that can lapse ([`LAPSING_STATES`](crate::rules::work::LAPSING_STATES)) whose deadline
    /// passed before `now`, each locked (waiting for another holder): the judgement that follows
    /// sees them settled.
    LapsedOfSession { session: &'a SessionId, now: Micros },
    /// A session's items not yet stopped (locked by [`WorkSql::work_where`]; unlocked by
    /// [`WorkSql::first_work`], which only looks).
    UnstoppedOfSession(&'a SessionId),
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

/// SQL over work items and the sessions tokens bound to their deliveries.
pub trait WorkSql: Clock {
    /// The items `filter` selects, in queue order.
    async fn work_where(&self, filter: WorkFilter<'_>) -> Result<Vec<WorkRow>>;
    /// The first item `filter` selects, in queue order, whose lease `wanted` accepts; rows are
    /// read one at a time and the scan stops there, so a deep queue costs only what it skips.
    async fn first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<WorkRow>>;
    /// Writes a lease back to item `seq`, and with [`Change::revoke_tokens`] revokes the item's
    /// live sessions tokens at `now`.
    async fn apply_lease(&self, seq: Seq, change: &Change, now: Micros) -> Result<()>;
    /// Queues an item.
    async fn insert_work(&self, new: &NewWork<'_>) -> Result<()>;
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

/// Applies expiry to a session's lapsed items (before judging whether it has a live one).
pub async fn settle_session<S: WorkSql>(sql: &S, session: &SessionId, now: Micros) -> Result<()> {
    for item in sql.work_where(WorkFilter::LapsedOfSession { session, now }).await? {
        settle(sql, item, now).await?;
    }
    Ok(())
}

/// Force-stops every item of a session not yet stopped (archive, delete).
pub async fn stop_session_work<S: WorkSql>(sql: &S, session: &SessionId) -> Result<()> {
    let now = sql.now().await?;
    for item in sql.work_where(WorkFilter::UnstoppedOfSession(session)).await? {
        sql.apply_lease(item.seq, &item.lease.stop(true, now)?, now).await?;
    }
    Ok(())
}

/// Whether a session has a live item ([`Lease::is_live`]).
pub async fn has_live_work<S: WorkSql>(sql: &S, session: &SessionId) -> Result<bool> {
    Ok(sql.first_work(WorkFilter::UnstoppedOfSession(session), &Lease::is_live).await?.is_some())
}

/// Queues a work item on environment `environment` whose lease, once acknowledged, lasts `ttl`
/// seconds between heartbeats.
pub async fn enqueue<S: WorkSql>(sql: &S, environment: Seq, data: &WorkData, ttl: u64) -> Result<WorkId> {
    let id = WorkId::generate();
    let session = data.session_id();
    let now = sql.now().await?;
    sql.insert_work(&NewWork {
        id: &id,
        environment,
        session,
        data,
        state: WorkState::Queued,
        ttl_seconds: Lease::queued(id.clone(), ttl).ttl_seconds,
        created_at: now,
    })
    .await?;
    Ok(id)
}
