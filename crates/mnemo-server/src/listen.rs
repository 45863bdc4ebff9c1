//! The accept loop: HTTP/1.1 connections with a header-read timeout, a request-body deadline
//! and a cap on concurrent connections, shut down gracefully.
//!
//! The timeouts bound what a *client* sends, never what the server sends back: a long poll or
//! an SSE stream is a response, so neither deadline touches it once its request has arrived.
//! Between requests the header-read timeout is the keep-alive idle timeout too (hyper starts it
//! as soon as it waits for the next request's head).

use std::convert::Infallible;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header::{CONNECTION, HeaderValue};
use axum::http::{Request, Response};
use axum::response::IntoResponse;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use mnemo_api::ErrorType;
use tokio::net::TcpListener;
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
    /// their request is answered late rather than refused. Open SSE streams count.
    pub max_connections: usize,
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
    /// The longest timeout honoured (a day), so that deadlines never overflow a clock.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            body_timeout: Self::DEFAULT_BODY_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
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
    let graceful = GracefulShutdown::new();
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
        // Responses and SSE events are written whole; don't hold them back for ACKs.
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let router = router.clone();
            async move { Ok::<_, Infallible>(handle(router, req, body_timeout).await) }
        });
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                // Header timeouts, resets, clients that hang up mid-request: routine.
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }

    drop(listener);
    tracing::debug!(connections = graceful.count(), "waiting for open connections to finish");
    graceful.shutdown().await;
    Ok(())
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

/// One request through the router, its body under a deadline.
async fn handle(router: Router, req: Request<Incoming>, body_timeout: Duration) -> Response<Body> {
    let timed_out = Arc::new(AtomicBool::new(false));
    let req = req.map(|body| Body::new(DeadlineBody::new(body, body_timeout, Arc::clone(&timed_out))));
    let response = match router.oneshot(req).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
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
