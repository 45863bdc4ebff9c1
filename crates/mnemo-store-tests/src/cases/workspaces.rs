//! The organization, workspaces, minted API keys and workspace rate-limit overrides
//! (admin-api.md §5, §8.3–§8.5, §8.9).

use mnemo_api::{
    AdminCursor, AdminPageQuery, ApiKeyStatus, ApiKeyUpdate, LimiterType, NewApiKey, NewWorkspace, RateLimitUpdate,
    WorkspaceUpdate,
};
use mnemo_store::ops::credentials::ListApiKeys;
use mnemo_store::ops::workspaces::ListWorkspaces;
use mnemo_store::rules::rate_limit;
use mnemo_store::{Credential, Limits, StoreError};
use serde_json::json;

use super::hash;
use crate::StoreFactory;

fn new_workspace(name: &str) -> NewWorkspace {
    serde_json::from_value::<mnemo_api::WorkspaceCreate>(json!({"name": name})).unwrap().validate().unwrap()
}

fn first_page() -> AdminPageQuery {
    AdminPageQuery { limit: 20, cursor: AdminCursor::Start }
}

fn listing(include_archived: bool, include_default: bool) -> ListWorkspaces {
    ListWorkspaces { ids: None, include_archived, include_default, page: first_page() }
}

pub async fn the_organization_is_read_and_renamed(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let org = s.organization().await.unwrap();
    assert_eq!(org.name, "mnemo");
    assert_eq!(org.id.len(), 36, "a UUID: {}", org.id);
    let renamed = s.rename_organization("Acme").await.unwrap();
    assert_eq!((renamed.id.as_str(), renamed.name.as_str()), (org.id.as_str(), "Acme"));
    assert!(matches!(s.rename_organization("").await, Err(StoreError::Invalid(_))));
}

pub async fn workspaces_are_created_updated_listed_and_archived(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let default = s.default_workspace().await.unwrap();
    let a = s.create_workspace_with(new_workspace("a"), 3).await.unwrap();
    let b = s.create_workspace_with(new_workspace("b"), 3).await.unwrap();
    assert_eq!(s.get_workspace(&a.id).await.unwrap(), a);
    // The cap counts active workspaces, Default included; archived ones do not count.
    let full = s.create_workspace_with(new_workspace("c"), 3).await.unwrap_err();
    assert!(full.to_string().starts_with("this organization already has 3 active workspaces"), "{full}");

    let patch: WorkspaceUpdate = serde_json::from_value(json!({"name": "A", "tags": {"k": "v"}})).unwrap();
    let updated = s.update_workspace(&a.id, patch).await.unwrap();
    assert_eq!((updated.name.as_str(), updated.tags.get("k").map(String::as_str)), ("A", Some("v")));
    let rename_default: WorkspaceUpdate = serde_json::from_value(json!({"name": "Prod"})).unwrap();
    let e = s.update_workspace(&default, rename_default).await.unwrap_err();
    assert_eq!(e.to_string(), "the Default workspace cannot be renamed");

    let ids = |p: mnemo_api::AdminPage<mnemo_api::Workspace>| p.data.into_iter().map(|w| w.id).collect::<Vec<_>>();
    assert_eq!(ids(s.list_workspaces(listing(false, false)).await.unwrap()), [a.id.clone(), b.id.clone()]);
    assert_eq!(
        ids(s.list_workspaces(listing(false, true)).await.unwrap()),
        [default.clone(), a.id.clone(), b.id.clone()]
    );
    let only_b = ListWorkspaces { ids: Some(vec![b.id.clone()]), ..listing(false, true) };
    assert_eq!(ids(s.list_workspaces(only_b).await.unwrap()), std::slice::from_ref(&b.id));
    let page =
        ListWorkspaces { page: AdminPageQuery { limit: 1, cursor: AdminCursor::Start }, ..listing(false, false) };
    let first = s.list_workspaces(page).await.unwrap();
    assert_eq!((first.data.len(), first.has_more, first.last_id.as_deref()), (1, true, Some(a.id.as_str())));

    let archived = s.archive_workspace(&b.id).await.unwrap();
    assert!(archived.archived_at.is_some());
    assert_eq!(s.archive_workspace(&b.id).await.unwrap().archived_at, archived.archived_at, "idempotent");
    assert_eq!(ids(s.list_workspaces(listing(false, false)).await.unwrap()), std::slice::from_ref(&a.id));
    assert_eq!(ids(s.list_workspaces(listing(true, false)).await.unwrap()), [a.id.clone(), b.id.clone()]);
    s.create_workspace_with(new_workspace("c"), 3).await.expect("an archived workspace frees its place");
    let e = s.archive_workspace(&default).await.unwrap_err();
    assert_eq!(e.to_string(), "the Default workspace cannot be archived");

    let unknown: mnemo_api::WorkspaceId = "wrkspc_unknown".parse().unwrap();
    assert_eq!(s.get_workspace(&unknown).await.unwrap_err().to_string(), "workspace `wrkspc_unknown` not found");
    assert!(matches!(s.archive_workspace(&unknown).await, Err(StoreError::NotFound { .. })));
}

pub async fn api_keys_are_minted_listed_and_changed(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let default = s.default_workspace().await.unwrap();
    let legacy = s.ensure_api_key(hash(1), "").await.unwrap();
    let ws = s.create_workspace_with(new_workspace("w"), 100).await.unwrap();
    let new = NewApiKey { name: "ci".into(), workspace_id: ws.id.clone(), expires_at: None };
    let key = s.create_api_key(new, hash(2), "sk-mnemo-abc…wxyz", None).await.unwrap();
    assert_eq!((key.status, key.partial_key_hint.as_deref()), (ApiKeyStatus::Active, Some("sk-mnemo-abc…wxyz")));
    assert_eq!(key.workspace_id.as_ref(), Some(&ws.id));
    let found = s.resolve_credential(hash(2)).await.unwrap().unwrap();
    assert_eq!((found.credential, found.workspace), (Credential::ApiKey(key.id.clone()), Some(ws.id.clone())));

    let old = s.get_api_key(&legacy).await.unwrap();
    assert_eq!((old.workspace_id, old.created_by), (None, None), "a legacy Default key");
    assert!(old.name.starts_with("key "), "an unnamed key gets a name: {}", old.name);

    let all = ListApiKeys { status: None, workspace: None, created_by_user_id: None, page: first_page() };
    assert_eq!(s.list_api_keys(all.clone()).await.unwrap().data.len(), 2);
    let of_ws = ListApiKeys { workspace: Some(ws.id.clone()), ..all.clone() };
    assert_eq!(s.list_api_keys(of_ws).await.unwrap().data[0].id, key.id);
    let of_default = ListApiKeys { workspace: Some(default.clone()), ..all.clone() };
    assert_eq!(s.list_api_keys(of_default).await.unwrap().data[0].id, legacy);

    let body = |v| serde_json::from_value::<ApiKeyUpdate>(v).unwrap();
    let (off, revoked) = s.update_api_key(&key.id, body(json!({"status": "inactive"}))).await.unwrap();
    assert_eq!((off.status, revoked), (ApiKeyStatus::Inactive, true));
    assert_eq!(s.resolve_credential(hash(2)).await.unwrap(), None, "an inactive key authenticates nothing");
    let inactive = ListApiKeys { status: Some(ApiKeyStatus::Inactive), ..all.clone() };
    assert_eq!(s.list_api_keys(inactive).await.unwrap().data.len(), 1);
    let (on, revoked) = s.update_api_key(&key.id, body(json!({"status": "active", "name": "ci2"}))).await.unwrap();
    assert_eq!((on.status, on.name.as_str(), revoked), (ApiKeyStatus::Active, "ci2", false));
    assert!(s.resolve_credential(hash(2)).await.unwrap().is_some());

    // Archiving the workspace archives its keys, finally; it takes no new ones.
    s.archive_workspace(&ws.id).await.unwrap();
    assert_eq!(s.resolve_credential(hash(2)).await.unwrap(), None);
    assert_eq!(s.get_api_key(&key.id).await.unwrap().status, ApiKeyStatus::Archived);
    let e = s.update_api_key(&key.id, body(json!({"status": "active"}))).await.unwrap_err();
    assert_eq!(e.to_string(), format!("API key `{}` is archived; an archived key cannot be changed", key.id));
    let late = NewApiKey { name: "late".into(), workspace_id: ws.id.clone(), expires_at: None };
    let e = s.create_api_key(late, hash(3), "h", None).await.unwrap_err();
    assert_eq!(e.to_string(), format!("workspace `{}` is archived; no API key can be created in it", ws.id));
    assert!(s.resolve_credential(hash(1)).await.unwrap().is_some(), "the Default workspace's keys keep working");

    let unknown: mnemo_api::ApiKeyId = "apikey_unknown".parse().unwrap();
    assert_eq!(s.get_api_key(&unknown).await.unwrap_err().to_string(), "API key `apikey_unknown` not found");
    assert_eq!(s.count_admin_keys().await.unwrap(), 0);
    s.ensure_admin_key(hash(9), "admin").await.unwrap();
    assert_eq!(s.count_admin_keys().await.unwrap(), 1);
}

pub async fn workspace_rate_limits_are_overridden_and_cleared(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.create_workspace_with(new_workspace("w"), 100).await.unwrap();
    let entry = rate_limit::catalogue(&[]).remove(0);
    assert!(s.workspace_rate_limits(&ws.id).await.unwrap().is_empty());
    let set: RateLimitUpdate =
        serde_json::from_value(json!({"limits": [{"type": "requests_per_minute", "value": 30}]})).unwrap();
    let own = s.update_workspace_rate_limits(&ws.id, entry.clone(), set).await.unwrap();
    assert_eq!(own.get(&LimiterType::RequestsPerMinute), Some(&30));
    let stored = s.workspace_rate_limits(&ws.id).await.unwrap();
    assert_eq!(stored.get(&entry.id).and_then(|m| m.get(&LimiterType::RequestsPerMinute)), Some(&30));
    let clear: RateLimitUpdate =
        serde_json::from_value(json!({"limits": [{"type": "requests_per_minute", "value": null}]})).unwrap();
    assert!(s.update_workspace_rate_limits(&ws.id, entry.clone(), clear.clone()).await.unwrap().is_empty());
    assert!(s.workspace_rate_limits(&ws.id).await.unwrap().is_empty());
    s.archive_workspace(&ws.id).await.unwrap();
    let e = s.update_workspace_rate_limits(&ws.id, entry, clear).await.unwrap_err();
    assert_eq!(e.to_string(), format!("workspace `{}` is archived; its rate limits cannot change", ws.id));
}
