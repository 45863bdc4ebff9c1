//! Environments and the self-hosted work queue: wire shapes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::Secret;
use crate::ids::{EnvironmentId, EnvironmentKeyId, SessionId, WorkId};

/// Where a session's tools run (`type: "environment"`). Timestamps are RFC 3339 strings, as
/// the reference client types them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "environment")]
pub struct Environment {
    pub id: EnvironmentId,
    pub name: String,
    pub description: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// `{"type": "self_hosted"}` or a `cloud` configuration (kept as data; mnemo serves only
    /// self-hosted environments).
    pub config: Value,
    pub scope: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

impl Environment {
    /// Whether sessions on it are served by a self-hosted worker through the work queue.
    pub fn is_self_hosted(&self) -> bool {
        config_type(&self.config) == Some("self_hosted")
    }
}

/// The prefix of environment keys minted by mnemo (through the API or the console).
pub const ENVIRONMENT_KEY_PREFIX: &str = "sk-mnemo-env-";

/// The `type` of an environment `config`.
pub fn config_type(config: &Value) -> Option<&str> {
    config.get("type").and_then(Value::as_str)
}

/// Body of `POST /v1/environments`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CreateEnvironment {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// Body of `POST /v1/environments/{id}`. `description: null` clears it, so it is a double
/// option: absent = keep, `null` = clear, string = set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UpdateEnvironment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "double_option", skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// A patch: a string upserts; `null` or `""` removes the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, Option<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// Reads a field that may be absent (keep), `null` (clear) or a value (set) as a double option.
pub(crate) fn double_option<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// Confirmation of an environment deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "environment_deleted")]
pub struct EnvironmentDeleted {
    pub id: EnvironmentId,
}

/// A freshly minted environment key: the only time the secret is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "environment_key")]
pub struct EnvironmentKey {
    pub id: EnvironmentKeyId,
    pub environment_id: EnvironmentId,
    /// Present only in the answer to the creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub key: Option<Secret>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

/// The `expected_last_heartbeat` of an item's first heartbeat.
pub const NO_HEARTBEAT: &str = "NO_HEARTBEAT";

/// Lifecycle of a work item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkState {
    Queued,
    Starting,
    Active,
    Stopping,
    Stopped,
}

impl WorkState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Starting => "starting",
            Self::Active => "active",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Queued, Self::Starting, Self::Active, Self::Stopping, Self::Stopped]
            .into_iter()
            .find(|w| w.as_str() == s)
    }
}

/// What a work item asks the worker to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkData {
    /// `session` (serve that session) or `healthcheck`.
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

impl WorkData {
    /// Work for one session.
    pub fn session(id: &SessionId) -> Self {
        Self { kind: "session".into(), id: id.to_string() }
    }

    /// The session this work serves, if it serves one.
    pub fn session_id(&self) -> Option<&str> {
        (self.kind == "session").then_some(self.id.as_str())
    }
}

/// One item of a self-hosted environment's queue (`type: "work"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "work")]
pub struct Work {
    pub id: WorkId,
    pub environment_id: EnvironmentId,
    pub state: WorkState,
    pub data: WorkData,
    /// Only on the poll answer: base64url JSON carrying a fresh `sessions_token`.
    #[schema(value_type = Option<String>)]
    pub secret: Option<Secret>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    pub created_at: String,
    pub acknowledged_at: Option<String>,
    pub started_at: Option<String>,
    pub latest_heartbeat_at: Option<String>,
    pub stop_requested_at: Option<String>,
    pub stopped_at: Option<String>,
}

/// Answer to a heartbeat (`type: "work_heartbeat"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "work_heartbeat")]
pub struct WorkHeartbeat {
    /// Echo this byte for byte as the next `expected_last_heartbeat`.
    pub last_heartbeat: String,
    pub ttl_seconds: u64,
    pub lease_extended: bool,
    pub state: WorkState,
}

/// The lease as it stands, in a heartbeat precondition failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkLeaseState {
    pub last_heartbeat: Option<String>,
    pub lease_extended: bool,
    pub state: WorkState,
    pub ttl_seconds: u64,
}

/// Queue statistics (`type: "work_queue_stats"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "work_queue_stats")]
pub struct WorkQueueStats {
    pub depth: u64,
    pub pending: u64,
    pub oldest_queued_at: Option<String>,
    pub workers_polling: Option<u64>,
}

/// Body of `POST …/work/{id}/stop`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StopWork {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// The decoded `secret` of a polled work item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkSecret {
    #[schema(value_type = String)]
    pub sessions_token: Secret,
}

impl WorkSecret {
    /// URL-safe base64 of the JSON payload, as the queue hands it out.
    pub fn encode(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).expect("a secret serialises"))
    }

    /// Reads a secret back, with or without padding.
    pub fn decode(secret: &str) -> Option<Self> {
        use base64::Engine;
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(secret.trim().trim_end_matches('=')).ok()?;
        let parsed: Self = serde_json::from_slice(&raw).ok()?;
        (!parsed.sessions_token.is_empty()).then_some(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_round_trip_with_or_without_padding() {
        let s = WorkSecret { sessions_token: "sk-sess-abc".into() };
        let enc = s.encode();
        assert_eq!(WorkSecret::decode(&enc), Some(s.clone()));
        assert_eq!(WorkSecret::decode(&format!("{enc}==")), Some(s));
        assert_eq!(WorkSecret::decode("not base64!"), None);
    }

    #[test]
    fn debug_never_prints_a_credential() {
        let token = "sk-mnemo-sess-TOPSECRET";
        let secret = WorkSecret { sessions_token: token.into() };
        let work: Work = serde_json::from_value(serde_json::json!({
            "type": "work", "id": "work_w", "environment_id": "env_e", "state": "queued",
            "data": {"type": "session", "id": "sesn_s"}, "secret": secret.encode(), "created_at": "t",
            "acknowledged_at": null, "started_at": null, "latest_heartbeat_at": null,
            "stop_requested_at": null, "stopped_at": null,
        }))
        .unwrap();
        let key = EnvironmentKey {
            id: EnvironmentKeyId::generate(),
            environment_id: EnvironmentId::generate(),
            key: Some("sk-mnemo-env-TOPSECRET".into()),
            created_at: String::new(),
            revoked_at: None,
        };
        for printed in [format!("{secret:?}"), format!("{work:?}"), format!("{work:#?}"), format!("{key:?}")] {
            assert!(!printed.contains("TOPSECRET"), "{printed}");
            assert!(!printed.contains(&secret.encode()), "{printed}");
            assert!(printed.contains("[redacted]"), "{printed}");
        }
        let unset = Work { secret: None, ..work };
        assert!(format!("{unset:?}").contains("secret: None"));
    }

    #[test]
    fn update_tells_absent_from_null() {
        let absent: UpdateEnvironment = serde_json::from_str("{}").unwrap();
        assert_eq!(absent.description, None);
        let null: UpdateEnvironment = serde_json::from_str(r#"{"description": null}"#).unwrap();
        assert_eq!(null.description, Some(None));
        let set: UpdateEnvironment = serde_json::from_str(r#"{"description": "x"}"#).unwrap();
        assert_eq!(set.description, Some(Some("x".into())));
    }
}
