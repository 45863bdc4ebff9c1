//! [`Refusal`]: how the organization rules ([`super::workspace`], [`super::api_key`],
//! [`super::rate_limit`]) say no.
//!
//! Every refusal of these rules is a `400 invalid_request_error`; some carry a stable
//! `error.details.error_code` ([`AdminErrorCode`]) the SDK's error table knows. One type for
//! all of them keeps the mapping to the HTTP answer in one place (the store error, then the
//! server's error mapping).

use mnemo_api::{AdminErrorCode, Invalid};

/// A request an organization rule refuses: `400`, the message, and a code if the API has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub code: Option<AdminErrorCode>,
    pub message: String,
}

impl Refusal {
    /// A refusal without a code.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self { code: None, message: message.into() }
    }

    /// A refusal with a code.
    pub fn coded(code: AdminErrorCode, message: impl Into<String>) -> Self {
        Self { code: Some(code), message: message.into() }
    }
}

impl From<Invalid> for Refusal {
    fn from(e: Invalid) -> Self {
        Self::invalid(e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_its_message_and_keeps_its_code() {
        let r = Refusal::coded(AdminErrorCode::WorkspaceApiKeyLimitExceeded, "too many");
        assert_eq!((r.to_string().as_str(), r.code), ("too many", Some(AdminErrorCode::WorkspaceApiKeyLimitExceeded)));
        let r: Refusal = Invalid("bad name".into()).into();
        assert_eq!(r, Refusal { code: None, message: "bad name".into() });
    }
}
