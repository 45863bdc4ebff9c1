//! The self-hosted work queue: delivery, acknowledgement, heartbeats, stops, scoping,
//! listings, metadata, statistics and healthchecks. (What time does to leases and tokens is
//! in [`super::leases`].)

use std::time::Duration;

use mnemo_api::{WorkHeartbeat, WorkId, WorkState};
use mnemo_store::rules::work::NO_HEARTBEAT;
use mnemo_store::{Credential, ErrorCode, HeartbeatOutcome, Limits, StoreError};

use super::fixtures::{
    environment, fresh_hash, is_environment_not_found, many_keys, map, session, with_session, work_of,
};
use crate::StoreFactory;

/// The answer of a heartbeat that was not refused.
pub(crate) fn beat(outcome: HeartbeatOutcome) -> WorkHeartbeat {
    match outcome {
        HeartbeatOutcome::Beat(beat) => beat,
        HeartbeatOutcome::PreconditionFailed(state) => panic!("heartbeat refused: {state:?}"),
    }
}

/// The lease state of a refused heartbeat.
pub(crate) fn refused(outcome: HeartbeatOutcome) -> mnemo_api::WorkLeaseState {
    match outcome {
        HeartbeatOutcome::PreconditionFailed(state) => state,
        HeartbeatOutcome::Beat(beat) => panic!("heartbeat accepted: {beat:?}"),
    }
}

pub async fn work_is_polled_acknowledged_heartbeaten_and_stopped(factory: &impl StoreFactory) {
    let (s, ws, env, session) = with_session(factory, Limits::default(), true).await;
    let item = work_of(&*s, &env, &session).await;
    assert_eq!(
        (item.state, item.data.kind.as_str(), item.secret.as_ref().map(mnemo_api::Secret::expose)),
        (WorkState::Queued, "session", None)
    );
    assert_eq!(item.environment_id, env.id);
    let stats = s.work_stats(&ws, &env.id).await.unwrap();
    assert_eq!((stats.depth, stats.pending, stats.oldest_queued_at.as_deref()), (1, 0, Some(item.created_at.as_str())));

    // Nothing to acknowledge or heartbeat before a delivery.
    assert_err!(s.ack_work(&ws, &env.id, &item.id).await, StoreError::Conflict(_));
    assert_eq!(
        refused(s.heartbeat_work(&ws, &env.id, &item.id, NO_HEARTBEAT, None).await.unwrap()).state,
        WorkState::Queued
    );

    // A delivery hides the item from other polls.
    let polled = s.poll_work(&ws, &env.id, Some("worker-1".into()), 60_000, fresh_hash()).await.unwrap().unwrap();
    assert_eq!((&polled.id, polled.state, &polled.data), (&item.id, WorkState::Queued, &item.data));
    let stats = s.work_stats(&ws, &env.id).await.unwrap();
    assert_eq!((stats.depth, stats.pending, stats.workers_polling), (0, 1, Some(1)));
    assert!(s.poll_work(&ws, &env.id, Some("worker-2".into()), 60_000, fresh_hash()).await.unwrap().is_none());
    assert_eq!(s.work_stats(&ws, &env.id).await.unwrap().workers_polling, Some(2), "every polling worker counts");
    assert!(s.poll_work(&ws, &env.id, Some("worker-1".into()), 60_000, fresh_hash()).await.unwrap().is_none());
    assert!(s.poll_work(&ws, &env.id, None, 60_000, fresh_hash()).await.unwrap().is_none());
    let stats = s.work_stats(&ws, &env.id).await.unwrap();
    assert_eq!(
        (stats.depth, stats.pending, stats.workers_polling),
        (0, 1, Some(2)),
        "a worker counts once however often it polls; an anonymous poll counts no worker"
    );

    let acked = s.ack_work(&ws, &env.id, &item.id).await.unwrap();
    assert_eq!(acked.state, WorkState::Starting);
    assert!(acked.acknowledged_at.is_some());
    assert_err!(s.ack_work(&ws, &env.id, &item.id).await, StoreError::Conflict(_));
    let stats = s.work_stats(&ws, &env.id).await.unwrap();
    assert_eq!((stats.depth, stats.pending), (0, 0), "an acknowledged item is neither queued nor pending");

    // Conditional heartbeats: `NO_HEARTBEAT` first, then each echoes the previous answer.
    let first = beat(s.heartbeat_work(&ws, &env.id, &item.id, NO_HEARTBEAT, None).await.unwrap());
    assert_eq!(
        (first.state, first.lease_extended, first.ttl_seconds),
        (WorkState::Active, true, Limits::default().work_lease_ttl_seconds)
    );
    let active = s.get_work(&ws, &env.id, &item.id).await.unwrap();
    assert_eq!(active.state, WorkState::Active);
    assert!(active.started_at.is_some() && active.latest_heartbeat_at.is_some());
    let stale = refused(s.heartbeat_work(&ws, &env.id, &item.id, NO_HEARTBEAT, None).await.unwrap());
    assert_eq!(
        (stale.state, stale.last_heartbeat.as_deref()),
        (WorkState::Active, Some(first.last_heartbeat.as_str()))
    );
    let second = beat(s.heartbeat_work(&ws, &env.id, &item.id, &first.last_heartbeat, Some(10)).await.unwrap());
    assert_eq!(second.ttl_seconds, 10, "a heartbeat may ask for its lease");
    assert_ne!(second.last_heartbeat, first.last_heartbeat, "every heartbeat answers a new value");
    assert!(matches!(
        s.heartbeat_work(&ws, &env.id, &item.id, &first.last_heartbeat, None).await.unwrap(),
        HeartbeatOutcome::PreconditionFailed(_)
    ));
    let long = beat(s.heartbeat_work(&ws, &env.id, &item.id, &second.last_heartbeat, Some(1_000_000)).await.unwrap());
    assert_eq!(long.ttl_seconds, 3_600, "at most an hour");
    // Last, as it leaves a one-second lease: nothing below depends on the lease still holding.
    let short = beat(s.heartbeat_work(&ws, &env.id, &item.id, &long.last_heartbeat, Some(0)).await.unwrap());
    assert_eq!(short.ttl_seconds, 1, "at least a second");

    // A graceful stop, reported by heartbeats whatever they expect, then the worker's own.
    let stopping = s.stop_work(&ws, &env.id, &item.id, false).await.unwrap();
    assert_eq!(stopping.state, WorkState::Stopping);
    assert!(stopping.stop_requested_at.is_some());
    let told = beat(s.heartbeat_work(&ws, &env.id, &item.id, "anything", None).await.unwrap());
    assert_eq!((told.state, told.lease_extended), (WorkState::Stopping, false));
    let twice = s.stop_work(&ws, &env.id, &item.id, false).await.unwrap();
    assert_eq!((twice.state, &twice.stop_requested_at), (WorkState::Stopping, &stopping.stop_requested_at));
    let stopped = s.stop_work(&ws, &env.id, &item.id, true).await.unwrap();
    assert_eq!(stopped.state, WorkState::Stopped);
    assert!(stopped.stopped_at.is_some());
    assert_err!(s.stop_work(&ws, &env.id, &item.id, true).await, StoreError::Conflict(_));
    assert_err!(s.stop_work(&ws, &env.id, &item.id, false).await, StoreError::Conflict(_));
    let after = beat(s.heartbeat_work(&ws, &env.id, &item.id, NO_HEARTBEAT, None).await.unwrap());
    assert_eq!((after.state, after.lease_extended), (WorkState::Stopped, false));
    assert_err!(s.ack_work(&ws, &env.id, &item.id).await, StoreError::Conflict(_));
    assert_eq!(s.get_work(&ws, &env.id, &item.id).await.unwrap().state, WorkState::Stopped);
    assert!(
        s.poll_work(&ws, &env.id, None, 60_000, fresh_hash()).await.unwrap().is_none(),
        "a stopped item is never delivered"
    );
    assert_eq!(s.expire_work().await.unwrap(), 0, "a stopped item never expires");

    // A queued item can be stopped outright too.
    let other = super::fixtures::session(&*s, &env).await;
    let queued = work_of(&*s, &env, &other).await;
    assert_eq!(s.stop_work(&ws, &env.id, &queued.id, true).await.unwrap().state, WorkState::Stopped);
}

pub async fn work_items_are_scoped_listed_annotated_and_counted(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let a = environment(&*s, true).await;
    let b = environment(&*s, true).await;
    let mut items = Vec::new();
    for _ in 0..3 {
        let session = session(&*s, &a).await;
        items.push(work_of(&*s, &a, &session).await.id);
    }

    // An item is reached only through its own environment.
    let i1 = &items[0];
    assert_err!(s.get_work(&ws, &b.id, i1).await, StoreError::NotFound { .. });
    assert_err!(s.ack_work(&ws, &b.id, i1).await, StoreError::NotFound { .. });
    assert_err!(s.heartbeat_work(&ws, &b.id, i1, NO_HEARTBEAT, None).await, StoreError::NotFound { .. });
    assert_err!(s.stop_work(&ws, &b.id, i1, true).await, StoreError::NotFound { .. });
    assert_err!(s.update_work_metadata(&ws, &b.id, i1, Default::default()).await, StoreError::NotFound { .. });
    assert!(s.poll_work(&ws, &b.id, None, 60_000, fresh_hash()).await.unwrap().is_none());
    assert_eq!(
        s.get_work(&ws, &a.id, i1).await.unwrap().state,
        WorkState::Queued,
        "untouched by the other environment"
    );
    assert_err!(s.get_work(&ws, &a.id, &WorkId::generate()).await, StoreError::NotFound { .. });

    // Newest first, page by page.
    let page = s.list_work(&ws, &a.id, 2, None).await.unwrap();
    assert_eq!(page.items.iter().map(|w| &w.id).collect::<Vec<_>>(), [&items[2], &items[1]]);
    let rest = s.list_work(&ws, &a.id, 2, page.next).await.unwrap();
    assert_eq!(rest.items.iter().map(|w| &w.id).collect::<Vec<_>>(), [&items[0]]);
    assert!(rest.next.is_none());
    assert!(s.list_work(&ws, &b.id, 10, None).await.unwrap().items.is_empty());

    // Metadata patches.
    let set = [("a".to_owned(), Some("1".to_owned())), ("b".to_owned(), Some("2".to_owned()))].into();
    assert_eq!(s.update_work_metadata(&ws, &a.id, i1, set).await.unwrap().metadata, map(&[("a", "1"), ("b", "2")]));
    let removed = s.update_work_metadata(&ws, &a.id, i1, [("a".to_owned(), None)].into()).await.unwrap();
    assert_eq!(removed.metadata, map(&[("b", "2")]));
    assert_err!(
        s.update_work_metadata(&ws, &a.id, i1, many_keys(17, Some("v".to_owned()))).await,
        StoreError::Coded { code: ErrorCode::InvalidMetadata, .. }
    );
    assert_eq!(s.get_work(&ws, &a.id, i1).await.unwrap().metadata, map(&[("b", "2")]));

    let stats = s.work_stats(&ws, &a.id).await.unwrap();
    assert_eq!((stats.depth, stats.pending), (3, 0));
    let oldest = s.get_work(&ws, &a.id, i1).await.unwrap().created_at;
    assert_eq!(stats.oldest_queued_at, Some(oldest));
    let empty = s.work_stats(&ws, &b.id).await.unwrap();
    assert_eq!((empty.depth, empty.pending, empty.oldest_queued_at), (0, 0, None));

    // Only a self-hosted environment has a queue.
    let cloud = environment(&*s, false).await;
    assert_err!(s.poll_work(&ws, &cloud.id, None, 60_000, fresh_hash()).await, StoreError::Invalid(_));
    assert_err!(s.enqueue_healthcheck(&ws, &cloud.id).await, StoreError::Invalid(_));
    let unknown = mnemo_api::EnvironmentId::generate();
    assert_err!(s.poll_work(&ws, &unknown, None, 60_000, fresh_hash()).await, e if is_environment_not_found(&e));
    assert_err!(s.work_stats(&ws, &unknown).await, e if is_environment_not_found(&e));
    assert_err!(s.list_work(&ws, &unknown, 10, None).await, e if is_environment_not_found(&e));
    assert_err!(s.enqueue_healthcheck(&ws, &unknown).await, e if is_environment_not_found(&e));
}

pub async fn healthchecks_queue_oldest_first(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, true).await;
    let check = s.enqueue_healthcheck(&ws, &env.id).await.unwrap();
    assert_eq!(
        (check.data.kind.as_str(), check.state, &check.environment_id),
        ("healthcheck", WorkState::Queued, &env.id)
    );
    // `hc_` and a random part, of the same shape as an item id's.
    let random = check.data.id.strip_prefix("hc_").expect("a healthcheck id starts with hc_");
    assert_eq!(random.len(), check.id.as_str().len() - "work_".len(), "{}", check.data.id);
    assert!(random.chars().all(|c| c.is_ascii_alphanumeric()), "{}", check.data.id);
    assert_eq!(s.get_work(&ws, &env.id, &check.id).await.unwrap().data, check.data);
    let session = session(&*s, &env).await;
    let later = s.enqueue_healthcheck(&ws, &env.id).await.unwrap();
    assert_ne!(later.data.id, check.data.id, "every healthcheck has its own id");

    let mut delivered = Vec::new();
    for _ in 0..3 {
        delivered.push(s.poll_work(&ws, &env.id, None, 60_000, fresh_hash()).await.unwrap().expect("an item").data);
    }
    assert_eq!(
        delivered.iter().map(|d| d.kind.as_str()).collect::<Vec<_>>(),
        ["healthcheck", "session", "healthcheck"]
    );
    assert_eq!((&delivered[1].id, &delivered[2]), (&session.id.to_string(), &later.data), "oldest first");
    assert!(s.poll_work(&ws, &env.id, None, 60_000, fresh_hash()).await.unwrap().is_none());

    // The worker acknowledges and stops a healthcheck without touching any session.
    s.ack_work(&ws, &env.id, &check.id).await.unwrap();
    assert_eq!(s.stop_work(&ws, &env.id, &check.id, true).await.unwrap().state, WorkState::Stopped);
}

/// A healthcheck delivery binds a sessions token like any other, and the worker force-stops
/// the item with it (`worker-behaviour.md` §4 steps 2 and 14), so the token must resolve to
/// its item — with no session. (Regression: the lookup failed with a storage error, the stop
/// was a 500, and the healthcheck came back after every lease.)
pub async fn a_healthcheck_token_resolves_to_its_item(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, true).await;
    let check = s.enqueue_healthcheck(&ws, &env.id).await.unwrap();
    let token = fresh_hash();
    s.poll_work(&ws, &env.id, None, 60_000, token).await.unwrap().expect("the healthcheck");
    s.ack_work(&ws, &env.id, &check.id).await.unwrap();
    let resolved = s.resolve_credential(token).await.map(|p| p.map(|p| p.credential));
    assert!(
        matches!(&resolved, Ok(Some(Credential::SessionToken { work, environment, session: None }))
            if *work == check.id && *environment == env.id),
        "a healthcheck's token resolves to its item: {resolved:?}"
    );
}

pub async fn an_unacknowledged_delivery_is_reclaimed(factory: &impl StoreFactory) {
    let (s, ws, env, session) = with_session(factory, Limits::default(), true).await;
    let first = s.poll_work(&ws, &env.id, None, 300, fresh_hash()).await.unwrap().expect("the item");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_err!(
        s.ack_work(&ws, &env.id, &first.id).await,
        StoreError::Conflict(_),
        "a lapsed delivery cannot be acknowledged"
    );
    let stats = s.work_stats(&ws, &env.id).await.unwrap();
    assert_eq!((stats.depth, stats.pending), (1, 0), "a lapsed delivery is queued again");
    let again = s.poll_work(&ws, &env.id, None, 60_000, fresh_hash()).await.unwrap().expect("delivered again");
    assert_eq!((&again.id, &again.data.id), (&first.id, &session.id.to_string()));
    assert_eq!(s.ack_work(&ws, &env.id, &again.id).await.unwrap().state, WorkState::Starting);
}
