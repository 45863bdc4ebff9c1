//! Workspace isolation of environments, their keys, their work queues and webhooks
//! (admin-api.md §8.2): every call made in workspace B about a resource of workspace A fails
//! exactly as it fails for an id nobody ever used, changes nothing in A, and B's listings never
//! show A's rows; an event of A's resource is delivered to A's endpoints only, stamped with A's
//! workspace and the organization.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use mnemo_api::{
    EnvironmentId, EnvironmentKeyId, WebhookEndpointId, WebhookEventType as T, WorkId, WorkState,
    generate_webhook_secret,
};
use mnemo_store::rules::work::NO_HEARTBEAT;
use mnemo_store::{
    EnvironmentPatch, Limits, ListWebhookDeliveries, NewEnvironment, NewWebhookEndpoint, Result, Store,
    WebhookEndpointPatch,
};
use serde_json::json;

use super::fixtures::fresh_hash;
use crate::StoreFactory;

/// `got` (a call in the wrong workspace about `id`) failed exactly as `unknown` (the same call
/// about `unknown_id`, which nobody ever used) did: same variant, same message, the id aside.
#[track_caller]
fn same_as_unknown<T: Debug>(what: &str, got: Result<T>, unknown: Result<T>, id: &str, unknown_id: &str) {
    let got = got.expect_err(what);
    let unknown = unknown.expect_err(what);
    let neutral = |text: String, id: &str| text.replace(id, "<id>");
    assert_eq!(neutral(got.to_string(), id), neutral(unknown.to_string(), unknown_id), "{what}: message");
    assert_eq!(neutral(format!("{got:?}"), id), neutral(format!("{unknown:?}"), unknown_id), "{what}: error");
}

async fn environment_in(s: &dyn Store, ws: &mnemo_api::WorkspaceId, name: &str) -> mnemo_api::Environment {
    let new = NewEnvironment {
        name: name.into(),
        description: None,
        metadata: BTreeMap::new(),
        config: json!({"type": "self_hosted"}),
        scope: None,
    };
    s.create_environment(ws, new).await.unwrap()
}

fn endpoint(url: &str) -> NewWebhookEndpoint {
    NewWebhookEndpoint {
        url: url.into(),
        event_types: None,
        description: None,
        secret: generate_webhook_secret().into(),
    }
}

/// What an endpoint's deliveries are about (type and resource), newest first.
async fn resources(s: &dyn Store, ws: &mnemo_api::WorkspaceId, endpoint: &WebhookEndpointId) -> Vec<(T, String)> {
    let query = ListWebhookDeliveries { status: None, limit: 10, after: None };
    let page = s.list_webhook_deliveries(ws, endpoint, query).await.unwrap();
    page.items.into_iter().map(|d| (d.event_type, d.resource_id)).collect()
}

pub async fn environments_and_keys_of_another_workspace_are_unknown(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let a = s.default_workspace().await.unwrap();
    let b = s.create_workspace("B").await.unwrap();
    let env = environment_in(&*s, &a, "of A").await;
    let key = s.create_environment_key(&a, &env.id, fresh_hash()).await.unwrap();
    let (id, unknown) = (env.id.as_str(), EnvironmentId::generate());
    let (key_id, unknown_key) = (key.id.as_str(), EnvironmentKeyId::generate());
    let patch = || EnvironmentPatch { name: Some("taken".into()), ..Default::default() };

    same_as_unknown(
        "get",
        s.get_environment(&b, &env.id).await,
        s.get_environment(&a, &unknown).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "update",
        s.update_environment(&b, &env.id, patch()).await,
        s.update_environment(&a, &unknown, patch()).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "archive",
        s.archive_environment(&b, &env.id).await,
        s.archive_environment(&a, &unknown).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "delete",
        s.delete_environment(&b, &env.id).await,
        s.delete_environment(&a, &unknown).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "create a key",
        s.create_environment_key(&b, &env.id, fresh_hash()).await,
        s.create_environment_key(&a, &unknown, fresh_hash()).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "list keys",
        s.list_environment_keys(&b, &env.id).await,
        s.list_environment_keys(&a, &unknown).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "revoke a key",
        s.revoke_environment_key(&b, &env.id, &key.id).await,
        s.revoke_environment_key(&a, &env.id, &unknown_key).await,
        key_id,
        unknown_key.as_str(),
    );
    assert!(s.list_environments(&b, true, 100, None).await.unwrap().items.is_empty(), "B lists none of A's");

    // Nothing B asked for happened in A.
    let after = s.get_environment(&a, &env.id).await.unwrap();
    assert_eq!((after.name.as_str(), after.archived_at.as_deref()), ("of A", None));
    let keys = s.list_environment_keys(&a, &env.id).await.unwrap();
    assert_eq!(keys.iter().map(|k| (&k.id, k.revoked_at.is_none())).collect::<Vec<_>>(), [(&key.id, true)]);
    assert_eq!(s.list_environments(&a, true, 100, None).await.unwrap().items.len(), 1);

    // B's own environment is B's alone, listed there and unknown in A.
    let of_b = environment_in(&*s, &b, "of B").await;
    let listed = s.list_environments(&b, true, 100, None).await.unwrap().items;
    assert_eq!(listed.iter().map(|e| &e.id).collect::<Vec<_>>(), [&of_b.id]);
    same_as_unknown(
        "get B's in A",
        s.get_environment(&a, &of_b.id).await,
        s.get_environment(&b, &unknown).await,
        of_b.id.as_str(),
        unknown.as_str(),
    );
}

pub async fn work_of_another_workspace_is_unknown(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let a = s.default_workspace().await.unwrap();
    let b = s.create_workspace("B").await.unwrap();
    let env = environment_in(&*s, &a, "of A").await;
    let item = s.enqueue_healthcheck(&a, &env.id).await.unwrap();
    let (id, unknown) = (env.id.as_str(), EnvironmentId::generate());
    let (item_id, unknown_item) = (item.id.as_str(), WorkId::generate());

    same_as_unknown(
        "poll",
        s.poll_work(&b, &env.id, Some("w".into()), 60_000, fresh_hash()).await,
        s.poll_work(&a, &unknown, Some("w".into()), 60_000, fresh_hash()).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "healthcheck",
        s.enqueue_healthcheck(&b, &env.id).await,
        s.enqueue_healthcheck(&a, &unknown).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "list",
        s.list_work(&b, &env.id, 10, None).await,
        s.list_work(&a, &unknown, 10, None).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown("stats", s.work_stats(&b, &env.id).await, s.work_stats(&a, &unknown).await, id, unknown.as_str());
    same_as_unknown(
        "get",
        s.get_work(&b, &env.id, &item.id).await,
        s.get_work(&a, &env.id, &unknown_item).await,
        item_id,
        unknown_item.as_str(),
    );
    same_as_unknown(
        "ack",
        s.ack_work(&b, &env.id, &item.id).await,
        s.ack_work(&a, &env.id, &unknown_item).await,
        item_id,
        unknown_item.as_str(),
    );
    same_as_unknown(
        "heartbeat",
        s.heartbeat_work(&b, &env.id, &item.id, NO_HEARTBEAT, None).await,
        s.heartbeat_work(&a, &env.id, &unknown_item, NO_HEARTBEAT, None).await,
        item_id,
        unknown_item.as_str(),
    );
    same_as_unknown(
        "stop",
        s.stop_work(&b, &env.id, &item.id, true).await,
        s.stop_work(&a, &env.id, &unknown_item, true).await,
        item_id,
        unknown_item.as_str(),
    );
    let patch = || [("k".to_owned(), Some("v".to_owned()))].into();
    same_as_unknown(
        "metadata",
        s.update_work_metadata(&b, &env.id, &item.id, patch()).await,
        s.update_work_metadata(&a, &env.id, &unknown_item, patch()).await,
        item_id,
        unknown_item.as_str(),
    );

    // A's item was neither delivered, stopped nor annotated, and no poll of B's was recorded.
    let stats = s.work_stats(&a, &env.id).await.unwrap();
    assert_eq!((stats.depth, stats.workers_polling), (1, Some(0)), "{stats:?}");
    let untouched = s.get_work(&a, &env.id, &item.id).await.unwrap();
    assert_eq!((untouched.state, untouched.metadata.len()), (WorkState::Queued, 0));

    // B's own queue never hands out A's item; A's poll does.
    let of_b = environment_in(&*s, &b, "of B").await;
    assert!(s.poll_work(&b, &of_b.id, None, 60_000, fresh_hash()).await.unwrap().is_none());
    assert!(s.list_work(&b, &of_b.id, 10, None).await.unwrap().items.is_empty());
    let polled = s.poll_work(&a, &env.id, None, 60_000, fresh_hash()).await.unwrap().expect("A's item");
    assert_eq!(polled.id, item.id);
}

pub async fn webhook_endpoints_of_another_workspace_are_unknown(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let a = s.default_workspace().await.unwrap();
    let b = s.create_workspace("B").await.unwrap();
    let hook = s.create_webhook_endpoint(&a, endpoint("https://a.example/hook")).await.unwrap();
    let (id, unknown) = (hook.id.as_str(), WebhookEndpointId::generate());
    let patch = || WebhookEndpointPatch { description: Some(Some("taken".into())), ..Default::default() };
    let query = || ListWebhookDeliveries { status: None, limit: 10, after: None };

    same_as_unknown(
        "get",
        s.get_webhook_endpoint(&b, &hook.id, true).await,
        s.get_webhook_endpoint(&a, &unknown, true).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "update",
        s.update_webhook_endpoint(&b, &hook.id, patch()).await,
        s.update_webhook_endpoint(&a, &unknown, patch()).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "rotate",
        s.rotate_webhook_secret(&b, &hook.id, generate_webhook_secret(), Duration::ZERO).await,
        s.rotate_webhook_secret(&a, &unknown, generate_webhook_secret(), Duration::ZERO).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "deliveries",
        s.list_webhook_deliveries(&b, &hook.id, query()).await,
        s.list_webhook_deliveries(&a, &unknown, query()).await,
        id,
        unknown.as_str(),
    );
    same_as_unknown(
        "delete",
        s.delete_webhook_endpoint(&b, &hook.id).await,
        s.delete_webhook_endpoint(&a, &unknown).await,
        id,
        unknown.as_str(),
    );
    assert!(s.list_webhook_endpoints(&b, 100, None).await.unwrap().items.is_empty(), "B lists none of A's");

    // Untouched in A: same secret, no description, still listed.
    let after = s.get_webhook_endpoint(&a, &hook.id, true).await.unwrap();
    assert_eq!(after.description, None);
    assert_eq!(
        after.secret.as_ref().map(|s| s.expose().to_owned()),
        hook.secret.as_ref().map(|s| s.expose().to_owned())
    );
    let listed = s.list_webhook_endpoints(&a, 100, None).await.unwrap().items;
    assert_eq!(listed.iter().map(|e| &e.id).collect::<Vec<_>>(), [&hook.id]);
}

pub async fn webhook_events_reach_only_their_workspaces_endpoints(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let a = s.default_workspace().await.unwrap();
    let b = s.create_workspace("B").await.unwrap();
    let of_a = s.create_webhook_endpoint(&a, endpoint("https://a.example/hook")).await.unwrap();
    let of_b = s.create_webhook_endpoint(&b, endpoint("https://b.example/hook")).await.unwrap();

    let env_a = environment_in(&*s, &a, "of A").await;
    let env_b = environment_in(&*s, &b, "of B").await;
    s.archive_environment(&b, &env_b.id).await.unwrap();

    assert_eq!(resources(&*s, &a, &of_a.id).await, [(T::EnvironmentCreated, env_a.id.to_string())]);
    assert_eq!(
        resources(&*s, &b, &of_b.id).await,
        [(T::EnvironmentArchived, env_b.id.to_string()), (T::EnvironmentCreated, env_b.id.to_string())]
    );

    // Each delivery goes out stamped with its endpoint's (its resource's) workspace and the
    // organization.
    let organization = s.organization().await.unwrap();
    let claimed = s.claim_webhook_deliveries(10, Duration::from_secs(60)).await.unwrap();
    assert_eq!(claimed.len(), 3, "{claimed:?}");
    for d in &claimed {
        let (ws, env) = if d.endpoint == of_a.id { (&a, &env_a.id) } else { (&b, &env_b.id) };
        assert_eq!((&d.workspace_id, d.resource_id.as_str()), (ws, env.as_str()), "{d:?}");
        assert_eq!(d.organization_id, organization.id, "{d:?}");
    }
    assert!(!organization.id.is_empty() && !organization.name.is_empty(), "{organization:?}");
}
