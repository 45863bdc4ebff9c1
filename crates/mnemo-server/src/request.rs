//! Per-request plumbing: the request id, the request log line and the limits of a request's
//! head.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::IntoResponse;
use axum::response::Response;
use mnemo_api::limits::{MAX_HEADER_BYTES, MAX_HEADERS, MAX_URI_BYTES};
use mnemo_api::{AuditActor, RequestId, WorkspaceId};
use tracing::Instrument;

use crate::ApiError;

tokio::task_local! {
    static REQUEST_ID: RequestId;
}

/// The id of the request being served, if any.
pub(crate) fn current_request_id() -> Option<RequestId> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Marks an answer whose request line is logged at `debug` rather than `info`: a poll that
/// found nothing, which idle workers repeat every second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Routine;

/// Who a request was served for, set by the caller's extractor once the credential is known:
/// its workspace, answered as `anthropic-workspace-id` (admin-api.md §8.1), and its actor, which
/// the audit log records.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServedIn(Arc<Served>);

#[derive(Debug, Default)]
struct Served {
    workspace: OnceLock<WorkspaceId>,
    actor: OnceLock<AuditActor>,
    /// What the request met at its workspace's rate limit, when it was counted.
    counted: OnceLock<crate::rate_limit::Counted>,
}

impl ServedIn {
    pub(crate) fn set(&self, workspace: Option<&WorkspaceId>, actor: AuditActor) {
        if let Some(workspace) = workspace {
            let _ = self.0.workspace.set(workspace.clone());
        }
        let _ = self.0.actor.set(actor);
    }

    /// The workspace the request was served in, once its caller is known.
    pub(crate) fn workspace(&self) -> Option<&WorkspaceId> {
        self.0.workspace.get()
    }

    /// The caller, once known.
    pub(crate) fn actor(&self) -> Option<&AuditActor> {
        self.0.actor.get()
    }

    /// Records what the request met at its rate limit (once: a request counts once).
    pub(crate) fn set_counted(&self, counted: crate::rate_limit::Counted) {
        let _ = self.0.counted.set(counted);
    }

    /// What the request met at its rate limit, once counted.
    pub(crate) fn counted(&self) -> Option<crate::rate_limit::Counted> {
        self.0.counted.get().copied()
    }
}

/// Gives every request an id (echoed as `request-id` and in error bodies) and a span named after
/// its route template, and logs it once it is answered.
pub(crate) async fn track(mut req: Request, next: Next) -> Response {
    let id = RequestId::generate();
    // Handlers outside this crate (the console's pages) name it too.
    req.extensions_mut().insert(id.clone());
    let served_in = ServedIn::default();
    req.extensions_mut().insert(served_in.clone());
    let route = req.extensions().get::<MatchedPath>().map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().clone();
    let span = tracing::info_span!("request", %method, %route, request_id = %id);
    let started = Instant::now();
    let mut response = REQUEST_ID.scope(id.clone(), next.run(req)).instrument(span.clone()).await;
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    let elapsed_us = elapsed.as_micros() as u64;
    crate::metrics::request_done(&method, &route, status, elapsed);
    // The access log: one `info` line per request (method, route template and request id from
    // the span), but health probes and empty polls only when asked for.
    span.in_scope(|| {
        if route == "/healthz" {
            tracing::trace!(status, elapsed_us, "answered");
        } else if response.extensions().get::<Routine>().is_some() {
            tracing::debug!(status, elapsed_us, "answered");
        } else {
            tracing::info!(status, elapsed_us, "answered");
        }
    });
    if let Ok(value) = HeaderValue::from_str(id.as_str()) {
        response.headers_mut().insert("request-id", value);
    }
    if let Some(workspace) = served_in.workspace()
        && let Ok(value) = HeaderValue::from_str(workspace.as_str())
    {
        response.headers_mut().insert("anthropic-workspace-id", value);
    }
    if let Some(counted) = served_in.counted() {
        crate::rate_limit::add_headers(&mut response, counted);
    }
    response
}

/// Refuses a request whose head is larger than the API takes — a request target over
/// [`MAX_URI_BYTES`] (`414`), more than [`MAX_HEADERS`] headers or more than
/// [`MAX_HEADER_BYTES`] of them (`431`) — with the error envelope, before any handler or
/// extractor looks at it. The HTTP layer's own bounds lie further out (see `listen.rs`): only a
/// head beyond those is answered without an envelope.
pub(crate) async fn check_head(req: Request, next: Next) -> Response {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_URI_BYTES {
        let message = format!("the request target is {target} bytes long; the limit is {MAX_URI_BYTES}");
        return ApiError::invalid_with_status(414, message).into_response();
    }
    let headers = req.headers();
    if headers.len() > MAX_HEADERS {
        let message = format!("the request has {} headers; the limit is {MAX_HEADERS}", headers.len());
        return ApiError::invalid_with_status(431, message).into_response();
    }
    let bytes: usize = headers.iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    if bytes > MAX_HEADER_BYTES {
        let message =
            format!("the request's headers are {bytes} bytes (names and values); the limit is {MAX_HEADER_BYTES}");
        return ApiError::invalid_with_status(431, message).into_response();
    }
    next.run(req).await
}
