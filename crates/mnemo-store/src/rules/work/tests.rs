//! One row per rule of the lease.

use super::*;

const S: Micros = 1_000_000;
const NOW: Micros = 1_800_000_000 * S;

fn item() -> Lease {
    Lease::queued("work_w".parse().unwrap(), 300)
}

fn delivered() -> Lease {
    item().deliver(NOW - S, 5_000).lease
}

fn acked() -> Lease {
    delivered().ack(NOW - S).unwrap().lease
}

fn beating() -> Lease {
    match acked().heartbeat(NO_HEARTBEAT, None, NOW - S) {
        Heartbeat::Beat(change, _) => change.lease,
        other => panic!("{other:?}"),
    }
}

fn with(state: WorkState, lease: Lease) -> Lease {
    Lease { state, ..lease }
}

/// The state an expiry leads to and whether it revokes tokens.
type Expiry = Option<(WorkState, bool)>;

#[test]
fn expiry() {
    #[rustfmt::skip]
    let rows: Vec<(&str, Lease, Micros, Expiry)> = vec![
        ("a queued item never expires", item(), NOW, None),
        ("a lease within its time holds", beating(), NOW, None),
        ("an acknowledged lease that ran out goes back to the queue, tokens revoked",
            acked(), NOW + 301 * S, Some((WorkState::Queued, true))),
        ("a heartbeat lease that ran out goes back to the queue", beating(), NOW + 301 * S, Some((WorkState::Queued, true))),
        ("a stopping item nobody holds is stopped", with(WorkState::Stopping, item()), NOW, Some((WorkState::Stopped, true))),
        ("a stopping item whose worker's lease lapsed is stopped",
            with(WorkState::Stopping, beating()), NOW + 301 * S, Some((WorkState::Stopped, true))),
        ("a stopping item still held waits for its worker", with(WorkState::Stopping, beating()), NOW, None),
        ("a stopped item stays stopped", with(WorkState::Stopped, item()), NOW + 9_000 * S, None),
    ];
    for (rule, lease, at, expected) in rows {
        let got = lease.expire(at).map(|c| (c.lease.state, c.revoke_tokens));
        assert_eq!(got, expected, "rule: {rule}");
    }
    let requeued = acked().expire(NOW + 301 * S).unwrap().lease;
    assert_eq!(
        (requeued.lease_expires_at, requeued.pending_until, requeued.last_heartbeat.as_deref()),
        (None, None, None)
    );
    assert!(requeued.deliverable(NOW + 301 * S));
}

#[test]
fn token_liveness() {
    #[rustfmt::skip]
    let rows: Vec<(&str, Lease, Micros, bool)> = vec![
        ("a delivery's token lives while it waits for its acknowledgement", delivered(), NOW, true),
        ("an unacknowledged delivery's token dies with its window", delivered(), NOW + 5 * S, false),
        ("an acknowledged item's token lives with its lease", acked(), NOW + 299 * S, true),
        ("and dies the moment the lease lapses, before any expiry is written", acked(), NOW + 300 * S, false),
        ("a heartbeat keeps it alive", beating(), NOW + 200 * S, true),
        ("a stopping item's token lives while its lease does (the worker is finishing)",
            with(WorkState::Stopping, beating()), NOW, true),
        ("a stopped item's token is dead", with(WorkState::Stopped, beating()), NOW, false),
        ("an item never delivered has no live token", item(), NOW, false),
    ];
    for (rule, lease, at, expected) in rows {
        assert_eq!(lease.token_alive(at), expected, "rule: {rule}");
    }
}

#[test]
fn delivery_and_acknowledgement() {
    assert!(item().deliverable(NOW), "a queued item is deliverable");
    let d = item().deliver(NOW, 5_000);
    assert!(d.revoke_tokens, "a new delivery kills the last delivery's token");
    assert_eq!(d.lease.pending_until, Some(NOW + 5 * S));
    assert!(!d.lease.deliverable(NOW + 5 * S), "hidden while its window is open");
    assert!(d.lease.deliverable(NOW + 5 * S + 1), "reclaimed after it");
    assert!(!with(WorkState::Active, item()).deliverable(NOW), "a leased item is not deliverable");

    let a = d.lease.ack(NOW + S).unwrap();
    assert_eq!(a.lease.state, WorkState::Starting);
    assert_eq!(a.lease.lease_expires_at, Some(NOW + S + 300 * S));
    assert_eq!(a.lease.acknowledged_at, Some(NOW + S));
    assert!(!a.revoke_tokens);
    let late = d.lease.ack(NOW + 6 * S).unwrap_err();
    assert!(matches!(late, StoreError::Conflict(m) if m.contains("not waiting for an acknowledgement (state queued)")));
    assert!(item().ack(NOW).is_err(), "an item never delivered cannot be acknowledged");
    assert!(a.lease.ack(NOW + S).is_err(), "nor acknowledged twice");
}

#[test]
fn heartbeats() {
    let leased = acked();
    let Heartbeat::Beat(first, answer) = leased.heartbeat(NO_HEARTBEAT, Some(60), NOW) else { panic!() };
    assert_eq!(first.lease.state, WorkState::Active);
    assert_eq!((answer.ttl_seconds, answer.lease_extended), (60, true));
    assert_eq!(first.lease.lease_expires_at, Some(NOW + 60 * S));
    assert_eq!(first.lease.started_at, Some(NOW));
    assert_eq!(first.lease.last_heartbeat.as_deref(), Some(answer.last_heartbeat.as_str()));

    // The same instant twice still gives a fresh value.
    let Heartbeat::Beat(second, again) = first.lease.heartbeat(&answer.last_heartbeat, None, NOW) else { panic!() };
    assert_ne!(again.last_heartbeat, answer.last_heartbeat);
    assert_eq!(second.lease.started_at, Some(NOW), "started_at is the first heartbeat's");
    assert_eq!(again.ttl_seconds, 60, "the last asked-for lease carries on");

    #[rustfmt::skip]
    let refusals: Vec<(&str, Lease, &str)> = vec![
        ("a stale echo is refused", second.lease.clone(), answer.last_heartbeat.as_str()),
        ("the first heartbeat must say NO_HEARTBEAT", leased.clone(), "2026-01-01T00:00:00Z"),
        ("a queued item holds no lease", item(), NO_HEARTBEAT),
    ];
    for (rule, lease, expected) in refusals {
        assert!(matches!(lease.heartbeat(expected, None, NOW), Heartbeat::Refuse(_)), "rule: {rule}");
    }
    for state in [WorkState::Stopping, WorkState::Stopped] {
        let got = with(state, second.lease.clone()).heartbeat("anything", None, NOW);
        let Heartbeat::Report(r) = got else { panic!("a stop is reported, not refused: {got:?}") };
        assert_eq!((r.state, r.lease_extended), (state, false));
    }
    let Heartbeat::Beat(clamped, _) = leased.heartbeat(NO_HEARTBEAT, Some(99_999), NOW) else { panic!() };
    assert_eq!(clamped.lease.ttl_seconds, MAX_TTL_SECONDS);
}

#[test]
fn stops() {
    let graceful = beating().stop(false, NOW).unwrap();
    assert_eq!((graceful.lease.state, graceful.revoke_tokens), (WorkState::Stopping, false));
    assert_eq!(graceful.lease.stop_requested_at, Some(NOW));
    let again = graceful.lease.stop(false, NOW + S).unwrap();
    assert_eq!(again.lease.stop_requested_at, Some(NOW), "the first request's time is kept");
    let confirmed = graceful.lease.stop(true, NOW + S).unwrap();
    assert_eq!((confirmed.lease.state, confirmed.revoke_tokens), (WorkState::Stopped, true));
    assert_eq!(confirmed.lease.stopped_at, Some(NOW + S));
    assert!(!confirmed.lease.is_live());
    let twice = confirmed.lease.stop(true, NOW).unwrap_err();
    assert!(matches!(twice, StoreError::Conflict(m) if m == "work item `work_w` is already stopped"));
}

#[test]
fn only_a_self_hosted_environment_has_a_queue() {
    let env = |kind: &str| -> Environment {
        serde_json::from_value(serde_json::json!({
            "type": "environment", "id": "env_e", "name": "e", "description": null, "metadata": {},
            "config": {"type": kind}, "scope": null, "created_at": "t", "updated_at": "t", "archived_at": null,
        }))
        .unwrap()
    };
    assert!(check_has_queue(&env("self_hosted")).is_ok());
    let cloud = check_has_queue(&env("cloud")).unwrap_err();
    assert_eq!(cloud.to_string(), "environment `env_e` is not self-hosted; it has no work queue");
}

/// A backend selects lapsed items by [`LAPSING_STATES`]: an item in any other state never
/// expires, however long ago its hold ended.
#[test]
fn only_the_lapsing_states_expire() {
    for state in [WorkState::Queued, WorkState::Starting, WorkState::Active, WorkState::Stopping, WorkState::Stopped] {
        let lease = Lease { pending_until: Some(0), lease_expires_at: Some(0), ..with(state, beating()) };
        let expires = lease.expire(NOW).is_some();
        assert_eq!(expires, LAPSING_STATES.contains(&state), "{state:?}");
    }
}
