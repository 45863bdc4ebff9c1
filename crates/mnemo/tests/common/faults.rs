//! A fault-injecting HTTP/1.1 proxy for the end-to-end tests: it listens on 127.0.0.1:0,
//! forwards to a server, and per request draws a fault from a seeded RNG — delays, resets
//! (RST: zero linger, then drop), half-closed and stalled connections, truncated responses, and bursts of `5xx` the
//! proxy answers itself. It reads request and response boundaries (`content-length`; a chunked
//! or unbounded response, such as an SSE stream, is piped through to the end of the
//! connection), so keep-alive connections get a fresh draw per request. Each request goes to
//! the server on a connection of its own.
//!
//! The seed: `MNEMO_FAULT_SEED=<n>` or `random`, else the test's fixed one; it is always printed
//! so a failure can be replayed.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The kinds of fault, as counted in [`Proxy::counts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// The request is held back before it is forwarded.
    Delay,
    /// RST before the request reaches the server.
    ResetBefore,
    /// RST after the server answered: the server processed it, the client never hears.
    ResetAfter,
    /// The client's write side is shut (it reads EOF) before the request is forwarded.
    HalfClose,
    /// The request is read and never answered (for up to the stall cap, then RST).
    Stall,
    /// Part of the server's response is forwarded, then the connection is closed.
    Truncate,
    /// A `503`, `502` or `500` answered by the proxy, as part of a burst.
    Status5xx,
}

/// The chance of each fault per request, and its bounds.
#[derive(Debug, Clone)]
pub struct Plan {
    pub delay: f64,
    pub reset_before: f64,
    pub reset_after: f64,
    pub half_close: f64,
    pub stall: f64,
    pub truncate: f64,
    /// The chance a request starts a burst of 1–`burst_max` proxy-made `5xx`s.
    pub burst: f64,
    pub burst_max: u32,
    pub max_delay: Duration,
    /// How long a stalled connection is held if the client does not give up first.
    pub stall_cap: Duration,
    /// Faults dealt once each to the first request whose `METHOD /path` contains the text, whether
    /// or not random faults are active (a scenario that must hit one exact request).
    pub once: Vec<(&'static str, Fault)>,
}

impl Plan {
    /// No random faults at all: only what [`Plan::once`] names.
    pub fn quiet() -> Self {
        Self {
            delay: 0.0,
            reset_before: 0.0,
            reset_after: 0.0,
            half_close: 0.0,
            stall: 0.0,
            truncate: 0.0,
            burst: 0.0,
            ..Self::default()
        }
    }
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            delay: 0.08,
            reset_before: 0.03,
            reset_after: 0.03,
            half_close: 0.02,
            stall: 0.02,
            truncate: 0.03,
            burst: 0.03,
            burst_max: 3,
            max_delay: Duration::from_millis(400),
            stall_cap: Duration::from_secs(2),
            once: Vec::new(),
        }
    }
}

/// The seed from `MNEMO_FAULT_SEED` (a number or `random`), else `fixed`; printed either way.
pub fn seed(fixed: u64) -> u64 {
    let seed = match std::env::var("MNEMO_FAULT_SEED").ok().as_deref().map(str::trim) {
        None | Some("") => fixed,
        Some("random") => rand::random(),
        Some(n) => n.parse().unwrap_or_else(|_| panic!("MNEMO_FAULT_SEED={n:?} is neither a number nor `random`")),
    };
    eprintln!("fault seed: {seed} (replay with MNEMO_FAULT_SEED={seed})");
    seed
}

/// How many rounds a test runs: `MNEMO_FAULT_ROUNDS`, else 1.
pub fn rounds() -> u64 {
    std::env::var("MNEMO_FAULT_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(1).max(1)
}

struct Shared {
    upstream: SocketAddr,
    plan: Plan,
    seed: u64,
    /// Faults are drawn only while this holds.
    active: AtomicBool,
    /// Proxy-made `5xx`s still due in the current burst.
    burst_left: AtomicU32,
    connections: AtomicU64,
    requests: AtomicU64,
    counts: Mutex<BTreeMap<Fault, u64>>,
    /// Non-idempotent requests (POST/DELETE) the server processed whose answer was lost.
    lost_answers: Mutex<Vec<String>>,
    /// `MNEMO_FAULT_TRACE` is set: each request and its fault are printed.
    trace: bool,
    /// What is left of [`Plan::once`].
    once: Mutex<Vec<(&'static str, Fault)>>,
}

impl Shared {
    fn count(&self, fault: Fault) {
        *self.counts.lock().unwrap().entry(fault).or_default() += 1;
    }
}

/// A running proxy; it stops accepting when dropped.
pub struct Proxy {
    pub base: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy in front of `upstream` (`http://127.0.0.1:port`).
    pub async fn start(upstream: &str, seed: u64, plan: Plan) -> Self {
        let addr = upstream.trim_start_matches("http://").trim_end_matches('/');
        let upstream: SocketAddr = addr.parse().unwrap_or_else(|_| panic!("not an address: {upstream}"));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            upstream,
            seed,
            active: AtomicBool::new(true),
            burst_left: AtomicU32::new(0),
            connections: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            counts: Mutex::new(BTreeMap::new()),
            lost_answers: Mutex::new(Vec::new()),
            trace: std::env::var_os("MNEMO_FAULT_TRACE").is_some(),
            once: Mutex::new(plan.once.clone()),
            plan,
        });
        let s = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let n = s.connections.fetch_add(1, Ordering::Relaxed);
                // One RNG per connection, from the seed and the connection's number.
                let rng = StdRng::seed_from_u64(s.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                tokio::spawn(serve(Arc::clone(&s), conn, rng));
            }
        });
        Self { base, shared, task }
    }

    /// Stops (false) or resumes (true) injecting faults; requests are forwarded either way.
    pub fn set_active(&self, active: bool) {
        self.shared.active.store(active, Ordering::SeqCst);
        if !active {
            self.shared.burst_left.store(0, Ordering::SeqCst);
        }
    }

    /// Faults injected so far, by kind.
    pub fn counts(&self) -> BTreeMap<Fault, u64> {
        self.shared.counts.lock().unwrap().clone()
    }

    pub fn total_faults(&self) -> u64 {
        self.counts().values().sum()
    }

    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// The POST/DELETE requests (`METHOD path`) the server processed but whose answer the
    /// client never got: the retries the store's rules must recognise.
    pub fn lost_answers(&self) -> Vec<String> {
        self.shared.lost_answers.lock().unwrap().clone()
    }

    /// A one-line summary for the test's output.
    pub fn summary(&self) -> String {
        format!(
            "seed {} · {} requests on {} connections · faults {:?} · {} non-idempotent answers lost",
            self.shared.seed,
            self.requests(),
            self.shared.connections.load(Ordering::Relaxed),
            self.counts(),
            self.lost_answers().len()
        )
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One HTTP message head and what follows it.
struct Head {
    bytes: Vec<u8>,
    /// The first line (`GET /path HTTP/1.1` or `HTTP/1.1 200 OK`).
    line: String,
    length: Length,
}

enum Length {
    Fixed(usize),
    /// Chunked or delimited by the end of the connection.
    Unbounded,
}

/// Reads one message head from `conn`, keeping any bytes past it in `buf`; `None` at a clean
/// end of the connection.
async fn read_head(conn: &mut TcpStream, buf: &mut Vec<u8>, is_request: bool) -> Option<Head> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let bytes: Vec<u8> = buf.drain(..end + 4).collect();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let mut lines = text.split("\r\n");
            let line = lines.next().unwrap_or_default().to_owned();
            let mut length = if is_request { Length::Fixed(0) } else { Length::Unbounded };
            for header in lines {
                let Some((name, value)) = header.split_once(':') else { continue };
                let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
                if name == "content-length" {
                    length = Length::Fixed(value.parse().ok()?);
                } else if name == "transfer-encoding" && value.to_ascii_lowercase().contains("chunked") {
                    length = Length::Unbounded;
                }
            }
            if !is_request {
                let status: u16 = line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(200);
                if status == 204 || status == 304 || (100..200).contains(&status) {
                    length = Length::Fixed(0);
                }
            }
            return Some(Head { bytes, line, length });
        }
        let mut chunk = [0u8; 16 * 1024];
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Reads exactly `n` body bytes (some may already be in `buf`).
async fn read_body(conn: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> Option<Vec<u8>> {
    while buf.len() < n {
        let mut chunk = [0u8; 16 * 1024];
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
        }
    }
    Some(buf.drain(..n).collect())
}

fn is_chunked(head: &[u8]) -> bool {
    String::from_utf8_lossy(head)
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.to_ascii_lowercase().contains("chunked"))
}

/// Reads a chunked body to its last chunk, framing included (no trailers: mnemo sends none).
async fn read_chunked(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = loop {
            if let Some(at) = buf.windows(2).position(|w| w == b"\r\n") {
                break at;
            }
            let mut chunk = [0u8; 16 * 1024];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(k) => buf.extend_from_slice(&chunk[..k]),
            }
        };
        let size_text = std::str::from_utf8(&buf[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        let framed = read_body(conn, buf, line_end + 2 + size + 2).await?;
        out.extend_from_slice(&framed);
        if size == 0 {
            return Some(out);
        }
    }
}

fn reset(conn: TcpStream) {
    let _ = conn.set_zero_linger();
    drop(conn);
}

/// Serves one client connection, request by request.
async fn serve(s: Arc<Shared>, mut client: TcpStream, mut rng: StdRng) {
    let mut cbuf = Vec::new();
    loop {
        let Some(head) = read_head(&mut client, &mut cbuf, true).await else { return };
        let Length::Fixed(n) = head.length else {
            // A chunked request body: not something mnemo's clients send. Refuse it loudly.
            let _ = client.write_all(b"HTTP/1.1 501 Not Implemented\r\ncontent-length: 0\r\n\r\n").await;
            return;
        };
        let Some(body) = read_body(&mut client, &mut cbuf, n).await else { return };
        s.requests.fetch_add(1, Ordering::Relaxed);
        let method = head.line.split(' ').next().unwrap_or_default().to_owned();
        let target = head.line.split(' ').nth(1).unwrap_or_default().to_owned();
        let what = format!("{method} {}", target.split('?').next().unwrap_or_default());
        let non_idempotent = method == "POST" || method == "DELETE";

        let fault = draw(&s, &mut rng, &what);
        if let Some(f) = fault {
            s.count(f);
        }
        if s.trace {
            eprintln!("fault proxy: {what} → {fault:?}");
        }
        match fault {
            Some(Fault::Delay) => {
                let ms = rng.random_range(1..=s.plan.max_delay.as_millis().max(1) as u64);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Some(Fault::ResetBefore) => return reset(client),
            Some(Fault::HalfClose) => {
                let _ = client.shutdown().await;
                // Drain whatever the client still sends, then end.
                let mut sink = [0u8; 4096];
                while let Ok(k) = tokio::time::timeout(s.plan.stall_cap, client.read(&mut sink)).await {
                    if matches!(k, Ok(0) | Err(_)) {
                        break;
                    }
                }
                return;
            }
            Some(Fault::Stall) => {
                let mut sink = [0u8; 4096];
                let _ = tokio::time::timeout(s.plan.stall_cap, async {
                    while !matches!(client.read(&mut sink).await, Ok(0) | Err(_)) {}
                })
                .await;
                return reset(client);
            }
            Some(Fault::Status5xx) => {
                let status =
                    ["503 Service Unavailable", "502 Bad Gateway", "500 Internal Server Error"][rng.random_range(0..3)];
                let body = r#"{"type":"error","error":{"type":"api_error","message":"injected by the fault proxy"}}"#;
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if client.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                continue;
            }
            _ => {}
        }

        // Forward the request on a new upstream connection: the server closes idle keep-alive
        // connections on its own clock, and a request must not meet one it just closed.
        let mut up = match TcpStream::connect(s.upstream).await {
            Ok(u) => u,
            Err(_) => return reset(client), // The server is down: the client sees a reset.
        };
        let up = &mut up;
        let mut ubuf = Vec::new();
        let mut request = head.bytes;
        request.extend_from_slice(&body);
        if up.write_all(&request).await.is_err() {
            return reset(client);
        }
        let Some(resp) = read_head(up, &mut ubuf, false).await else { return reset(client) };
        let event_stream = String::from_utf8_lossy(&resp.bytes).to_ascii_lowercase().contains("text/event-stream");
        let resp_body = match resp.length {
            Length::Fixed(len) => read_body(up, &mut ubuf, len).await,
            // A chunked answer with an end (the memory stream): read whole, then faulted like
            // any other answer.
            Length::Unbounded if !event_stream && is_chunked(&resp.bytes) => read_chunked(up, &mut ubuf).await,
            Length::Unbounded => {
                // A stream (SSE) or an answer to the end of the connection: pipe both ways.
                if client.write_all(&resp.bytes).await.is_err() || client.write_all(&ubuf).await.is_err() {
                    return;
                }
                let _ = tokio::io::copy_bidirectional(&mut client, up).await;
                return;
            }
        };
        let Some(resp_body) = resp_body else { return reset(client) };
        let mut answer = resp.bytes;
        answer.extend_from_slice(&resp_body);
        match fault {
            Some(Fault::ResetAfter) => {
                if non_idempotent {
                    s.lost_answers.lock().unwrap().push(what);
                }
                return reset(client);
            }
            Some(Fault::Truncate) => {
                let cut = rng.random_range(0..answer.len());
                let _ = client.write_all(&answer[..cut]).await;
                if non_idempotent {
                    s.lost_answers.lock().unwrap().push(what);
                }
                return reset(client);
            }
            _ => {}
        }
        if client.write_all(&answer).await.is_err() {
            return;
        }
        if resp.line.contains(" 101 ") {
            return;
        }
    }
}

/// The fault for the next request, if any.
fn draw(s: &Shared, rng: &mut StdRng, what: &str) -> Option<Fault> {
    {
        let mut once = s.once.lock().unwrap();
        if let Some(i) = once.iter().position(|(text, _)| what.contains(text)) {
            return Some(once.remove(i).1);
        }
    }
    if !s.active.load(Ordering::SeqCst) {
        return None;
    }
    let left = s.burst_left.load(Ordering::SeqCst);
    if left > 0 && s.burst_left.compare_exchange(left, left - 1, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
        return Some(Fault::Status5xx);
    }
    let p = &s.plan;
    let x: f64 = rng.random();
    let table = [
        (p.delay, Fault::Delay),
        (p.reset_before, Fault::ResetBefore),
        (p.reset_after, Fault::ResetAfter),
        (p.half_close, Fault::HalfClose),
        (p.stall, Fault::Stall),
        (p.truncate, Fault::Truncate),
        (p.burst, Fault::Status5xx),
    ];
    let mut acc = 0.0;
    for (chance, fault) in table {
        acc += chance;
        if x < acc {
            if fault == Fault::Status5xx {
                s.burst_left.fetch_add(rng.random_range(0..p.burst_max.max(1)), Ordering::SeqCst);
            }
            return Some(fault);
        }
    }
    None
}
