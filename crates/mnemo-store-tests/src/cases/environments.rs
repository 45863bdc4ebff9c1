//! Environments and their keys.

use std::collections::BTreeMap;

use mnemo_api::EnvironmentId;
use mnemo_store::{Credential, EnvironmentPatch, ErrorCode, Limits, NewEnvironment, StoreError};
use serde_json::json;

use super::fixtures::{environment, fresh_hash, is_environment_not_found, many_keys, map};
use crate::StoreFactory;

fn named(name: &str) -> NewEnvironment {
    NewEnvironment {
        name: name.into(),
        description: None,
        metadata: BTreeMap::new(),
        config: json!({"type": "self_hosted"}),
        scope: None,
    }
}

pub async fn environments_are_created_updated_listed_archived_and_deleted(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let new = NewEnvironment {
        name: "first".into(),
        description: Some("about it".into()),
        metadata: map(&[("team", "a"), ("tier", "1")]),
        config: json!({"type": "self_hosted"}),
        scope: None,
    };
    let env = s.create_environment(&ws, new).await.unwrap();
    assert_eq!(env.name, "first");
    assert_eq!(env.description.as_deref(), Some("about it"));
    assert_eq!(env.metadata, map(&[("team", "a"), ("tier", "1")]));
    assert_eq!(env.config, json!({"type": "self_hosted"}));
    assert!(env.is_self_hosted());
    assert_eq!(env.archived_at, None);
    assert_eq!(s.get_environment(&ws, &env.id).await.unwrap(), env);

    // A patch: `None` keeps, `Some(None)` clears, `None`/`""` metadata values remove keys.
    let patch = EnvironmentPatch {
        name: Some("renamed".into()),
        description: Some(None),
        config: Some(json!({"type": "self_hosted", "note": 1})),
        metadata: Some(
            [("team".to_owned(), None), ("tier".to_owned(), Some(String::new())), ("new".to_owned(), Some("x".into()))]
                .into(),
        ),
        scope: Some("workspace".into()),
    };
    let updated = s.update_environment(&ws, &env.id, patch).await.unwrap();
    assert_eq!(updated.name, "renamed");
    assert_eq!(updated.description, None);
    assert_eq!(updated.config, json!({"type": "self_hosted", "note": 1}));
    assert_eq!(updated.metadata, map(&[("new", "x")]));
    assert_eq!(updated.scope.as_deref(), Some("workspace"));
    assert_eq!(updated.created_at, env.created_at);
    assert_eq!(s.get_environment(&ws, &env.id).await.unwrap(), updated);
    let kept = s.update_environment(&ws, &env.id, EnvironmentPatch::default()).await.unwrap();
    assert_eq!((kept.name.as_str(), &kept.metadata, &kept.scope), ("renamed", &updated.metadata, &updated.scope));

    let retype = EnvironmentPatch { config: Some(json!({"type": "cloud"})), ..Default::default() };
    assert_err!(
        s.update_environment(&ws, &env.id, retype).await,
        StoreError::Coded { code: ErrorCode::InvalidConfigTypeChange, .. }
    );
    let crowded = EnvironmentPatch { metadata: Some(many_keys(17, Some("v".to_owned()))), ..Default::default() };
    assert_err!(
        s.update_environment(&ws, &env.id, crowded).await,
        StoreError::Coded { code: ErrorCode::InvalidMetadata, .. }
    );
    assert_eq!(
        s.get_environment(&ws, &env.id).await.unwrap().metadata,
        map(&[("new", "x")]),
        "a refused patch changes nothing"
    );

    // Newest first, page by page.
    let second = s.create_environment(&ws, named("second")).await.unwrap();
    let third = s.create_environment(&ws, named("third")).await.unwrap();
    let page = s.list_environments(&ws, false, 2, None).await.unwrap();
    assert_eq!(page.items.iter().map(|e| &e.id).collect::<Vec<_>>(), [&third.id, &second.id]);
    let rest = s.list_environments(&ws, false, 2, page.next).await.unwrap();
    assert_eq!(rest.items.iter().map(|e| &e.id).collect::<Vec<_>>(), [&env.id]);
    assert!(rest.next.is_none());

    // Archiving is idempotent and freezes the environment.
    let archived = s.archive_environment(&ws, &second.id).await.unwrap();
    assert!(archived.archived_at.is_some());
    let again = s.archive_environment(&ws, &second.id).await.unwrap();
    assert_eq!(again.archived_at, archived.archived_at, "archiving twice keeps the first archival");
    let ids = |l: Vec<mnemo_api::Environment>| l.into_iter().map(|e| e.id).collect::<Vec<EnvironmentId>>();
    assert_eq!(ids(s.list_environments(&ws, false, 10, None).await.unwrap().items), [third.id.clone(), env.id.clone()]);
    assert_eq!(
        ids(s.list_environments(&ws, true, 10, None).await.unwrap().items),
        [third.id.clone(), second.id.clone(), env.id.clone()]
    );
    let rename = EnvironmentPatch { name: Some("late".into()), ..Default::default() };
    assert_err!(
        s.update_environment(&ws, &second.id, rename).await,
        StoreError::Coded { code: ErrorCode::EnvironmentArchived, .. }
    );

    // Deletion.
    s.delete_environment(&ws, &env.id).await.unwrap();
    assert_err!(s.get_environment(&ws, &env.id).await, e if is_environment_not_found(&e));
    assert_err!(s.delete_environment(&ws, &env.id).await, e if is_environment_not_found(&e));
    assert_err!(s.update_environment(&ws, &env.id, EnvironmentPatch::default()).await, e if is_environment_not_found(&e));
    assert_err!(s.archive_environment(&ws, &env.id).await, e if is_environment_not_found(&e));
    assert_eq!(ids(s.list_environments(&ws, true, 10, None).await.unwrap().items), [third.id, second.id]);
    assert_err!(s.get_environment(&ws, &EnvironmentId::generate()).await, e if is_environment_not_found(&e));
}

pub async fn environment_keys_are_scoped_to_their_environment(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let a = environment(&*s, true).await;
    let b = environment(&*s, true).await;
    let (ha1, ha2, hb) = (fresh_hash(), fresh_hash(), fresh_hash());
    let ka1 = s.create_environment_key(&ws, &a.id, ha1).await.unwrap();
    let ka2 = s.create_environment_key(&ws, &a.id, ha2).await.unwrap();
    let kb = s.create_environment_key(&ws, &b.id, hb).await.unwrap();
    let key_ids = |keys: Vec<mnemo_api::EnvironmentKey>| keys.into_iter().map(|k| k.id).collect::<Vec<_>>();
    assert_eq!(key_ids(s.list_environment_keys(&ws, &a.id).await.unwrap()), [ka1.id.clone(), ka2.id.clone()]);
    assert_eq!(key_ids(s.list_environment_keys(&ws, &b.id).await.unwrap()), std::slice::from_ref(&kb.id));

    // A key is revoked through its own environment only.
    assert_err!(s.revoke_environment_key(&ws, &a.id, &kb.id).await, StoreError::NotFound { .. });
    assert!(matches!(
        s.resolve_credential(hb).await.unwrap().map(|p| p.credential),
        Some(Credential::EnvironmentKey { .. })
    ));
    assert_err!(
        s.revoke_environment_key(&ws, &a.id, &mnemo_api::EnvironmentKeyId::generate()).await,
        StoreError::NotFound { .. }
    );

    let revoked = s.revoke_environment_key(&ws, &a.id, &ka1.id).await.unwrap();
    assert!(revoked.revoked_at.is_some());
    assert_eq!(s.resolve_credential(ha1).await.unwrap().map(|p| p.credential), None);
    assert!(
        s.resolve_credential(ha2).await.unwrap().map(|p| p.credential).is_some(),
        "the environment's other key lives on"
    );
    let twice = s.revoke_environment_key(&ws, &a.id, &ka1.id).await.unwrap();
    assert_eq!(twice.revoked_at, revoked.revoked_at, "revoking twice returns the key unchanged");
    let listed = s.list_environment_keys(&ws, &a.id).await.unwrap();
    assert_eq!(listed[0].revoked_at, revoked.revoked_at);
    assert_eq!(listed[1].revoked_at, None);
    assert!(listed.iter().all(|k| k.key.is_none()), "a store never returns a key's secret");

    s.archive_environment(&ws, &b.id).await.unwrap();
    assert_err!(
        s.create_environment_key(&ws, &b.id, fresh_hash()).await,
        StoreError::Coded { code: ErrorCode::EnvironmentArchived, .. }
    );

    // Deleting an environment takes its keys with it.
    s.delete_environment(&ws, &a.id).await.unwrap();
    assert_eq!(s.resolve_credential(ha2).await.unwrap().map(|p| p.credential), None);
    assert_err!(s.list_environment_keys(&ws, &a.id).await, e if is_environment_not_found(&e));
    assert_err!(s.create_environment_key(&ws, &a.id, fresh_hash()).await, e if is_environment_not_found(&e));
}
