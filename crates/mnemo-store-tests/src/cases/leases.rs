//! What time does to the work queue, with one-second leases: lapsed leases, lapsed stops,
//! and the life of a sessions token. Each story sleeps past the lease instead of asserting
//! how long anything takes.

use std::time::Duration;

use mnemo_api::{Environment, Session, Work, WorkState};
use mnemo_store::rules::work::NO_HEARTBEAT;
use mnemo_store::{Credential, Limits, Store};

use super::fixtures::{environment, fresh_hash, session, user_message, with_session};
use super::work::{beat, refused};
use crate::StoreFactory;

/// Leases of one second.
fn short() -> Limits {
    Limits { work_lease_ttl_seconds: 1, ..Limits::default() }
}

/// Sleeps well past a one-second lease.
async fn past_the_lease() {
    tokio::time::sleep(Duration::from_millis(1_600)).await;
}

/// An environment with one session whose item is delivered and acknowledged.
async fn leased(s: &dyn Store) -> (Environment, Session, Work) {
    let ws = s.default_workspace().await.unwrap();
    let env = environment(s, true).await;
    let session = session(s, &env).await;
    let item = s.poll_work(&ws, &env.id, None, 60_000, fresh_hash()).await.unwrap().expect("the session's item");
    let acked = s.ack_work(&ws, &env.id, &item.id).await.unwrap();
    (env, session, acked)
}

pub async fn a_lapsed_lease_returns_the_item_to_the_queue(factory: &impl StoreFactory) {
    let s = factory.open(short()).await;
    let ws = s.default_workspace().await.unwrap();
    // Each story in its own environment, so that one story's poll cannot expire another's item.
    let (polled_env, _, polled) = leased(&*s).await;
    let (expired_env, _, expired) = leased(&*s).await;
    let (kept_env, _, kept) = leased(&*s).await;
    let held = beat(s.heartbeat_work(&ws, &kept_env.id, &kept.id, NO_HEARTBEAT, Some(60)).await.unwrap());
    let (stopping_env, stopping_session, stopping) = leased(&*s).await;
    s.stop_work(&ws, &stopping_env.id, &stopping.id, false).await.unwrap();
    let (input_env, input_session, input_item) = leased(&*s).await;
    s.stop_work(&ws, &input_env.id, &input_item.id, false).await.unwrap();

    past_the_lease().await;

    // The next poll finds the lapsed item and delivers it again; its old holder is refused.
    let again = s.poll_work(&ws, &polled_env.id, None, 60_000, fresh_hash()).await.unwrap();
    assert_eq!(again.map(|w| w.id), Some(polled.id.clone()), "a lapsed lease is delivered again");
    let old_holder = refused(s.heartbeat_work(&ws, &polled_env.id, &polled.id, NO_HEARTBEAT, None).await.unwrap());
    assert_eq!(old_holder.state, WorkState::Queued);

    // New input to a session whose stopping item lapsed: the item is stopped and new work queued.
    let appended =
        s.append_events(&ws, &input_session.id, vec![user_message("hi")], super::fixtures::person()).await.unwrap();
    assert!(appended.enqueued_work, "a lapsed stopping item is no live work");
    assert_eq!(s.get_work(&ws, &input_env.id, &input_item.id).await.unwrap().state, WorkState::Stopped);

    // `expire_work` applies the rest: one item back in the queue, one stopping item stopped.
    assert_eq!(s.expire_work().await.unwrap(), 2, "the lapsed lease and the lapsed stop");
    let requeued = s.get_work(&ws, &expired_env.id, &expired.id).await.unwrap();
    assert_eq!(requeued.state, WorkState::Queued);
    let stats = s.work_stats(&ws, &expired_env.id).await.unwrap();
    assert_eq!((stats.depth, stats.pending), (1, 0));
    let redelivered = s.poll_work(&ws, &expired_env.id, None, 60_000, fresh_hash()).await.unwrap();
    assert_eq!(redelivered.map(|w| w.id), Some(expired.id.clone()));
    let stopped = s.get_work(&ws, &stopping_env.id, &stopping.id).await.unwrap();
    assert_eq!(stopped.state, WorkState::Stopped);
    assert!(stopped.stopped_at.is_some());
    let appended =
        s.append_events(&ws, &stopping_session.id, vec![user_message("hi")], super::fixtures::person()).await.unwrap();
    assert!(appended.enqueued_work, "the stopped item's session gets new work");

    // A heartbeat kept its lease.
    let still = beat(s.heartbeat_work(&ws, &kept_env.id, &kept.id, &held.last_heartbeat, None).await.unwrap());
    assert_eq!((still.state, still.lease_extended), (WorkState::Active, true));
    assert_eq!(s.expire_work().await.unwrap(), 0, "nothing else lapsed");
}

/// The expiry sweep sleeps until the next lease lapses: the store tells when that is.
pub async fn the_store_tells_when_the_next_lease_lapses(factory: &impl StoreFactory) {
    let s = factory.open(short()).await;
    assert_eq!(s.next_work_lapse().await.unwrap(), None, "no work, nothing lapses");
    let (env, _, item) = leased(&*s).await;
    let next = s.next_work_lapse().await.unwrap().expect("a leased item lapses");
    assert!(next > Duration::ZERO && next <= Duration::from_secs(1), "within its one-second lease: {next:?}");
    past_the_lease().await;
    assert_eq!(s.next_work_lapse().await.unwrap(), Some(Duration::ZERO), "lapsed");
    assert_eq!(s.expire_work().await.unwrap(), 1);
    let ws = s.default_workspace().await.unwrap();
    assert_eq!(s.get_work(&ws, &env.id, &item.id).await.unwrap().state, WorkState::Queued);
    assert_eq!(s.next_work_lapse().await.unwrap(), None, "a queued item does not lapse");
}

/// Regression: a sessions token kept working after its lease lapsed until some later poll,
/// heartbeat or expiry in its environment happened to write the expiry down.
pub async fn a_sessions_token_lives_exactly_as_long_as_its_lease(factory: &impl StoreFactory) {
    let (s, ws, env, session) = with_session(factory, short(), true).await;
    let alive = |work: &Work| Credential::SessionToken {
        work: work.id.clone(),
        session: Some(session.id.clone()),
        environment: env.id.clone(),
    };

    // A delivery's token lives while the delivery waits for its acknowledgement…
    let first = fresh_hash();
    let item = s.poll_work(&ws, &env.id, None, 1_000, first).await.unwrap().expect("the item");
    assert_eq!(s.resolve_credential(first).await.unwrap().map(|p| p.credential), Some(alive(&item)));
    // …and dies when that window lapses, with no other call in between.
    past_the_lease().await;
    assert_eq!(
        s.resolve_credential(first).await.unwrap().map(|p| p.credential),
        None,
        "the acknowledgement window lapsed"
    );

    // A re-delivery mints a new token; the old one stays dead although the item is held again.
    let second = fresh_hash();
    s.poll_work(&ws, &env.id, None, 60_000, second).await.unwrap().expect("delivered again");
    assert_eq!(
        s.resolve_credential(first).await.unwrap().map(|p| p.credential),
        None,
        "a re-delivery kills the old token"
    );
    assert_eq!(s.resolve_credential(second).await.unwrap().map(|p| p.credential), Some(alive(&item)));
    s.ack_work(&ws, &env.id, &item.id).await.unwrap();
    assert_eq!(
        s.resolve_credential(second).await.unwrap().map(|p| p.credential),
        Some(alive(&item)),
        "alive while leased"
    );

    // The lease lapses: the token dies at once, before anything writes the expiry down.
    past_the_lease().await;
    assert_eq!(s.resolve_credential(second).await.unwrap().map(|p| p.credential), None, "the lease lapsed");

    let third = fresh_hash();
    s.poll_work(&ws, &env.id, None, 60_000, third).await.unwrap().expect("delivered again");
    assert_eq!(s.resolve_credential(second).await.unwrap().map(|p| p.credential), None);
    s.ack_work(&ws, &env.id, &item.id).await.unwrap();
    beat(s.heartbeat_work(&ws, &env.id, &item.id, NO_HEARTBEAT, Some(60)).await.unwrap());
    assert_eq!(s.resolve_credential(third).await.unwrap().map(|p| p.credential), Some(alive(&item)));

    // Stopping: the token lives on while the worker winds down and confirms, then dies.
    s.stop_work(&ws, &env.id, &item.id, false).await.unwrap();
    assert_eq!(
        s.resolve_credential(third).await.unwrap().map(|p| p.credential),
        Some(alive(&item)),
        "alive while stopping"
    );
    s.stop_work(&ws, &env.id, &item.id, true).await.unwrap();
    assert_eq!(s.resolve_credential(third).await.unwrap().map(|p| p.credential), None, "a stop kills the token");
}
