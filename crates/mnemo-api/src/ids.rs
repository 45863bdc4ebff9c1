//! Prefixed, unguessable, time-sortable identifiers.
//!
//! Every id is its prefix followed by 22 base62 characters encoding 128 bits: 48 bits of
//! milliseconds since the Unix epoch and 80 random bits. Base62 in the `0-9A-Za-z` alphabet is
//! in ASCII order, so ids of one kind sort by creation time.

use std::fmt;
use std::str::FromStr;

use rand::RngCore;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LEN: usize = 22;

/// An id that does not have the expected prefix or body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a valid {kind} id (expected `{prefix}…`)")]
pub struct IdError {
    kind: &'static str,
    prefix: &'static str,
    value: String,
}

/// A fresh 22-character body: time-ordered prefix, random remainder.
fn new_body() -> String {
    let millis =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
            & 0xFFFF_FFFF_FFFF;
    let mut random = [0u8; 10];
    rand::rng().fill_bytes(&mut random);
    let mut n: u128 = u128::from(millis) << 80;
    for (i, b) in random.iter().enumerate() {
        n |= u128::from(*b) << (8 * (9 - i));
    }
    let mut out = [b'0'; BODY_LEN];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8(out.to_vec()).expect("alphabet is ASCII")
}

/// A new secret credential: `prefix` followed by 43 base62 characters (≈256 bits).
pub fn generate_secret(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 43);
    out.push_str(prefix);
    let mut rng = rand::rng();
    while out.len() < prefix.len() + 43 {
        // Rejection sampling keeps every character equally likely.
        let b = (rng.next_u32() & 0xFF) as u8;
        if b < 248 {
            out.push(ALPHABET[usize::from(b % 62)] as char);
        }
    }
    out
}

fn valid_body(body: &str) -> bool {
    // Accept any opaque suffix of reasonable shape, so ids minted by another implementation
    // (the hosted service uses 24 characters) are accepted too.
    !body.is_empty() && body.len() <= 64 && body.bytes().all(|b| b.is_ascii_alphanumeric())
}

macro_rules! prefixed_id {
    ($(#[$meta:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// A new, unguessable id.
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, new_body()))
            }

            /// The id as text, prefix included.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, IdError> {
                match s.strip_prefix($prefix) {
                    Some(body) if valid_body(body) => Ok(Self(s.to_owned())),
                    _ => Err(IdError { kind: $kind, prefix: $prefix, value: s.chars().take(80).collect() }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                crate::openapi::id_schema($prefix, $kind)
            }
        }

        impl utoipa::ToSchema for $name {
            fn schemas(
                schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>,
            ) {
                schemas.push((stringify!($name).to_owned(), <Self as utoipa::PartialSchema>::schema()));
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

prefixed_id!(
    /// Identifies a memory store (`memstore_…`).
    MemoryStoreId, "memstore_", "memory store"
);
prefixed_id!(
    /// Identifies a memory; stable across renames (`mem_…`).
    MemoryId, "mem_", "memory"
);
prefixed_id!(
    /// Identifies one immutable memory version (`memver_…`).
    MemoryVersionId, "memver_", "memory version"
);
prefixed_id!(
    /// Identifies an API key, never the secret itself (`apikey_…`).
    ApiKeyId, "apikey_", "API key"
);
prefixed_id!(
    /// Identifies a session (`sesn_…`).
    SessionId, "sesn_", "session"
);
prefixed_id!(
    /// Identifies an environment (`env_…`).
    EnvironmentId, "env_", "environment"
);
prefixed_id!(
    /// Identifies an environment key, never the secret itself (`envkey_…`).
    EnvironmentKeyId, "envkey_", "environment key"
);
prefixed_id!(
    /// Identifies a work item of a self-hosted environment's queue (`work_…`).
    WorkId, "work_", "work item"
);
prefixed_id!(
    /// Identifies an agent (`agent_…`).
    AgentId, "agent_", "agent"
);
prefixed_id!(
    /// Identifies a session event; tool-call ids are event ids (`sevt_…`).
    EventId, "sevt_", "session event"
);
prefixed_id!(
    /// Identifies a webhook endpoint (`whep_…`).
    WebhookEndpointId, "whep_", "webhook endpoint"
);
prefixed_id!(
    /// Identifies one webhook event: its payload's `id` and `webhook-id` header (`wevt_…`).
    WebhookEventId, "wevt_", "webhook event"
);
prefixed_id!(
    /// Identifies one event's delivery to one endpoint (`whdel_…`).
    WebhookDeliveryId, "whdel_", "webhook delivery"
);
prefixed_id!(
    /// Identifies a workspace, the unit every Managed Agents resource belongs to (`wrkspc_…`).
    WorkspaceId, "wrkspc_", "workspace"
);
prefixed_id!(
    /// Identifies an admin key, never the secret itself (`admkey_…`): the credential of the
    /// Admin API, which belongs to the organization rather than to a workspace.
    AdminKeyId, "admkey_", "admin key"
);
prefixed_id!(
    /// Identifies one entry of the audit log (`audit_…`).
    AuditEventId, "audit_", "audit event"
);
prefixed_id!(
    /// Identifies a person of the organization (`user_…`).
    UserId, "user_", "user"
);
prefixed_id!(
    /// Identifies an invitation to join the organization (`invite_…`).
    InviteId, "invite_", "invite"
);
prefixed_id!(
    /// Identifies a dream, a model's curation of a memory store (`drm_…`).
    DreamId, "drm_", "dream"
);
prefixed_id!(
    /// Identifies one HTTP request, echoed in the `request-id` header (`req_…`).
    RequestId, "req_", "request"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_round_trip_and_carry_their_prefix() {
        let id = MemoryStoreId::generate();
        assert!(id.as_str().starts_with("memstore_"));
        assert_eq!(id.as_str().len(), "memstore_".len() + BODY_LEN);
        assert_eq!(id.as_str().parse::<MemoryStoreId>().unwrap(), id);
    }

    #[test]
    fn ids_of_another_kind_are_refused() {
        let err = "mem_abc".parse::<MemoryStoreId>().unwrap_err();
        assert!(err.to_string().contains("memory store"));
        assert!("memstore_".parse::<MemoryStoreId>().is_err());
        assert!("memstore_a/b".parse::<MemoryStoreId>().is_err());
        assert!("memstore_011CZkZaBF1tNoB5wlCeusgy".parse::<MemoryStoreId>().is_ok());
    }

    #[test]
    fn tenancy_ids_have_their_own_prefixes() {
        #[rustfmt::skip]
        let rows: Vec<(&str, bool, bool, bool, bool)> = vec![
            // (text, workspace?, admin key?, audit event?, API key?)
            ("wrkspc_01JABCdef", true, false, false, false),
            ("admkey_01JABCdef", false, true, false, false),
            ("audit_01JABCdef", false, false, true, false),
            ("apikey_01JABCdef", false, false, false, true),
            ("wrkspc_", false, false, false, false),
            ("wrkspc_a-b", false, false, false, false),
            ("default", false, false, false, false),
        ];
        for (text, ws, admin, audit, api) in rows {
            assert_eq!(text.parse::<WorkspaceId>().is_ok(), ws, "{text}");
            assert_eq!(text.parse::<AdminKeyId>().is_ok(), admin, "{text}");
            assert_eq!(text.parse::<AuditEventId>().is_ok(), audit, "{text}");
            assert_eq!(text.parse::<ApiKeyId>().is_ok(), api, "{text}");
        }
        assert!(WorkspaceId::generate().as_str().starts_with(WorkspaceId::PREFIX));
        assert!(AdminKeyId::generate().as_str().starts_with("admkey_"));
        assert!(AuditEventId::generate().as_str().starts_with("audit_"));
        let err = "apikey_x".parse::<WorkspaceId>().unwrap_err().to_string();
        assert!(err.contains("workspace") && err.contains("wrkspc_"), "{err}");
    }

    #[test]
    fn ids_sort_by_creation_time() {
        let a = MemoryId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = MemoryId::generate();
        assert!(a < b);
    }

    #[test]
    fn ids_are_unguessable() {
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| MemoryId::generate()).collect();
        assert_eq!(ids.len(), 1000);
    }
}
