//! Wire types shared by the mnemo server, client, worker and CLI.
//!
//! This crate owns everything that crosses the HTTP boundary of the memory-stores API: the
//! prefixed identifiers ([`MemoryStoreId`], [`MemoryId`], …), the validated [`MemoryPath`],
//! the JSON shapes ([`Memory`], [`MemoryStore`], [`MemoryVersion`], …), the limits of
//! [`limits`] and the error envelope ([`ErrorEnvelope`]).
//!
//! It knows nothing about HTTP frameworks, databases or the local filesystem, so every other
//! crate can depend on it.

mod agents;
mod environments;
mod error;
mod events;
pub mod headers;
mod ids;
pub mod limits;
pub mod openapi;
mod path;
mod sessions;
mod types;
mod webhooks;

pub use agents::*;
pub use environments::*;
pub use error::{DISK_FULL_CODE, DISK_FULL_MESSAGE, ErrorBody, ErrorEnvelope, ErrorType, MEMORY_STORE_FULL_CODE};
pub use events::*;
pub use ids::{
    AgentId, ApiKeyId, EnvironmentId, EnvironmentKeyId, EventId, IdError, MemoryId, MemoryStoreId, MemoryVersionId,
    RequestId, SessionId, WebhookDeliveryId, WebhookEndpointId, WebhookEventId, WorkId, generate_secret,
};
pub use path::{MemoryPath, Overlap, PathError, PathPrefix};
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
