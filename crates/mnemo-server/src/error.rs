//! The one error type of every handler, rendered as Anthropic's error envelope.
//!
//! [`ApiError`] is the single mapping from a failure to a status, an error type and the envelope
//! (with the request id). Deterministic `409`s carry `x-should-retry: false`; a retryable store
//! failure is a `529` and an unavailable database a `503`, both with `x-should-retry: true` and
//! `retry-after`; a full database disk is a `507` with the `database_disk_full` code. A 5xx's
//! cause is logged at ERROR and the client gets a generic message.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use mnemo_api::{ErrorBody, ErrorEnvelope, ErrorType};
use mnemo_store::StoreError;
use serde_json::{Map, Value};

use crate::request::current_request_id;

/// A failed request: an error type, a message for humans, and type-specific fields.
#[derive(Debug)]
pub struct ApiError {
    kind: ErrorType,
    message: String,
    extra: Map<String, Value>,
    /// The real cause of a 5xx, for the log only; clients see a generic message.
    internal: Option<String>,
    /// A status other than the error type's usual one (a `412` that is an invalid request).
    status_override: Option<u16>,
    /// Tell clients to retry (`x-should-retry: true`): the failure was transient.
    retry: bool,
    /// The database's disk is full: logged once per request as such, and not worth a quick
    /// retry (`x-should-retry: false`).
    disk_full: bool,
    /// Whole seconds to wait before trying again (`retry-after`), for a limit the caller hit.
    retry_after: Option<u64>,
    /// Close the connection after this answer (`connection: close`), so a refused stream does
    /// not keep a connection slot as an idle keep-alive.
    close: bool,
}

impl ApiError {
    pub(crate) fn new(kind: ErrorType, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            extra: Map::new(),
            internal: None,
            status_override: None,
            retry: false,
            disk_full: false,
            retry_after: None,
            close: false,
        }
    }

    /// A `429 rate_limit_error` telling the caller to wait `retry_after` (at least a second).
    pub(crate) fn rate_limited(message: impl Into<String>, retry_after: std::time::Duration) -> Self {
        Self::limited(ErrorType::RateLimit, message, retry_after)
    }

    /// A `529 overloaded_error`: the server is at a limit of its own, not the caller's.
    pub(crate) fn overloaded(message: impl Into<String>, retry_after: std::time::Duration) -> Self {
        Self::limited(ErrorType::Overloaded, message, retry_after)
    }

    fn limited(kind: ErrorType, message: impl Into<String>, retry_after: std::time::Duration) -> Self {
        let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
        Self { retry_after: Some(secs.max(1)), ..Self::new(kind, message) }
    }

    /// Closes the connection once this answer is sent.
    pub(crate) fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorType::InvalidRequest, message)
    }

    pub(crate) fn authentication(message: impl Into<String>) -> Self {
        Self::new(ErrorType::Authentication, message)
    }

    pub(crate) fn permission(message: impl Into<String>) -> Self {
        Self::new(ErrorType::Permission, message)
    }

    /// Adds `error.details.error_code`, which the reference client maps to typed exceptions.
    pub(crate) fn with_code(mut self, code: &str) -> Self {
        let details = self.extra.entry("details").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(details) = details {
            details.insert("error_code".into(), Value::String(code.to_owned()));
        }
        self
    }

    /// A `412` whose `error.details` carry a code and more.
    pub(crate) fn precondition_failed(message: &str, code: &str, details: Value) -> Self {
        let mut err = Self::new(ErrorType::InvalidRequest, message);
        err.status_override = Some(412);
        let mut d = match details {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        d.insert("error_code".into(), Value::String(code.to_owned()));
        err.extra.insert("details".into(), Value::Object(d));
        err
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorType::NotFound, message)
    }

    /// An invalid request answered with another 4xx status than `400` (`414`, `431`).
    pub(crate) fn invalid_with_status(status: u16, message: impl Into<String>) -> Self {
        Self { status_override: Some(status), ..Self::invalid(message) }
    }

    pub(crate) fn content_too_large(size: usize) -> Self {
        Self::new(ErrorType::RequestTooLarge, mnemo_api::content_too_large_message(size))
    }

    pub(crate) fn internal(cause: String) -> Self {
        Self { internal: Some(cause), ..Self::new(ErrorType::Api, "internal server error") }
    }

    /// The `error.type` this error renders with.
    pub fn kind(&self) -> ErrorType {
        self.kind
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let message = e.to_string();
        match &e {
            StoreError::NotFound { .. } => Self::not_found(message),
            StoreError::PathConflict { conflicting_memory_id, conflicting_path, .. } => {
                let mut err = Self::new(ErrorType::MemoryPathConflict, message);
                let id = conflicting_memory_id.as_ref().map(ToString::to_string).unwrap_or_default();
                err.extra.insert("conflicting_memory_id".into(), Value::String(id));
                err.extra.insert("conflicting_path".into(), Value::String(conflicting_path.clone()));
                err
            }
            StoreError::PreconditionFailed { .. } => Self::new(ErrorType::MemoryPreconditionFailed, message),
            StoreError::StoreFull { limit, .. } => {
                let mut err = Self::invalid(message).with_code(mnemo_api::MEMORY_STORE_FULL_CODE);
                if let Some(Value::Object(details)) = err.extra.get_mut("details") {
                    details.insert("limit".into(), Value::from(*limit));
                }
                err
            }
            StoreError::Archived(_)
            | StoreError::RedactCurrentVersion { .. }
            | StoreError::Invalid(_)
            | StoreError::InvalidCursor => Self::invalid(message),
            StoreError::Conflict(_) => Self::new(ErrorType::Conflict, message),
            StoreError::Limited(_) => Self::new(ErrorType::RateLimit, message),
            StoreError::Forbidden(_) => Self::permission(message),
            StoreError::Unauthenticated(_) => Self::authentication(message),
            StoreError::WorkspaceUnspecified { .. } => Self::invalid(message),
            StoreError::Coded { code, .. } => {
                let kind = if code.is_not_found() { ErrorType::NotFound } else { ErrorType::InvalidRequest };
                Self::new(kind, message).with_code(code.as_str())
            }
            StoreError::Retryable(_) => {
                let mut err = Self::new(ErrorType::Overloaded, "the database is busy; retry the request");
                err.internal = Some(e.chain());
                err.retry = true;
                err
            }
            StoreError::Unavailable(_) => {
                let mut err = Self::new(ErrorType::Api, "the database is unavailable; retry the request");
                err.status_override = Some(503);
                err.internal = Some(e.chain());
                err.retry = true;
                err
            }
            StoreError::DiskFull(_) => {
                let mut err =
                    Self::new(ErrorType::Api, mnemo_api::DISK_FULL_MESSAGE).with_code(mnemo_api::DISK_FULL_CODE);
                err.status_override = Some(507);
                err.internal = Some(e.chain());
                err.disk_full = true;
                err
            }
            StoreError::Backend(_) => Self::internal(e.chain()),
        }
    }
}

impl ApiError {
    /// The status this error is answered with.
    pub(crate) fn status(&self) -> u16 {
        self.status_override.unwrap_or_else(|| self.kind.status())
    }

    /// The envelope's `error` object. The real cause of a 5xx goes to the log here, never to
    /// the client.
    pub(crate) fn into_body(self) -> ErrorBody {
        if let Some(cause) = &self.internal {
            if self.disk_full {
                tracing::error!(error = %cause, "request failed: the database's disk is full; free space on its volume");
            } else if self.retry {
                tracing::warn!(error = %cause, "request failed on a transient database error");
            } else {
                tracing::error!(error = %cause, "request failed");
            }
        }
        ErrorBody { kind: self.kind.as_str().to_owned(), message: self.message, extra: self.extra }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let request_id = current_request_id();
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let (disk_full, retry, kind) = (self.disk_full, self.retry, self.kind);
        let (retry_after, close) = (self.retry_after, self.close);
        let body = ErrorEnvelope { error: self.into_body(), request_id: request_id.map(|id| id.to_string()) };
        let mut response = (status, axum::Json(body)).into_response();
        // These conflicts answer the same on every retry; tell clients not to back off and
        // try again (the reference client retries every 409 otherwise).
        if disk_full
            || matches!(kind, ErrorType::MemoryPreconditionFailed | ErrorType::MemoryPathConflict | ErrorType::Conflict)
        {
            response.headers_mut().insert("x-should-retry", HeaderValue::from_static("false"));
        }
        if retry {
            response.headers_mut().insert("x-should-retry", HeaderValue::from_static("true"));
            response.headers_mut().insert("retry-after", HeaderValue::from_static("1"));
        }
        if let Some(secs) = retry_after {
            response.headers_mut().insert("retry-after", HeaderValue::from(secs));
            response.headers_mut().insert("x-should-retry", HeaderValue::from_static("true"));
        }
        if close {
            response.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use mnemo_store::ErrorCode;
    use serde_json::json;

    use super::*;

    fn render(e: StoreError) -> (u16, Option<String>, Value) {
        let response = ApiError::from(e).into_response();
        let retry = response.headers().get("x-should-retry").map(|v| v.to_str().unwrap().to_owned());
        let status = response.status().as_u16();
        let body = futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX)).unwrap();
        (status, retry, serde_json::from_slice(&body).unwrap())
    }

    #[test]
    fn each_store_error_renders_with_its_status_and_retry_advice() {
        let (status, retry, body) = render(StoreError::Retryable("deadlock detected".into()));
        assert_eq!((status, retry.as_deref()), (529, Some("true")), "a transient failure is worth retrying");
        assert_eq!(body["error"]["type"], "overloaded_error");
        assert!(!body.to_string().contains("deadlock"), "causes stay in the log: {body}");

        let down = StoreError::Unavailable(std::io::Error::other("connection refused to db.internal:5432").into());
        let response = ApiError::from(down).into_response();
        assert_eq!(response.status().as_u16(), 503, "an unreachable database is a 503");
        assert_eq!(response.headers()["retry-after"], "1");
        assert_eq!(response.headers()["x-should-retry"], "true");
        let body = futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX)).unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("db.internal"), "the cause stays in the log");

        let (status, retry, body) = render(StoreError::backend(std::io::Error::other("disk on fire")));
        assert_eq!((status, retry), (500, None));
        assert_eq!(body["error"]["message"], "internal server error");

        let missing = StoreError::Coded { code: ErrorCode::EnvironmentNotFound, message: "gone".into() };
        let (status, _, body) = render(missing);
        assert_eq!((status, &body["error"]["details"]["error_code"]), (404, &json!("environment_not_found")));
        let archived = StoreError::Coded { code: ErrorCode::EnvironmentArchived, message: "archived".into() };
        assert_eq!(render(archived).0, 400);

        let (status, retry, body) = render(StoreError::StoreFull { store: "memstore_x".into(), limit: 3 });
        assert_eq!((status, retry), (400, None), "a full store is a plain invalid request, as the hosted API's");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["details"], json!({"error_code": "memory_store_full", "limit": 3}));

        let full = StoreError::DiskFull(std::io::Error::other("database or disk is full: /var/lib/mnemo/x.db").into());
        let (status, retry, body) = render(full);
        assert_eq!((status, retry.as_deref()), (507, Some("false")), "a full disk is a 507, not worth a quick retry");
        assert_eq!(body["error"]["type"], "api_error");
        assert_eq!(body["error"]["details"]["error_code"], "database_disk_full");
        assert!(body["error"]["message"].as_str().unwrap().contains("disk is full"), "{body}");
        assert!(!body.to_string().contains("/var/lib"), "the cause stays in the log: {body}");

        let (status, retry, _) = render(StoreError::Conflict("stopped".into()));
        assert_eq!((status, retry.as_deref()), (409, Some("false")));
    }
}
