//! Version retention (issue 35 item 3): a store's own window, and purges that keep exactly each
//! live memory's newest version among those past it, in bounded batches, losing no concurrent
//! write.

use std::sync::Arc;
use std::time::Duration;

use mnemo_api::{MemoryStoreId, MemoryVersionId, WorkspaceId};
use mnemo_store::rules::retention::Retention;
use mnemo_store::{Limits, MemoryChange, Store, StoreError};

use super::fixtures::{all_versions, api_actor, memory_store, path, versions};
use crate::StoreFactory;

const WINDOW: Duration = Duration::from_millis(400);

/// Runs purge batches of `limit` in `store` under `retention` until it is done; the versions
/// purged.
async fn purge_all(s: &dyn Store, ws: &WorkspaceId, store: &MemoryStoreId, retention: Retention, limit: u32) -> u64 {
    let (mut after, mut purged) = (0, 0);
    loop {
        let Some(batch) = s.purge_versions(ws, store, retention, after, limit).await.unwrap() else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        assert!(batch.versions <= u64::from(limit), "a batch is bounded");
        purged += batch.versions;
        after = batch.next_after;
        if batch.done {
            return purged;
        }
    }
}

async fn version_ids(s: &dyn Store, store: &MemoryStoreId) -> Vec<MemoryVersionId> {
    let mut ids: Vec<_> = all_versions(s, store, versions(100)).await.into_iter().map(|v| v.id).collect();
    ids.sort();
    ids
}

pub async fn a_purge_keeps_each_live_memorys_newest_version_and_the_young_ones(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "kept").await;
    let untouched = memory_store(&*s, "untouched").await;
    let change = |content: &str| MemoryChange { content: Some(content.into()), path: None, expected_sha256: None };

    // Old: a memory edited twice, one created then deleted, one edited again later, one written
    // in another store.
    let edited = s.create_memory(&ws, &store, path("/edited.md"), "v1".into(), api_actor()).await.unwrap();
    s.update_memory(&ws, &store, &edited.id, change("v2"), api_actor()).await.unwrap();
    let edited_now = s.update_memory(&ws, &store, &edited.id, change("v3"), api_actor()).await.unwrap();
    let gone = s.create_memory(&ws, &store, path("/gone.md"), "bye".into(), api_actor()).await.unwrap();
    s.delete_memory(&ws, &store, &gone.id, None, api_actor()).await.unwrap();
    let later = s.create_memory(&ws, &store, path("/later.md"), "old".into(), api_actor()).await.unwrap();
    s.create_memory(&ws, &untouched, path("/x.md"), "x".into(), api_actor()).await.unwrap();
    // A redacted old version goes like any other.
    let old_of_edited = all_versions(&*s, &store, versions(100))
        .await
        .into_iter()
        .find(|v| v.memory_id == edited.id && v.content_sha256.as_deref() == Some(&mnemo_api::content_sha256(b"v2")))
        .unwrap();
    s.redact_memory_version(&ws, &store, &old_of_edited.id, api_actor()).await.unwrap();
    tokio::time::sleep(WINDOW + Duration::from_millis(100)).await;
    // Young: a new memory and a new version of `later`.
    let young = s.create_memory(&ws, &store, path("/young.md"), "new".into(), api_actor()).await.unwrap();
    let later_now = s.update_memory(&ws, &store, &later.id, change("new"), api_actor()).await.unwrap();
    let untouched_before = version_ids(&*s, &untouched).await;

    // Keeping forever purges nothing.
    assert_eq!(purge_all(&*s, &ws, &store, Retention::Forever, 2).await, 0);
    let mut want = vec![
        edited_now.memory_version_id.clone(),
        young.memory_version_id.clone(),
        later_now.memory_version_id.clone(),
    ];
    want.sort();
    // Batches of two: several transactions, each bounded.
    let purged = purge_all(&*s, &ws, &store, Retention::Window(WINDOW), 2).await;
    assert_eq!(version_ids(&*s, &store).await, want, "each live memory's newest, and the young");
    assert_eq!(purged, 5, "edited v1 and v2 (redacted), gone's two versions, later's first");
    // The memories themselves are untouched.
    let read = s.get_memory(&ws, &store, &edited.id).await.unwrap();
    assert_eq!(read.content.as_deref(), Some("v3"));
    assert_eq!(s.get_memory(&ws, &store, &later.id).await.unwrap().content.as_deref(), Some("new"));
    assert!(matches!(s.get_memory(&ws, &store, &gone.id).await, Err(StoreError::NotFound { .. })));
    // Another store is purged by its own pass only.
    assert_eq!(version_ids(&*s, &untouched).await, untouched_before);
    // A second purge finds nothing more.
    assert_eq!(purge_all(&*s, &ws, &store, Retention::Window(WINDOW), 2).await, 0);
}

pub async fn a_stores_own_retention_is_set_read_and_cleared(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "own").await;
    assert_eq!(s.store_retention(&ws, &store).await.unwrap(), None, "the server's by default");
    let week: Retention = "7d".parse().unwrap();
    assert_eq!(s.set_store_retention(&ws, &store, Some(week)).await.unwrap(), Some(week));
    assert_eq!(s.store_retention(&ws, &store).await.unwrap(), Some(week));
    assert_eq!(s.set_store_retention(&ws, &store, Some(Retention::Forever)).await.unwrap(), Some(Retention::Forever));
    let listed = s.retention_stores().await.unwrap();
    let mine = listed.iter().find(|r| r.store == store).unwrap();
    assert_eq!((&mine.workspace, mine.own), (&ws, Some(Retention::Forever)));
    s.set_store_retention(&ws, &store, None).await.unwrap();
    assert_eq!(s.store_retention(&ws, &store).await.unwrap(), None);

    // Another workspace's store, or none at all: not found, whichever it is.
    let other = s
        .create_workspace_with(
            serde_json::from_value::<mnemo_api::WorkspaceCreate>(serde_json::json!({"name": "other"}))
                .unwrap()
                .validate()
                .unwrap(),
            10,
        )
        .await
        .unwrap()
        .id;
    for (ws, id) in [(&other, &store), (&ws, &MemoryStoreId::generate())] {
        assert!(matches!(s.store_retention(ws, id).await, Err(StoreError::NotFound { .. })));
        assert!(matches!(s.set_store_retention(ws, id, Some(week)).await, Err(StoreError::NotFound { .. })));
        assert!(matches!(
            s.purge_versions(ws, id, week, 0, 10).await,
            Ok(Some(b)) if b.done && b.versions == 0
        ));
    }
}

pub async fn writes_during_a_purge_lose_nothing(factory: &impl StoreFactory) {
    let opened = factory.open(Limits::default()).await;
    let s: Arc<dyn Store> = opened.store.clone();
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "busy").await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let m = s.create_memory(&ws, &store, path(&format!("/m{i}.md")), "0".into(), api_actor()).await.unwrap();
        for n in 1..5 {
            let change = MemoryChange { content: Some(n.to_string()), path: None, expected_sha256: None };
            s.update_memory(&ws, &store, &m.id, change, api_actor()).await.unwrap();
        }
        ids.push(m.id);
    }
    tokio::time::sleep(WINDOW + Duration::from_millis(100)).await;
    // Writers edit every memory while batches of three purge.
    let writer = {
        let (s, ws, store, ids) = (s.clone(), ws.clone(), store.clone(), ids.clone());
        tokio::spawn(async move {
            let mut last = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                let content = format!("during {i}");
                let change = MemoryChange { content: Some(content.clone()), path: None, expected_sha256: None };
                let written = s.update_memory(&ws, &store, id, change, api_actor()).await.unwrap();
                last.push((id.clone(), content, written.memory_version_id));
            }
            last
        })
    };
    let purged = purge_all(&*s, &ws, &store, Retention::Window(WINDOW), 3).await;
    let last = writer.await.unwrap();
    // Every acknowledged write is there, as content and as a version.
    let kept = version_ids(&*s, &store).await;
    for (id, content, version) in &last {
        assert_eq!(s.get_memory(&ws, &store, id).await.unwrap().content.as_deref(), Some(content.as_str()));
        assert!(kept.contains(version), "{version} was purged");
    }
    // Four old superseded versions per memory went; at most the one current when the purge
    // looked at it may have stayed (the writer made a newer one after).
    assert!((80..=100).contains(&purged), "{purged}");
    purge_all(&*s, &ws, &store, Retention::Window(WINDOW), 3).await;
    tokio::time::sleep(WINDOW).await;
    purge_all(&*s, &ws, &store, Retention::Window(WINDOW), 3).await;
    assert_eq!(version_ids(&*s, &store).await.len(), 20, "in the end, each memory's newest");
}
