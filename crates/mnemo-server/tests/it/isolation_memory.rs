//! Workspace isolation of the memory routes (admin-api.md §8.2): a key of another workspace gets
//! exactly the answer an unknown id gets — status and body, message included — for a store, a
//! memory, a version, the change feed and the stream; its listings are empty; and every answer
//! names the workspace that served it.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{KEY, TestServer};

const KEY_B: &str = "sk-test-key-of-workspace-b";

/// `text` with every occurrence of `from` replaced by `to`.
fn swapped(text: &str, from: &str, to: &str) -> String {
    text.replace(from, to)
}

/// An answer's body without its `request_id` (each request has its own).
fn shown(mut v: Value) -> String {
    if let Some(o) = v.as_object_mut() {
        o.remove("request_id");
    }
    v.to_string()
}

#[tokio::test]
async fn another_workspaces_memory_resources_answer_as_unknown_ones() {
    let s = TestServer::start().await;
    let db = s.store();
    let b = db.create_workspace("B").await.unwrap();
    db.ensure_api_key_in(&b, mnemo_server::hash_credential(KEY_B), "b").await.unwrap();

    let store = s.new_store("a's").await.id;
    let (status, memory) = s
        .call(
            Method::POST,
            &format!("/v1/memory_stores/{store}/memories"),
            KEY,
            Some(json!({"path": "/a.md", "content": "one"})),
        )
        .await;
    assert_eq!(status, 200, "{memory}");
    let (memory_id, version_id) = (memory["id"].as_str().unwrap(), memory["memory_version_id"].as_str().unwrap());
    let unknown_store = mnemo_api::MemoryStoreId::generate().to_string();

    let reads = [
        format!("/v1/memory_stores/{store}"),
        format!("/v1/memory_stores/{store}/memories"),
        format!("/v1/memory_stores/{store}/memories/{memory_id}"),
        format!("/v1/memory_stores/{store}/memory_versions"),
        format!("/v1/memory_stores/{store}/memory_versions/{version_id}"),
        format!("/v1/memory_stores/{store}/changes?format=json&wait_ms=0"),
        format!("/v1/memory_stores/{store}/changes?after=0"),
        format!("/v1/memory_stores/{store}/memories:stream"),
    ];
    let writes = [
        (Method::POST, format!("/v1/memory_stores/{store}"), Some(json!({"name": "stolen"}))),
        (Method::POST, format!("/v1/memory_stores/{store}/memories"), Some(json!({"path": "/b.md", "content": "b"}))),
        (Method::POST, format!("/v1/memory_stores/{store}/memories/{memory_id}"), Some(json!({"content": "b"}))),
        (Method::POST, format!("/v1/memory_stores/{store}/memory_versions/{version_id}/redact"), None),
        (Method::DELETE, format!("/v1/memory_stores/{store}/memories/{memory_id}"), None),
        (Method::POST, format!("/v1/memory_stores/{store}/archive"), None),
        (Method::DELETE, format!("/v1/memory_stores/{store}"), None),
    ];
    let calls = reads.iter().map(|p| (Method::GET, p.clone(), None)).chain(writes);
    for (method, path, body) in calls {
        let (status, got) = s.call(method.clone(), &path, KEY_B, body.clone()).await;
        let unknown = swapped(&path, store.as_str(), &unknown_store);
        let (unknown_status, expected) = s.call(method.clone(), &unknown, KEY_B, body).await;
        assert_eq!(unknown_status, 404, "{method} {unknown}: {expected}");
        let expected = swapped(&shown(expected), &unknown_store, store.as_str());
        assert_eq!((status, shown(got)), (404, expected), "{method} {path} with B's key");
    }
    // The batch answers each write as its own request would.
    let batch = json!({"writes": [{"type": "create", "path": "/c.md", "content": "c"}]});
    let (status, got) =
        s.call(Method::POST, &format!("/v1/memory_stores/{store}/memories:batch"), KEY_B, Some(batch.clone())).await;
    let (_, expected) =
        s.call(Method::POST, &format!("/v1/memory_stores/{unknown_store}/memories:batch"), KEY_B, Some(batch)).await;
    assert_eq!((status, shown(got)), (200, swapped(&shown(expected), &unknown_store, store.as_str())));

    // B lists nothing; A's store and memory are untouched.
    let (status, listed) = s.call(Method::GET, "/v1/memory_stores?include_archived=true", KEY_B, None).await;
    assert_eq!((status, &listed["data"]), (200, &json!([])), "{listed}");
    let (status, kept) =
        s.call(Method::GET, &format!("/v1/memory_stores/{store}/memories/{memory_id}"), KEY, None).await;
    assert_eq!(
        (status, kept["content"].as_str(), kept["memory_version_id"].as_str()),
        (200, Some("one"), Some(version_id))
    );
    let (_, a_store) = s.call(Method::GET, &format!("/v1/memory_stores/{store}"), KEY, None).await;
    assert_eq!((a_store["name"].as_str(), &a_store["archived_at"]), (Some("a's"), &Value::Null));
}

#[tokio::test]
async fn memory_answers_name_the_serving_workspace() {
    let s = TestServer::start().await;
    let db = s.store();
    let a = db.default_workspace().await.unwrap();
    let b = db.create_workspace("B").await.unwrap();
    db.ensure_api_key_in(&b, mnemo_server::hash_credential(KEY_B), "b").await.unwrap();
    let store = s.new_store("a's").await.id;
    for (key, ws, path, status) in [
        (KEY, &a, format!("/v1/memory_stores/{store}"), 200),
        (KEY, &a, "/v1/memory_stores".to_owned(), 200),
        (KEY_B, &b, format!("/v1/memory_stores/{store}"), 404),
        (KEY_B, &b, "/v1/memory_stores".to_owned(), 200),
    ] {
        let resp = s.raw(Method::GET, &path).bearer_auth(key).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{path}");
        let header = resp.headers().get("anthropic-workspace-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        assert_eq!(header.as_deref(), Some(ws.as_str()), "{path} with {key}");
    }
}
