//! A memory store's change feed (`GET /v1/memory_stores/{id}/changes`, a mnemo extension): the
//! SSE stream, the JSON long poll, and [`ChangeSubscription`], the stream kept open across
//! disconnects (resumed by cursor with `Last-Event-ID`, reconnected with [`Backoff`]).
//!
//! The hosted API has no feed and answers `404`: every call here turns that into a distinct
//! outcome (`Ok(None)`, [`FeedEvent::Unsupported`]) so a caller can fall back to interval sync.

use std::pin::Pin;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use mnemo_api::headers::WRITER_HEADER;
use mnemo_api::{MemoryChangeEvent, MemoryChangePage, MemoryStoreId};
use reqwest::Method;
use serde::Serialize;

use crate::sse::SseParser;
use crate::{Backoff, Client, ClientError, Jitter, Result, success};

/// Delays between reconnections of a [`ChangeSubscription`].
pub const FEED_BACKOFF: Backoff =
    Backoff::doubling(Duration::from_millis(250), Duration::from_secs(15)).with_jitter(Jitter::Shave(0.25));

/// The keep-alive interval a stream asks the server for (`ping`): long, because an idle feed's
/// only cost to the server is its pings (a thousand idle mounts cost it four times less CPU
/// than at the server's 15 s default), yet under the common 60 s idle timeout of proxies.
pub const FEED_PING: Duration = Duration::from_secs(55);

/// With nothing (not even a ping) heard for this long, a stream is taken as dead and
/// reconnected: two missed pings and a margin. (A server that ignores `ping` sends its own
/// every 15 s, which is sooner.)
pub const FEED_IDLE: Duration = Duration::from_secs(2 * 55 + 10);

/// A connection that lasted this long resets the back-off: the next drop reconnects at once.
const STABLE_CONNECTION: Duration = Duration::from_secs(10);

/// One open SSE change feed: each item is an entry and its cursor (the message's `id:`).
pub type ChangeStream = Pin<Box<dyn Stream<Item = Result<(String, MemoryChangeEvent)>> + Send>>;

#[derive(Serialize)]
struct StreamQuery<'a> {
    after: Option<&'a str>,
    ping: u64,
    /// `inline`: small versions' content comes with their entries.
    content: Option<&'static str>,
}

#[derive(Serialize)]
struct PollQuery<'a> {
    format: &'static str,
    after: Option<&'a str>,
    wait_ms: u64,
    limit: Option<u32>,
}

impl Client {
    /// Opens the store's SSE change feed once, after `after` (a cursor this feed handed out, sent
    /// as `Last-Event-ID`) or from now. `Ok(None)` when the server has no feed (`404`: the hosted
    /// API, or an unknown store). The stream ends when the server closes it; `ping`s and
    /// unknown event names are skipped, but they count as signs of life: a stream that hears
    /// nothing at all for [`FEED_IDLE`] yields [`ClientError::Stalled`].
    pub async fn memory_changes_stream(
        &self,
        store: &MemoryStoreId,
        after: Option<&str>,
        with_content: bool,
    ) -> Result<Option<ChangeStream>> {
        let path = format!("/v1/memory_stores/{store}/changes");
        let mut req = self
            .request(Method::GET, &path)
            .header("accept", "text/event-stream")
            .header(WRITER_HEADER, self.writer().as_str())
            .timeout(Duration::from_secs(24 * 3600));
        let content = with_content.then_some("inline");
        req = req.query(&StreamQuery { after, ping: FEED_PING.as_secs(), content });
        if let Some(cursor) = after {
            req = req.header("last-event-id", cursor);
        }
        let resp = match success(req.send().await.map_err(ClientError::Transport)?).await {
            Ok(resp) => resp,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let state = (resp.bytes_stream(), SseParser::default(), after.map(str::to_owned));
        let stream = futures::stream::unfold(state, |(mut bytes, mut parser, mut last_id)| async move {
            loop {
                if parser.is_refused() {
                    // The stream was refused (an oversized message): it ends here.
                    return None;
                }
                while let Some(message) = parser.next_raw() {
                    let message = match message {
                        Ok(m) => m,
                        Err(e) => return Some((Err(e), (bytes, parser, last_id))),
                    };
                    // As EventSource does, the last id seen stays the cursor of later messages.
                    if let Some(id) = &message.id {
                        last_id = Some(id.clone());
                    }
                    let known = matches!(
                        message.event.as_deref(),
                        Some("memory.created" | "memory.modified" | "memory.deleted")
                    );
                    if !known || message.is_skipped() {
                        continue;
                    }
                    let item = match (message.json::<MemoryChangeEvent>(), &last_id) {
                        (Ok(change), Some(cursor)) => Ok((cursor.clone(), change)),
                        (Ok(_), None) => {
                            Err(ClientError::Decode { status: 200, message: "change without a cursor (no id:)".into() })
                        }
                        (Err(e), _) => Err(e),
                    };
                    return Some((item, (bytes, parser, last_id)));
                }
                match tokio::time::timeout(FEED_IDLE, bytes.next()).await {
                    Ok(Some(Ok(chunk))) => parser.push(&chunk),
                    Ok(Some(Err(e))) => return Some((Err(ClientError::Transport(e)), (bytes, parser, last_id))),
                    Ok(None) => return None,
                    Err(_) => return Some((Err(ClientError::Stalled(FEED_IDLE)), (bytes, parser, last_id))),
                }
            }
        });
        Ok(Some(Box::pin(stream)))
    }

    /// The feed's JSON long poll: the changes after `after` (from now without it) as soon as
    /// there is one, or an empty page with the same cursor when `wait` ends (at most 60 s on the
    /// server). `Ok(None)` when the server has no feed (`404`).
    pub async fn memory_changes_poll(
        &self,
        store: &MemoryStoreId,
        after: Option<&str>,
        wait: Duration,
        limit: Option<u32>,
    ) -> Result<Option<MemoryChangePage>> {
        let path = format!("/v1/memory_stores/{store}/changes");
        let query = PollQuery { format: "json", after, wait_ms: wait.as_millis() as u64, limit };
        let outcome =
            self.send(|| self.request(Method::GET, &path).query(&query).timeout(wait + Duration::from_secs(30))).await;
        match outcome {
            Ok(page) => Ok(Some(page)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The store's change feed as one subscription that outlives disconnects: see
    /// [`ChangeSubscription`]. `after` is where to start (from now without it).
    pub fn subscribe_memory_changes(&self, store: MemoryStoreId, after: Option<String>) -> ChangeSubscription {
        ChangeSubscription {
            client: self.clone(),
            store,
            cursor: after,
            stream: None,
            connected_at: None,
            failures: 0,
            ended: false,
            with_content: false,
        }
    }
}

/// What a [`ChangeSubscription`] reports.
#[derive(Debug)]
pub enum FeedEvent {
    /// The feed is open (again). `resumed` is whether it picked up after a cursor: when it is
    /// `false` the feed started from now, and changes made before (or while disconnected
    /// without a cursor) must be found by other means (a full listing).
    Connected { resumed: bool },
    /// One entry, in the store's commit order; `cursor` is where a reconnection resumes.
    Change { cursor: String, change: MemoryChangeEvent },
    /// The server has no change feed (`404`: the hosted API, or the store is gone). Final.
    Unsupported,
    /// The server refused the feed for good (another permanent 4xx: a dead credential, a
    /// store not attached to the session). Final.
    Refused(ClientError),
}

/// The change feed of one store, reconnected after any drop, stall ([`FEED_IDLE`]) or transient
/// failure with [`FEED_BACKOFF`], resuming after the last cursor it handed out (so nothing is
/// missed or repeated across reconnections). After [`FeedEvent::Unsupported`] or
/// [`FeedEvent::Refused`] it reports `Unsupported` for ever.
///
/// [`next`](Self::next) is not cancel-safe across a reconnection; drive it from one task.
pub struct ChangeSubscription {
    client: Client,
    store: MemoryStoreId,
    cursor: Option<String>,
    stream: Option<ChangeStream>,
    connected_at: Option<Instant>,
    failures: u32,
    ended: bool,
    /// Asks for small versions' content with their entries (`content=inline`).
    with_content: bool,
}

impl std::fmt::Debug for ChangeSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeSubscription")
            .field("store", &self.store)
            .field("cursor", &self.cursor)
            .field("connected", &self.stream.is_some())
            .finish_non_exhaustive()
    }
}

/// Failed connections in a row after which a feed says so at `warn` (once).
const FEED_FAILURES_TOLD: u32 = 3;

impl ChangeSubscription {
    /// Asks the server to send small versions' content with their entries
    /// ([`MemoryChangeEvent::content`]); a server that does not know the option sends none.
    pub fn with_content(mut self) -> Self {
        self.with_content = true;
        self
    }

    /// The cursor a reconnection resumes after (the last change handed out, or the start).
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// The next thing worth knowing: a (re)connection, a change, or the end of the feed.
    pub async fn next(&mut self) -> FeedEvent {
        loop {
            if self.ended {
                return FeedEvent::Unsupported;
            }
            let Some(stream) = &mut self.stream else {
                if self.failures > 0 {
                    tokio::time::sleep(FEED_BACKOFF.delay(self.failures - 1)).await;
                }
                match self.client.memory_changes_stream(&self.store, self.cursor.as_deref(), self.with_content).await {
                    Ok(Some(stream)) => {
                        self.stream = Some(stream);
                        self.connected_at = Some(Instant::now());
                        return FeedEvent::Connected { resumed: self.cursor.is_some() };
                    }
                    Ok(None) => {
                        self.ended = true;
                        return FeedEvent::Unsupported;
                    }
                    Err(e) if e.is_permanent() => {
                        self.ended = true;
                        return FeedEvent::Refused(e);
                    }
                    Err(e) => {
                        if self.failures + 1 == FEED_FAILURES_TOLD {
                            // Said once, not at every retry: a feed the server keeps refusing
                            // (its stream cap reached) leaves a mount on its interval sync.
                            tracing::warn!(memory_store_id = %self.store, "the memory change feed cannot connect ({e}); still trying, syncing on the interval meanwhile");
                        } else {
                            tracing::debug!(memory_store_id = %self.store, failures = self.failures, "change feed connection failed: {e}");
                        }
                        self.failures += 1;
                        continue;
                    }
                }
            };
            // The stream itself gives up after FEED_IDLE without a byte (pings included).
            match stream.next().await {
                Some(Ok((cursor, change))) => {
                    self.cursor = Some(cursor.clone());
                    return FeedEvent::Change { cursor, change };
                }
                outcome => {
                    match outcome {
                        Some(Err(e)) => tracing::debug!(memory_store_id = %self.store, "change feed failed: {e}"),
                        _ => tracing::debug!(memory_store_id = %self.store, "change feed closed by the server"),
                    }
                    self.stream = None;
                    let stable = self.connected_at.take().is_some_and(|t| t.elapsed() >= STABLE_CONNECTION);
                    self.failures = if stable { 0 } else { self.failures + 1 };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use mnemo_api::{MemoryId, MemoryVersionId};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::testing::{json, serve};

    fn change_json(store: &MemoryStoreId, path: &str) -> String {
        serde_json::json!({
            "memory_id": MemoryId::generate(), "memory_store_id": store,
            "memory_version_id": MemoryVersionId::generate(), "operation": "created",
            "path": path, "content_sha256": "ab", "content_size_bytes": 2,
            "created_at": "2026-12-01T10:00:00.000000Z",
        })
        .to_string()
    }

    fn sse(body: &str) -> String {
        format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}")
    }

    const NOT_FOUND: &str = r#"{"type":"error","error":{"type":"not_found_error","message":"Not found"}}"#;

    #[tokio::test]
    async fn a_subscription_yields_typed_changes_and_resumes_after_the_last_cursor() {
        let store = MemoryStoreId::generate();
        let first = sse(&format!(
            "event: ping\ndata: {{}}\n\nevent: memory.created\nid: 7\ndata: {}\n\nevent: memory.future\nid: 8\ndata: {{}}\n\nevent: memory.created\nid: 9\ndata: {}\n\n",
            change_json(&store, "/a.md"),
            change_json(&store, "/b.md"),
        ));
        let second = sse(&format!("event: memory.created\nid: 12\ndata: {}\n\n", change_json(&store, "/c.md")));
        let (base, seen) = serve(vec![first, second]).await;
        let mut sub = Client::new(&base, "k").unwrap().subscribe_memory_changes(store.clone(), None);
        assert!(matches!(sub.next().await, FeedEvent::Connected { resumed: false }));
        let mut paths = Vec::new();
        for expected in ["7", "9"] {
            match sub.next().await {
                FeedEvent::Change { cursor, change } => {
                    assert_eq!(cursor, expected);
                    assert_eq!(change.memory_store_id, store);
                    paths.push(change.path.unwrap());
                }
                other => panic!("expected a change, got {other:?}"),
            }
        }
        // The server closed the stream: the subscription reconnects after cursor 9.
        assert!(matches!(sub.next().await, FeedEvent::Connected { resumed: true }));
        match sub.next().await {
            FeedEvent::Change { cursor, change } => {
                assert_eq!(cursor, "12");
                paths.push(change.path.unwrap());
            }
            other => panic!("expected a change, got {other:?}"),
        }
        assert_eq!(paths, ["/a.md", "/b.md", "/c.md"]);
        let seen = seen.lock().unwrap().clone();
        // The stream asks for the long keep-alive interval.
        let line = format!("get /v1/memory_stores/{store}/changes?ping=55 http/1.1").to_lowercase();
        assert!(seen[0].starts_with(&line), "{}", seen[0]);
        assert!(seen[1].contains("?after=9&ping=55 "), "{}", seen[1]);
        assert!(!seen[0].contains("last-event-id"), "{}", seen[0]);
        assert!(seen[0].contains("anthropic-beta:") && seen[0].contains("authorization: bearer k"), "{}", seen[0]);
        assert!(seen[1].contains("last-event-id: 9\r\n"), "{}", seen[1]);
    }

    /// A stream that sends its headers and then a ping every `ping` (or nothing, without),
    /// for every connection; counts the connections.
    async fn pinging(ping: Option<Duration>) -> (String, Arc<Mutex<usize>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let count = Arc::new(Mutex::new(0));
        let seen = Arc::clone(&count);
        tokio::spawn(async move {
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                *seen.lock().unwrap() += 1;
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = sock.read(&mut buf).await;
                    let head =
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                    if sock.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let Some(every) = ping else { return std::future::pending().await };
                    loop {
                        tokio::time::sleep(every).await;
                        let msg = "event: ping\ndata: {}\n\n";
                        let chunk = format!("{:x}\r\n{msg}\r\n", msg.len());
                        if sock.write_all(chunk.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (base, count)
    }

    /// Regression: pings were skipped before the idle check saw them, so a quiet store's feed
    /// was dropped and reopened every 45 s (and each reopening asked for a full sync).
    #[tokio::test(start_paused = true)]
    async fn pings_keep_a_quiet_feed_open_and_silence_reopens_it() {
        let store = MemoryStoreId::generate();
        let (base, connections) = pinging(Some(FEED_PING)).await;
        let mut sub = Client::new(&base, "k").unwrap().subscribe_memory_changes(store.clone(), None);
        assert!(matches!(sub.next().await, FeedEvent::Connected { resumed: false }));
        let quiet = tokio::time::timeout(FEED_IDLE * 4, sub.next()).await;
        assert!(quiet.is_err(), "nothing to report while pings arrive: {quiet:?}");
        assert_eq!(*connections.lock().unwrap(), 1, "the feed was never reopened");

        let (base, connections) = pinging(None).await;
        let mut sub = Client::new(&base, "k").unwrap().subscribe_memory_changes(store, None);
        assert!(matches!(sub.next().await, FeedEvent::Connected { resumed: false }));
        let reopened = tokio::time::timeout(FEED_IDLE * 2, sub.next()).await;
        assert!(matches!(reopened, Ok(FeedEvent::Connected { resumed: false })), "{reopened:?}");
        assert_eq!(*connections.lock().unwrap(), 2);
    }

    #[tokio::test]
    async fn transient_failures_are_retried_and_a_404_means_no_feed() {
        let store = MemoryStoreId::generate();
        let busy = r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#;
        let (base, seen) =
            serve(vec![json("529 Overloaded", busy), sse(": hi\n\n"), json("404 Not Found", NOT_FOUND)]).await;
        let client = Client::new(&base, "k").unwrap().with_max_retries(0);
        let mut sub = client.subscribe_memory_changes(store.clone(), Some("3".into()));
        assert!(matches!(sub.next().await, FeedEvent::Connected { resumed: true }));
        // That stream ends at once; the reconnection finds no feed, which is final.
        assert!(matches!(sub.next().await, FeedEvent::Unsupported));
        assert!(matches!(sub.next().await, FeedEvent::Unsupported));
        assert_eq!(seen.lock().unwrap().len(), 3);
        assert!(seen.lock().unwrap().iter().all(|r| r.contains("last-event-id: 3\r\n")));
    }

    #[tokio::test]
    async fn a_permanent_refusal_ends_the_subscription() {
        let denied = r#"{"type":"error","error":{"type":"permission_error","message":"no"}}"#;
        let (base, _) = serve(vec![json("403 Forbidden", denied)]).await;
        let mut sub = Client::new(&base, "k").unwrap().subscribe_memory_changes(MemoryStoreId::generate(), None);
        assert!(matches!(sub.next().await, FeedEvent::Refused(e) if e.status() == Some(403)));
        assert!(matches!(sub.next().await, FeedEvent::Unsupported));
    }

    #[tokio::test]
    async fn the_long_poll_reads_a_page_or_no_feed() {
        let store = MemoryStoreId::generate();
        let page = format!(r#"{{"data":[{}],"next_cursor":"15"}}"#, change_json(&store, "/x.md"));
        let (base, seen) = serve(vec![json("200 OK", &page), json("404 Not Found", NOT_FOUND)]).await;
        let client = Client::new(&base, "k").unwrap();
        let got = client.memory_changes_poll(&store, Some("4"), Duration::from_millis(1500), Some(10)).await.unwrap();
        let got = got.expect("a page");
        assert_eq!((got.data.len(), got.next_cursor.as_str()), (1, "15"));
        assert_eq!(got.data[0].path.as_deref(), Some("/x.md"));
        assert!(seen.lock().unwrap()[0].contains("?format=json&after=4&wait_ms=1500&limit=10 "));
        assert!(client.memory_changes_poll(&store, None, Duration::ZERO, None).await.unwrap().is_none());
        assert!(client.memory_changes_stream(&store, None, false).await.is_err(), "the server is gone now");
    }
}
