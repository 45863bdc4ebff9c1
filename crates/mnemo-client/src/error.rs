//! Client errors, classified so callers never match on messages.

use mnemo_api::{ErrorBody, ErrorEnvelope};

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
            Self::Transport(_) | Self::Stalled(_) => None,
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
}
