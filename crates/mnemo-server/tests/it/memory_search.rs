//! Memory search (`GET /v1/memory_stores/{id}/memories:search` and `GET /v1/memories:search`,
//! mnemo extensions): results and their shape, malformed queries, scopes and paging.

use mnemo_api::MemoryStoreId;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{Fixtures, KEY, TestServer};

fn encode(q: &str) -> String {
    form_urlencoded::byte_serialize(q.as_bytes()).collect()
}

fn in_store(store: &MemoryStoreId, q: &str) -> String {
    format!("/v1/memory_stores/{store}/memories:search?q={}", encode(q))
}

fn everywhere(q: &str) -> String {
    format!("/v1/memories:search?q={}", encode(q))
}

async fn write(s: &TestServer, store: &MemoryStoreId, path: &str, content: &str) -> Value {
    let body = json!({"path": path, "content": content});
    let (status, memory) = s.call(Method::POST, &format!("/v1/memory_stores/{store}/memories"), KEY, Some(body)).await;
    assert_eq!(status, 200, "{memory}");
    memory
}

fn paths(page: &Value) -> Vec<&str> {
    page["data"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_search_answers_ranked_results_with_marked_snippets() {
    let s = TestServer::start().await;
    let store = s.new_store("notes").await.id;
    let memory = write(&s, &store, "/ops/db.md", "The staging database is staging-db-02.").await;
    write(&s, &store, "/ops/cache.md", "redis only").await;
    let (status, page) = s.call(Method::GET, &in_store(&store, "staging-db-02"), KEY, None).await;
    assert_eq!(status, 200, "{page}");
    let result = &page["data"][0];
    assert_eq!(result["type"], "memory_search_result");
    assert_eq!(result["memory_id"], memory["id"]);
    assert_eq!(result["memory_store_id"], store.as_str());
    assert_eq!(result["path"], "/ops/db.md");
    assert_eq!(result["content_sha256"], memory["content_sha256"]);
    assert_eq!(result["snippet"], "The staging database is «staging-db-02».");
    assert!(result["score"].is_number(), "{result}");
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    assert_eq!(page["next_page"], Value::Null);

    // The workspace-wide search finds it too, and a path prefix narrows.
    let (_, all) = s.call(Method::GET, &everywhere("\"staging database\""), KEY, None).await;
    assert_eq!(paths(&all), ["/ops/db.md"]);
    let (_, narrowed) =
        s.call(Method::GET, &format!("{}&path_prefix=/elsewhere/", in_store(&store, "db")), KEY, None).await;
    assert_eq!(paths(&narrowed), Vec::<&str>::new());

    // The answer names the extension.
    let resp = s.raw(Method::GET, &in_store(&store, "x")).bearer_auth(KEY).send().await.unwrap();
    let extensions = resp.headers()[mnemo_api::headers::EXTENSIONS_HEADER].to_str().unwrap().to_owned();
    assert!(extensions.contains("memory-search"), "{extensions}");
}

#[tokio::test]
async fn a_malformed_query_is_a_400_saying_how_to_fix_it() {
    let s = TestServer::start().await;
    let store = s.new_store("notes").await.id;
    let long = "a".repeat(513);
    let table: &[(&str, &str)] = &[
        ("", "`q` is empty"),
        ("   ", "`q` is empty"),
        ("\"unclosed phrase", "closing `\"`"),
        ("-only -exclusions", "only excludes"),
        ("*", "`term*`"),
        ("path:", "`path:` with no path"),
        (&long, "at most 512 bytes"),
    ];
    for (q, words) in table {
        for url in [in_store(&store, q), everywhere(q)] {
            let (status, body) = s.call(Method::GET, &url, KEY, None).await;
            assert_eq!((status, body["error"]["type"].as_str()), (400, Some("invalid_request_error")), "{q}: {body}");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains(words), "{q}: {message}");
        }
    }
    let (status, body) = s.call(Method::GET, "/v1/memories:search", KEY, None).await;
    assert_eq!(status, 400, "no q at all: {body}");
    let (status, body) = s.call(Method::GET, &format!("{}&path_prefix=nope", everywhere("a")), KEY, None).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.call(Method::GET, &format!("{}&page=garbage", everywhere("a")), KEY, None).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_sessions_token_searches_only_its_sessions_stores() {
    let s = TestServer::start().await;
    let attached = s.new_store("attached").await.id;
    let foreign = s.new_store("foreign").await.id;
    write(&s, &attached, "/mine.md", "common word").await;
    write(&s, &foreign, "/theirs.md", "common word").await;
    let (token, env_key) = s.read_only_sessions_token(&attached).await;

    let (_, key_sees) = s.call(Method::GET, &everywhere("common"), KEY, None).await;
    let mut all = paths(&key_sees);
    all.sort();
    assert_eq!(all, ["/mine.md", "/theirs.md"], "an API key searches its whole workspace");
    let (status, token_sees) = s.call(Method::GET, &everywhere("common"), &token, None).await;
    assert_eq!(status, 200, "{token_sees}");
    assert_eq!(paths(&token_sees), ["/mine.md"], "a sessions token only its session's stores");
    assert_eq!(s.call(Method::GET, &in_store(&attached, "common"), &token, None).await.0, 200, "read-only attached");
    assert_eq!(s.call(Method::GET, &in_store(&foreign, "common"), &token, None).await.0, 403);
    assert_eq!(s.call(Method::GET, &everywhere("common"), &env_key, None).await.0, 403, "an environment key");
    assert_eq!(s.call(Method::GET, &everywhere("common"), "sk-nobody", None).await.0, 401);
}

#[tokio::test]
async fn results_page_by_next_page() {
    let s = TestServer::start().await;
    let store = s.new_store("notes").await.id;
    for i in 0..7 {
        write(&s, &store, &format!("/n{i}.md"), &"needle ".repeat(i + 1)).await;
    }
    // Pages of one ranking: the index's, once it holds them all (a memory still waiting for
    // it leads the ranking until it is taken in).
    s.store().catch_up_search_index().await.unwrap();
    let mut url = format!("{}&limit=3", in_store(&store, "needle"));
    let mut seen = Vec::new();
    loop {
        let (status, page) = s.call(Method::GET, &url, KEY, None).await;
        assert_eq!(status, 200, "{page}");
        seen.extend(paths(&page).into_iter().map(str::to_owned));
        match page["next_page"].as_str() {
            Some(next) => url = format!("{}&limit=3&page={next}", in_store(&store, "needle")),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(seen, (0..7).map(|i| format!("/n{i}.md")).collect::<Vec<_>>());
}
