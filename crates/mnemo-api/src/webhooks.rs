//! Webhooks: the endpoints an operator registers (a mnemo extension; the hosted product
//! registers them in its console), the thin events mnemo sends them — shaped as the reference
//! SDK's `BetaWebhookEvent` — and the record of each delivery.

use std::fmt;

use base64::Engine as _;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::{WebhookDeliveryId, WebhookEndpointId, WebhookEventId};
use chrono::{DateTime, Utc};

use crate::types::Invalid;
#[cfg(test)]
use crate::types::Timestamp;

/// What a webhook event reports (`data.type`), named as the reference SDK names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
pub enum WebhookEventType {
    #[serde(rename = "session.created")]
    SessionCreated,
    #[serde(rename = "session.updated")]
    SessionUpdated,
    #[serde(rename = "session.archived")]
    SessionArchived,
    #[serde(rename = "session.deleted")]
    SessionDeleted,
    /// The session started running (its log's `session.status_running`).
    #[serde(rename = "session.status_run_started")]
    SessionStatusRunStarted,
    /// The session went idle, whatever the stop reason (its log's `session.status_idle`).
    #[serde(rename = "session.status_idled")]
    SessionStatusIdled,
    /// The session was terminated (its log's `session.status_terminated`).
    #[serde(rename = "session.status_terminated")]
    SessionStatusTerminated,
    /// The session is running.
    #[serde(rename = "session.running")]
    SessionRunning,
    /// The session went idle with a stop reason other than `requires_action`.
    #[serde(rename = "session.idled")]
    SessionIdled,
    /// The session went idle waiting for tool results or confirmations.
    #[serde(rename = "session.requires_action")]
    SessionRequiresAction,
    #[serde(rename = "memory_store.created")]
    MemoryStoreCreated,
    #[serde(rename = "memory_store.archived")]
    MemoryStoreArchived,
    #[serde(rename = "memory_store.deleted")]
    MemoryStoreDeleted,
    #[serde(rename = "environment.created")]
    EnvironmentCreated,
    #[serde(rename = "environment.updated")]
    EnvironmentUpdated,
    #[serde(rename = "environment.archived")]
    EnvironmentArchived,
    #[serde(rename = "environment.deleted")]
    EnvironmentDeleted,
    #[serde(rename = "agent.created")]
    AgentCreated,
    #[serde(rename = "agent.updated")]
    AgentUpdated,
    #[serde(rename = "agent.archived")]
    AgentArchived,
}

impl WebhookEventType {
    /// Every type mnemo sends.
    pub const ALL: &'static [Self] = &[
        Self::SessionCreated,
        Self::SessionUpdated,
        Self::SessionArchived,
        Self::SessionDeleted,
        Self::SessionStatusRunStarted,
        Self::SessionStatusIdled,
        Self::SessionStatusTerminated,
        Self::SessionRunning,
        Self::SessionIdled,
        Self::SessionRequiresAction,
        Self::MemoryStoreCreated,
        Self::MemoryStoreArchived,
        Self::MemoryStoreDeleted,
        Self::EnvironmentCreated,
        Self::EnvironmentUpdated,
        Self::EnvironmentArchived,
        Self::EnvironmentDeleted,
        Self::AgentCreated,
        Self::AgentUpdated,
        Self::AgentArchived,
    ];

    /// The wire name (`session.status_idled`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionCreated => "session.created",
            Self::SessionUpdated => "session.updated",
            Self::SessionArchived => "session.archived",
            Self::SessionDeleted => "session.deleted",
            Self::SessionStatusRunStarted => "session.status_run_started",
            Self::SessionStatusIdled => "session.status_idled",
            Self::SessionStatusTerminated => "session.status_terminated",
            Self::SessionRunning => "session.running",
            Self::SessionIdled => "session.idled",
            Self::SessionRequiresAction => "session.requires_action",
            Self::MemoryStoreCreated => "memory_store.created",
            Self::MemoryStoreArchived => "memory_store.archived",
            Self::MemoryStoreDeleted => "memory_store.deleted",
            Self::EnvironmentCreated => "environment.created",
            Self::EnvironmentUpdated => "environment.updated",
            Self::EnvironmentArchived => "environment.archived",
            Self::EnvironmentDeleted => "environment.deleted",
            Self::AgentCreated => "agent.created",
            Self::AgentUpdated => "agent.updated",
            Self::AgentArchived => "agent.archived",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for WebhookEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an endpoint is sent: `None` is every type, including types added later.
pub type EventFilter = Option<Vec<WebhookEventType>>;

/// The most characters an endpoint URL may have.
pub const MAX_WEBHOOK_URL_CHARS: usize = 2048;
/// The most characters an endpoint description may have.
pub const MAX_WEBHOOK_DESCRIPTION_CHARS: usize = 512;
/// What every signing secret starts with.
pub const WEBHOOK_SECRET_PREFIX: &str = "whsec_";

/// Checks an endpoint URL: absolute `http://` or `https://` with a host, no credentials and no
/// fragment, at most [`MAX_WEBHOOK_URL_CHARS`]. Returns it as it will be called.
pub fn parse_webhook_url(raw: &str) -> Result<String, Invalid> {
    let n = raw.chars().count();
    if n > MAX_WEBHOOK_URL_CHARS {
        return Err(Invalid(format!("url must be at most {MAX_WEBHOOK_URL_CHARS} characters long (got {n})")));
    }
    let url = url::Url::parse(raw.trim())
        .map_err(|e| Invalid(format!("url must be an absolute http:// or https:// URL (`{raw}`: {e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Invalid(format!("url must use http:// or https:// (got `{}://`)", url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(Invalid(format!("url must name a host (got `{raw}`)")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Invalid(
            "url must not carry credentials (user:password@); verify deliveries by their signature".into(),
        ));
    }
    if url.fragment().is_some() {
        return Err(Invalid("url must not have a fragment (#…)".into()));
    }
    Ok(url.to_string())
}

/// Checks an event filter: a non-empty list of known types (duplicates dropped, sorted).
pub fn parse_event_types(raw: &[String]) -> Result<Vec<WebhookEventType>, Invalid> {
    if raw.is_empty() {
        return Err(Invalid("event_types must name at least one type, or be omitted (null) for every type".into()));
    }
    let mut types = Vec::with_capacity(raw.len());
    for name in raw {
        let Some(t) = WebhookEventType::parse(name) else {
            let known: Vec<&str> = WebhookEventType::ALL.iter().map(|t| t.as_str()).collect();
            return Err(Invalid(format!("unknown event type `{name}` in event_types (known: {})", known.join(", "))));
        };
        types.push(t);
    }
    types.sort();
    types.dedup();
    Ok(types)
}

/// Checks an endpoint description: at most [`MAX_WEBHOOK_DESCRIPTION_CHARS`], no control
/// characters.
pub fn validate_webhook_description(d: &str) -> Result<(), Invalid> {
    let n = d.chars().count();
    if n > MAX_WEBHOOK_DESCRIPTION_CHARS {
        return Err(Invalid(format!(
            "description must be at most {MAX_WEBHOOK_DESCRIPTION_CHARS} characters long (got {n})"
        )));
    }
    if d.chars().any(char::is_control) {
        return Err(Invalid("description must not contain control characters".into()));
    }
    Ok(())
}

/// A new signing secret: `whsec_` and the base64 of 32 random bytes, the form Standard Webhooks
/// verifiers (the reference SDK's `webhooks.unwrap`) take.
pub fn generate_webhook_secret() -> String {
    let mut key = [0u8; 32];
    rand::rng().fill_bytes(&mut key);
    format!("{WEBHOOK_SECRET_PREFIX}{}", base64::engine::general_purpose::STANDARD.encode(key))
}

/// The key bytes a `whsec_…` secret stands for (what the signature is keyed by).
pub fn webhook_secret_key(secret: &str) -> Option<Vec<u8>> {
    let body = secret.strip_prefix(WEBHOOK_SECRET_PREFIX).unwrap_or(secret);
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

/// An endpoint that webhook events are POSTed to (`type: "webhook_endpoint"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "webhook_endpoint")]
pub struct WebhookEndpoint {
    pub id: WebhookEndpointId,
    pub url: String,
    /// The event types it is sent; null: every type.
    pub event_types: Option<Vec<WebhookEventType>>,
    pub description: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Until when the secret a rotation replaced still signs deliveries beside the current one
    /// (null: no previous secret signs).
    #[serde(default)]
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// The signing secret (`whsec_…`): only in the answers to the creation, to a rotation and to
    /// `GET /v1/webhook_endpoints/{id}/secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub secret: Option<crate::Secret>,
}

/// The body of `POST /v1/webhook_endpoints`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateWebhookEndpoint {
    /// Where events are POSTed: `http://` or `https://`.
    pub url: String,
    /// The event types to send; omitted or null: every type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The body of `POST /v1/webhook_endpoints/{id}`: what is given changes, the rest stays.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateWebhookEndpoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A list of types, or null for every type.
    #[serde(default, deserialize_with = "crate::environments::double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<String>>)]
    pub event_types: Option<Option<Vec<String>>>,
    /// A description, or null to clear it.
    #[serde(default, deserialize_with = "crate::environments::double_option", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub description: Option<Option<String>>,
}

/// How long a rotated-out secret keeps signing, unless the rotation says otherwise.
pub const DEFAULT_KEEP_PREVIOUS_SECRET_SECONDS: u64 = 86_400;
/// The longest a rotated-out secret may keep signing.
pub const MAX_KEEP_PREVIOUS_SECRET_SECONDS: u64 = 7 * 86_400;

/// The body of `POST /v1/webhook_endpoints/{id}/rotate_secret`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RotateWebhookSecret {
    /// Seconds the old secret keeps signing beside the new one, so receivers can switch without
    /// refusing a delivery (0–604800, default 86400; 0 stops it at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_previous_seconds: Option<u64>,
}

/// Confirmation of an endpoint deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "webhook_endpoint_deleted")]
pub struct WebhookEndpointDeleted {
    pub id: WebhookEndpointId,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not yet delivered: waiting for its next attempt (or in one now).
    Pending,
    /// The endpoint answered 2xx.
    Delivered,
    /// Every attempt failed; no more are made.
    Failed,
}

impl DeliveryStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "delivered" => Some(Self::Delivered),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }
}

/// One event on its way to one endpoint (`type: "webhook_delivery"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "webhook_delivery")]
pub struct WebhookDelivery {
    pub id: WebhookDeliveryId,
    pub endpoint_id: WebhookEndpointId,
    /// The event's id: its payload's `id` and the `webhook-id` header of every attempt.
    pub event_id: WebhookEventId,
    pub event_type: WebhookEventType,
    /// The id of the resource the event is about (`data.id`).
    pub resource_id: String,
    pub status: DeliveryStatus,
    /// Attempts made (or under way).
    pub attempts: u32,
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// The HTTP status the endpoint answered the last attempt with, if it answered.
    pub last_status_code: Option<u16>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
    /// When the next attempt is due (while pending; during an attempt, when it may be retried
    /// if it never finishes).
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// When it was delivered or given up on.
    pub finished_at: Option<DateTime<Utc>>,
}

/// The payload mnemo POSTs: a thin event naming the resource (`type: "event"`), as the
/// reference SDK's `BetaWebhookEvent` reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "event")]
pub struct WebhookEvent {
    /// Unique per event, the same on every attempt and every endpoint.
    pub id: WebhookEventId,
    /// RFC 3339: when the change happened.
    pub created_at: String,
    pub data: WebhookEventData,
}

/// What changed: its type and the resource's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookEventData {
    #[serde(rename = "type")]
    pub kind: WebhookEventType,
    /// The id of the resource (session, memory store, environment, agent).
    pub id: String,
    pub organization_id: String,
    pub workspace_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_round_trip_by_their_wire_names() {
        for t in WebhookEventType::ALL {
            assert_eq!(WebhookEventType::parse(t.as_str()), Some(*t));
            assert_eq!(serde_json::to_value(t).unwrap(), t.as_str());
        }
        assert_eq!(WebhookEventType::parse("session.bogus"), None);
    }

    #[test]
    fn urls_must_be_http_or_https_with_a_host_and_no_credentials() {
        assert_eq!(parse_webhook_url("https://example.com/hook").unwrap(), "https://example.com/hook");
        assert_eq!(parse_webhook_url("http://127.0.0.1:9000").unwrap(), "http://127.0.0.1:9000/");
        for (bad, says) in [
            ("ftp://example.com/x", "http:// or https://"),
            ("example.com/hook", "absolute"),
            ("", "absolute"),
            ("https://user:pw@example.com/", "credentials"),
            ("https://example.com/#frag", "fragment"),
            ("file:///etc/passwd", "http:// or https://"),
        ] {
            let e = parse_webhook_url(bad).unwrap_err();
            assert!(e.0.contains(says), "{bad}: {}", e.0);
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_WEBHOOK_URL_CHARS));
        assert!(parse_webhook_url(&long).unwrap_err().0.contains("at most"));
    }

    #[test]
    fn event_filters_name_known_types() {
        let types = parse_event_types(&["session.status_idled".into(), "agent.created".into(), "agent.created".into()])
            .unwrap();
        assert_eq!(types, vec![WebhookEventType::SessionStatusIdled, WebhookEventType::AgentCreated]);
        assert!(parse_event_types(&[]).unwrap_err().0.contains("at least one"));
        let e = parse_event_types(&["session.exploded".into()]).unwrap_err();
        assert!(e.0.contains("session.exploded") && e.0.contains("session.status_idled"), "{}", e.0);
    }

    #[test]
    fn secrets_are_whsec_and_32_bytes_of_base64() {
        let s = generate_webhook_secret();
        assert!(s.starts_with("whsec_"));
        assert_eq!(webhook_secret_key(&s).unwrap().len(), 32);
        assert_ne!(s, generate_webhook_secret());
    }

    #[test]
    fn the_payload_has_the_sdk_shape_and_debug_hides_the_secret() {
        let event = WebhookEvent {
            id: "wevt_011CZkZaBF1tNoB5wlCeusgy".parse().unwrap(),
            created_at: "2026-05-01T12:00:00.000000Z".into(),
            data: WebhookEventData {
                kind: WebhookEventType::SessionStatusIdled,
                id: "sesn_1".into(),
                organization_id: "org".into(),
                workspace_id: "ws".into(),
            },
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "event");
        assert_eq!(json["data"]["type"], "session.status_idled");
        assert_eq!(json["data"]["id"], "sesn_1");
        let endpoint = WebhookEndpoint {
            id: WebhookEndpointId::generate(),
            url: "https://example.com/".into(),
            event_types: None,
            description: None,
            created_at: Timestamp::default(),
            updated_at: Timestamp::default(),
            previous_secret_expires_at: None,
            secret: Some("whsec_c2VjcmV0".into()),
        };
        assert!(!format!("{endpoint:?}").contains("c2VjcmV0"));
    }
}
