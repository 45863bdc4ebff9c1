//! Client errors, classified so callers never match on messages.

use mnemo_api::{ErrorBody, ErrorEnvelope, ErrorType, MEMORY_STORE_FULL_CODE, MemoryId};

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status.
    #[error("{status} {}: {}{}", .error.kind, .error.message, .request_id.as_deref().map(|r| format!(" (request {r})")).unwrap_or_default())]
    Api { status: u16, error: ErrorBody, request_id: Option<String> },
    /// The request never got an answer (connection refused, timeout, …).
    #[error("request failed: {0}")]
    Transport(#[source] reqwest::Error),
    /// A stream sent nothing at all (not even a keep-alive ping) for this long.
    #[error("the stream was silent for {} s", .0.as_secs())]
    Stalled(std::time::Duration),
    /// A streamed answer ended before its end (the connection closed early): another attempt
    /// may get it whole.
    #[error("{0}")]
    Incomplete(String),
    /// A success answer that is not the expected JSON.
    #[error("unexpected response body (status {status}): {message}")]
    Decode { status: u16, message: String },
}

impl ClientError {
    pub(crate) fn from_response(status: u16, request_id: Option<String>, body: &[u8]) -> Self {
        let error = match serde_json::from_slice::<ErrorEnvelope>(body) {
            Ok(envelope) => envelope.error,
            Err(_) => ErrorBody {
                kind: "api_error".to_owned(),
                message: String::from_utf8_lossy(body).chars().take(500).collect(),
                extra: Default::default(),
            },
        };
        Self::Api { status, error, request_id }
    }

    /// The HTTP status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } | Self::Decode { status, .. } => Some(*status),
            Self::Transport(_) | Self::Stalled(_) | Self::Incomplete(_) => None,
        }
    }

    /// The `error.type`, when the server answered with the envelope.
    pub fn error_type(&self) -> Option<&str> {
        match self {
            Self::Api { error, .. } => Some(&error.kind),
            _ => None,
        }
    }

    /// A refusal that repeating the same request cannot change: every 4xx except 408, 409
    /// and 429 (the worker's rule for giving up on an operation).
    pub fn is_permanent(&self) -> bool {
        matches!(self.status(), Some(s) if (400..500).contains(&s) && !matches!(s, 408 | 409 | 429))
    }

    /// 404.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// 409, whatever its type.
    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// `error.details.error_code`, when the server sent one.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            Self::Api { error, .. } => error.extra.get("details")?.get("error_code")?.as_str(),
            _ => None,
        }
    }

    /// A create or rename refused because another memory holds the path or one overlapping it
    /// (`409 memory_path_conflict_error`): the blocking memory as the error names it.
    pub fn path_conflict(&self) -> Option<PathConflict> {
        let Self::Api { status: 409, error, .. } = self else { return None };
        if error.kind != ErrorType::MemoryPathConflict.as_str() {
            return None;
        }
        let field = |name| error.extra.get(name).and_then(|v| v.as_str()).filter(|s| !s.is_empty());
        Some(PathConflict {
            memory_id: field("conflicting_memory_id").and_then(|id| id.parse().ok()),
            path: field("conflicting_path").map(str::to_owned),
        })
    }

    /// A memory create refused because the store holds as many memories as its server allows.
    /// Only mnemo says so (`error.details.error_code` = [`MEMORY_STORE_FULL_CODE`]); the hosted
    /// API's refusal is a plain `400`.
    pub fn is_store_full(&self) -> bool {
        self.status() == Some(400) && self.error_code() == Some(MEMORY_STORE_FULL_CODE)
    }
}

/// The memory that blocks a path, as a `409 memory_path_conflict_error` names it. Either may be
/// missing: the reference client documents the fields, not that every server fills them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathConflict {
    /// The blocking memory (`conflicting_memory_id`; an empty string reads as unknown).
    pub memory_id: Option<MemoryId>,
    /// Its path: the requested one, or an ancestor or descendant of it (`conflicting_path`).
    pub path: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(status: u16, body: &str) -> ClientError {
        ClientError::from_response(status, Some("req_1".into()), body.as_bytes())
    }

    #[test]
    fn codes_path_conflicts_and_full_stores_are_read_from_the_envelope() {
        let full = refusal(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"memory store `memstore_x` already holds 3 memories","details":{"error_code":"memory_store_full","limit":3}}}"#,
        );
        assert_eq!(full.error_code(), Some("memory_store_full"));
        assert!(full.is_store_full() && full.is_permanent() && full.path_conflict().is_none());

        // The hosted API's kind of refusal: no code, so not known to be a full store.
        let plain = refusal(400, r#"{"type":"error","error":{"type":"invalid_request_error","message":"too many"}}"#);
        assert_eq!(plain.error_code(), None);
        assert!(!plain.is_store_full());

        let id = MemoryId::generate();
        let taken = refusal(
            409,
            &format!(
                r#"{{"type":"error","error":{{"type":"memory_path_conflict_error","message":"a memory already exists at /a","conflicting_memory_id":"{id}","conflicting_path":"/a"}}}}"#
            ),
        );
        assert_eq!(taken.path_conflict(), Some(PathConflict { memory_id: Some(id), path: Some("/a".into()) }));
        let unnamed = refusal(
            409,
            r#"{"type":"error","error":{"type":"memory_path_conflict_error","message":"taken","conflicting_memory_id":"","conflicting_path":"/a"}}"#,
        );
        assert_eq!(unnamed.path_conflict(), Some(PathConflict { memory_id: None, path: Some("/a".into()) }));
        let stale = refusal(
            409,
            r#"{"type":"error","error":{"type":"memory_precondition_failed_error","message":"content_sha256 precondition failed"}}"#,
        );
        assert!(stale.path_conflict().is_none(), "another 409 is not a path conflict");
        assert!(refusal(502, "<html>bad gateway</html>").error_code().is_none());
    }
}
