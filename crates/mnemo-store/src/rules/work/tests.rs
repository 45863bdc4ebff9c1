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

/// A poll selects by [`DELIVERABLE_STATE`]: an item in any other state is never delivered,
/// however long ago its delivery window closed.
#[test]
fn only_the_deliverable_state_is_delivered() {
    #[rustfmt::skip]
    let rows: Vec<(&str, Lease, bool)> = vec![
        ("a queued item never delivered", item(), true),
        ("a queued item whose delivery window closed (reclaimed)", Lease { pending_until: Some(NOW - 1), ..item() }, true),
        ("a queued item whose delivery window is open", Lease { pending_until: Some(NOW + 1), ..item() }, false),
        ("the window closes strictly after its end", Lease { pending_until: Some(NOW), ..item() }, false),
        ("starting", with(WorkState::Starting, item()), false),
        ("active", with(WorkState::Active, item()), false),
        ("stopping", with(WorkState::Stopping, item()), false),
        ("stopped", with(WorkState::Stopped, item()), false),
    ];
    for (rule, lease, expected) in rows {
        assert_eq!(lease.deliverable(NOW), expected, "rule: {rule}");
        if expected {
            assert_eq!(lease.state, DELIVERABLE_STATE, "rule: {rule}");
        }
    }
}

#[test]
fn a_worker_counts_as_polling_for_thirty_seconds() {
    #[rustfmt::skip]
    let rows: Vec<(&str, Micros, bool)> = vec![
        ("a poll just now", NOW, true),
        ("a poll 29 s ago", NOW - 29 * S, true),
        ("a poll exactly 30 s ago still counts", NOW - 30 * S, true),
        ("a poll 30 s and a microsecond ago does not", NOW - 30 * S - 1, false),
        ("a poll a minute ago does not", NOW - 60 * S, false),
    ];
    for (rule, last_poll, counts) in rows {
        assert_eq!(last_poll >= polling_since(NOW), counts, "rule: {rule}");
    }
    assert_eq!(POLLING_WINDOW_MICROS, 30 * S);
    assert_eq!(polling_since(Micros::MIN), Micros::MIN, "no overflow at the clock's start");
}

#[test]
fn a_healthcheck_carries_an_hc_id_of_its_item() {
    let item: WorkId = "work_01abc".parse().unwrap();
    let data = healthcheck(&item);
    assert_eq!((data.kind.as_str(), data.id.as_str()), ("healthcheck", "hc_01abc"));
    assert_eq!(data.session_id(), None, "a healthcheck serves no session");
    let (a, b) = (healthcheck(&WorkId::generate()), healthcheck(&WorkId::generate()));
    assert!(a.id.starts_with("hc_") && !a.id.contains("work_"), "{}", a.id);
    assert_ne!(a.id, b.id, "every check has its own id");
}

#[test]
fn queue_statistics() {
    let open = Lease { pending_until: Some(NOW + S), ..item() };
    let closed = Lease { pending_until: Some(NOW - S), ..item() };
    let leased = with(WorkState::Active, item());
    let queued = item();
    let (t1, t2, t3) = ("2026-01-01T00:00:01.000000Z", "2026-01-01T00:00:02.000000Z", "2026-01-01T00:00:03.000000Z");
    /// The rule, the queued items with their creation, and the expected depth, pending, oldest.
    type Row<'a> = (&'a str, Vec<(&'a Lease, &'a str)>, (u64, u64, Option<&'a str>));
    #[rustfmt::skip]
    let rows: Vec<Row<'_>> = vec![
        ("an empty queue", vec![], (0, 0, None)),
        ("a queued item is depth", vec![(&queued, t1)], (1, 0, Some(t1))),
        ("a delivery waiting for its acknowledgement is pending, and still the oldest",
            vec![(&open, t1), (&queued, t2)], (1, 1, Some(t1))),
        ("a delivery whose window closed counts as depth again", vec![(&closed, t2)], (1, 0, Some(t2))),
        ("the oldest is the earliest creation, in any order", vec![(&queued, t3), (&open, t2), (&queued, t1)], (2, 1, Some(t1))),
        ("an item no longer queued is not counted", vec![(&leased, t1), (&queued, t2)], (1, 0, Some(t2))),
    ];
    for (rule, queued, (depth, pending, oldest)) in rows {
        let stats = queue_stats(queued, 4, NOW);
        assert_eq!(
            (stats.depth, stats.pending, stats.oldest_queued_at.as_deref(), stats.workers_polling),
            (depth, pending, oldest, Some(4)),
            "rule: {rule}"
        );
    }
}
