use mnemo_api::{MemoryListItem, Precondition, UpdateMemory, View, content_sha256, limits::MAX_CONTENT_BYTES};
use mnemo_client::{ClientError, ListMemoriesParams};
use mnemo_store::Limits;

use crate::common::{TestServer, error_type};

fn conflict_fields(e: ClientError) -> (String, String, String) {
    match e {
        ClientError::Api { status: 409, error, .. } => (
            error.kind,
            error.extra["conflicting_memory_id"].as_str().unwrap().to_owned(),
            error.extra["conflicting_path"].as_str().unwrap().to_owned(),
        ),
        other => panic!("expected a 409, got {other:?}"),
    }
}

#[tokio::test]
async fn create_and_retrieve_in_both_views() {
    let s = TestServer::start().await;
    let store = s.new_store("m").await;
    let text = "héllo wörld\n";
    let basic = s.client.create_memory(&store.id, "/notes/a.md", text, None).await.unwrap();
    assert!(basic.id.as_str().starts_with("mem_"));
    assert!(basic.memory_version_id.as_str().starts_with("memver_"));
    assert_eq!(basic.content, None, "create defaults to the basic view");
    assert_eq!(basic.content_sha256, content_sha256(text.as_bytes()));
    assert_eq!(basic.content_size_bytes, text.len() as u64);
    assert_eq!(basic.path, "/notes/a.md");

    let full = s.client.get_memory(&store.id, &basic.id, None).await.unwrap();
    assert_eq!(full.content.as_deref(), Some(text), "retrieve defaults to the full view");
    let light = s.client.get_memory(&store.id, &basic.id, Some(View::Basic)).await.unwrap();
    assert_eq!(light.content, None);
    assert_eq!(light.content_sha256, basic.content_sha256);

    // Content is kept byte for byte: NUL, CRLF, emoji, combining marks (no normalisation).
    let odd = "nul\0 crlf\r\n emoji \u{1F600} e\u{301}";
    let m = s.client.create_memory(&store.id, "/odd", odd, Some(View::Full)).await.unwrap();
    assert_eq!(m.content_sha256, content_sha256(odd.as_bytes()));
    assert_eq!(s.client.get_memory(&store.id, &m.id, None).await.unwrap().content.as_deref(), Some(odd));

    let empty = s.client.create_memory(&store.id, "/empty", "", Some(View::Full)).await.unwrap();
    assert_eq!(empty.content.as_deref(), Some(""));
    assert_eq!(empty.content_sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_eq!(empty.content_size_bytes, 0);
}

#[tokio::test]
async fn invalid_paths_and_oversized_content_are_refused_without_effect() {
    let s = TestServer::start().await;
    let store = s.new_store("m").await;
    let deep = "/d".repeat(21);
    let long = format!("/{}", "x".repeat(1024));
    for path in [
        "a",
        "/",
        "/a/",
        "//a",
        "/a//b",
        "/./a",
        "/a/..",
        "/a\u{1}",
        "/a\u{2028}",
        "/a\u{200e}",
        "/e\u{301}",
        &deep,
        &long,
    ] {
        let r = s.client.create_memory(&store.id, path, "x", None).await;
        assert_eq!(error_type(r), (400, "invalid_request_error".into()), "{path:?}");
    }
    let big = "x".repeat(MAX_CONTENT_BYTES + 1);
    assert_eq!(
        error_type(s.client.create_memory(&store.id, "/big", &big, None).await),
        (413, "request_too_large".into())
    );
    let exact = "y".repeat(MAX_CONTENT_BYTES);
    let m = s.client.create_memory(&store.id, "/exact", &exact, None).await.unwrap();
    assert_eq!(m.content_size_bytes, MAX_CONTENT_BYTES as u64);
    let upd = UpdateMemory { content: Some(big), ..Default::default() };
    assert_eq!(error_type(s.client.update_memory(&store.id, &m.id, &upd, None).await).0, 413);

    let all = s.client.list_all_memories(&store.id, View::Basic).await.unwrap();
    assert_eq!(all.iter().map(|m| m.path.as_str()).collect::<Vec<_>>(), ["/exact"]);

    let null_content = s
        .raw(reqwest::Method::POST, &format!("/v1/memory_stores/{}/memories", store.id))
        .bearer_auth(crate::common::KEY)
        .json(&serde_json::json!({"path": "/n", "content": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(null_content.status(), 400);
    let bad_json = s
        .raw(reqwest::Method::POST, &format!("/v1/memory_stores/{}/memories", store.id))
        .bearer_auth(crate::common::KEY)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_json.status(), 400);
    let body: serde_json::Value = bad_json.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn taken_and_overlapping_paths_conflict_naming_the_blocker() {
    let s = TestServer::start().await;
    let store = s.new_store("m").await;
    let file = s.client.create_memory(&store.id, "/a/b.md", "x", None).await.unwrap();

    for (path, blocker) in [("/a/b.md", "/a/b.md"), ("/a", "/a/b.md"), ("/a/b.md/c", "/a/b.md")] {
        let e = s.client.create_memory(&store.id, path, "y", None).await.unwrap_err();
        let (kind, id, conflicting) = conflict_fields(e);
        assert_eq!(kind, "memory_path_conflict_error");
        assert_eq!(id, file.id.as_str());
        assert_eq!(conflicting, blocker, "{path}");
    }
    // Siblings and look-alikes are fine: `/a/b.mdx` and `/a-b` do not overlap `/a/b.md`.
    s.client.create_memory(&store.id, "/a/b.mdx", "z", None).await.unwrap();
    s.client.create_memory(&store.id, "/a-b", "z", None).await.unwrap();
    // Case-sensitive.
    s.client.create_memory(&store.id, "/A/b.md", "z", None).await.unwrap();
}

#[tokio::test]
async fn conflicts_tell_the_client_not_to_retry() {
    let s = TestServer::start().await;
    let store = s.new_store("m").await;
    s.client.create_memory(&store.id, "/x", "1", None).await.unwrap();
    let resp = s
        .raw(reqwest::Method::POST, &format!("/v1/memory_stores/{}/memories", store.id))
        .bearer_auth(crate::common::KEY)
        .json(&serde_json::json!({"path": "/x", "content": "2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409);
    assert_eq!(resp.headers()["x-should-retry"], "false");
    let rid = resp.headers()["request-id"].to_str().unwrap().to_owned();
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["request_id"], rid.as_str());
}

#[tokio::test]
async fn updates_with_preconditions_renames_and_retries() {
    let s = TestServer::start().await;
    let store = s.new_store("m").await;
    let m = s.client.create_memory(&store.id, "/doc.md", "v1", None).await.unwrap();
    let sha1 = m.content_sha256.clone();
    let pre = |sha: &str| Some(Precondition::ContentSha256 { content_sha256: sha.to_owned() });

    let v2 = UpdateMemory { content: Some("v2".into()), precondition: pre(&sha1), ..Default::default() };
    let after = s.client.update_memory(&store.id, &m.id, &v2, None).await.unwrap();
    assert_eq!(after.content_sha256, content_sha256(b"v2"));
    assert_eq!(after.content, None, "update defaults to the basic view");
    assert_ne!(after.memory_version_id, m.memory_version_id);

    // A retry of the same update (the stored state already matches) succeeds, writes nothing.
    let again = s.client.update_memory(&store.id, &m.id, &v2, Some(View::Full)).await.unwrap();
    assert_eq!(again.memory_version_id, after.memory_version_id);
    assert_eq!(again.content.as_deref(), Some("v2"));

    // A stale precondition for a different change fails and changes nothing.
    let stale = UpdateMemory { content: Some("v3".into()), precondition: pre(&sha1), ..Default::default() };
    let e = s.client.update_memory(&store.id, &m.id, &stale, None).await.unwrap_err();
    assert_eq!(e.error_type(), Some("memory_precondition_failed_error"));
    assert_eq!(s.client.get_memory(&store.id, &m.id, None).await.unwrap().content.as_deref(), Some("v2"));
    let malformed = UpdateMemory { content: Some("v3".into()), precondition: pre("ABC"), ..Default::default() };
    assert_eq!(error_type(s.client.update_memory(&store.id, &m.id, &malformed, None).await).0, 400);

    // Unconditional update.
    let v3 = UpdateMemory { content: Some("v3".into()), ..Default::default() };
    s.client.update_memory(&store.id, &m.id, &v3, None).await.unwrap();

    // Rename keeps the id and the content, even onto its own former subtree.
    let rename = UpdateMemory { path: Some("/doc.md/inner.md".into()), ..Default::default() };
    let renamed = s.client.update_memory(&store.id, &m.id, &rename, Some(View::Full)).await.unwrap();
    assert_eq!(
        (renamed.id.clone(), renamed.path.as_str(), renamed.content.as_deref()),
        (m.id.clone(), "/doc.md/inner.md", Some("v3"))
    );

    // Renaming onto a taken or overlapping path conflicts.
    let other = s.client.create_memory(&store.id, "/other/x.md", "o", None).await.unwrap();
    for target in ["/other/x.md", "/other", "/other/x.md/y"] {
        let r = UpdateMemory { path: Some(target.into()), ..Default::default() };
        let e = s.client.update_memory(&store.id, &m.id, &r, None).await.unwrap_err();
        let (kind, id, _) = conflict_fields(e);
        assert_eq!((kind.as_str(), id.as_str()), ("memory_path_conflict_error", other.id.as_str()), "{target}");
    }
    let bad = UpdateMemory { path: Some("relative".into()), ..Default::default() };
    assert_eq!(error_type(s.client.update_memory(&store.id, &m.id, &bad, None).await).0, 400);

    let versions = s.versions_of(&store.id, &m.id).await;
    let ops: Vec<_> = versions.iter().map(|v| v.operation.as_str()).collect();
    assert_eq!(ops, ["modified", "modified", "modified", "created"], "one version per effective change");
}

#[tokio::test]
async fn deletes_honour_the_expected_digest() {
    let s = TestServer::start().await;
    let store = s.new_store("m").await;
    let m = s.client.create_memory(&store.id, "/d", "keep", None).await.unwrap();
    let wrong = content_sha256(b"other");
    let e = s.client.delete_memory(&store.id, &m.id, Some(&wrong)).await.unwrap_err();
    assert_eq!((e.status(), e.error_type()), (Some(409), Some("memory_precondition_failed_error")));
    assert!(s.client.get_memory(&store.id, &m.id, None).await.is_ok());
    assert_eq!(error_type(s.client.delete_memory(&store.id, &m.id, Some("xyz")).await).0, 400);

    let gone = s.client.delete_memory(&store.id, &m.id, Some(&m.content_sha256)).await.unwrap();
    assert_eq!(gone.id, m.id);
    assert_eq!(error_type(s.client.get_memory(&store.id, &m.id, None).await), (404, "not_found_error".into()));
    assert_eq!(error_type(s.client.delete_memory(&store.id, &m.id, None).await).0, 404);
    // The path is free again.
    s.client.create_memory(&store.id, "/d", "new", None).await.unwrap();
}

#[tokio::test]
async fn memories_of_another_store_are_not_found() {
    let s = TestServer::start().await;
    let a = s.new_store("a").await;
    let b = s.new_store("b").await;
    let m = s.client.create_memory(&a.id, "/x", "x", None).await.unwrap();
    assert_eq!(error_type(s.client.get_memory(&b.id, &m.id, None).await).0, 404);
    assert_eq!(error_type(s.client.delete_memory(&b.id, &m.id, None).await).0, 404);
    let resp = s
        .raw(reqwest::Method::GET, &format!("/v1/memory_stores/{}/memories/not-an-id", a.id))
        .bearer_auth(crate::common::KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test]
async fn the_per_store_cap_refuses_new_memories_only() {
    let s = TestServer::with_limits(Limits { max_memories_per_store: 3, ..Limits::default() }).await;
    let store = s.new_store("cap").await;
    let mut ms = Vec::new();
    for i in 0..3 {
        ms.push(s.client.create_memory(&store.id, &format!("/m{i}"), "x", None).await.unwrap());
    }
    let e = s.client.create_memory(&store.id, "/m3", "x", None).await.unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert!(e.to_string().contains("3 memories"), "{e}");
    assert!(e.is_store_full(), "the refusal says why in error.details: {e:?}");
    // Existing memories stay readable and editable; renames do not count as new.
    let upd = UpdateMemory { content: Some("y".into()), path: Some("/renamed".into()), ..Default::default() };
    s.client.update_memory(&store.id, &ms[0].id, &upd, None).await.unwrap();
    assert_eq!(s.client.get_memory(&store.id, &ms[1].id, None).await.unwrap().content.as_deref(), Some("x"));
    // Another store has its own budget.
    let other = s.new_store("other").await;
    s.client.create_memory(&other.id, "/m", "x", None).await.unwrap();
    // Deleting frees a slot.
    s.client.delete_memory(&store.id, &ms[2].id, None).await.unwrap();
    s.client.create_memory(&store.id, "/m3", "x", None).await.unwrap();
}

async fn collect(
    s: &TestServer,
    store: &mnemo_api::MemoryStoreId,
    mut params: ListMemoriesParams,
) -> (Vec<String>, usize) {
    let mut out = Vec::new();
    let mut pages = 0;
    loop {
        let page = s.client.list_memories(store, &params).await.unwrap();
        pages += 1;
        assert!(page.data.len() <= params.limit.unwrap_or(20) as usize);
        for item in page.data {
            out.push(match item {
                MemoryListItem::Memory(m) => m.path,
                MemoryListItem::Prefix(p) => format!("prefix:{}", p.path),
            });
        }
        match page.next_page {
            Some(next) => params.page = Some(next),
            None => return (out, pages),
        }
    }
}

#[tokio::test]
async fn listing_orders_paths_filters_prefixes_and_rolls_up_depth() {
    let s = TestServer::start().await;
    let store = s.new_store("list").await;
    let paths = [
        "/b.md",
        "/a.md",
        "/notes/todo.md",
        "/notes/2026/jan.md",
        "/notes/2026/feb.md",
        "/notes-archive/old.md",
        "/notes/zz/deep/x.md",
        "/z/1",
        "/z/2",
        "/z/3",
    ];
    for p in paths {
        s.client.create_memory(&store.id, p, p, None).await.unwrap();
    }
    let mut sorted: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
    sorted.sort();
    for limit in [1, 2, 3, 100] {
        let (got, _) = collect(&s, &store.id, ListMemoriesParams { limit: Some(limit), ..Default::default() }).await;
        assert_eq!(got, sorted, "limit {limit}");
    }

    let notes = ListMemoriesParams { path_prefix: Some("/notes/".into()), limit: Some(2), ..Default::default() };
    let (got, _) = collect(&s, &store.id, notes).await;
    assert_eq!(got, ["/notes/2026/feb.md", "/notes/2026/jan.md", "/notes/todo.md", "/notes/zz/deep/x.md"]);

    for limit in [1, 2, 100] {
        let top = ListMemoriesParams { depth: Some(1), limit: Some(limit), ..Default::default() };
        let (got, _) = collect(&s, &store.id, top).await;
        assert_eq!(got, ["/a.md", "/b.md", "prefix:/notes-archive/", "prefix:/notes/", "prefix:/z/"], "limit {limit}");
    }
    let inner = ListMemoriesParams {
        depth: Some(1),
        path_prefix: Some("/notes/".into()),
        limit: Some(1),
        ..Default::default()
    };
    let (got, pages) = collect(&s, &store.id, inner).await;
    assert_eq!(got, ["prefix:/notes/2026/", "/notes/todo.md", "prefix:/notes/zz/"]);
    assert_eq!(pages, 3, "prefix items count toward the limit");

    for (q, what) in [
        (ListMemoriesParams { depth: Some(2), ..Default::default() }, "depth 2"),
        (ListMemoriesParams { path_prefix: Some("/notes".into()), ..Default::default() }, "prefix without /"),
        (ListMemoriesParams { limit: Some(0), ..Default::default() }, "limit 0"),
        (ListMemoriesParams { limit: Some(101), ..Default::default() }, "limit 101"),
        (ListMemoriesParams { page: Some("nope".into()), ..Default::default() }, "bad cursor"),
    ] {
        assert_eq!(error_type(s.client.list_memories(&store.id, &q).await).0, 400, "{what}");
    }
}

#[tokio::test]
async fn full_listings_carry_content_in_pages_of_at_most_twenty() {
    let s = TestServer::start().await;
    let store = s.new_store("full").await;
    for i in 0..45 {
        s.client.create_memory(&store.id, &format!("/f{i:02}"), &format!("c{i}"), None).await.unwrap();
    }
    let params = ListMemoriesParams { view: Some(View::Full), limit: Some(100), ..Default::default() };
    let first = s.client.list_memories(&store.id, &params).await.unwrap();
    assert_eq!(first.data.len(), 20);
    let all = s.client.list_all_memories(&store.id, View::Full).await.unwrap();
    assert_eq!(all.len(), 45);
    for (i, m) in all.iter().enumerate() {
        assert_eq!(m.content.as_deref(), Some(format!("c{i}").as_str()));
    }
    let basic = s.client.list_all_memories(&store.id, View::Basic).await.unwrap();
    assert!(basic.iter().all(|m| m.content.is_none() && m.content_size_bytes > 0));
}

#[tokio::test]
async fn listings_carry_an_etag_and_answer_304_while_the_store_is_unchanged() {
    let s = TestServer::start().await;
    let store = s.new_store("etag").await;
    s.client.create_memory(&store.id, "/a", "a", None).await.unwrap();
    let path = format!("/v1/memory_stores/{}/memories", store.id);
    let first = s.raw(reqwest::Method::GET, &path).bearer_auth(crate::common::KEY).send().await.unwrap();
    let tag = first.headers()["etag"].to_str().unwrap().to_owned();
    let if_none_match = |tag: String| {
        s.raw(reqwest::Method::GET, &path).bearer_auth(crate::common::KEY).header("if-none-match", tag).send()
    };
    let same = if_none_match(tag.clone()).await.unwrap();
    assert_eq!(same.status(), 304);
    assert!(same.bytes().await.unwrap().is_empty());
    s.client.create_memory(&store.id, "/b", "b", None).await.unwrap();
    let changed = if_none_match(tag.clone()).await.unwrap();
    assert_eq!(changed.status(), 200);
    assert_ne!(changed.headers()["etag"].to_str().unwrap(), tag);
}
