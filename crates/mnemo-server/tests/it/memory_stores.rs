use std::collections::BTreeMap;

use mnemo_api::{CreateMemoryStore, UpdateMemory, UpdateMemoryStore};
use mnemo_client::ListMemoryStoresParams;

use crate::common::{TestServer, error_type};

#[tokio::test]
async fn create_fills_defaults_and_retrieve_round_trips() {
    let s = TestServer::start().await;
    let store = s.new_store("User Preferences").await;
    assert!(store.id.as_str().starts_with("memstore_"));
    assert_eq!(store.description, "");
    assert!(store.metadata.is_empty());
    assert_eq!(store.archived_at, None);
    assert_eq!(s.client.get_memory_store(&store.id).await.unwrap(), store);
}

#[tokio::test]
async fn invalid_stores_are_refused() {
    let s = TestServer::start().await;
    let cases = [
        CreateMemoryStore { name: String::new(), ..Default::default() },
        CreateMemoryStore { name: "x".repeat(256), ..Default::default() },
        CreateMemoryStore { name: "tab\there".into(), ..Default::default() },
        CreateMemoryStore { name: "ok".into(), description: Some("d".repeat(1025)), ..Default::default() },
        CreateMemoryStore {
            name: "ok".into(),
            metadata: Some((0..17).map(|i| (format!("k{i}"), "v".into())).collect()),
            ..Default::default()
        },
        CreateMemoryStore {
            name: "ok".into(),
            metadata: Some([("k".repeat(65), "v".into())].into()),
            ..Default::default()
        },
        CreateMemoryStore {
            name: "ok".into(),
            metadata: Some([("k".into(), "v".repeat(513))].into()),
            ..Default::default()
        },
    ];
    for body in cases {
        assert_eq!(error_type(s.client.create_memory_store(&body).await), (400, "invalid_request_error".into()));
    }
    let page = s.client.list_memory_stores(&ListMemoryStoresParams::default()).await.unwrap();
    assert!(page.data.is_empty(), "nothing was created");
}

#[tokio::test]
async fn update_patches_fields_and_metadata() {
    let s = TestServer::start().await;
    let created = s
        .client
        .create_memory_store(&CreateMemoryStore {
            name: "a".into(),
            description: Some("first".into()),
            metadata: Some([("keep".into(), "1".into()), ("drop".into(), "2".into())].into()),
        })
        .await
        .unwrap();
    let patch = UpdateMemoryStore {
        name: Some("b".into()),
        description: Some(String::new()),
        metadata: Some([("drop".into(), None), ("add".into(), Some("3".into()))].into()),
    };
    let updated = s.client.update_memory_store(&created.id, &patch).await.unwrap();
    assert_eq!(updated.name, "b");
    assert_eq!(updated.description, "");
    let want: BTreeMap<String, String> = [("keep".into(), "1".into()), ("add".into(), "3".into())].into();
    assert_eq!(updated.metadata, want);
    assert!(updated.updated_at >= created.updated_at);
    assert_eq!(updated.created_at, created.created_at);

    // A patch that would leave 17 pairs changes nothing.
    let many = UpdateMemoryStore {
        metadata: Some((0..15).map(|i| (format!("n{i}"), Some("v".into()))).collect()),
        ..Default::default()
    };
    assert_eq!(error_type(s.client.update_memory_store(&created.id, &many).await).0, 400);
    assert_eq!(s.client.get_memory_store(&created.id).await.unwrap(), updated);
}

#[tokio::test]
async fn list_pages_newest_first_and_filters() {
    let s = TestServer::start().await;
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(s.new_store(&format!("s{i}")).await.id);
    }
    s.client.archive_memory_store(&ids[0]).await.unwrap();
    let mut seen = Vec::new();
    let mut params = ListMemoryStoresParams { limit: Some(3), ..Default::default() };
    loop {
        let page = s.client.list_memory_stores(&params).await.unwrap();
        assert!(page.data.len() <= 3);
        seen.extend(page.data.into_iter().map(|st| st.id));
        match page.next_page {
            Some(next) => params.page = Some(next),
            None => break,
        }
    }
    let want: Vec<_> = ids[1..].iter().rev().cloned().collect();
    assert_eq!(seen, want, "newest first, archived excluded");

    let all = s
        .client
        .list_memory_stores(&ListMemoryStoresParams {
            include_archived: Some(true),
            limit: Some(100),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.data.len(), 7);

    let third = s.client.get_memory_store(&ids[3]).await.unwrap();
    let range = s
        .client
        .list_memory_stores(&ListMemoryStoresParams {
            created_at_gte: Some(third.created_at.to_rfc3339()),
            created_at_lte: Some(third.created_at.to_rfc3339()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(range.data.iter().map(|st| &st.id).collect::<Vec<_>>(), [&ids[3]]);

    for bad in [0, 101] {
        let r = s.client.list_memory_stores(&ListMemoryStoresParams { limit: Some(bad), ..Default::default() }).await;
        assert_eq!(error_type(r).0, 400);
    }
    let r =
        s.client.list_memory_stores(&ListMemoryStoresParams { page: Some("bogus".into()), ..Default::default() }).await;
    assert_eq!(error_type(r).0, 400);
}

#[tokio::test]
async fn archived_stores_refuse_writes_but_allow_reads_deletes_and_redaction() {
    let s = TestServer::start().await;
    let store = s.new_store("arch").await;
    let a = s.client.create_memory(&store.id, "/a.md", "one", None).await.unwrap();
    s.client
        .update_memory(&store.id, &a.id, &UpdateMemory { content: Some("two".into()), ..Default::default() }, None)
        .await
        .unwrap();
    let b = s.client.create_memory(&store.id, "/b.md", "b", None).await.unwrap();

    let archived = s.client.archive_memory_store(&store.id).await.unwrap();
    assert!(archived.archived_at.is_some());
    let again = s.client.archive_memory_store(&store.id).await.unwrap();
    assert_eq!(again, archived, "archiving twice changes nothing");

    assert_eq!(error_type(s.client.create_memory(&store.id, "/c.md", "c", None).await).0, 400);
    let upd = UpdateMemory { content: Some("three".into()), ..Default::default() };
    assert_eq!(error_type(s.client.update_memory(&store.id, &a.id, &upd, None).await).0, 400);
    let rename = UpdateMemoryStore { name: Some("new".into()), ..Default::default() };
    assert_eq!(error_type(s.client.update_memory_store(&store.id, &rename).await).0, 400);

    // Reads, deletes and redaction still work.
    assert_eq!(s.client.get_memory(&store.id, &a.id, None).await.unwrap().content.as_deref(), Some("two"));
    s.client.delete_memory(&store.id, &b.id, None).await.unwrap();
    s.client.redact_memory_version(&store.id, &a.memory_version_id).await.unwrap();
    s.client.delete_memory_store(&store.id).await.unwrap();
}

#[tokio::test]
async fn delete_removes_the_store_with_its_memories_and_versions() {
    let s = TestServer::start().await;
    let store = s.new_store("gone").await;
    let m = s.client.create_memory(&store.id, "/x", "x", None).await.unwrap();
    let deleted = s.client.delete_memory_store(&store.id).await.unwrap();
    assert_eq!(deleted.id, store.id);
    assert_eq!(error_type(s.client.get_memory_store(&store.id).await), (404, "not_found_error".into()));
    assert_eq!(error_type(s.client.get_memory(&store.id, &m.id, None).await).0, 404);
    assert_eq!(error_type(s.client.get_memory_version(&store.id, &m.memory_version_id, None).await).0, 404);
    assert_eq!(error_type(s.client.delete_memory_store(&store.id).await).0, 404);
}
