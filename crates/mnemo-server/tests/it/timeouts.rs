//! Slow and stalled clients: the header-read timeout, the body deadline, the connection cap,
//! and what they must leave alone (long polls, event streams, in-flight requests at shutdown).
//!
//! Raw `TcpStream`s play the misbehaving clients. Timings are only bounded generously from
//! above; the lower bounds asserted (a timeout never fires early) hold on any machine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use mnemo_server::{AppState, ServeConfig, hash_credential};
use mnemo_store::Store;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::common::{Fixtures, KEY, toolset};

/// How long any test waits for something that should happen; far above every timeout used.
const PATIENCE: Duration = Duration::from_secs(30);

/// A server with its own [`ServeConfig`].
struct Server {
    addr: SocketAddr,
    base: String,
    stop: Option<oneshot::Sender<()>>,
    served: JoinHandle<std::io::Result<()>>,
    _store: mnemo_store_tests::TestStore,
}

async fn start(config: ServeConfig) -> Server {
    let opened = mnemo_store_tests::from_env().open(Default::default()).await;
    let store: Arc<dyn Store> = Arc::clone(&opened.store);
    store.ensure_api_key(hash_credential(KEY), "test").await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let router = mnemo_server::router(AppState::new(store));
    let served = tokio::spawn(mnemo_server::serve_with(listener, router, config, async {
        let _ = stopped.await;
    }));
    Server { addr, base: format!("http://{addr}"), stop: Some(stop), served, _store: opened }
}

fn config(header_read: Duration, body: Duration, max_connections: usize) -> ServeConfig {
    ServeConfig {
        header_read_timeout: header_read,
        body_timeout: body,
        max_connections,
        // Every client here is 127.0.0.1; the per-address cap is tested in `fairness`.
        max_connections_per_address: 0,
        ..ServeConfig::default()
    }
}

impl Server {
    /// A well-behaved client. It never reuses a connection, so no request can race the
    /// server closing an idle one (a short header timeout is also a short idle timeout).
    fn http(&self) -> reqwest::Client {
        reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap()
    }

    async fn healthz(&self) -> u16 {
        self.http().get(format!("{}/healthz", self.base)).send().await.unwrap().status().as_u16()
    }
}

impl Fixtures for Server {
    async fn call(&self, method: Method, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.http().request(method, format!("{}{path}", self.base)).bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap())
    }
}

/// Reads until the server closes the connection (a reset counts), panicking after [`PATIENCE`].
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await {
            Err(_) => panic!("the server kept the connection open; got {:?}", String::from_utf8_lossy(&got)),
            Ok(Ok(0) | Err(_)) => return got,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one whole `/healthz` answer off a kept-alive connection.
async fn read_healthz_answer(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(br#"{"status":"ok"}"#) {
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut buf)).await.expect("an answer in time").unwrap();
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(got).unwrap()
}

/// Whether the peer is still connected and silent.
fn still_open(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(stream.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: mnemo\r\n\r\n";

#[tokio::test]
async fn a_client_stalled_in_its_headers_is_cut_off_while_others_are_served() {
    let timeout = Duration::from_secs(1);
    let s = start(config(timeout, Duration::from_secs(60), 64)).await;
    let started = Instant::now();
    let mut stalled = TcpStream::connect(s.addr).await.unwrap();
    stalled.write_all(b"POST /v1/memory_stores HTTP/1.1\r\nhost: mnemo\r\nx-api-").await.unwrap();
    let mut silent = TcpStream::connect(s.addr).await.unwrap();

    for _ in 0..3 {
        assert_eq!(s.healthz().await, 200, "a stalled client does not hold up others");
    }
    // Deterministic either way: the stalled client is still connected, or its time was up.
    assert!(still_open(&stalled) || started.elapsed() >= timeout);

    let got = read_until_closed(&mut stalled).await;
    assert!(started.elapsed() >= timeout, "cut off no sooner than the timeout");
    assert!(got.is_empty(), "closed without an answer: {:?}", String::from_utf8_lossy(&got));
    // A client that never sends a byte is an idle connection: closed the same way.
    assert!(read_until_closed(&mut silent).await.is_empty());
    assert_eq!(s.healthz().await, 200);
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_answered_408_and_the_connection_closed() {
    let timeout = Duration::from_secs(1);
    let s = start(config(Duration::from_secs(60), timeout, 64)).await;
    let started = Instant::now();
    let mut slow = TcpStream::connect(s.addr).await.unwrap();
    let head = format!(
        "POST /v1/memory_stores HTTP/1.1\r\nhost: mnemo\r\nx-api-key: {KEY}\r\n\
         content-type: application/json\r\ncontent-length: 64\r\n\r\n{{\"name\": \"half"
    );
    slow.write_all(head.as_bytes()).await.unwrap();

    let answer = String::from_utf8(read_until_closed(&mut slow).await).unwrap();
    assert!(started.elapsed() >= timeout, "cut off no sooner than the timeout");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("an HTTP answer: {answer:?}"));
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 408 "), "{head}");
    assert!(head.contains("\r\nconnection: close"), "{head}");
    assert!(head.contains("\r\nrequest-id: req_"), "{head}");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "timeout_error", "{body}");

    let (status, stores) = s.call(Method::GET, "/v1/memory_stores", KEY, None).await;
    assert_eq!((status, &stores["data"]), (200, &json!([])), "nothing was created");
}

#[tokio::test]
async fn connections_over_the_cap_wait_until_one_closes() {
    let s = start(config(Duration::from_secs(60), Duration::from_secs(60), 2)).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        // Served once, then idle on keep-alive: each holds a slot.
        let mut c = TcpStream::connect(s.addr).await.unwrap();
        c.write_all(HEALTHZ).await.unwrap();
        assert!(read_healthz_answer(&mut c).await.starts_with("HTTP/1.1 200 "));
        held.push(c);
    }

    let mut third = TcpStream::connect(s.addr).await.expect("the kernel completes the handshake");
    third.write_all(b"GET /healthz HTTP/1.1\r\nhost: mnemo\r\nconnection: close\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_secs(1), third.read(&mut buf)).await;
    assert!(early.is_err(), "no answer while two connections are held: {early:?}");

    drop(held.pop());
    let answer = String::from_utf8(read_until_closed(&mut third).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 "), "served once a slot is free: {answer:?}");
    // The connection still held keeps working.
    held[0].write_all(HEALTHZ).await.unwrap();
    assert!(read_healthz_answer(&mut held[0]).await.starts_with("HTTP/1.1 200 "));
}

#[tokio::test]
async fn long_polls_and_event_streams_outlive_both_timeouts() {
    let timeout = Duration::from_millis(400);
    let s = start(config(timeout, timeout, 64)).await;
    let (env, env_key) = s.new_environment_with_key().await;
    let poll = format!("/v1/environments/{env}/work/poll");

    // Nothing queued: the poll waits out its 999 ms, far past both timeouts.
    let started = Instant::now();
    let (status, got) = s.call(Method::GET, &format!("{poll}?block_ms=999"), &env_key, None).await;
    assert_eq!((status, got), (200, Value::Null));
    assert!(started.elapsed() >= Duration::from_millis(900));

    let agent = s.new_agent(toolset()).await;
    let (_, session) =
        s.call(Method::POST, "/v1/sessions", KEY, Some(json!({"agent": agent, "environment_id": env}))).await;
    let sid = session["id"].as_str().unwrap().to_owned();
    let (_, work) = s.call(Method::GET, &poll, &env_key, None).await;
    assert_eq!(work["type"], "work", "{work}");

    let resp =
        s.http().get(format!("{}/v1/sessions/{sid}/events/stream", s.base)).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    // Idle well past both timeouts (the stream's own pings come every 15 s).
    tokio::time::sleep(timeout * 5).await;
    let message = json!({"events": [{"type": "agent.message", "content": [{"type": "text", "text": "still here"}]}]});
    let (status, _) = s.call(Method::POST, &format!("/v1/sessions/{sid}/events"), KEY, Some(message)).await;
    assert_eq!(status, 200);
    let mut seen = String::new();
    while !seen.contains("still here") {
        let chunk = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .expect("the event in time")
            .expect("the stream is still open")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test]
async fn shutdown_finishes_the_request_in_flight_and_stops_accepting() {
    let mut s = start(ServeConfig::default()).await;
    let (env, env_key) = s.new_environment_with_key().await;

    let url = format!("{}/v1/environments/{env}/work/poll?block_ms=999", s.base);
    let (http, key) = (s.http(), env_key.clone());
    let poll = tokio::spawn(async move {
        http.get(url).bearer_auth(key).header("anthropic-worker-id", "w1").send().await.map(|r| r.status())
    });
    // The poll is in its handler once the store has seen the worker.
    let stats = format!("/v1/environments/{env}/work/stats");
    let deadline = Instant::now() + PATIENCE;
    while s.call(Method::GET, &stats, &env_key, None).await.1["workers_polling"] != 1 {
        assert!(Instant::now() < deadline, "the poll never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    s.stop.take().unwrap().send(()).unwrap();
    let served = tokio::time::timeout(PATIENCE, &mut s.served).await.expect("the server stops in time");
    served.unwrap().unwrap();
    assert_eq!(poll.await.unwrap().unwrap(), 200, "the in-flight long poll was answered");
    assert!(TcpStream::connect(s.addr).await.is_err(), "the listener is closed");
}
