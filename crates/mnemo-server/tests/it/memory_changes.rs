//! The memory change feed (`/v1/memory_stores/{id}/changes`, a mnemo extension): the SSE
//! stream, resuming, the JSON long poll, scopes, and the cost of an idle feed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use mnemo_api::{MemoryStoreId, UpdateMemory};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{Fixtures, KEY, TestServer};

type Body = std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// An open SSE response and what has been read of it.
struct Sse {
    body: Body,
    buf: String,
    pings: usize,
}

impl Sse {
    async fn open(s: &TestServer, store: &MemoryStoreId, query: &str, last_event_id: Option<&str>) -> Self {
        Self::open_as(s, store, query, last_event_id, None).await
    }

    /// [`Sse::open`] naming a writer (`mnemo-writer`).
    async fn open_as(
        s: &TestServer,
        store: &MemoryStoreId,
        query: &str,
        last_event_id: Option<&str>,
        writer: Option<&str>,
    ) -> Self {
        let mut req = s.raw(Method::GET, &format!("/v1/memory_stores/{store}/changes{query}")).bearer_auth(KEY);
        if let Some(writer) = writer {
            req = req.header("mnemo-writer", writer);
        }
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        Self { body: Box::pin(resp.bytes_stream()), buf: String::new(), pings: 0 }
    }

    /// The next message other than a ping: (event, id, data).
    async fn next(&mut self) -> (String, String, Value) {
        self.next_within(Duration::from_secs(5)).await.expect("a change in time")
    }

    async fn next_within(&mut self, wait: Duration) -> Option<(String, String, Value)> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let message: String = self.buf.drain(..end + 2).collect();
                let field = |name: &str| {
                    message.lines().find_map(|l| l.strip_prefix(&format!("{name}: ")[..]).map(str::to_owned))
                };
                let event = field("event").expect("every message has an event line");
                if event == "ping" {
                    self.pings += 1;
                    continue;
                }
                let data = serde_json::from_str(&field("data").unwrap()).unwrap();
                return Some((event, field("id").expect("every change has an id"), data));
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next()).await.ok()?;
            self.buf.push_str(&String::from_utf8_lossy(&chunk.unwrap().unwrap()));
        }
    }
}

async fn write(s: &TestServer, store: &MemoryStoreId, p: &str, content: &str) -> mnemo_api::Memory {
    s.client.create_memory(store, p, content, None).await.unwrap()
}

fn update(content: Option<&str>, path: Option<&str>) -> UpdateMemory {
    UpdateMemory { content: content.map(Into::into), path: path.map(Into::into), ..Default::default() }
}

#[tokio::test]
async fn the_stream_tells_every_change_in_order_without_content() {
    let s = TestServer::start().await;
    let store = s.new_store("fed").await.id;
    let other = s.new_store("other").await.id;
    write(&s, &store, "/before.md", "old news").await;
    let mut sse = Sse::open(&s, &store, "", None).await;

    let m = write(&s, &store, "/a.md", "secret one").await;
    write(&s, &other, "/elsewhere.md", "not here").await;
    s.client.update_memory(&store, &m.id, &update(Some("secret two"), None), None).await.unwrap();
    s.client.update_memory(&store, &m.id, &update(None, Some("/b.md")), None).await.unwrap();
    s.client.delete_memory(&store, &m.id, None).await.unwrap();

    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(sse.next().await);
    }
    let summary: Vec<_> =
        seen.iter().map(|(e, _, d)| (e.as_str(), d["operation"].as_str(), d["path"].as_str())).collect();
    assert_eq!(
        summary,
        [
            ("memory.created", Some("created"), Some("/a.md")),
            ("memory.modified", Some("modified"), Some("/a.md")),
            ("memory.modified", Some("modified"), Some("/b.md")),
            ("memory.deleted", Some("deleted"), Some("/b.md")),
        ],
        "from now on (not the earlier write), this store only, in commit order"
    );
    let versions = s.versions_of(&store, &m.id).await;
    for ((_, id, data), version) in seen.iter().zip(versions.iter().rev()) {
        assert_eq!(data["memory_id"], m.id.as_str());
        assert_eq!(data["memory_store_id"], store.as_str());
        assert_eq!(data["memory_version_id"], version.id.as_str());
        assert_eq!(data["content_sha256"], json!(version.content_sha256));
        assert_eq!(data["content_size_bytes"], json!(version.content_size_bytes));
        assert_eq!(data["created_by"]["type"], "api_actor");
        assert!(data["created_at"].is_string());
        assert!(data.get("content").is_none(), "never the content: {data}");
        assert!(!data.to_string().contains("secret"), "never the content: {data}");
        assert!(id.parse::<i64>().is_ok(), "the id is the cursor");
    }
    let ids: Vec<i64> = seen.iter().map(|(_, id, _)| id.parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "cursors grow: {ids:?}");
    assert!(sse.next_within(Duration::from_millis(300)).await.is_none(), "nothing else");
}

#[tokio::test]
async fn a_stream_resumes_after_a_cursor_exactly() {
    let s = TestServer::start().await;
    let store = s.new_store("resumed").await.id;
    let mut sse = Sse::open(&s, &store, "?after=0", None).await;
    let paths = ["/1", "/2", "/3", "/4"];
    for p in &paths[..2] {
        write(&s, &store, p, "x").await;
    }
    let (_, first, _) = sse.next().await;
    let (_, second, _) = sse.next().await;
    drop(sse);
    // Missed while disconnected.
    for p in &paths[2..] {
        write(&s, &store, p, "x").await;
    }
    let path_of = |(_, _, d): (String, String, Value)| d["path"].as_str().unwrap().to_owned();

    let mut by_header = Sse::open(&s, &store, "", Some(&first)).await;
    for expected in &paths[1..] {
        assert_eq!(&path_of(by_header.next().await), expected, "Last-Event-ID replays what came after it");
    }
    let mut by_query = Sse::open(&s, &store, &format!("?after={second}"), None).await;
    for expected in &paths[2..] {
        assert_eq!(&path_of(by_query.next().await), expected, "?after= replays what came after it");
    }
    // The header wins over the URL's cursor, as a reconnecting client's would.
    let mut both = Sse::open(&s, &store, "?after=0", Some(&second)).await;
    assert_eq!(path_of(both.next().await), "/3");
    assert_eq!(path_of(both.next().await), "/4");
    let mut from_start = Sse::open(&s, &store, "?after=0", None).await;
    assert_eq!(path_of(from_start.next().await), "/1", "after=0 starts at the beginning");

    // Then live, without duplicates.
    write(&s, &store, "/5", "x").await;
    for sse in [&mut by_header, &mut by_query, &mut both] {
        assert_eq!(path_of(sse.next().await), "/5");
        assert!(sse.next_within(Duration::from_millis(200)).await.is_none(), "no duplicates");
    }

    let (status, body) = s.call(Method::GET, &format!("/v1/memory_stores/{store}/changes?after=x"), KEY, None).await;
    assert_eq!((status, body["error"]["type"].as_str()), (400, Some("invalid_request_error")));
    let unknown = MemoryStoreId::generate();
    assert_eq!(s.call(Method::GET, &format!("/v1/memory_stores/{unknown}/changes"), KEY, None).await.0, 404);
    assert_eq!(s.call(Method::GET, &format!("/v1/memory_stores/{unknown}/changes?after=0"), KEY, None).await.0, 404);
}

#[tokio::test]
async fn the_long_poll_answers_on_a_change_or_empty_when_the_wait_ends() {
    let s = Arc::new(TestServer::start().await);
    let store = s.new_store("polled").await.id;
    let url = |q: &str| format!("/v1/memory_stores/{store}/changes?format=json{q}");

    let (status, now) = s.call(Method::GET, &url("&wait_ms=0"), KEY, None).await;
    assert_eq!((status, now["data"].as_array().map(Vec::len)), (200, Some(0)), "{now}");
    let cursor = now["next_cursor"].as_str().unwrap().to_owned();

    // Times out empty, keeping the cursor.
    let started = Instant::now();
    let (_, timed_out) = s.call(Method::GET, &url(&format!("&after={cursor}&wait_ms=400")), KEY, None).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(timed_out, json!({"data": [], "next_cursor": cursor}));

    // Returns early when a change commits.
    let waiting = {
        let (s, q) = (Arc::clone(&s), url(&format!("&after={cursor}&wait_ms=20000")));
        tokio::spawn(async move { (Instant::now(), s.call(Method::GET, &q, KEY, None).await) })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let m = write(&s, &store, "/new.md", "hi").await;
    let (asked, (status, page)) = waiting.await.unwrap();
    assert_eq!(status, 200);
    assert!(asked.elapsed() < Duration::from_secs(5), "answered on the change, not at the end of the wait");
    assert_eq!(page["data"].as_array().unwrap().len(), 1, "{page}");
    assert_eq!(page["data"][0]["memory_id"], m.id.as_str());
    assert_eq!(page["data"][0]["operation"], "created");
    let next = page["next_cursor"].as_str().unwrap().to_owned();
    assert_ne!(next, cursor);

    // Already there: answers at once, in pages.
    for p in ["/x", "/y", "/z"] {
        write(&s, &store, p, "1").await;
    }
    let (_, two) = s.call(Method::GET, &url(&format!("&after={next}&limit=2")), KEY, None).await;
    let paths: Vec<_> = two["data"].as_array().unwrap().iter().map(|d| d["path"].clone()).collect();
    assert_eq!(paths, [json!("/x"), json!("/y")]);
    let (_, last) =
        s.call(Method::GET, &url(&format!("&after={}", two["next_cursor"].as_str().unwrap())), KEY, None).await;
    assert_eq!(last["data"][0]["path"], "/z");

    // A redacted version reads as the versions API shows it.
    let created = s.versions_of(&store, &m.id).await.pop().unwrap();
    s.client.update_memory(&store, &m.id, &update(Some("newer"), None), None).await.unwrap();
    s.client.redact_memory_version(&store, &created.id).await.unwrap();
    let (_, all) = s.call(Method::GET, &url("&after=0&limit=1"), KEY, None).await;
    assert_eq!(all["data"][0]["memory_version_id"], created.id.as_str());
    assert_eq!(
        (&all["data"][0]["path"], &all["data"][0]["content_sha256"], &all["data"][0]["content_size_bytes"]),
        (&Value::Null, &Value::Null, &Value::Null)
    );
    let (status, _) = s.call(Method::GET, &format!("/v1/memory_stores/{store}/changes?format=xml"), KEY, None).await;
    assert_eq!(status, 400, "an unknown format is refused");
}

#[tokio::test]
async fn feeds_are_scoped_like_the_memory_endpoints() {
    let s = TestServer::start().await;
    let attached = s.new_store("attached").await.id;
    let foreign = s.new_store("foreign").await.id;
    let (token, env_key) = s.read_only_sessions_token(&attached).await;

    let feed = |store: &MemoryStoreId| format!("/v1/memory_stores/{store}/changes?format=json&wait_ms=0");
    let memories = |store: &MemoryStoreId| format!("/v1/memory_stores/{store}/memories");
    for (who, credential) in [("the sessions token", &token), ("the environment key", &env_key)] {
        for store in [&attached, &foreign] {
            let fed = s.call(Method::GET, &feed(store), credential, None).await.0;
            let listed = s.call(Method::GET, &memories(store), credential, None).await.0;
            assert_eq!(fed, listed, "{who} on {store}: the feed answers as the memory listing does");
        }
    }
    assert_eq!(s.call(Method::GET, &feed(&attached), &token, None).await.0, 200, "an attached (read-only) store");
    assert_eq!(s.call(Method::GET, &feed(&foreign), &token, None).await.0, 403, "an unattached store");
    assert_eq!(s.call(Method::GET, &feed(&attached), &env_key, None).await.0, 403, "an environment key");
    assert_eq!(s.call(Method::GET, &feed(&attached), "sk-nobody", None).await.0, 401);

    // The token's stream sees its store's changes.
    let resp =
        s.raw(Method::GET, &format!("/v1/memory_stores/{attached}/changes")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut sse = Sse { body: Box::pin(resp.bytes_stream()), buf: String::new(), pings: 0 };
    write(&s, &attached, "/seen.md", "x").await;
    assert_eq!(sse.next().await.2["path"], "/seen.md");
}

#[tokio::test]
async fn idle_feeds_make_no_store_reads() {
    let s = TestServer::start().await;
    let store = s.new_store("idle").await.id;
    let busy = s.new_store("busy").await.id;
    let mut feeds = Vec::new();
    for _ in 0..5 {
        feeds.push(Sse::open(&s, &store, "", None).await);
    }
    // Opening is done once each stream's first read is: wait for the count to settle.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = s.state.change_feed_reads();
    let idle_for = Duration::from_millis(2500);
    // Writes to another store wake nobody here.
    for i in 0..5 {
        write(&s, &busy, &format!("/{i}"), "x").await;
    }
    tokio::time::sleep(idle_for).await;
    let reads = s.state.change_feed_reads() - before;
    let shared = std::env::var("MNEMO_TEST_DATABASE").is_ok_and(|v| v == "postgres");
    if shared {
        // PostgreSQL re-checks each watched store once per listener tick (1 s), however many
        // feeds watch it: a lost NOTIFY only delays.
        assert!(reads <= 2 * (idle_for.as_secs() + 1), "{reads} reads for 5 idle feeds of one store");
    } else {
        assert_eq!(reads, 0, "idle feeds read nothing");
    }
    // One change: the five feeds share one read (PostgreSQL's re-check may add one).
    write(&s, &store, "/wake", "x").await;
    for feed in &mut feeds {
        assert_eq!(feed.next().await.2["path"], "/wake");
    }
    let after_wake = s.state.change_feed_reads() - before - reads;
    assert!((1..=1 + u64::from(shared)).contains(&after_wake), "one read for all the feeds of a change ({after_wake})");
}

/// Feeds share a read only where it holds what they would read themselves: a version redacted
/// since is never sent from a read made before.
#[tokio::test]
async fn a_shared_read_never_sends_a_version_redacted_since() {
    let s = TestServer::start().await;
    let store = s.new_store("redacting").await.id;
    let mut watching = Sse::open(&s, &store, "?content=inline", None).await;
    write(&s, &store, "/before.md", "before").await;
    let cursor = watching.next().await.1;
    let m = write(&s, &store, "/secret.md", "the secret words").await;
    s.client.update_memory(&store, &m.id, &update(Some("public now"), None), None).await.unwrap();
    // A feed from the cursor reads both versions of /secret.md and keeps that read.
    let mut first = Sse::open(&s, &store, "?content=inline", Some(&cursor)).await;
    assert_eq!(first.next().await.2["content"], "the secret words");
    assert_eq!(first.next().await.2["content"], "public now");
    let secret = s.versions_of(&store, &m.id).await.pop().unwrap();
    s.client.redact_memory_version(&store, &secret.id).await.unwrap();
    // The same query a moment later reads again: the redacted version names nothing.
    let mut second = Sse::open(&s, &store, "?content=inline", Some(&cursor)).await;
    let (_, _, redacted) = second.next().await;
    assert_eq!(redacted["memory_version_id"], secret.id.as_str());
    assert_eq!((&redacted["path"], redacted.get("content")), (&Value::Null, None), "{redacted}");
    assert_eq!(second.next().await.2["content"], "public now");
    drop((watching, first));
}

/// Two servers on one database: a write through one is seen on the other's feed. On
/// PostgreSQL they are two stores on one schema (two replicas, hearing each other through
/// `NOTIFY`); on SQLite, two server states over one store.
#[tokio::test]
async fn a_write_through_one_replica_reaches_the_other_replicas_feed() {
    let mut keep = None;
    let (a, b): (Arc<dyn mnemo_store::Store>, Arc<dyn mnemo_store::Store>) =
        if std::env::var("MNEMO_TEST_DATABASE").is_ok_and(|v| v == "postgres") {
            use mnemo_store_tests::Postgres;
            let schema = Postgres::fresh_schema().await;
            let settings = Postgres::settings(&schema, mnemo_store::Limits::default());
            let a = mnemo_store_postgres::PostgresStore::open(&settings).await.unwrap();
            let b = mnemo_store_postgres::PostgresStore::open(&settings).await.unwrap();
            (Arc::new(a), Arc::new(b))
        } else {
            let opened = mnemo_store_tests::from_env().open(mnemo_store::Limits::default()).await;
            let one = Arc::clone(&opened.store);
            keep = Some(opened);
            (Arc::clone(&one), one)
        };
    a.ensure_api_key(mnemo_server::hash_credential(KEY), "test").await.unwrap();
    let serve = |store: Arc<dyn mnemo_store::Store>| async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let router = mnemo_server::router(mnemo_server::AppState::new(store));
        tokio::spawn(mnemo_server::serve(listener, router, std::future::pending()));
        base
    };
    let (base_a, base_b) = (serve(Arc::clone(&a)).await, serve(Arc::clone(&b)).await);
    let client_a = mnemo_client::Client::new(&base_a, KEY).unwrap().with_max_retries(0);
    let store = client_a
        .create_memory_store(&mnemo_api::CreateMemoryStore { name: "shared".into(), ..Default::default() })
        .await
        .unwrap()
        .id;

    let resp = reqwest::Client::new()
        .get(format!("{base_b}/v1/memory_stores/{store}/changes"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut on_b = Sse { body: Box::pin(resp.bytes_stream()), buf: String::new(), pings: 0 };
    let started = Instant::now();
    let m = client_a.create_memory(&store, "/from-a.md", "hello", None).await.unwrap();
    let (event, _, data) = on_b.next().await;
    assert_eq!((event.as_str(), &data["memory_id"]), ("memory.created", &json!(m.id.as_str())));
    assert!(started.elapsed() < Duration::from_secs(2), "within a second or so: {:?}", started.elapsed());
    a.close().await;
    b.close().await;
    drop(keep);
}

#[tokio::test]
async fn a_client_names_its_keep_alive_interval_within_bounds() {
    let s = TestServer::start().await;
    let store = s.new_store("notes").await.id;
    for bad in ["4", "301", "soon", "-5"] {
        let url = format!("/v1/memory_stores/{store}/changes?ping={bad}");
        let (status, body) = s.call(Method::GET, &url, KEY, None).await;
        assert_eq!(status, 400, "{bad}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert_eq!(message, format!("ping must be whole seconds from 5 to 300 (got `{bad}`)"));
    }
    // At 5 s a quiet feed hears a ping within 6 s (at the default 15 s it would not).
    let mut feed = Sse::open(&s, &store, "?ping=5", None).await;
    let started = Instant::now();
    assert!(feed.next_within(Duration::from_secs(6)).await.is_none(), "no change was made");
    assert!(feed.pings >= 1, "no ping in {:?}", started.elapsed());
}

#[tokio::test]
async fn a_stream_asked_for_it_carries_small_versions_content() {
    let s = TestServer::start().await;
    let store = s.new_store("notes").await.id;
    let (status, body) =
        s.call(Method::GET, &format!("/v1/memory_stores/{store}/changes?content=full"), KEY, None).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["message"], "content must be `inline` (got `full`)");

    let mut with = Sse::open(&s, &store, "?content=inline", None).await;
    let mut without = Sse::open(&s, &store, "", None).await;
    let small = write(&s, &store, "/small.md", "small bytes").await;
    let big = "x".repeat(70_000);
    write(&s, &store, "/big.md", &big).await;
    s.client.delete_memory(&store, &small.id, None).await.unwrap();
    let (_, _, created) = with.next().await;
    assert_eq!(created["content"], "small bytes", "{created}");
    assert_eq!(created["content_sha256"], small.content_sha256);
    let (_, _, large) = with.next().await;
    assert!(large.get("content").is_none(), "over 64 KiB: fetched, not inline");
    let (event, _, deleted) = with.next().await;
    assert_eq!(event, "memory.deleted");
    assert!(deleted.get("content").is_none());
    for _ in 0..3 {
        let (_, _, entry) = without.next().await;
        assert!(entry.get("content").is_none(), "only when asked: {entry}");
    }
}

#[tokio::test]
async fn a_writers_own_versions_come_back_without_their_content() {
    let s = TestServer::start().await;
    let store = s.new_store("notes").await.id;
    let (one, two) = ("writer-one-0123456789", "writer-two-0123456789");
    // The server remembers who wrote what while the store has a feed.
    let mut open = Sse::open_as(&s, &store, "?content=inline", None, Some(one)).await;
    let post = |path: String, body: Value, writer: Option<&'static str>| {
        let mut req = s.raw(Method::POST, &path).bearer_auth(KEY).json(&body);
        if let Some(writer) = writer {
            req = req.header("mnemo-writer", writer);
        }
        async move {
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 200);
            resp.json::<Value>().await.unwrap()
        }
    };
    let memories = format!("/v1/memory_stores/{store}/memories");
    // Writer one: a create, a batch of a create and an update, and an update; writer two: a
    // create; nobody named: a create.
    let a = post(memories.clone(), json!({"path": "/a.md", "content": "one's a"}), Some(one)).await;
    let batch = json!({"writes": [
        {"type": "create", "path": "/b.md", "content": "one's b"},
        {"type": "update", "memory_id": a["id"], "content": "one's a, again"},
    ]});
    post(format!("{memories}:batch"), batch, Some(one)).await;
    post(format!("{memories}/{}", a["id"].as_str().unwrap()), json!({"content": "one's a, third"}), Some(one)).await;
    post(memories.clone(), json!({"path": "/c.md", "content": "two's c"}), Some(two)).await;
    post(memories.clone(), json!({"path": "/d.md", "content": "nobody's d"}), None).await;
    // Read from the start once every write has been answered (a feed open during the writes may
    // see a version before its write's request has recorded the writer: it then sends the
    // content, as it always may).
    let mut feed_one = Sse::open_as(&s, &store, "?content=inline&after=0", None, Some(one)).await;
    let mut feed_two = Sse::open_as(&s, &store, "?content=inline&after=0", None, Some(two)).await;
    let mut anonymous = Sse::open(&s, &store, "?content=inline&after=0", None).await;
    let written = [
        ("one's a", Some(one)),
        ("one's b", Some(one)),
        ("one's a, again", Some(one)),
        ("one's a, third", Some(one)),
        ("two's c", Some(two)),
        ("nobody's d", None),
    ];
    for (content, by) in written {
        let digest = mnemo_api::content_sha256(content.as_bytes());
        for (feed, me) in [(&mut feed_one, Some(one)), (&mut feed_two, Some(two)), (&mut anonymous, None)] {
            let (_, _, entry) = feed.next().await;
            assert_eq!(entry["content_sha256"], digest.as_str(), "{entry}");
            if me.is_some() && me == by {
                assert!(entry.get("content").is_none(), "its own write comes back without content: {entry}");
            } else {
                assert_eq!(entry["content"], content, "another's write comes with its content: {entry}");
            }
        }
    }

    // A malformed id is refused, on the feed and on a write; the write is not made.
    for bad in ["short", "has spaces in it, 0123456789", &"x".repeat(65)] {
        let feed = s.raw(Method::GET, &format!("/v1/memory_stores/{store}/changes")).bearer_auth(KEY);
        let write = s.raw(Method::POST, &memories).bearer_auth(KEY).json(&json!({"path": "/e.md", "content": "e"}));
        for req in [feed, write] {
            let resp = req.header("mnemo-writer", bad).send().await.unwrap();
            assert_eq!(resp.status(), 400);
            let body: Value = resp.json().await.unwrap();
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.starts_with("mnemo-writer must be 16 to 64 ASCII letters"), "{message}");
        }
    }
    let listed = s.client.list_all_memories(&store, mnemo_api::View::Basic).await.unwrap();
    assert_eq!(listed.len(), 4, "a refused write wrote nothing");
    assert_eq!(open.next().await.2["content_sha256"], mnemo_api::content_sha256(b"one's a"));
}
