//! The memory stream (`GET /v1/memory_stores/{id}/memories:stream`, a mnemo extension): the
//! whole store in one answer, the listing's scopes, one snapshot while writers write, the end
//! line, and the server that hides it.

use futures::StreamExt;
use mnemo_api::headers::EXTENSIONS_HEADER;
use mnemo_api::{Memory, MemoryStoreId, MemoryStreamEnd, View};
use reqwest::Method;
use serde_json::json;

use crate::common::{KEY, TestServer};
use crate::work::world;

fn stream_path(store: &str) -> String {
    format!("/v1/memory_stores/{store}/memories:stream")
}

/// The memory lines and the end line of a stream's body.
fn lines(body: &[u8]) -> (Vec<Memory>, MemoryStreamEnd) {
    let text = std::str::from_utf8(body).unwrap();
    assert!(text.ends_with('\n'), "every line ends with a newline");
    let mut lines: Vec<&str> = text.lines().collect();
    let end: MemoryStreamEnd = serde_json::from_str(lines.pop().expect("an end line")).unwrap();
    let memories = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    (memories, end)
}

async fn fill(s: &TestServer, store: &MemoryStoreId, n: usize, size: usize) {
    let db = s.store();
    let ws = db.default_workspace().await.unwrap();
    let actor = mnemo_api::Actor::ApiActor { api_key_id: "apikey_stream".parse().unwrap() };
    for i in 0..n {
        let path = mnemo_api::MemoryPath::parse(&format!("/f{}/m{i:04}.md", i % 9)).unwrap();
        db.create_memory(&ws, store, path, format!("{i:04} {}", "x".repeat(size)), actor.clone()).await.unwrap();
    }
}

#[tokio::test]
async fn the_stream_is_the_full_listing_in_one_answer_then_its_end_line() {
    let s = TestServer::start().await;
    let store = s.new_store("stream").await.id;
    // More than one chunk of the store's reads.
    fill(&s, &store, 230, 100).await;
    s.client.create_memory(&store, "/odd", "nul\0 crlf\r\n emoji \u{1F600}", None).await.unwrap();
    let resp = s.raw(Method::GET, &stream_path(store.as_str())).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/jsonl");
    assert!(resp.headers()[EXTENSIONS_HEADER].to_str().unwrap().contains("memory-stream"));
    let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    let (memories, end) = lines(&resp.bytes().await.unwrap());
    let listed = s.client.list_all_memories(&store, View::Full).await.unwrap();
    assert_eq!(memories, listed, "the full listing, page for page");
    assert_eq!(end.memory_count, 231);
    assert_eq!(etag, format!("\"m{}\"", end.change_seq), "the end names the snapshot the ETag names");
    let listing =
        s.raw(Method::GET, &format!("/v1/memory_stores/{store}/memories")).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(listing.headers()["etag"].to_str().unwrap(), etag, "the listing's tag for the same state");

    // The typed client reads the same.
    let mut stream = s.client.open_memory_stream(&store).await.unwrap().expect("offered");
    let mut read = Vec::new();
    while let Some(batch) = stream.next_batch::<mnemo_api::Memory>().await.unwrap() {
        read.extend(batch);
    }
    assert_eq!(read, listed);
    assert_eq!(stream.end(), Some(end));

    // An empty store: just the end line.
    let empty = s.new_store("empty").await.id;
    let resp = s.raw(Method::GET, &stream_path(empty.as_str())).bearer_auth(KEY).send().await.unwrap();
    let (memories, end) = lines(&resp.bytes().await.unwrap());
    assert!(memories.is_empty());
    assert_eq!(end.memory_count, 0);
}

#[tokio::test]
async fn the_stream_is_scoped_like_the_listing() {
    let w = world(300).await;
    let (_, work, token) = w.leased().await;
    let (_, foreign) = w.s.call(Method::POST, "/v1/memory_stores", KEY, Some(json!({"name": "foreign"}))).await;
    let foreign = foreign["id"].as_str().unwrap().to_owned();
    let unknown = MemoryStoreId::generate().to_string();
    let status = |path: String, credential: Option<String>| {
        let req = w.s.raw(Method::GET, &path);
        let req = match credential {
            Some(c) => req.bearer_auth(c),
            None => req,
        };
        async move { req.send().await.unwrap().status().as_u16() }
    };
    let cases = [
        ("an API key", Some(KEY.to_owned()), &w.rw_store, 200),
        ("the environment key", Some(w.env_key.clone()), &w.rw_store, 403),
        ("a token, an attached store", Some(token.clone()), &w.rw_store, 200),
        ("a token, a read-only store", Some(token.clone()), &w.ro_store, 200),
        ("a token, an unattached store", Some(token.clone()), &foreign, 403),
        ("no credential", None, &w.rw_store, 401),
        ("an unknown key", Some("sk-nobody".to_owned()), &w.rw_store, 401),
        ("an unknown store", Some(KEY.to_owned()), &unknown, 404),
    ];
    for (what, credential, store, expected) in cases {
        let listing = status(format!("/v1/memory_stores/{store}/memories"), credential.clone()).await;
        let stream = status(stream_path(store), credential).await;
        assert_eq!((listing, stream), (expected, expected), "{what}: the listing, then the stream");
    }
    // The token dies with its item, for both.
    w.s.call(Method::POST, &w.work(&format!("/{work}/stop")), KEY, Some(json!({"force": true}))).await;
    let listing = status(format!("/v1/memory_stores/{}/memories", w.rw_store), Some(token.clone())).await;
    let stream = status(stream_path(&w.rw_store), Some(token)).await;
    assert_eq!((listing, stream), (401, 401));
}

#[tokio::test]
async fn a_stream_reads_one_snapshot_while_writers_write() {
    let s = TestServer::start().await;
    let store = s.new_store("snapshot").await.id;
    // Several MiB, so the answer cannot sit whole in socket buffers before the writes.
    fill(&s, &store, 800, 8 * 1024).await;
    let before = s.client.list_all_memories(&store, View::Full).await.unwrap();
    let resp = s.raw(Method::GET, &stream_path(store.as_str())).bearer_auth(KEY).send().await.unwrap();
    let etag = resp.headers()["etag"].to_str().unwrap().to_owned();
    let mut body = resp.bytes_stream();
    let mut read = body.next().await.unwrap().unwrap().to_vec();
    // Changes behind and ahead of what was read so far.
    let last = before.last().unwrap();
    let body_of = |text: &str| mnemo_api::UpdateMemory { content: Some(text.into()), ..Default::default() };
    s.client.update_memory(&store, &before[400].id, &body_of("changed"), None).await.unwrap();
    s.client.delete_memory(&store, &last.id, None).await.unwrap();
    s.client.create_memory(&store, "/zzz", "late", None).await.unwrap();
    s.client.create_memory(&store, "/0", "late, first in order", None).await.unwrap();
    while let Some(chunk) = body.next().await {
        read.extend_from_slice(&chunk.unwrap());
    }
    let (memories, end) = lines(&read);
    assert_eq!(memories, before, "the store as it stood when the stream began");
    assert_eq!(etag, format!("\"m{}\"", end.change_seq));
    let now = s.client.list_all_memories(&store, View::Basic).await.unwrap();
    assert_eq!(now.len(), before.len() + 1, "the writes landed meanwhile");
}

#[tokio::test]
async fn a_hidden_stream_is_an_unknown_route_and_the_header_says_so() {
    let s = TestServer::configured(mnemo_store::Limits::default(), |state| state.with_memory_stream(false)).await;
    let store = s.new_store("hidden").await.id;
    let (status, body) = s.call(Method::GET, &stream_path(store.as_str()), KEY, None).await;
    assert_eq!((status, body["error"]["type"].as_str()), (404, Some("not_found_error")), "{body}");
    let (_, unknown) = s.call(Method::GET, &format!("/v1/memory_stores/{store}/nothing"), KEY, None).await;
    assert_eq!(
        body["error"]["message"].as_str().unwrap().replace("memories:stream", "nothing"),
        unknown["error"]["message"].as_str().unwrap(),
        "answered like a route that does not exist"
    );
    let resp = s.raw(Method::GET, "/healthz").send().await.unwrap();
    assert_eq!(resp.headers()[EXTENSIONS_HEADER], "change-feed, memory-batch, memory-search, version-retention");
    assert_eq!(s.client.offers_memory_stream(), Some(false));
    assert!(s.client.open_memory_stream(&store).await.unwrap().is_none(), "the client lists pages instead");
}
