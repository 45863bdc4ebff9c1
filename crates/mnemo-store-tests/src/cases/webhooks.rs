//! Webhooks: endpoints, the outbox every write fills in its own transaction, and the claims and
//! outcomes of delivery attempts (two claimers never share a delivery while its lease runs).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use mnemo_api::{
    AgentParams, DeliveryStatus, WebhookDelivery, WebhookDeliveryId, WebhookEndpoint, WebhookEndpointId,
    WebhookEventType as T, generate_webhook_secret,
};
use mnemo_store::rules::webhook::Next;
use mnemo_store::{
    EnvironmentPatch, EventAuthor, Limits, ListWebhookDeliveries, MemoryStorePatch, NewWebhookEndpoint, Store,
    StoreError, WebhookAttempt, WebhookEndpointPatch,
};
use serde_json::json;

use super::fixtures::{agent, environment, event, follow, memory_store, new_session};
use crate::StoreFactory;

async fn endpoint(s: &dyn Store, url: &str, types: Option<Vec<T>>) -> WebhookEndpoint {
    let ws = s.default_workspace().await.unwrap();
    let new = NewWebhookEndpoint {
        url: url.into(),
        event_types: types,
        description: None,
        secret: generate_webhook_secret().into(),
    };
    s.create_webhook_endpoint(&ws, new).await.unwrap()
}

/// Every delivery of an endpoint, oldest first.
async fn deliveries(s: &dyn Store, endpoint: &WebhookEndpointId) -> Vec<WebhookDelivery> {
    let ws = s.default_workspace().await.unwrap();
    let mut out = follow(7, None, async |after| {
        let query = ListWebhookDeliveries { status: None, limit: 7, after };
        s.list_webhook_deliveries(&ws, endpoint, query).await.unwrap()
    })
    .await;
    out.reverse();
    out
}

fn kinds(list: &[WebhookDelivery]) -> Vec<(T, String)> {
    list.iter().map(|d| (d.event_type, d.resource_id.clone())).collect()
}

fn attempt(id: &WebhookDeliveryId, attempt: u32, status: Option<u16>, next: Next) -> WebhookAttempt {
    WebhookAttempt {
        delivery: id.clone(),
        attempt,
        status_code: status,
        error: status.is_none().then(|| "connection refused".to_owned()),
        next,
    }
}

pub async fn webhook_endpoints_are_created_listed_updated_and_deleted(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let secret = generate_webhook_secret();
    let created = s
        .create_webhook_endpoint(
            &ws,
            NewWebhookEndpoint {
                url: "https://example.com/hook".into(),
                event_types: Some(vec![T::SessionStatusIdled]),
                description: Some("ops".into()),
                secret: secret.clone().into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        created.secret.as_ref().map(mnemo_api::Secret::expose),
        Some(secret.as_str()),
        "the creation shows the secret"
    );
    assert_eq!(created.event_types, Some(vec![T::SessionStatusIdled]));
    assert_eq!(created.description.as_deref(), Some("ops"));
    let plain = s.get_webhook_endpoint(&ws, &created.id, false).await.unwrap();
    assert_eq!(plain.secret, None);
    assert_eq!(plain.url, "https://example.com/hook");
    assert_eq!(s.get_webhook_endpoint(&ws, &created.id, true).await.unwrap().secret, Some(secret.into()));
    let second = endpoint(&*s, "http://127.0.0.1:9/", None).await;

    let page = s.list_webhook_endpoints(&ws, 1, None).await.unwrap();
    assert_eq!(page.items.iter().map(|e| &e.id).collect::<Vec<_>>(), [&second.id], "newest first");
    assert!(page.items.iter().all(|e| e.secret.is_none()), "listings never carry secrets");
    let rest = s.list_webhook_endpoints(&ws, 10, page.next).await.unwrap();
    assert_eq!(rest.items.iter().map(|e| &e.id).collect::<Vec<_>>(), [&created.id]);
    assert!(rest.next.is_none());

    let patch = WebhookEndpointPatch {
        url: Some("https://example.org/other".into()),
        event_types: Some(None),
        description: Some(None),
    };
    let updated = s.update_webhook_endpoint(&ws, &created.id, patch).await.unwrap();
    assert_eq!(
        (updated.url.as_str(), &updated.event_types, &updated.description),
        ("https://example.org/other", &None, &None)
    );
    assert!(updated.updated_at >= created.updated_at);
    let kept = s.update_webhook_endpoint(&ws, &created.id, WebhookEndpointPatch::default()).await.unwrap();
    assert_eq!(kept.url, "https://example.org/other", "an empty patch keeps every field");

    s.delete_webhook_endpoint(&ws, &created.id).await.unwrap();
    assert_err!(s.get_webhook_endpoint(&ws, &created.id, false).await, StoreError::NotFound { .. });
    assert_err!(s.delete_webhook_endpoint(&ws, &created.id).await, StoreError::NotFound { .. });
    assert_err!(
        s.list_webhook_deliveries(&ws, &created.id, ListWebhookDeliveries { limit: 10, ..Default::default() }).await,
        StoreError::NotFound { .. }
    );
    assert_err!(
        s.update_webhook_endpoint(&ws, &WebhookEndpointId::generate(), WebhookEndpointPatch::default()).await,
        StoreError::NotFound { .. }
    );
}

pub async fn changes_yield_webhook_deliveries_in_their_transaction(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let all = endpoint(&*s, "https://example.com/all", None).await;
    let picky =
        endpoint(&*s, "https://example.com/picky", Some(vec![T::SessionRequiresAction, T::MemoryStoreArchived])).await;

    let store = memory_store(&*s, "hooks").await;
    s.archive_memory_store(&ws, &store).await.unwrap();
    s.archive_memory_store(&ws, &store).await.unwrap();
    // A refused write records nothing.
    assert_err!(
        s.update_memory_store(&ws, &store, MemoryStorePatch { name: Some("x".into()), ..Default::default() }).await,
        StoreError::Archived(_)
    );
    s.delete_memory_store(&ws, &store).await.unwrap();

    let env = environment(&*s, true).await;
    let patch = EnvironmentPatch { name: Some("renamed".into()), ..Default::default() };
    s.update_environment(&ws, &env.id, patch).await.unwrap();
    let agent = agent(&*s).await;
    let same: AgentParams = serde_json::from_value(json!({})).unwrap();
    s.update_agent(&ws, &agent.id, 1, same).await.unwrap();
    let renamed: AgentParams = serde_json::from_value(json!({"name": "renamed"})).unwrap();
    s.update_agent(&ws, &agent.id, 1, renamed).await.unwrap();
    let session = s.create_session(&ws, new_session(&agent, &env)).await.unwrap();
    let call = event(json!({"type": "agent.tool_use", "name": "read", "input": {"file_path": "/x"}}));
    s.append_events(&ws, &session.id, vec![call], EventAuthor::Server).await.unwrap();
    s.update_session(&ws, &session.id, Some(Some("t".into())), None).await.unwrap();
    s.archive_session(&ws, &session.id).await.unwrap();
    s.archive_session(&ws, &session.id).await.unwrap();
    s.delete_session(&ws, &session.id).await.unwrap();
    s.archive_agent(&ws, &agent.id).await.unwrap();
    s.archive_environment(&ws, &env.id).await.unwrap();
    s.delete_environment(&ws, &env.id).await.unwrap();

    let (st, en, ag, se) = (store.to_string(), env.id.to_string(), agent.id.to_string(), session.id.to_string());
    let want = vec![
        (T::MemoryStoreCreated, st.clone()),
        (T::MemoryStoreArchived, st.clone()),
        (T::MemoryStoreDeleted, st.clone()),
        (T::EnvironmentCreated, en.clone()),
        (T::EnvironmentUpdated, en.clone()),
        (T::AgentCreated, ag.clone()),
        (T::AgentUpdated, ag.clone()),
        (T::SessionCreated, se.clone()),
        (T::SessionStatusRunStarted, se.clone()),
        (T::SessionRunning, se.clone()),
        (T::SessionStatusIdled, se.clone()),
        (T::SessionRequiresAction, se.clone()),
        (T::SessionUpdated, se.clone()),
        (T::SessionStatusTerminated, se.clone()),
        (T::SessionArchived, se.clone()),
        (T::SessionDeleted, se.clone()),
        (T::AgentArchived, ag),
        (T::EnvironmentArchived, en.clone()),
        (T::EnvironmentDeleted, en),
    ];
    let got = deliveries(&*s, &all.id).await;
    assert_eq!(kinds(&got), want, "every change, once, in commit order");
    for d in &got {
        assert_eq!((d.status, d.attempts, d.endpoint_id.clone()), (DeliveryStatus::Pending, 0, all.id.clone()));
        assert!(d.next_attempt_at.is_some() && d.last_attempt_at.is_none() && d.finished_at.is_none());
    }
    assert_eq!(got.iter().map(|d| &d.event_id).collect::<HashSet<_>>().len(), got.len(), "one event per change");
    let picked = deliveries(&*s, &picky.id).await;
    assert_eq!(kinds(&picked), vec![(T::MemoryStoreArchived, st), (T::SessionRequiresAction, se)]);
    // One event, delivered to each endpoint under the same id.
    let shared: Vec<_> = got.iter().filter(|d| d.event_type == T::MemoryStoreArchived).collect();
    assert_eq!(shared[0].event_id, picked[0].event_id);
    assert_ne!(shared[0].id, picked[0].id);

    let pending = ListWebhookDeliveries { status: Some(DeliveryStatus::Delivered), limit: 10, after: None };
    assert!(s.list_webhook_deliveries(&ws, &all.id, pending).await.unwrap().items.is_empty());
}

pub async fn deliveries_are_claimed_retried_and_finished(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let hook = endpoint(&*s, "https://example.com/hook", Some(vec![T::MemoryStoreCreated])).await;
    let store = memory_store(&*s, "one").await;
    let long = Duration::from_secs(60);

    let claimed = s.claim_webhook_deliveries(10, long).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let first = &claimed[0];
    assert_eq!((first.attempt, &first.endpoint, first.url.as_str()), (1, &hook.id, "https://example.com/hook"));
    assert_eq!((first.event_type, first.resource_id.as_str()), (T::MemoryStoreCreated, store.as_str()));
    assert_eq!(Some(first.secret.clone()), s.get_webhook_endpoint(&ws, &hook.id, true).await.unwrap().secret);
    assert!(s.claim_webhook_deliveries(10, long).await.unwrap().is_empty(), "a claimed delivery is hidden");
    let listed = &deliveries(&*s, &hook.id).await[0];
    assert_eq!((listed.attempts, listed.status), (1, DeliveryStatus::Pending));
    assert!(listed.last_attempt_at.is_some());

    // A failed attempt is due again after its delay; the event keeps its id.
    assert!(s.finish_webhook_attempt(attempt(&first.id, 1, Some(500), Next::RetryIn(Duration::ZERO))).await.unwrap());
    let after = &deliveries(&*s, &hook.id).await[0];
    assert_eq!((after.last_status_code, after.status), (Some(500), DeliveryStatus::Pending));
    let second = s.claim_webhook_deliveries(10, long).await.unwrap();
    assert_eq!((second.len(), second[0].attempt, &second[0].event), (1, 2, &first.event));
    // A report of an attempt that is not the latest changes nothing.
    assert!(!s.finish_webhook_attempt(attempt(&first.id, 1, Some(200), Next::Delivered)).await.unwrap());
    assert_eq!(deliveries(&*s, &hook.id).await[0].status, DeliveryStatus::Pending);
    assert!(s.finish_webhook_attempt(attempt(&first.id, 2, Some(204), Next::Delivered)).await.unwrap());
    let done = &deliveries(&*s, &hook.id).await[0];
    assert_eq!((done.status, done.attempts, done.last_status_code), (DeliveryStatus::Delivered, 2, Some(204)));
    assert!(done.finished_at.is_some() && done.next_attempt_at.is_none());
    assert!(!s.finish_webhook_attempt(attempt(&first.id, 2, Some(204), Next::Delivered)).await.unwrap());
    assert!(s.claim_webhook_deliveries(10, long).await.unwrap().is_empty(), "a delivered one is never sent again");

    // The last attempt failing fails the delivery, keeping why.
    memory_store(&*s, "two").await;
    let failing = s.claim_webhook_deliveries(10, long).await.unwrap().remove(0);
    assert!(s.finish_webhook_attempt(attempt(&failing.id, 1, None, Next::Failed)).await.unwrap());
    let failed = deliveries(&*s, &hook.id).await.remove(1);
    assert_eq!((failed.status, failed.last_status_code), (DeliveryStatus::Failed, None));
    assert_eq!(failed.last_error.as_deref(), Some("connection refused"));
    let only_failed = ListWebhookDeliveries { status: Some(DeliveryStatus::Failed), limit: 10, after: None };
    assert_eq!(s.list_webhook_deliveries(&ws, &hook.id, only_failed).await.unwrap().items.len(), 1);

    // An attempt never reported is made again once its lease ends.
    memory_store(&*s, "three").await;
    let lost = s.claim_webhook_deliveries(10, Duration::from_secs(1)).await.unwrap().remove(0);
    assert!(s.claim_webhook_deliveries(10, long).await.unwrap().is_empty());
    let again = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Some(d) = s.claim_webhook_deliveries(10, long).await.unwrap().pop() {
            break d;
        }
    };
    assert_eq!((&again.id, again.attempt), (&lost.id, 2));
    assert!(!s.finish_webhook_attempt(attempt(&lost.id, 1, Some(200), Next::Delivered)).await.unwrap());

    // Pruning removes what finished, never what is pending.
    assert_eq!(s.prune_webhook_deliveries(Duration::ZERO).await.unwrap(), 2);
    let left = deliveries(&*s, &hook.id).await;
    assert_eq!(left.iter().map(|d| &d.id).collect::<Vec<_>>(), [&lost.id]);
    assert_eq!(s.prune_webhook_deliveries(Duration::from_secs(3600)).await.unwrap(), 0);

    // Deleting the endpoint drops its deliveries: nothing is claimed or recorded for them.
    s.delete_webhook_endpoint(&ws, &hook.id).await.unwrap();
    assert!(!s.finish_webhook_attempt(attempt(&lost.id, 2, Some(200), Next::Delivered)).await.unwrap());
    memory_store(&*s, "four").await;
    assert!(s.claim_webhook_deliveries(10, long).await.unwrap().is_empty());
}

pub async fn concurrent_claimers_never_share_a_delivery(factory: &impl StoreFactory) {
    const CLAIMERS: usize = 8;
    const EVENTS: usize = 40;
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    for round in 0..3 {
        let hook = endpoint(&*s, "https://example.com/hook", None).await;
        for i in 0..EVENTS {
            memory_store(&*s, &format!("r{round}-{i}")).await;
        }
        let handles: Vec<_> = (0..CLAIMERS)
            .map(|_| {
                let s = Arc::clone(&s.store);
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    loop {
                        let batch = s.claim_webhook_deliveries(3, Duration::from_secs(60)).await.unwrap();
                        if batch.is_empty() {
                            return got;
                        }
                        got.extend(batch.into_iter().map(|d| d.id));
                    }
                })
            })
            .collect();
        let claims: Vec<Vec<WebhookDeliveryId>> =
            join_all(handles).await.into_iter().map(|r| r.expect("a claimer panicked")).collect();
        let mut seen: BTreeMap<WebhookDeliveryId, usize> = BTreeMap::new();
        for (claimer, got) in claims.iter().enumerate() {
            for id in got {
                if let Some(other) = seen.insert(id.clone(), claimer) {
                    panic!("round {round}: {id} claimed by claimers {other} and {claimer}");
                }
            }
        }
        let all: HashSet<WebhookDeliveryId> = deliveries(&*s, &hook.id).await.into_iter().map(|d| d.id).collect();
        assert_eq!(all.len(), EVENTS);
        assert_eq!(seen.into_keys().collect::<HashSet<_>>(), all, "round {round}: every delivery claimed once");
        s.delete_webhook_endpoint(&ws, &hook.id).await.unwrap();
    }
}

pub async fn claims_take_the_oldest_due_first_and_return_them_in_that_order(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let long = Duration::from_secs(60);
    let first = endpoint(&*s, "https://example.com/first", Some(vec![T::MemoryStoreCreated])).await;
    let second = endpoint(&*s, "https://example.com/second", Some(vec![T::MemoryStoreCreated])).await;
    let a = memory_store(&*s, "a").await;
    // The oldest event's deliveries are attempted once and both are due again at once, after the
    // two newer events' first attempts became due.
    let old = s.claim_webhook_deliveries(10, long).await.unwrap();
    let got: Vec<_> = old.iter().map(|d| (&d.endpoint, d.resource_id.as_str())).collect();
    assert_eq!(got, [(&first.id, a.as_str()), (&second.id, a.as_str())], "one event's deliveries in endpoint order");
    let b = memory_store(&*s, "b").await;
    let c = memory_store(&*s, "c").await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    for d in old.iter().rev() {
        assert!(s.finish_webhook_attempt(attempt(&d.id, 1, Some(503), Next::RetryIn(Duration::ZERO))).await.unwrap());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }

    // A claim of one takes the delivery due longest: the first attempt of `b` to the first endpoint.
    let one = s.claim_webhook_deliveries(1, long).await.unwrap();
    assert_eq!(
        one.iter().map(|d| (&d.endpoint, d.resource_id.as_str(), d.attempt)).collect::<Vec<_>>(),
        [(&first.id, b.as_str(), 1)]
    );
    let rest = s.claim_webhook_deliveries(10, long).await.unwrap();
    let got: Vec<_> = rest.iter().map(|d| (&d.endpoint, d.resource_id.as_str(), d.attempt)).collect();
    assert_eq!(
        got,
        [
            (&second.id, b.as_str(), 1),
            (&first.id, c.as_str(), 1),
            (&second.id, c.as_str(), 1),
            // The retries, due last, in the order they became due (the second endpoint's was
            // reported first), not the order they were made.
            (&second.id, a.as_str(), 2),
            (&first.id, a.as_str(), 2),
        ],
        "oldest due first, and deliveries due together in the order they were made"
    );
}

pub async fn a_rotated_secret_signs_beside_the_new_one_until_it_expires(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let hook = endpoint(&*s, "https://example.com/hook", Some(vec![T::MemoryStoreCreated])).await;
    let old = s.get_webhook_endpoint(&ws, &hook.id, true).await.unwrap().secret.unwrap();
    let long = Duration::from_secs(60);

    let new = generate_webhook_secret();
    let rotated = s.rotate_webhook_secret(&ws, &hook.id, new.clone(), Duration::from_secs(600)).await.unwrap();
    assert_eq!(
        rotated.secret.as_ref().map(mnemo_api::Secret::expose),
        Some(new.as_str()),
        "the answer carries the new secret"
    );
    assert!(rotated.previous_secret_expires_at.is_some_and(|at| at > rotated.updated_at));
    let read = s.get_webhook_endpoint(&ws, &hook.id, true).await.unwrap();
    assert_eq!(
        (read.secret.as_ref().map(mnemo_api::Secret::expose), read.previous_secret_expires_at),
        (Some(new.as_str()), rotated.previous_secret_expires_at)
    );
    memory_store(&*s, "during").await;
    let d = s.claim_webhook_deliveries(10, long).await.unwrap().remove(0);
    assert_eq!(
        (d.secret.expose(), d.previous_secret.as_ref().map(mnemo_api::Secret::expose)),
        (new.as_str(), Some(old.expose())),
        "both sign"
    );
    let listed = s.list_webhook_endpoints(&ws, 10, None).await.unwrap().items.remove(0);
    assert!(listed.secret.is_none() && listed.previous_secret_expires_at.is_some());

    // Rotating at once (no overlap) leaves only the newest.
    let newest = generate_webhook_secret();
    let rotated = s.rotate_webhook_secret(&ws, &hook.id, newest.clone(), Duration::ZERO).await.unwrap();
    assert_eq!(rotated.previous_secret_expires_at, None);
    memory_store(&*s, "after").await;
    let d = s.claim_webhook_deliveries(10, long).await.unwrap().remove(0);
    assert_eq!((d.secret.expose(), d.previous_secret.as_ref().map(mnemo_api::Secret::expose)), (newest.as_str(), None));

    // An overlap ends on the store's clock.
    s.rotate_webhook_secret(&ws, &hook.id, generate_webhook_secret(), Duration::from_secs(1)).await.unwrap();
    let ended = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let e = s.get_webhook_endpoint(&ws, &hook.id, false).await.unwrap();
        if e.previous_secret_expires_at.is_none() {
            break e;
        }
    };
    assert_eq!(ended.secret, None);
    memory_store(&*s, "later").await;
    assert_eq!(s.claim_webhook_deliveries(10, long).await.unwrap().remove(0).previous_secret, None);

    assert_err!(
        s.rotate_webhook_secret(&ws, &WebhookEndpointId::generate(), generate_webhook_secret(), long).await,
        StoreError::NotFound { .. }
    );
}

pub async fn the_next_attempt_is_due_when_the_earliest_pending_delivery_is(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let next = || async { s.next_webhook_attempt_in().await.unwrap() };
    assert_eq!(next().await, None, "nothing is pending");
    let hook = endpoint(&*s, "https://example.com/hook", Some(vec![T::MemoryStoreCreated])).await;
    assert_eq!(next().await, None, "an endpoint alone queues nothing");
    memory_store(&*s, "one").await;
    assert_eq!(next().await, Some(Duration::ZERO), "a new delivery is due at once");

    // A claimed delivery is due again when its lease ends.
    let first = s.claim_webhook_deliveries(10, Duration::from_secs(60)).await.unwrap().remove(0);
    let wait = next().await.expect("the claimed delivery is still pending");
    assert!(wait > Duration::from_secs(50) && wait <= Duration::from_secs(60), "{wait:?}");
    // A failed attempt's retry is due after its delay, as stored: what a sender started later
    // (a restart) learns from the store alone.
    let retry = Next::RetryIn(Duration::from_secs(30));
    assert!(s.finish_webhook_attempt(attempt(&first.id, 1, Some(500), retry)).await.unwrap());
    let wait = next().await.expect("the retry is pending");
    assert!(wait > Duration::from_secs(20) && wait <= Duration::from_secs(30), "{wait:?}");

    // A delivery due now comes first; finished ones count for nothing.
    memory_store(&*s, "two").await;
    assert_eq!(next().await, Some(Duration::ZERO));
    let second = s.claim_webhook_deliveries(10, Duration::from_secs(60)).await.unwrap();
    assert_eq!(second.len(), 1, "only the due delivery is claimed");
    assert!(s.finish_webhook_attempt(attempt(&second[0].id, 1, Some(200), Next::Delivered)).await.unwrap());
    memory_store(&*s, "three").await;
    let third = s.claim_webhook_deliveries(10, Duration::from_secs(60)).await.unwrap().remove(0);
    assert!(s.finish_webhook_attempt(attempt(&third.id, 1, None, Next::Failed)).await.unwrap());
    let wait = next().await.expect("the retry is still pending");
    assert!(wait > Duration::from_secs(20) && wait <= Duration::from_secs(30), "{wait:?}");

    // An overdue retry is due now, not in the past.
    memory_store(&*s, "four").await;
    let fourth = s.claim_webhook_deliveries(10, Duration::from_secs(60)).await.unwrap().remove(0);
    assert!(s.finish_webhook_attempt(attempt(&fourth.id, 1, Some(503), Next::RetryIn(Duration::ZERO))).await.unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(next().await, Some(Duration::ZERO));

    // Deleting the endpoint drops its pending deliveries.
    s.delete_webhook_endpoint(&ws, &hook.id).await.unwrap();
    assert_eq!(next().await, None);
}
