//! Searching memories by meaning (`mode=semantic|hybrid`) against `mnemo serve --models` whose
//! `[embeddings]` names a fake OpenAI-compatible embeddings server with deterministic vectors:
//! ranking by meaning, a memory found by full text before (or without) its embedding, the
//! fallback to full text while the provider is down, a deletion forgotten at once, the CLI,
//! and a server without a provider saying why it cannot.

mod common;

use std::time::Duration;

use mnemo_api::{MemorySearchPage, MemoryStoreId, SearchMode};
use mnemo_client::{Method, SearchMemoriesParams};
use mnemo_model::fake_embeddings::FakeEmbeddings;
use serde_json::json;

use common::{KEY, Server, mnemo, wait_until_async};

async fn write(api: &mnemo_client::Client, store: &MemoryStoreId, path: &str, content: &str) -> String {
    let body = json!({"path": path, "content": content});
    let memory = api.json(Method::POST, &format!("/v1/memory_stores/{store}/memories"), Some(&body)).await.unwrap();
    memory["id"].as_str().unwrap().to_owned()
}

async fn search(api: &mnemo_client::Client, store: &MemoryStoreId, q: &str, mode: SearchMode) -> MemorySearchPage {
    let params = SearchMemoriesParams { q: q.into(), mode: Some(mode), ..Default::default() };
    api.search_memories(Some(store), &params).await.unwrap()
}

fn paths(page: &MemorySearchPage) -> Vec<&str> {
    page.data.iter().map(|r| r.path.as_str()).collect()
}

/// The extensions the server names.
async fn extensions(base: &str) -> String {
    let resp = reqwest::Client::new().get(format!("{base}/v1/memory_stores")).bearer_auth(KEY).send().await.unwrap();
    resp.headers()[mnemo_api::headers::EXTENSIONS_HEADER].to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_are_found_by_meaning_and_by_full_text_while_not_yet_embedded() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = FakeEmbeddings::start().await;
    let models = tmp.path().join("models.toml");
    std::fs::write(&models, fake.config_toml()).unwrap();
    let server =
        Server::start(&tmp.path().join("db.sqlite"), &["--api-key", KEY, "--models", models.to_str().unwrap()]);
    let api = server.client();
    assert!(extensions(&server.base).await.contains("memory-search-semantic"));
    let store = api.json(Method::POST, "/v1/memory_stores", Some(&json!({"name": "notes"}))).await.unwrap();
    let store: MemoryStoreId = store["id"].as_str().unwrap().parse().unwrap();
    let pg = write(&api, &store, "/infra/pg.md", "we run postgres 15 on host seven").await;
    write(&api, &store, "/food/lunch.md", "pizza on fridays").await;
    write(&api, &store, "/notes/refused.md", "an unembeddable database note").await;

    // Once the embedder has caught up, `postgres` is the closest to `database` though it never
    // says the word; the memory the provider refused is still found, by full text.
    let caught_up = wait_until_async(Duration::from_secs(20), || async {
        paths(&search(&api, &store, "database", SearchMode::Semantic).await).first() == Some(&"/infra/pg.md")
    });
    assert!(caught_up.await, "the embedder never embedded the memories");
    let page = search(&api, &store, "database", SearchMode::Semantic).await;
    assert_eq!(page.mode, SearchMode::Semantic);
    assert_eq!(page.notice, None);
    assert!(paths(&page).contains(&"/notes/refused.md"), "{:?}", paths(&page));
    assert_eq!(page.data[0].snippet, "we run postgres 15 on host seven");
    let refused = page.data.iter().find(|r| r.path == "/notes/refused.md").unwrap();
    assert_eq!(refused.snippet, "an unembeddable «database» note");
    let text = search(&api, &store, "database", SearchMode::Text).await;
    assert_eq!(paths(&text), vec!["/notes/refused.md"], "full text needs the word");
    let hybrid = search(&api, &store, "database", SearchMode::Hybrid).await;
    assert_eq!(hybrid.mode, SearchMode::Hybrid);
    assert_eq!(hybrid.data.len(), 3, "{:?}", paths(&hybrid));
    assert_ne!(hybrid.data[0].path, "/food/lunch.md");
    // Narrowing terms hold when ranking by meaning.
    let narrowed = search(&api, &store, "database -postgres", SearchMode::Semantic).await;
    assert!(!paths(&narrowed).contains(&"/infra/pg.md"), "{:?}", paths(&narrowed));

    // At rest the embedder asks the provider nothing (the refusal is not retried).
    let asked = fake.requests();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(fake.requests(), asked, "an idle embedder calls nobody");

    // A memory is found the moment its write is acknowledged, embedded or not.
    write(&api, &store, "/late.md", "database backup plan").await;
    assert!(paths(&search(&api, &store, "database", SearchMode::Semantic).await).contains(&"/late.md"));

    // The CLI ranks by meaning too.
    let mut cmd = mnemo();
    cmd.args(["store", "search", store.as_str(), "database", "--mode", "semantic"]);
    cmd.args(["--base-url", &server.base, "--api-key", KEY]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let at = |p: &str| stdout.find(p).unwrap_or_else(|| panic!("no {p} in {stdout}"));
    assert!(at("/infra/pg.md") < at("/food/lunch.md"), "{stdout}");

    // While the provider is down, a search by meaning answers by full text and says so.
    fake.set_down(true);
    let page = search(&api, &store, "database", SearchMode::Hybrid).await;
    assert_eq!(page.mode, SearchMode::Text);
    let notice = page.notice.as_deref().unwrap();
    assert!(notice.contains("ranked by full text only") && notice.contains("mode=hybrid"), "{notice}");
    let mut found = paths(&page);
    found.sort_unstable();
    assert_eq!(found, vec!["/late.md", "/notes/refused.md"]);
    let mut cmd = mnemo();
    cmd.args(["store", "search", store.as_str(), "database", "--mode", "semantic"]);
    cmd.args(["--base-url", &server.base, "--api-key", KEY]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("note: ranked by full text only"));

    // A deleted memory is never found again, by either ranking.
    fake.set_down(false);
    api.json(Method::DELETE, &format!("/v1/memory_stores/{store}/memories/{pg}"), None).await.unwrap();
    let page = search(&api, &store, "postgres database", SearchMode::Hybrid).await;
    assert!(!paths(&page).contains(&"/infra/pg.md"), "{:?}", paths(&page));

    // Bad input: an unknown mode is a 400 naming the values.
    let url = format!("{}/v1/memory_stores/{store}/memories:search?q=db&mode=vector", server.base);
    let resp = reqwest::Client::new().get(url).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let body = resp.text().await.unwrap();
    assert!(body.contains("`mode` is `text`, `semantic` or `hybrid` (got `vector`)"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_embeddings_provider_a_search_by_meaning_says_why_it_cannot() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::with_key(tmp.path());
    assert!(!extensions(&server.base).await.contains("memory-search-semantic"));
    let api = server.client();
    let store = api.json(Method::POST, "/v1/memory_stores", Some(&json!({"name": "notes"}))).await.unwrap();
    let store = store["id"].as_str().unwrap();
    for mode in ["semantic", "hybrid"] {
        let url = format!("{}/v1/memory_stores/{store}/memories:search?q=db&mode={mode}", server.base);
        let resp = reqwest::Client::new().get(url).bearer_auth(KEY).send().await.unwrap();
        assert_eq!(resp.status(), 400);
        let body: serde_json::Value = resp.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`mode={mode}` ranks by meaning")), "{message}");
        assert!(message.contains("[embeddings]") && message.contains("mode=text"), "{message}");
    }
    let url = format!("{}/v1/memories:search?q=db&mode=text", server.base);
    let resp = reqwest::Client::new().get(url).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}
