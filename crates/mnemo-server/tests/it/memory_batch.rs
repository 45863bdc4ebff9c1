//! The memory batch (`POST /v1/memory_stores/{id}/memories:batch`, a mnemo extension): writes in
//! order, each answered as its own request would be, the single writes' scopes, the limits.

use mnemo_api::headers::EXTENSIONS_HEADER;
use mnemo_api::{MemoryWrite, MemoryWriteBatch, UpdateMemory, View, content_sha256};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{KEY, TestServer};
use crate::work::world;

fn batch_path(store: &str) -> String {
    format!("/v1/memory_stores/{store}/memories:batch")
}

/// The `(status, error type)` of every result.
fn outcomes(body: &Value) -> Vec<(u64, Option<&str>)> {
    body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["status"].as_u64().unwrap(), r["error"]["type"].as_str()))
        .collect()
}

#[tokio::test]
async fn writes_apply_in_order_and_each_is_answered_as_its_own_request() {
    let s = TestServer::start().await;
    let store = s.new_store("batch").await.id;
    let a = s.client.create_memory(&store, "/a.md", "a1", None).await.unwrap();
    let writes = json!({"writes": [
        {"type": "update", "memory_id": a.id, "content": "a2",
         "precondition": {"type": "content_sha256", "content_sha256": content_sha256(b"a1")}},
        {"type": "update", "memory_id": a.id, "content": "a3",
         "precondition": {"type": "content_sha256", "content_sha256": content_sha256(b"a1")}},
        {"type": "create", "path": "/b.md", "content": "b"},
        {"type": "create", "path": "/b.md/c.md", "content": "c"},
        {"type": "create", "path": "relative.md", "content": "r"},
        {"type": "create", "path": "/big.md", "content": "x".repeat(102_401)},
        {"type": "create", "path": "/null.md", "content": null},
        {"type": "update", "memory_id": "mem_nothing", "content": "x"},
        {"type": "update", "memory_id": a.id, "path": "/renamed.md"},
    ]});
    let resp = s.raw(Method::POST, &batch_path(store.as_str())).bearer_auth(KEY).json(&writes).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()[EXTENSIONS_HEADER].to_str().unwrap().contains("memory-batch"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["type"], "memory_write_results");
    assert_eq!(
        outcomes(&body),
        [
            (200, None),
            (409, Some("memory_precondition_failed_error")),
            (200, None),
            (409, Some("memory_path_conflict_error")),
            (400, Some("invalid_request_error")),
            (413, Some("request_too_large")),
            (400, Some("invalid_request_error")),
            (404, Some("not_found_error")),
            (200, None),
        ]
    );
    let results = body["results"].as_array().unwrap();
    // The memories as a single write answers them (`view=basic`), errors with their fields.
    assert_eq!(results[0]["memory"]["content_sha256"], content_sha256(b"a2"));
    assert!(results[0]["memory"]["content"].is_null(), "no content, as a write's default view");
    assert_eq!(results[3]["error"]["conflicting_path"], "/b.md");
    assert!(results[4]["error"]["message"].as_str().unwrap().starts_with("writes[4]: "), "{}", results[4]);
    assert_eq!(results[8]["memory"]["path"], "/renamed.md");

    let live: Vec<(String, String)> = s
        .client
        .list_all_memories(&store, View::Full)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.path, m.content.unwrap_or_default()))
        .collect();
    assert_eq!(live, [("/b.md".to_owned(), "b".to_owned()), ("/renamed.md".to_owned(), "a2".to_owned())]);

    // The typed client: one outcome per write, in order.
    let typed = MemoryWriteBatch {
        writes: vec![
            MemoryWrite::Create(mnemo_api::CreateMemory { path: "/b.md".into(), content: Some("again".into()) }),
            MemoryWrite::Update {
                memory_id: a.id.to_string(),
                change: UpdateMemory { content: Some("a4".into()), ..Default::default() },
            },
        ],
    };
    assert!(s.client.offers_memory_batch());
    let answers = s.client.write_memories(&store, &typed).await.unwrap();
    assert_eq!(answers[0].as_ref().unwrap_err().status(), Some(409));
    assert_eq!(answers[1].as_ref().unwrap().content_sha256, content_sha256(b"a4"));
}

#[tokio::test]
async fn a_batch_holds_one_to_a_hundred_writes_of_a_known_shape() {
    let s = TestServer::start().await;
    let store = s.new_store("limits").await.id;
    let path = batch_path(store.as_str());
    let create = |i: usize| json!({"type": "create", "path": format!("/m{i}.md"), "content": "x"});
    for (writes, why) in [(json!([]), "empty"), (Value::Array((0..101).map(create).collect()), "101 writes")] {
        let (status, body) = s.call(Method::POST, &path, KEY, Some(json!({ "writes": writes }))).await;
        assert_eq!(status, 400, "{why}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("1 to 100 writes"), "{why}: {body}");
    }
    let (status, body) = s.call(Method::POST, &path, KEY, Some(json!({"writes": [{"type": "delete"}]}))).await;
    assert_eq!(status, 400, "an unknown kind of write: {body}");
    let (status, body) = s.call(Method::POST, &path, KEY, Some(Value::Array((0..100).map(create).collect()))).await;
    assert_eq!(status, 400, "not an object: {body}");
    let hundred = Value::Array((0..100).map(create).collect());
    let (status, body) = s.call(Method::POST, &path, KEY, Some(json!({ "writes": hundred }))).await;
    assert_eq!(status, 200, "{body}");
    assert!(outcomes(&body).iter().all(|o| o.0 == 200));
    let ws = s.store().default_workspace().await.unwrap();
    assert_eq!(s.store().memory_store_usage(&ws, std::slice::from_ref(&store)).await.unwrap()[&store].memories, 100);
    // An unknown store: each write answered as its own request would be.
    let unknown = batch_path(mnemo_api::MemoryStoreId::generate().as_str());
    let (status, body) = s.call(Method::POST, &unknown, KEY, Some(json!({"writes": [create(1)]}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(outcomes(&body), [(404, Some("not_found_error"))]);
}

#[tokio::test]
async fn a_batch_has_the_scopes_of_the_single_writes() {
    let w = world(300).await;
    let (_, _work, token) = w.leased().await;
    let foreign = w.s.new_store("foreign").await.id.to_string();
    let one = json!({"writes": [{"type": "create", "path": "/scoped.md", "content": "x"}]});
    for (who, secret, store, expect) in [
        ("the API key", KEY.to_owned(), &w.rw_store, 200),
        ("the environment key", w.env_key.clone(), &w.rw_store, 403),
        ("a token, an attached store", token.clone(), &w.rw_store, 200),
        ("a token, a read-only store", token.clone(), &w.ro_store, 403),
        ("a token, an unattached store", token.clone(), &foreign, 403),
    ] {
        let (status, body) = w.s.call(Method::POST, &batch_path(store), &secret, Some(one.clone())).await;
        assert_eq!(status, expect, "{who}: {body}");
    }
}
