//! The audit log: entries are appended with the store's clock, listed newest first through
//! filters and pages, and never hold a field that could carry a secret.

use mnemo_api::{AdminCursor, AdminPageQuery, AuditActor, AuditActorType, AuditOutcome, AuditResource, WorkspaceId};
use mnemo_store::ops::{AuditFilter, NewAuditEvent};
use mnemo_store::rules::audit::AuditAction;
use mnemo_store::{Limits, StoreError};
use serde_json::json;

use crate::StoreFactory;

fn event(action: AuditAction, workspace: Option<&WorkspaceId>, actor: &str, resource: &str) -> NewAuditEvent {
    NewAuditEvent {
        action,
        workspace: workspace.cloned(),
        actor: AuditActor { kind: AuditActorType::ApiKey, id: actor.into() },
        resource: action.resource_type().map(|kind| AuditResource { kind: kind.into(), id: resource.into() }),
        client_ip: Some("127.0.0.1".into()),
        outcome: AuditOutcome::Success,
        details: json!({"status": "inactive"}),
    }
}

fn page(limit: u32, cursor: AdminCursor) -> AdminPageQuery {
    AdminPageQuery { limit, cursor }
}

pub async fn audit_entries_are_listed_newest_first_through_filters_and_pages(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let default = s.default_workspace().await.unwrap();
    let other = s.create_workspace("B").await.unwrap();
    let mut ids = Vec::new();
    for (i, ws) in [&default, &other, &default, &default].into_iter().enumerate() {
        let e = event(AuditAction::ApiKeyUpdate, Some(ws), &format!("apikey_{i}"), &format!("apikey_r{i}"));
        ids.push(s.record_audit_event(e).await.unwrap());
    }
    let all = s.list_audit_events(AuditFilter::default(), page(20, AdminCursor::Start)).await.unwrap();
    let listed: Vec<_> = all.data.iter().map(|e| e.id.clone()).collect();
    assert_eq!(listed, ids.iter().rev().cloned().collect::<Vec<_>>(), "newest first");
    assert!(!all.has_more);
    let first = &all.data[3];
    assert_eq!(
        (first.action.as_str(), first.workspace_id.as_ref(), first.actor.id.as_str(), first.client_ip.as_deref()),
        ("api_key.update", Some(&default), "apikey_0", Some("127.0.0.1"))
    );
    assert_eq!(first.resource, Some(AuditResource { kind: "api_key".into(), id: "apikey_r0".into() }));
    assert_eq!((first.outcome, &first.details), (AuditOutcome::Success, &json!({"status": "inactive"})));

    let of_b = AuditFilter { workspace: Some(other.clone()), ..AuditFilter::default() };
    let b = s.list_audit_events(of_b, page(20, AdminCursor::Start)).await.unwrap();
    assert_eq!(b.data.iter().map(|e| &e.id).collect::<Vec<_>>(), vec![&ids[1]], "a workspace's entries only");
    let by_actor = AuditFilter { actor_id: Some("apikey_2".into()), ..AuditFilter::default() };
    assert_eq!(s.list_audit_events(by_actor, page(20, AdminCursor::Start)).await.unwrap().data.len(), 1);
    let by_action = AuditFilter { action: Some("workspace.create".into()), ..AuditFilter::default() };
    assert!(s.list_audit_events(by_action, page(20, AdminCursor::Start)).await.unwrap().data.is_empty());
    let later = AuditFilter { starting_at: Some(i64::MAX - 1), ..AuditFilter::default() };
    assert!(s.list_audit_events(later, page(20, AdminCursor::Start)).await.unwrap().data.is_empty());
    let earlier = AuditFilter { ending_at: Some(0), ..AuditFilter::default() };
    assert!(s.list_audit_events(earlier, page(20, AdminCursor::Start)).await.unwrap().data.is_empty());

    // Pages of two: after the last id, then back before the first.
    let one = s.list_audit_events(AuditFilter::default(), page(2, AdminCursor::Start)).await.unwrap();
    assert_eq!((one.data.len(), one.has_more), (2, true));
    let two = s
        .list_audit_events(AuditFilter::default(), page(2, AdminCursor::After(one.last_id.clone().unwrap())))
        .await
        .unwrap();
    assert_eq!(two.data.iter().map(|e| &e.id).collect::<Vec<_>>(), vec![&ids[1], &ids[0]]);
    assert!(!two.has_more);
    let back = s
        .list_audit_events(AuditFilter::default(), page(2, AdminCursor::Before(two.first_id.clone().unwrap())))
        .await
        .unwrap();
    assert_eq!(back.data.iter().map(|e| &e.id).collect::<Vec<_>>(), vec![&ids[3], &ids[2]]);
    let unknown = s.list_audit_events(AuditFilter::default(), page(2, AdminCursor::After("audit_x".into()))).await;
    assert!(matches!(unknown, Err(StoreError::Invalid(_))), "{unknown:?}");
}

pub async fn audit_entries_of_the_organization_name_no_workspace(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let default = s.default_workspace().await.unwrap();
    s.record_audit_event(event(AuditAction::WorkspaceCreate, Some(&default), "admkey_a", "wrkspc_x")).await.unwrap();
    let listed = s.list_audit_events(AuditFilter::default(), page(20, AdminCursor::Start)).await.unwrap();
    assert_eq!(listed.data[0].workspace_id, None, "creating a workspace is the organization's action");
}

pub async fn audit_details_never_hold_a_secret(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let mut e = event(AuditAction::EnvironmentKeyCreate, None, "apikey_a", "envkey_a");
    e.details = json!({"environment_id": "env_a", "nested": [{"key": "sk-mnemo-env-…"}]});
    let refused = s.record_audit_event(e).await;
    assert!(matches!(refused, Err(StoreError::Invalid(_))), "{refused:?}");
    let listed = s.list_audit_events(AuditFilter::default(), page(20, AdminCursor::Start)).await.unwrap();
    assert!(listed.data.is_empty(), "nothing was written");
    assert_eq!(s.prune_audit_events(1).await.unwrap(), 0, "nothing is old enough to go");
}
