//! The work-item lease: delivery with reclaim, acknowledgement, conditional heartbeats,
//! expiry, stops, and when an item's sessions token is alive.
//!
//! Every transition is a pure function of a [`Lease`] (the item's bookkeeping) and the time,
//! read from one clock — the database's when a backend has several writers. A backend loads the
//! lease in its transaction, applies the rule, writes the returned lease back and, when told,
//! revokes the item's tokens.

use mnemo_api::{Environment, WorkData, WorkHeartbeat, WorkId, WorkLeaseState, WorkQueueStats, WorkState};

use crate::StoreError;

/// Only a self-hosted environment has a work queue.
pub fn check_has_queue(env: &Environment) -> Result<(), StoreError> {
    if env.is_self_hosted() {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!("environment `{}` is not self-hosted; it has no work queue", env.id)))
    }
}

/// Microseconds since the Unix epoch.
pub type Micros = i64;

pub use mnemo_api::NO_HEARTBEAT;
/// Bounds on a requested lease, in seconds.
pub const MIN_TTL_SECONDS: u64 = 1;
pub const MAX_TTL_SECONDS: u64 = 3_600;

/// The states in which an item can lapse ([`Lease::expire`]): a backend may select by them
/// (and by a hold that ran out) before asking, so a scan reads only the items that lapsed.
pub const LAPSING_STATES: [WorkState; 3] = [WorkState::Starting, WorkState::Active, WorkState::Stopping];

/// The one state in which a poll may deliver an item ([`Lease::deliverable`]): a backend may
/// select by it (and by a delivery window that ran out) before asking.
pub const DELIVERABLE_STATE: WorkState = WorkState::Queued;

/// A worker counts as polling for this long after its last poll (the queue statistics'
/// `workers_polling`): long enough to cover a worker's long-poll and its pause between polls.
pub const POLLING_WINDOW_MICROS: Micros = 30_000_000;

/// The earliest last poll at `now` of a worker that still counts as polling.
pub fn polling_since(now: Micros) -> Micros {
    now.saturating_sub(POLLING_WINDOW_MICROS)
}

/// What a healthcheck item carries: the kind `healthcheck` and an id of its own, `hc_` and the
/// random part of `fresh` (a newly generated work id), so a worker can tell checks apart.
pub fn healthcheck(fresh: &WorkId) -> WorkData {
    let random = fresh.as_str().strip_prefix("work_").unwrap_or(fresh.as_str());
    WorkData { kind: "healthcheck".into(), id: format!("hc_{random}") }
}

/// A queue's statistics at `now`, from its queued items (each lease with its item's
/// `created_at`; items in other states are not counted) and how many workers polled within
/// [`POLLING_WINDOW_MICROS`]. `depth` counts the items a poll may deliver now; `pending` the
/// queued ones waiting for a delivery's acknowledgement; `oldest_queued_at` is the oldest
/// queued item's creation, delivered or not.
pub fn queue_stats<'a>(
    queued: impl IntoIterator<Item = (&'a Lease, &'a str)>,
    workers_polling: u64,
    now: Micros,
) -> WorkQueueStats {
    let (mut depth, mut pending, mut oldest) = (0, 0, None::<&str>);
    for (lease, created_at) in queued {
        if lease.state != DELIVERABLE_STATE {
            continue;
        }
        if lease.deliverable(now) {
            depth += 1;
        } else {
            pending += 1;
        }
        // Every creation time is RFC 3339 text of one width, so text order is time order.
        oldest = Some(oldest.map_or(created_at, |o| o.min(created_at)));
    }
    WorkQueueStats {
        depth,
        pending,
        oldest_queued_at: oldest.map(str::to_owned),
        workers_polling: Some(workers_polling),
    }
}

/// The mutable bookkeeping of one work item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub id: WorkId,
    pub state: WorkState,
    /// A delivered item stays hidden from polls, waiting for its acknowledgement, until then.
    pub pending_until: Option<Micros>,
    /// An acknowledged item is held until then unless a heartbeat extends it.
    pub lease_expires_at: Option<Micros>,
    /// The value the next heartbeat must echo (`None`: [`NO_HEARTBEAT`]).
    pub last_heartbeat: Option<String>,
    pub ttl_seconds: u64,
    pub acknowledged_at: Option<Micros>,
    pub started_at: Option<Micros>,
    pub latest_heartbeat_at: Option<Micros>,
    pub stop_requested_at: Option<Micros>,
    pub stopped_at: Option<Micros>,
}

/// A transition: the lease to write back, and whether the item's tokens die with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub lease: Lease,
    pub revoke_tokens: bool,
}

/// What a heartbeat does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heartbeat {
    /// The lease is extended: write it back and answer.
    Beat(Change, WorkHeartbeat),
    /// A stop is pending or done: answer with the state, change nothing.
    Report(WorkHeartbeat),
    /// The expectation is stale or the item is not leased (`412`).
    Refuse(WorkLeaseState),
}

fn seconds(s: u64) -> Micros {
    i64::try_from(s).unwrap_or(i64::MAX / 1_000_000).saturating_mul(1_000_000)
}

use mnemo_api::rfc3339_micros as rfc3339;

impl Lease {
    /// A new item's bookkeeping: queued, with the lease it will get once acknowledged.
    pub fn queued(id: WorkId, ttl_seconds: u64) -> Self {
        Self {
            id,
            state: WorkState::Queued,
            pending_until: None,
            lease_expires_at: None,
            last_heartbeat: None,
            ttl_seconds,
            acknowledged_at: None,
            started_at: None,
            latest_heartbeat_at: None,
            stop_requested_at: None,
            stopped_at: None,
        }
    }

    fn change(self, revoke_tokens: bool) -> Change {
        Change { lease: self, revoke_tokens }
    }

    /// When whoever holds the item loses it: the lease of an acknowledged item, else the
    /// delivery's acknowledgement window.
    fn held_until(&self) -> Option<Micros> {
        self.lease_expires_at.or(self.pending_until)
    }

    /// Whether the item is held by nobody at `now`.
    fn lapsed(&self, now: Micros) -> bool {
        self.held_until().is_none_or(|until| until < now)
    }

    /// Expiry at `now`: an acknowledged item whose lease ran out goes back to the queue; a
    /// `stopping` item that nobody holds any longer is stopped (its worker is gone and cannot
    /// confirm). Either way its tokens die. `None`: nothing expires.
    ///
    /// Only an item in `starting`, `active` or `stopping` whose hold (`lease_expires_at`, else
    /// `pending_until`) is absent or before `now` can expire: a backend may select by that
    /// before asking, so a scan reads only the items that have lapsed.
    pub fn expire(&self, now: Micros) -> Option<Change> {
        match self.state {
            WorkState::Starting | WorkState::Active if self.lease_expires_at.is_some_and(|at| at < now) => {
                let mut next = self.clone();
                next.state = WorkState::Queued;
                next.lease_expires_at = None;
                next.last_heartbeat = None;
                next.pending_until = None;
                Some(next.change(true))
            }
            WorkState::Stopping if self.lapsed(now) => Some(self.force_stop(now)),
            _ => None,
        }
    }

    /// Whether a sessions token minted for this item still authenticates at `now`: never once
    /// the item is stopped or the holder's lease (or acknowledgement window) has lapsed, even
    /// before any expiry has been written.
    pub fn token_alive(&self, now: Micros) -> bool {
        self.state != WorkState::Stopped && !self.lapsed(now)
    }

    /// Whether a poll may deliver the item at `now`.
    pub fn deliverable(&self, now: Micros) -> bool {
        self.state == DELIVERABLE_STATE && self.pending_until.is_none_or(|until| until < now)
    }

    /// Delivery: hidden from other polls for `reclaim_ms`. Tokens of an earlier delivery that
    /// was never acknowledged die.
    pub fn deliver(&self, now: Micros, reclaim_ms: u64) -> Change {
        let reclaim = i64::try_from(reclaim_ms.saturating_mul(1000)).unwrap_or(i64::MAX);
        if self.pending_until.is_some() {
            // Delivered before and never acknowledged: this delivery reclaims it.
            metrics::counter!("mnemo_work_items_reclaimed_total").increment(1);
        }
        let mut next = self.clone();
        next.pending_until = Some(now.saturating_add(reclaim));
        next.change(true)
    }

    /// Acknowledgement of a delivery that is still waiting for it.
    pub fn ack(&self, now: Micros) -> Result<Change, StoreError> {
        if self.state != WorkState::Queued || self.pending_until.is_none_or(|until| until < now) {
            return Err(StoreError::Conflict(format!(
                "work item `{}` is not waiting for an acknowledgement (state {}); poll again",
                self.id,
                self.state.as_str()
            )));
        }
        let mut next = self.clone();
        next.state = WorkState::Starting;
        next.acknowledged_at = Some(now);
        next.pending_until = None;
        next.lease_expires_at = Some(now.saturating_add(seconds(self.ttl_seconds)));
        Ok(next.change(false))
    }

    fn lease_state(&self) -> WorkLeaseState {
        WorkLeaseState {
            last_heartbeat: self.last_heartbeat.clone(),
            lease_extended: false,
            state: self.state,
            ttl_seconds: self.ttl_seconds,
        }
    }

    /// A conditional heartbeat: `expected` must echo the last one ([`NO_HEARTBEAT`] first).
    /// A stop is always reported through a normal answer.
    pub fn heartbeat(&self, expected: &str, desired_ttl_seconds: Option<u64>, now: Micros) -> Heartbeat {
        match self.state {
            WorkState::Stopping | WorkState::Stopped => {
                return Heartbeat::Report(WorkHeartbeat {
                    last_heartbeat: self.last_heartbeat.clone().unwrap_or_default(),
                    ttl_seconds: self.ttl_seconds,
                    lease_extended: false,
                    state: self.state,
                });
            }
            WorkState::Queued => return Heartbeat::Refuse(self.lease_state()),
            WorkState::Starting | WorkState::Active => {}
        }
        if expected != self.last_heartbeat.as_deref().unwrap_or(NO_HEARTBEAT) {
            return Heartbeat::Refuse(self.lease_state());
        }
        let ttl = desired_ttl_seconds.map_or(self.ttl_seconds, |t| t.clamp(MIN_TTL_SECONDS, MAX_TTL_SECONDS));
        // Unique per heartbeat, so a stale echo can never match a newer one.
        let mut beat_at = now;
        let mut beat = rfc3339(beat_at);
        if Some(beat.as_str()) == self.last_heartbeat.as_deref() {
            beat_at += 1;
            beat = rfc3339(beat_at);
        }
        let mut next = self.clone();
        next.state = WorkState::Active;
        next.last_heartbeat = Some(beat.clone());
        next.latest_heartbeat_at = Some(beat_at);
        next.started_at = self.started_at.or(Some(beat_at));
        next.lease_expires_at = Some(beat_at.saturating_add(seconds(ttl)));
        next.ttl_seconds = ttl;
        let answer = WorkHeartbeat { last_heartbeat: beat, ttl_seconds: ttl, lease_extended: true, state: next.state };
        Heartbeat::Beat(next.change(false), answer)
    }

    fn force_stop(&self, now: Micros) -> Change {
        let mut next = self.clone();
        next.state = WorkState::Stopped;
        next.stopped_at = Some(now);
        next.pending_until = None;
        next.lease_expires_at = None;
        next.change(true)
    }

    /// A stop: forced, the item is stopped at once and its tokens die; graceful, it is
    /// `stopping` until its worker confirms (or its lease lapses). Stopping a stopped item is a
    /// conflict.
    pub fn stop(&self, force: bool, now: Micros) -> Result<Change, StoreError> {
        if self.state == WorkState::Stopped {
            return Err(StoreError::Conflict(format!("work item `{}` is already stopped", self.id)));
        }
        if force {
            return Ok(self.force_stop(now));
        }
        let mut next = self.clone();
        next.state = WorkState::Stopping;
        next.stop_requested_at = self.stop_requested_at.or(Some(now));
        Ok(next.change(false))
    }

    /// Whether the item is live (a session has at most one live item).
    pub fn is_live(&self) -> bool {
        self.state != WorkState::Stopped
    }
}

#[cfg(test)]
mod tests;
