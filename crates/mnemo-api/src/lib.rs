//! Wire types shared by the mnemo server, client, worker and CLI.
//!
//! This crate owns everything that crosses the HTTP boundary of the API: the prefixed
//! identifiers ([`MemoryStoreId`], [`SessionId`], …, time-sortable), the validated
//! [`MemoryPath`] and [`PathPrefix`] (every path rule, parsed once), the JSON objects
//! ([`MemoryStore`], [`Memory`], [`MemoryVersion`], [`Agent`], [`Environment`], [`Work`],
//! [`Session`], [`WebhookEvent`], …) with their request bodies and validation, the typed session
//! [`Event`]s (every type accepted and emitted, parse errors naming the field), the [`limits`],
//! the Admin API's objects ([`admin`]: [`Workspace`], [`ApiKey`], rate limits, the audit log),
//! the [`headers`] both ends use, [`content_sha256`], the error envelope ([`ErrorEnvelope`]), and
//! [`openapi::complete`], what the OpenAPI document needs beyond the derived schemas.
//! It also holds the few pure policies every crate shares: the retry delay rule ([`Backoff`])
//! and the redacting [`Secret`].
//!
//! It knows nothing about HTTP frameworks, databases, async runtimes or the local filesystem, so
//! every other crate can depend on it. `Debug` of anything carrying a credential redacts it.

pub mod admin;
mod agents;
pub mod backoff;
mod dreams;
mod environments;
mod error;
mod events;
pub mod headers;
mod ids;
pub mod limits;
pub mod openapi;
mod path;
pub mod people;
mod retention;
mod secret;
mod sessions;
mod types;
mod webhooks;

pub use admin::*;
pub use agents::*;
pub use backoff::{Backoff, Growth, Jitter};
pub use dreams::*;
pub use environments::*;
pub use error::{DISK_FULL_CODE, DISK_FULL_MESSAGE, ErrorBody, ErrorEnvelope, ErrorType, MEMORY_STORE_FULL_CODE};
pub use events::*;
pub use ids::{
    AdminKeyId, AgentId, ApiKeyId, AuditEventId, DreamId, EnvironmentId, EnvironmentKeyId, EventId, IdError, InviteId,
    MemoryId, MemoryStoreId, MemoryVersionId, RequestId, SessionId, UserId, WebhookDeliveryId, WebhookEndpointId,
    WebhookEventId, WorkId, WorkspaceId, generate_secret,
};
pub use path::{MemoryPath, Overlap, PathError, PathPrefix};
pub use people::*;
pub use retention::{BadRetention, Retention};
pub use secret::{REDACTED, Secret};
pub use sessions::*;
pub use types::*;
pub use webhooks::*;

use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of `bytes`: the `content_sha256` of a memory holding them.
pub fn content_sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Whether `s` is a well-formed `content_sha256`: 64 lowercase hexadecimal characters.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_content_has_the_well_known_digest() {
        assert_eq!(content_sha256(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert!(is_sha256_hex(&content_sha256(b"x")));
        assert!(!is_sha256_hex(&content_sha256(b"x").to_uppercase()));
        assert!(!is_sha256_hex("abc"));
    }
}
