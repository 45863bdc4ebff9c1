//! The operations' order of steps (and so of locks), over primitives that record their calls.

use std::cell::RefCell;

use mnemo_api::{Environment, WorkLeaseState};

use super::*;
use crate::ops::{EnvironmentRow, run_ready};
use crate::rules::work::{LAPSING_STATES, NO_HEARTBEAT};

const S: Micros = 1_000_000;
const NOW: Micros = 1_800_000_000 * S;

/// A queue in memory; every primitive call is recorded by name (and a lease write by the state
/// it writes).
struct Fake {
    ws: WorkspaceId,
    environment: EnvironmentId,
    self_hosted: bool,
    items: RefCell<Vec<WorkRow>>,
    tokens: RefCell<Vec<(CredentialHash, Seq)>>,
    calls: RefCell<Vec<String>>,
}

impl Fake {
    fn new(self_hosted: bool) -> Self {
        let environment = EnvironmentId::generate();
        Self {
            ws: WorkspaceId::generate(),
            environment,
            self_hosted,
            items: Default::default(),
            tokens: Default::default(),
            calls: Default::default(),
        }
    }

    /// Adds an item in `state` whose hold (lease, else delivery window) ends at `until`.
    fn add(&self, state: WorkState, lease_until: Option<Micros>, pending_until: Option<Micros>) -> WorkId {
        let id = WorkId::generate();
        let mut items = self.items.borrow_mut();
        let lease = Lease { state, lease_expires_at: lease_until, pending_until, ..Lease::queued(id.clone(), 60) };
        let work = Work {
            id: id.clone(),
            environment_id: self.environment.clone(),
            state,
            data: WorkData::session(&SessionId::generate()),
            secret: None,
            metadata: BTreeMap::new(),
            created_at: format!("2026-01-01T00:00:0{}.000000Z", items.len()),
            acknowledged_at: None,
            started_at: None,
            latest_heartbeat_at: None,
            stop_requested_at: None,
            stopped_at: None,
        };
        let seq = items.len() as Seq + 1;
        items.push(WorkRow { work, lease, seq });
        id
    }

    fn call(&self, name: impl Into<String>) {
        self.calls.borrow_mut().push(name.into());
    }

    fn calls(&self) -> Vec<String> {
        self.calls.take()
    }

    fn select(&self, filter: WorkFilter<'_>) -> Vec<WorkRow> {
        let lapsed = |l: &Lease, now: Micros| {
            LAPSING_STATES.contains(&l.state) && l.lease_expires_at.or(l.pending_until).unwrap_or(0) < now
        };
        let session = |r: &WorkRow, s: &SessionId| r.work.data.session_id() == Some(s.as_str());
        let selected = |r: &WorkRow| match filter {
            WorkFilter::Item { environment, id, .. } => r.work.id == *id && r.work.environment_id == *environment,
            WorkFilter::Seq(seq) => r.seq == seq,
            WorkFilter::Lapsed { now, .. } => lapsed(&r.lease, now),
            WorkFilter::LapsedOfSession { session: s, now } => session(r, s) && lapsed(&r.lease, now),
            WorkFilter::UnstoppedOfSession(s) => session(r, s) && r.lease.state != WorkState::Stopped,
            WorkFilter::Deliverable { now, .. } => {
                r.lease.state == rule::DELIVERABLE_STATE && r.lease.pending_until.is_none_or(|p| p < now)
            }
            WorkFilter::Queued { .. } => r.lease.state == rule::DELIVERABLE_STATE,
        };
        self.items.borrow().iter().filter(|r| selected(r)).cloned().collect()
    }
}

impl Clock for Fake {
    async fn now(&self) -> Result<Micros> {
        Ok(NOW)
    }
}

impl EnvironmentSql for Fake {
    async fn hold_environment(&self, _ws: &WorkspaceId, id: &EnvironmentId) -> Result<EnvironmentRow> {
        self.call("hold_environment");
        let kind = if self.self_hosted { "self_hosted" } else { "cloud" };
        let environment: Environment = serde_json::from_value(serde_json::json!({
            "type": "environment", "id": id, "name": "e", "description": null, "metadata": {},
            "config": {"type": kind}, "scope": null, "created_at": "t", "updated_at": "t", "archived_at": null,
        }))
        .unwrap();
        Ok(EnvironmentRow { environment, seq: 1 })
    }
}

impl WorkSql for Fake {
    async fn earliest_lapse(&self) -> Result<Option<Micros>> {
        self.call("earliest_lapse");
        let items = self.items.borrow();
        let lapsing = items.iter().filter(|r| LAPSING_STATES.contains(&r.lease.state));
        Ok(lapsing.map(|r| r.lease.lease_expires_at.or(r.lease.pending_until).unwrap_or(0)).min())
    }
    async fn read_work(&self, filter: WorkFilter<'_>) -> Result<Vec<WorkRow>> {
        self.call("read_work");
        Ok(self.select(filter))
    }
    async fn lock_work(&self, filter: WorkFilter<'_>) -> Result<Vec<WorkRow>> {
        self.call("lock_work");
        Ok(self.select(filter))
    }
    async fn claim_work(&self, filter: WorkFilter<'_>) -> Result<Vec<WorkRow>> {
        self.call("claim_work");
        Ok(self.select(filter))
    }
    async fn first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<WorkRow>> {
        self.call("first_work");
        Ok(self.select(filter).into_iter().find(|r| wanted(&r.lease)))
    }
    async fn claim_first_work(
        &self,
        filter: WorkFilter<'_>,
        wanted: &(dyn Fn(&Lease) -> bool + Sync),
    ) -> Result<Option<WorkRow>> {
        self.call("claim_first_work");
        Ok(self.select(filter).into_iter().find(|r| wanted(&r.lease)))
    }
    async fn apply_lease(&self, seq: Seq, change: &Change, _now: Micros) -> Result<()> {
        self.call(format!("apply_lease {}", change.lease.state.as_str()));
        let mut items = self.items.borrow_mut();
        let row = items.iter_mut().find(|r| r.seq == seq).unwrap();
        row.lease = change.lease.clone();
        row.work.state = change.lease.state;
        Ok(())
    }
    async fn insert_work(&self, _new: &NewWork<'_>) -> Result<()> {
        self.call("insert_work");
        Ok(())
    }
    async fn set_work_metadata(&self, _seq: Seq, _metadata: &BTreeMap<String, String>) -> Result<()> {
        self.call("set_work_metadata");
        Ok(())
    }
    async fn insert_session_token(
        &self,
        hash: &CredentialHash,
        work: Seq,
        _session: Option<&str>,
        _now: Micros,
    ) -> Result<()> {
        self.call("insert_session_token");
        self.tokens.borrow_mut().push((*hash, work));
        Ok(())
    }
    async fn find_session_token(&self, hash: &CredentialHash) -> Result<Option<StoredToken>> {
        self.call("find_session_token");
        let found = self.tokens.borrow().iter().find(|(h, _)| h == hash).map(|&(_, work)| work);
        Ok(found.map(|work| StoredToken { work, session: None }))
    }
    async fn record_poll(&self, _environment: Seq, worker: &str, _now: Micros) -> Result<()> {
        self.call(format!("record_poll {worker}"));
        Ok(())
    }
    async fn workers_polled_since(&self, _environment: Seq, since: Micros) -> Result<u64> {
        self.call(format!("workers_polled_since -{}s", (NOW - since) / S));
        Ok(2)
    }
    async fn environment_seq(&self, _ws: &WorkspaceId, _id: &EnvironmentId) -> Result<Seq> {
        self.call("environment_seq");
        Ok(1)
    }
}

#[test]
fn a_poll_expires_then_claims_then_records_the_worker_last() {
    let q = Fake::new(true);
    let queued = q.add(WorkState::Queued, None, None);
    q.add(WorkState::Active, Some(NOW - S), None);
    let env = q.environment.clone();
    let polled = run_ready(poll(&q, &q.ws, &env, Some("w1"), 5_000, &[7; 32])).unwrap().unwrap();
    assert_eq!(polled.id, queued, "the oldest deliverable item");
    #[rustfmt::skip]
    assert_eq!(q.calls(), [
        "hold_environment",
        "claim_work", "apply_lease queued",             // the lapsed lease goes back to the queue
        "claim_first_work", "apply_lease queued",       // the delivery
        "insert_session_token",
        "record_poll w1",
    ]);
    assert_eq!(q.tokens.borrow().as_slice(), [([7; 32], 1)]);

    // Anonymous: no poll recorded. The requeued item is delivered next, and then nothing.
    assert!(run_ready(poll(&q, &q.ws, &env, None, 5_000, &[8; 32])).unwrap().is_some());
    assert!(!q.calls().iter().any(|c| c.starts_with("record_poll")));
    assert!(run_ready(poll(&q, &q.ws, &env, Some("w1"), 5_000, &[9; 32])).unwrap().is_none());
    assert_eq!(q.calls(), ["hold_environment", "claim_work", "claim_first_work", "record_poll w1"]);
}

#[test]
fn a_queue_is_judged_before_any_item_is_touched() {
    let q = Fake::new(false);
    q.add(WorkState::Queued, None, None);
    let env = q.environment.clone();
    assert!(matches!(run_ready(poll(&q, &q.ws, &env, Some("w"), 5_000, &[0; 32])), Err(StoreError::Invalid(_))));
    assert!(matches!(run_ready(enqueue_healthcheck(&q, &q.ws, &env, 60)), Err(StoreError::Invalid(_))));
    assert_eq!(q.calls(), ["hold_environment", "hold_environment"]);
}

#[test]
fn transitions_lock_the_item_then_settle_it_before_judging() {
    let q = Fake::new(true);
    let env = q.environment.clone();
    let lapsed = q.add(WorkState::Active, Some(NOW - S), None);
    let beat = run_ready(heartbeat(&q, &q.ws, &env, &lapsed, NO_HEARTBEAT, None)).unwrap();
    let HeartbeatOutcome::PreconditionFailed(WorkLeaseState { state, .. }) = beat else { panic!("{beat:?}") };
    assert_eq!(state, WorkState::Queued, "judged after its lapsed lease was expired");
    assert_eq!(q.calls(), ["lock_work", "apply_lease queued"]);

    let abandoned = q.add(WorkState::Stopping, None, None);
    let twice = run_ready(stop(&q, &q.ws, &env, &abandoned, false));
    assert!(matches!(twice, Err(StoreError::Conflict(_))), "nobody held it: expiry stopped it first: {twice:?}");
    assert_eq!(q.calls(), ["lock_work", "apply_lease stopped"]);

    let held = q.add(WorkState::Active, Some(NOW + S), None);
    assert_eq!(run_ready(stop(&q, &q.ws, &env, &held, false)).unwrap().state, WorkState::Stopping);
    assert_eq!(q.calls(), ["lock_work", "apply_lease stopping", "read_work"], "answered as it is read back");

    let unknown = WorkId::generate();
    assert!(matches!(run_ready(ack(&q, &q.ws, &env, &unknown)), Err(StoreError::NotFound { .. })));
    assert_eq!(q.calls(), ["lock_work"]);
}

#[test]
fn stats_count_workers_within_the_polling_window() {
    let q = Fake::new(true);
    q.add(WorkState::Queued, None, None);
    q.add(WorkState::Queued, None, Some(NOW + S));
    q.add(WorkState::Active, Some(NOW + S), None);
    let env = q.environment.clone();
    let stats = run_ready(stats(&q, &q.ws, &env)).unwrap();
    assert_eq!(
        (stats.depth, stats.pending, stats.oldest_queued_at.as_deref(), stats.workers_polling),
        (1, 1, Some("2026-01-01T00:00:00.000000Z"), Some(2))
    );
    assert_eq!(q.calls(), ["environment_seq", "read_work", "workers_polled_since -30s"]);
}

#[test]
fn a_token_lives_with_its_items_lease() {
    let q = Fake::new(true);
    q.add(WorkState::Active, Some(NOW + S), None);
    q.add(WorkState::Active, Some(NOW - S), None);
    q.tokens.borrow_mut().extend([([1; 32], 1), ([2; 32], 2), ([3; 32], 9)]);
    let alive = run_ready(find_token(&q, &[1; 32])).unwrap().expect("a live lease's token");
    assert_eq!((alive.work, alive.environment), (q.items.borrow()[0].work.id.clone(), q.environment.clone()));
    assert_eq!(run_ready(find_token(&q, &[2; 32])).unwrap(), None, "dead with a lapsed lease, expiry unwritten");
    assert_eq!(run_ready(find_token(&q, &[3; 32])).unwrap(), None, "an item that is gone");
    assert_eq!(run_ready(find_token(&q, &[4; 32])).unwrap(), None, "no such token");
}
