//! What the webhook calls of [`crate::Store`] take and return: endpoints, deliveries to list,
//! deliveries claimed for an attempt, and an attempt's outcome. The rules (which change yields
//! which event, retries) are in [`crate::rules::webhook`].

use std::time::Duration;

use mnemo_api::{
    DeliveryStatus, EventFilter, Secret, Timestamp, WebhookDeliveryId, WebhookEndpointId, WebhookEventId,
    WebhookEventType,
};

use crate::{Cursor, Result, StoreError};

/// A new endpoint, validated; `secret` is its signing secret (`whsec_…`).
#[derive(Debug, Clone)]
pub struct NewWebhookEndpoint {
    pub url: String,
    pub event_types: EventFilter,
    pub description: Option<String>,
    pub secret: Secret,
}

/// An endpoint update, validated; `None` keeps a field.
#[derive(Debug, Clone, Default)]
pub struct WebhookEndpointPatch {
    pub url: Option<String>,
    /// `Some(None)`: every type.
    pub event_types: Option<EventFilter>,
    /// `Some(None)` clears it.
    pub description: Option<Option<String>>,
}

/// Filters of an endpoint's delivery listing (newest first).
#[derive(Debug, Clone, Default)]
pub struct ListWebhookDeliveries {
    pub status: Option<DeliveryStatus>,
    pub limit: u32,
    pub after: Option<Cursor>,
}

/// A delivery claimed for one attempt: everything needed to send it. Until the claim's lease
/// ends nobody else claims it; the attempt is reported with
/// [`crate::Operations::finish_webhook_attempt`] under its `attempt` number.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    pub id: WebhookDeliveryId,
    /// This attempt's number (1: the first).
    pub attempt: u32,
    pub endpoint: WebhookEndpointId,
    pub url: String,
    pub secret: Secret,
    /// The secret a rotation replaced, while it still signs (deliveries then carry both
    /// signatures).
    pub previous_secret: Option<Secret>,
    pub event: WebhookEventId,
    pub event_type: WebhookEventType,
    pub resource_id: String,
    /// When the event happened.
    pub created_at: Timestamp,
    /// The event's workspace (the endpoint's: an endpoint hears its own workspace's events
    /// only): the payload's `data.workspace_id`.
    pub workspace_id: mnemo_api::WorkspaceId,
    /// The payload's `data.organization_id`: the organization's id.
    pub organization_id: String,
}

/// What one attempt got, and what becomes of its delivery.
#[derive(Debug, Clone)]
pub struct WebhookAttempt {
    pub delivery: WebhookDeliveryId,
    /// The claim's attempt number: a report for an attempt that is no longer the latest (its
    /// lease ran out and someone claimed it again) changes nothing.
    pub attempt: u32,
    /// The HTTP status the endpoint answered, if it answered.
    pub status_code: Option<u16>,
    /// Why the attempt failed, if it did (kept short; never a secret).
    pub error: Option<String>,
    pub next: crate::rules::webhook::Next,
}

/// How long an attempt's claim lasts at the least (its send may take this long before another
/// process may try again).
pub const MIN_CLAIM_LEASE: Duration = Duration::from_secs(1);

/// The most deliveries one claim returns.
pub const MAX_CLAIM: u32 = 100;

/// An event filter as a column holds it: JSON text of the type names, `NULL` for every type.
pub fn filter_to_column(filter: &EventFilter) -> Option<String> {
    filter.as_ref().map(|types| {
        serde_json::to_string(&types.iter().map(|t| t.as_str()).collect::<Vec<_>>()).expect("strings serialise")
    })
}

/// An event filter from its column.
pub fn filter_from_column(text: Option<&str>) -> Result<EventFilter> {
    let Some(text) = text else { return Ok(None) };
    let names: Vec<String> =
        serde_json::from_str(text).map_err(|e| StoreError::backend(format!("a webhook event filter: {e}")))?;
    // A type this build does not know (written by a newer one) is skipped, not an error.
    Ok(Some(names.iter().filter_map(|n| WebhookEventType::parse(n)).collect()))
}

/// An event type from its column.
pub fn event_type_from_column(text: &str) -> Result<WebhookEventType> {
    WebhookEventType::parse(text).ok_or_else(|| StoreError::backend(format!("unknown webhook event type `{text}`")))
}

/// A delivery status from its column.
pub fn status_from_column(text: &str) -> Result<DeliveryStatus> {
    DeliveryStatus::parse(text).ok_or_else(|| StoreError::backend(format!("unknown webhook delivery status `{text}`")))
}

/// Cuts an error message to what a delivery row keeps.
pub fn short_error(message: &str) -> String {
    const MAX: usize = 500;
    match message.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &message[..at]),
        None => message.to_owned(),
    }
}
