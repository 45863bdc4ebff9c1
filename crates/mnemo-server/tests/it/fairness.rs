//! Fair connections: one credential cannot hold more than its share of streams, streams cannot
//! take the connections other requests need, one address cannot hold more than its share of
//! connections, and a connection that sends nothing is closed soon.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use mnemo_server::{ServeConfig, StreamLimits};
use reqwest::Method;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{KEY, TestServer};
use crate::work::world_on;

/// Bounds a step that would hang on a server without these limits (a client waiting in the
/// listen backlog forever): the test fails instead of hanging. Not a measure of speed.
const HANG_GUARD: Duration = Duration::from_secs(30);

fn stream_path(session: &str) -> String {
    format!("/v1/sessions/{session}/events/stream")
}

/// A client whose every request has a connection of its own (nothing is pooled), from `from`.
fn fresh_client(from: &str) -> reqwest::Client {
    reqwest::Client::builder().pool_max_idle_per_host(0).local_address(from.parse::<IpAddr>().unwrap()).build().unwrap()
}

#[tokio::test]
async fn streams_past_a_credentials_cap_are_refused_with_429() {
    let limits = StreamLimits { per_credential: 3, total: 100 };
    let s = TestServer::configured(Default::default(), |state| state.with_stream_limits(limits)).await;
    let w = world_on(s).await;
    let (session, _, token) = w.leased().await;
    let client = fresh_client("127.0.0.1");
    let url = |path: &str| format!("{}{path}", w.s.base);

    let mut held = Vec::new();
    for _ in 0..3 {
        let open = client.get(url(&stream_path(&session))).bearer_auth(&token).send().await.unwrap();
        assert_eq!(open.status(), 200, "within its cap a sessions token streams");
        held.push(open);
    }
    let refused = client.get(url(&stream_path(&session))).bearer_auth(&token).send().await.unwrap();
    assert_eq!(refused.status(), 429, "the fourth stream of one token is refused");
    assert!(refused.headers().get("retry-after").is_some(), "it says when to retry");
    assert_eq!(refused.headers()["connection"], "close", "the refused connection is not kept");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("3 open streams"), "{message}");

    // The change feed and its long poll count against the same cap.
    let feed = format!("/v1/memory_stores/{}/changes", w.rw_store);
    let sse = client.get(url(&feed)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(sse.status(), 429);
    let poll = client.get(url(&format!("{feed}?format=json&wait_ms=10"))).bearer_auth(&token).send().await.unwrap();
    assert_eq!(poll.status(), 429);

    // Other credentials have caps of their own, and ordinary requests are not streams.
    let other = client.get(url(&stream_path(&session))).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(other.status(), 200, "an API key's streams are counted apart");
    let (status, _) = w.s.call(Method::GET, &format!("/v1/sessions/{session}"), &token, None).await;
    assert_eq!(status, 200, "the token's ordinary requests still pass");
    drop(held);
}

/// A live transcript in the console holds a connection like an API stream: it counts among the
/// streams of the API key the person signed in with.
#[tokio::test]
async fn console_live_transcripts_count_with_their_keys_streams() {
    let limits = StreamLimits { per_credential: 2, total: 100 };
    let s = TestServer::configured(Default::default(), |state| state.with_stream_limits(limits)).await;
    let w = world_on(s).await;
    let (session, _, _) = w.leased().await;
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let (status, _, cookie) = crate::auth::console_sign_in(&w.s, &client, KEY).await;
    assert_eq!(status, 303);
    let cookie = cookie.expect("signed in");
    let live = |client: &reqwest::Client| {
        client.get(format!("{}/console/sessions/{session}/live", w.s.base)).header("cookie", cookie.clone()).send()
    };
    let api = client.get(format!("{}{}", w.s.base, stream_path(&session))).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(api.status(), 200);
    let first = live(&client).await.unwrap();
    assert_eq!(first.status(), 200, "the key's second stream: a live transcript");
    let refused = live(&client).await.unwrap();
    assert_eq!(refused.status(), 429, "a third stream of the key, API or console, is refused");
    assert!(refused.headers().get("retry-after").is_some());
    drop(first);
    // The closed transcript's place is freed once the server notices (its next write fails).
    let reopened = tokio::time::timeout(HANG_GUARD, async {
        loop {
            let again = live(&client).await.unwrap();
            if again.status() == 200 {
                return again;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("a closed transcript frees its place");
    drop((api, reopened));
}

/// The finding: at `--max-connections 20`, a client holding many streams with one sessions
/// token made health checks fail for everyone. Now streams stop at their share and the rest
/// of the connections serve health checks and ordinary requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_holding_many_streams_cannot_starve_health_checks() {
    let serve = ServeConfig {
        max_connections: 20,
        // Every client of this test shares 127.0.0.1: the per-address cap is tested apart.
        max_connections_per_address: 0,
        ..ServeConfig::default()
    };
    let limits = StreamLimits::for_connections(20);
    let s = TestServer::serving(Default::default(), |state| state.with_stream_limits(limits), serve).await;
    let w = world_on(s).await;
    let (session, _, token) = w.leased().await;
    let attacker = fresh_client("127.0.0.1");
    let url = |path: &str| format!("{}{path}", w.s.base);

    let (mut held, mut refused) = (Vec::new(), 0);
    for _ in 0..30 {
        let req = attacker.get(url(&stream_path(&session))).bearer_auth(&token).send();
        let answer = tokio::time::timeout(HANG_GUARD, req).await.expect("a stream request is answered").unwrap();
        match answer.status().as_u16() {
            200 => held.push(answer),
            429 | 529 => refused += 1,
            other => panic!("unexpected answer {other}"),
        }
    }
    assert!(held.len() <= limits.total, "streams stop at their share: {} held", held.len());
    assert_eq!(held.len() + refused, 30);

    let others = fresh_client("127.0.0.1");
    for _ in 0..25 {
        let health = tokio::time::timeout(HANG_GUARD, others.get(url("/healthz")).send())
            .await
            .expect("a health check is answered while the streams are held")
            .unwrap();
        assert_eq!(health.status(), 200);
        let listing = tokio::time::timeout(HANG_GUARD, others.get(url("/v1/memory_stores")).bearer_auth(KEY).send())
            .await
            .expect("an ordinary request is answered while the streams are held")
            .unwrap();
        assert_eq!(listing.status(), 200);
    }
    drop(held);
}

/// Opens a connection to `to` from `from` (any address of 127.0.0.0/8 is this machine).
async fn connect_from(from: &str, to: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from.parse().unwrap(), 0)).unwrap();
    socket.connect(to).await.unwrap()
}

/// Sends a health check on `conn` and reads the answer's head (status line and headers).
async fn health_on(conn: &mut tokio::net::TcpStream) -> String {
    conn.write_all(b"GET /healthz HTTP/1.1\r\nhost: mnemo\r\nconnection: close\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(HANG_GUARD, conn.read_to_end(&mut answer)).await.expect("an answer").unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn one_address_holds_at_most_its_share_of_connections() {
    let serve = ServeConfig { max_connections: 20, max_connections_per_address: 3, ..ServeConfig::default() };
    let s = TestServer::serving(Default::default(), |state| state, serve).await;
    let at: SocketAddr = s.base.strip_prefix("http://").unwrap().parse().unwrap();
    // Three connections from 127.0.0.1 in the middle of a request: the address's share.
    let mut holding = Vec::new();
    for _ in 0..3 {
        let mut conn = connect_from("127.0.0.1", at).await;
        conn.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
        holding.push(conn);
    }
    // Each connection is counted once it is accepted: a request on a fresh one proves it.
    let mut fourth = connect_from("127.0.0.1", at).await;
    let refused = health_on(&mut fourth).await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert!(refused.contains("retry-after: 1"), "{refused}");
    assert!(refused.contains("rate_limit_error") && refused.contains("3 connections"), "{refused}");

    let mut elsewhere = connect_from("127.0.0.2", at).await;
    let served = health_on(&mut elsewhere).await;
    assert!(served.starts_with("HTTP/1.1 200"), "another address is served: {served}");

    // A closed connection gives its place back.
    drop(holding.pop());
    let mut again = None;
    for _ in 0..200 {
        let mut conn = connect_from("127.0.0.1", at).await;
        let answer = health_on(&mut conn).await;
        if answer.starts_with("HTTP/1.1 200") {
            again = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "the address got its place back");
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_long_before_the_header_timeout() {
    let serve = ServeConfig {
        first_byte_timeout: Duration::from_millis(200),
        header_read_timeout: Duration::from_secs(3600),
        max_connections: 1,
        max_connections_per_address: 0,
        ..ServeConfig::default()
    };
    let s = TestServer::serving(Default::default(), |state| state, serve).await;
    let at: SocketAddr = s.base.strip_prefix("http://").unwrap().parse().unwrap();
    let mut silent = connect_from("127.0.0.1", at).await;
    let mut buf = [0u8; 16];
    let closed = tokio::time::timeout(HANG_GUARD, silent.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0) | Err(_))), "the silent connection was closed: {closed:?}");
    // Its place, the only one, serves the next client.
    let mut next = connect_from("127.0.0.1", at).await;
    assert!(health_on(&mut next).await.starts_with("HTTP/1.1 200"));
}
