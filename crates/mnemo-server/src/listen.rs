//! The accept loop: HTTP/1.1 connections with a first-byte timeout, a header-read timeout, a
//! request-body deadline, a cap on concurrent connections and one per client address, shut
//! down gracefully. Every request carries its client's address (`ConnectInfo<SocketAddr>`).
//!
//! The timeouts bound what a *client* sends, never what the server sends back: a long poll or
//! an SSE stream is a response, so neither deadline touches it once its request has arrived.
//! Between requests the header-read timeout is the keep-alive idle timeout too (hyper starts it
//! as soon as it waits for the next request's head).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::header::{CONNECTION, HeaderValue};
use axum::http::{Method, Request, Response};
use axum::response::IntoResponse;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use mnemo_api::ErrorType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt;

use crate::ApiError;

/// How `serve` treats connections. [`Default`] suits a server on the open network; tests
/// shorten the timeouts.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Longest a client may take to send a request line and its headers, counted from when the
    /// server starts waiting for them. It is also the keep-alive idle timeout: a connection
    /// with no new request within this time is closed (silently, as HTTP/1.1 allows). At most
    /// [`MAX_TIMEOUT`](Self::MAX_TIMEOUT); longer is taken as that.
    pub header_read_timeout: Duration,
    /// Longest a client may take to send a request body, counted from when its headers
    /// arrived. A body still unfinished then is answered `408 timeout_error` and the connection
    /// is closed. A deadline rather than an idle timeout, so a body trickled a byte at a time
    /// cannot hold a connection either. At most [`MAX_TIMEOUT`](Self::MAX_TIMEOUT).
    pub body_timeout: Duration,
    /// Most connections served at once (at least 1). Further clients are not accepted until
    /// one closes: they wait in the kernel's listen backlog, where their connect succeeds and
    /// their request is answered late rather than refused. Open SSE streams count (and are
    /// capped below this by the router's `StreamLimits`).
    pub max_connections: usize,
    /// Most connections one client address may hold at once (`0`: no cap). A connection past
    /// it is answered `429` and closed at once, without taking one of the
    /// [`max_connections`](Self::max_connections) places. Behind a reverse proxy every client
    /// has the proxy's address: turn it off there and let the proxy cap its clients.
    pub max_connections_per_address: usize,
    /// Longest a new connection may stay silent before its first byte; then it is closed.
    /// Shorter than [`header_read_timeout`](Self::header_read_timeout), so connections opened
    /// and left idle cannot hold the places for long.
    pub first_byte_timeout: Duration,
}

impl ServeConfig {
    /// Default [`header_read_timeout`](Self::header_read_timeout): hyper's own default, and
    /// longer than common clients keep idle connections (httpx 5 s) so they close first.
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
    /// Default [`body_timeout`](Self::body_timeout): a largest body (1 MiB) needs about
    /// 17 KiB/s to make it.
    pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);
    /// Default [`max_connections`](Self::max_connections): well under the common soft limit of
    /// 1,024 open files, leaving room for the database and its readers.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
    /// Default [`first_byte_timeout`](Self::first_byte_timeout).
    pub const DEFAULT_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(10);

    /// The default [`max_connections_per_address`](Self::max_connections_per_address) for a
    /// server of `max_connections`: half of them (at least 1), so one address — a sandbox host
    /// running many sessions included — cannot hold them all.
    pub fn default_per_address(max_connections: usize) -> usize {
        (max_connections / 2).max(1)
    }
    /// The longest timeout honoured (a day), so that deadlines never overflow a clock.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            body_timeout: Self::DEFAULT_BODY_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: Self::default_per_address(Self::DEFAULT_MAX_CONNECTIONS),
            first_byte_timeout: Self::DEFAULT_FIRST_BYTE_TIMEOUT,
        }
    }
}

/// Most headers hyper parses on one request. Twice the API's limit: past the API's own limit,
/// a request is answered with the envelope; hyper allocates room for this many on every request
/// it parses, so it stays small.
const HTTP_MAX_HEADERS: usize = 2 * mnemo_api::limits::MAX_HEADERS;

/// Serves `router` on `listener` until `shutdown` completes; then stops accepting, lets every
/// connection finish its in-flight request, and returns once all are closed.
pub(crate) async fn run(
    listener: TcpListener,
    router: Router,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(config.header_read_timeout.min(ServeConfig::MAX_TIMEOUT));
    // The API's own head limits (`mnemo_api::limits::MAX_HEADERS`, `MAX_HEADER_BYTES`,
    // `MAX_URI_BYTES`) are checked by the router, which answers with the error envelope; hyper's
    // lie further out, so that a head just past the API's reaches it: up to twice as many
    // headers, and hyper's read buffer (about 400 KiB) for the head. Past those, hyper answers a
    // bare `431` / `414` itself (and a target over 64 KiB is always hyper's `414`).
    http.max_headers(HTTP_MAX_HEADERS);
    let body_timeout = config.body_timeout.min(ServeConfig::MAX_TIMEOUT);
    let slots = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let per_address = config.max_connections_per_address;
    let addresses = Arc::new(PerAddress::new(per_address));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    // Never longer than the whole head may take.
    let first_byte_timeout = config.first_byte_timeout.min(config.header_read_timeout).min(ServeConfig::MAX_TIMEOUT);
    let graceful = GracefulShutdown::new();
    // Tells connections still waiting for their first byte that the server is stopping.
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let mut shutdown = pin!(shutdown);

    loop {
        // Take a slot before accepting, so a client over the cap waits in the backlog.
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = Arc::clone(&slots).acquire_owned() => slot,
        };
        let Ok(slot) = slot else { break };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    if !is_connection_error(&e) {
                        // Most likely out of file descriptors: give connections time to close
                        // rather than spin (hyper 0.14 and axum do the same).
                        tracing::error!(error = %e, "accept failed; retrying in 1s");
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                    continue;
                }
            },
        };
        let Some(held) = addresses.take(peer.ip()) else {
            // Over its address's cap: answered at once, and its place goes back to others.
            drop(slot);
            refuse(stream, peer, &refusals, per_address);
            continue;
        };
        // Responses and SSE events are written whole; don't hold them back for ACKs.
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let router = router.clone();
            req.extensions_mut().insert(ConnectInfo(peer));
            async move { Ok::<_, Infallible>(handle(router, req, body_timeout).await) }
        });
        let http = http.clone();
        let watcher = graceful.watcher();
        let mut stopping = stopping.clone();
        tokio::spawn(async move {
            // A connection that sends nothing is closed soon, before hyper's longer header
            // timeout would; its place is free again at once.
            let mut first = [0u8; 1];
            let waited = tokio::select! {
                waited = tokio::time::timeout(first_byte_timeout, stream.peek(&mut first)) => waited,
                _ = stopping.wait_for(|stop| *stop) => return drop((slot, held)),
            };
            match waited {
                Ok(Ok(1..)) => {}
                Ok(_) => return drop((slot, held)),
                Err(_) => {
                    tracing::debug!(%peer, "connection sent nothing in time; closed");
                    return drop((slot, held));
                }
            }
            let conn = watcher.watch(http.serve_connection(TokioIo::new(stream), service));
            if let Err(e) = conn.await {
                // Header timeouts, resets, clients that hang up mid-request: routine.
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop((slot, held));
        });
    }

    drop(listener);
    let _ = stop.send(true);
    tracing::debug!(connections = graceful.count(), "waiting for open connections to finish");
    graceful.shutdown().await;
    Ok(())
}

/// Most over-cap connections being answered at once; past it they are closed unanswered.
const MAX_REFUSALS: usize = 64;
/// How long a refused connection is drained before it is closed (so the client reads the
/// answer instead of a reset).
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// Open connections per client address.
#[derive(Debug)]
struct PerAddress {
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's count against its address; dropping it gives the place back.
#[derive(Debug)]
struct AddressSlot {
    of: Arc<PerAddress>,
    ip: IpAddr,
}

impl PerAddress {
    fn new(cap: usize) -> Self {
        Self { cap, open: Mutex::default() }
    }

    /// A place for one more connection from `ip` (always, without a cap), or `None` when the
    /// address holds as many as it may.
    fn take(self: &Arc<Self>, ip: IpAddr) -> Option<Option<AddressSlot>> {
        if self.cap == 0 {
            return Some(None);
        }
        let ip = ip.to_canonical();
        let mut open = self.open.lock().expect("address counts poisoned");
        let n = open.entry(ip).or_default();
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Some(AddressSlot { of: Arc::clone(self), ip }))
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.of.open.lock().expect("address counts poisoned");
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The answer of a connection over its address's cap, written before the request is read.
fn refusal(cap: usize) -> Vec<u8> {
    let body = serde_json::json!({
        "type": "error",
        "error": {
            "type": ErrorType::RateLimit.as_str(),
            "message": format!(
                "this address holds {cap} connections to the server, the most one address may; close one, or \
                 retry later"
            ),
        },
    })
    .to_string();
    format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nx-should-retry: true\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers a connection over its address's cap with a `429` and closes it, in a task of its
/// own that holds no connection place; when too many are being answered, closes it unanswered.
fn refuse(stream: TcpStream, peer: SocketAddr, refusals: &Arc<Semaphore>, cap: usize) {
    tracing::debug!(%peer, "connection over its address's cap; refused");
    let Ok(permit) = Arc::clone(refusals).try_acquire_owned() else { return };
    tokio::spawn(async move {
        let mut stream = stream;
        let answer = refusal(cap);
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            stream.write_all(&answer).await?;
            stream.shutdown().await?;
            // Read what the client sent until it closes, so closing sends no reset that could
            // reach it before the answer.
            let mut sink = [0u8; 4096];
            while stream.read(&mut sink).await? > 0 {}
            Ok::<_, std::io::Error>(())
        })
        .await;
        drop(permit);
    });
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

/// One request through the router, its body under a deadline.
async fn handle(router: Router, req: Request<Incoming>, body_timeout: Duration) -> Response<Body> {
    let timed_out = Arc::new(AtomicBool::new(false));
    let may_write = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let req = req.map(|body| Body::new(DeadlineBody::new(body, body_timeout, Arc::clone(&timed_out))));
    let response = match router.oneshot(req).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    if may_write {
        // After the handler: whatever it wrote has committed.
        crate::maintenance::WRITES.made();
    }
    if !timed_out.load(Ordering::Acquire) {
        return response;
    }
    // Whatever the handler made of a failed read (a 400 from the JSON extractor), the client
    // needs to hear that it was too slow. The connection cannot be reused: part of the body
    // is still on the wire.
    tracing::debug!(request_id = ?response.headers().get("request-id"), "request body timed out");
    let secs = body_timeout.as_secs_f64();
    let mut timeout = ApiError::new(
        ErrorType::Timeout,
        format!("the request body did not arrive within {secs}s of its headers; send it without pausing"),
    )
    .into_response();
    if let Some(id) = response.headers().get("request-id") {
        timeout.headers_mut().insert("request-id", id.clone());
    }
    timeout.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    timeout
}

/// A request body that fails once its deadline passes, and says so through `timed_out`.
struct DeadlineBody {
    inner: Incoming,
    deadline: Instant,
    /// Armed on the first read that has to wait.
    sleep: Option<Pin<Box<Sleep>>>,
    timed_out: Arc<AtomicBool>,
}

impl DeadlineBody {
    fn new(inner: Incoming, timeout: Duration, timed_out: Arc<AtomicBool>) -> Self {
        Self { inner, deadline: Instant::now() + timeout, sleep: None, timed_out }
    }
}

/// The error a reader of a late body sees.
#[derive(Debug)]
struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request body timed out")
    }
}

impl std::error::Error for BodyTimedOut {}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.timed_out.store(true, Ordering::Release);
                Poll::Ready(Some(Err(BodyTimedOut.into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
