use mnemo_api::{Actor, Operation, UpdateMemory, View};
use mnemo_client::ListMemoryVersionsParams;

use crate::common::{KEY, TestServer, error_type};

#[tokio::test]
async fn every_mutation_writes_one_version_with_its_actor() {
    let s = TestServer::start().await;
    let store = s.new_store("v").await;
    let m = s.client.create_memory(&store.id, "/a", "1", None).await.unwrap();
    let upd = UpdateMemory { content: Some("2".into()), ..Default::default() };
    s.client.update_memory(&store.id, &m.id, &upd, None).await.unwrap();
    s.client.delete_memory(&store.id, &m.id, None).await.unwrap();
    let other = s.client.create_memory(&store.id, "/b", "b", None).await.unwrap();

    let page = s.versions_of(&store.id, &m.id).await;
    let ops: Vec<_> = page.iter().map(|v| v.operation).collect();
    assert_eq!(ops, [Operation::Deleted, Operation::Modified, Operation::Created], "newest first, after deletion too");
    let deleted = &page[0];
    assert_eq!(
        (deleted.path.as_deref(), deleted.content_sha256.as_deref(), deleted.content_size_bytes),
        (Some("/a"), None, None)
    );
    let Some(Actor::ApiActor { api_key_id }) = &page[2].created_by else { panic!("api actor expected") };
    assert!(api_key_id.as_str().starts_with("apikey_"));
    assert!(page.iter().all(|v| v.content.is_none()), "basic view by default");
    assert_eq!(page[1].content_sha256.as_deref(), Some(mnemo_api::content_sha256(b"2").as_str()));

    let by_key = ListMemoryVersionsParams { api_key_id: Some(api_key_id.to_string()), ..Default::default() };
    assert_eq!(s.client.list_memory_versions(&store.id, &by_key).await.unwrap().data.len(), 4);
    let by_session = ListMemoryVersionsParams { session_id: Some("sesn_nobody".into()), ..Default::default() };
    assert!(s.client.list_memory_versions(&store.id, &by_session).await.unwrap().data.is_empty());
    let created =
        ListMemoryVersionsParams { operation: Some("created".into()), view: Some(View::Full), ..Default::default() };
    let created = s.client.list_memory_versions(&store.id, &created).await.unwrap();
    assert_eq!(created.data.iter().map(|v| v.content.as_deref()).collect::<Vec<_>>(), [Some("b"), Some("1")]);
    let bad_op = ListMemoryVersionsParams { operation: Some("renamed".into()), ..Default::default() };
    assert_eq!(error_type(s.client.list_memory_versions(&store.id, &bad_op).await).0, 400);
    // An opaque service account id matches nothing here; one no id can be is refused on every
    // backend (a NUL byte used to be a 500 on PostgreSQL).
    let versions = format!("/v1/memory_stores/{}/memory_versions", store.id);
    let (status, none) =
        s.call(reqwest::Method::GET, &format!("{versions}?service_account_id=svac_x"), KEY, None).await;
    assert_eq!((status, none["data"].as_array().map(Vec::len)), (200, Some(0)), "{none}");
    let long = "s".repeat(257);
    for bad in ["%00", "a%0Ab", long.as_str()] {
        let (status, body) =
            s.call(reqwest::Method::GET, &format!("{versions}?service_account_id={bad}"), KEY, None).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("service_account_id"), "{body}");
    }

    let newest = s.client.get_memory_version(&store.id, &other.memory_version_id, None).await.unwrap();
    assert_eq!(newest.content.as_deref(), Some("b"), "retrieve defaults to full");
    let since = ListMemoryVersionsParams { created_at_gte: Some(newest.created_at.to_rfc3339()), ..Default::default() };
    let since = s.client.list_memory_versions(&store.id, &since).await.unwrap();
    assert_eq!(since.data.iter().map(|v| &v.id).collect::<Vec<_>>(), [&newest.id]);
    let until = ListMemoryVersionsParams {
        created_at_lte: Some(newest.created_at.to_rfc3339()),
        limit: Some(2),
        ..Default::default()
    };
    let until = s.client.list_memory_versions(&store.id, &until).await.unwrap();
    assert_eq!(until.data.len(), 2);
    assert!(until.next_page.is_some());
}

#[tokio::test]
async fn redaction_clears_content_but_keeps_the_record() {
    let s = TestServer::start().await;
    let store = s.new_store("r").await;
    let m = s.client.create_memory(&store.id, "/secret", "password=hunter2", None).await.unwrap();
    let e = s.client.redact_memory_version(&store.id, &m.memory_version_id).await.unwrap_err();
    assert_eq!(e.status(), Some(400), "the live version cannot be redacted");

    let upd = UpdateMemory { content: Some("password=<removed>".into()), ..Default::default() };
    s.client.update_memory(&store.id, &m.id, &upd, None).await.unwrap();
    let before = s.client.get_memory_version(&store.id, &m.memory_version_id, None).await.unwrap();
    let redacted = s.client.redact_memory_version(&store.id, &m.memory_version_id).await.unwrap();
    assert_eq!((redacted.content.as_deref(), redacted.path.as_deref()), (None, None));
    assert_eq!((redacted.content_sha256.as_deref(), redacted.content_size_bytes), (None, None));
    assert!(redacted.redacted_at.is_some());
    assert!(matches!(redacted.redacted_by, Some(Actor::ApiActor { .. })));
    assert_eq!(redacted.created_by, before.created_by);
    assert_eq!(redacted.created_at, before.created_at);
    assert_eq!(redacted.operation, Operation::Created);

    let fetched = s.client.get_memory_version(&store.id, &m.memory_version_id, Some(View::Full)).await.unwrap();
    assert_eq!(fetched, redacted);
    let twice = s.client.redact_memory_version(&store.id, &m.memory_version_id).await.unwrap();
    assert_eq!(twice, redacted, "redaction is idempotent");

    // A deleted version can be redacted once the memory is gone.
    s.client.delete_memory(&store.id, &m.id, None).await.unwrap();
    let versions = s.versions_of(&store.id, &m.id).await;
    for v in &versions {
        s.client.redact_memory_version(&store.id, &v.id).await.unwrap();
    }
    let unknown = "memver_doesnotexist".parse().unwrap();
    assert_eq!(error_type(s.client.redact_memory_version(&store.id, &unknown).await).0, 404);
}
