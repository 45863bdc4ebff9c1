//! Anthropic's error envelope: `{"type":"error","error":{"type","message",…},"request_id"}`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// `error.details.error_code` of a memory create refused because the store holds as many
/// memories as its server allows (a `400 invalid_request_error`; `details.limit` is the cap). A
/// mnemo extension: other servers send the status and type alone.
pub const MEMORY_STORE_FULL_CODE: &str = "memory_store_full";

/// `error.details.error_code` of a `507`: the server's database volume is full (a mnemo
/// extension; the hosted API has no such answer).
pub const DISK_FULL_CODE: &str = "database_disk_full";

/// What a write refused on a full database disk says.
pub const DISK_FULL_MESSAGE: &str = "the server's database disk is full, so it cannot take writes; reads still work, and writes succeed again once space is freed on the database's volume";

/// The `error.type` values mnemo emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    InvalidRequest,
    Authentication,
    Permission,
    NotFound,
    RequestTooLarge,
    RateLimit,
    Api,
    Overloaded,
    Timeout,
    Conflict,
    MemoryPreconditionFailed,
    MemoryPathConflict,
}

impl ErrorType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request_error",
            Self::Authentication => "authentication_error",
            Self::Permission => "permission_error",
            Self::NotFound => "not_found_error",
            Self::RequestTooLarge => "request_too_large",
            Self::RateLimit => "rate_limit_error",
            Self::Api => "api_error",
            Self::Overloaded => "overloaded_error",
            Self::Timeout => "timeout_error",
            Self::Conflict => "conflict_error",
            Self::MemoryPreconditionFailed => "memory_precondition_failed_error",
            Self::MemoryPathConflict => "memory_path_conflict_error",
        }
    }

    /// The HTTP status that goes with this type.
    pub fn status(self) -> u16 {
        match self {
            Self::InvalidRequest => 400,
            Self::Authentication => 401,
            Self::Permission => 403,
            Self::NotFound => 404,
            Self::Timeout => 408,
            Self::Conflict | Self::MemoryPreconditionFailed | Self::MemoryPathConflict => 409,
            Self::RequestTooLarge => 413,
            Self::RateLimit => 429,
            Self::Api => 500,
            Self::Overloaded => 529,
        }
    }
}

/// The `error` object of the envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    /// Type-specific fields that sit directly on the error object, such as
    /// `conflicting_memory_id` and `conflicting_path`, or a `details` object.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A whole error response body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "error")]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
    #[serde(default)]
    pub request_id: Option<String>,
}
