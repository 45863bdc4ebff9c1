//! Webhook events: the outbox of a write, recorded in the write's transaction.

use mnemo_api::{DeliveryStatus, EventFilter, WebhookDeliveryId};

use super::{Clock, Micros, Seq};
use crate::Result;
use crate::rules::webhook::{Change, Outbox, Planned};

/// SQL over webhook endpoints, events and deliveries.
pub trait WebhookSql: Clock {
    /// Every endpoint's row number and event filter, held against deletion until the
    /// transaction ends (a deletion that committed first is simply not seen).
    async fn webhook_filters(&self) -> Result<Vec<(Seq, EventFilter)>>;
    /// Records a webhook event; its row number.
    async fn insert_webhook_event(&self, event: &Planned<Seq>, now: Micros) -> Result<Seq>;
    /// Records a delivery of event `event` to endpoint `endpoint`, first attempted at `now`.
    async fn insert_webhook_delivery(
        &self,
        id: &WebhookDeliveryId,
        endpoint: Seq,
        event: Seq,
        status: DeliveryStatus,
        now: Micros,
    ) -> Result<()>;
}

/// Records the events of `outbox` and a delivery to every endpoint subscribed to each
/// ([`Outbox::plan`]), in the caller's transaction: an event exists if and only if its change
/// commits.
pub async fn emit<S: WebhookSql>(sql: &S, outbox: Outbox) -> Result<()> {
    if outbox.is_empty() {
        return Ok(());
    }
    let planned = outbox.plan(&sql.webhook_filters().await?);
    if planned.is_empty() {
        return Ok(());
    }
    let now = sql.now().await?;
    for event in planned {
        let event_seq = sql.insert_webhook_event(&event, now).await?;
        for endpoint in event.endpoints {
            let id = WebhookDeliveryId::generate();
            sql.insert_webhook_delivery(&id, endpoint, event_seq, DeliveryStatus::Pending, now).await?;
        }
    }
    Ok(())
}

/// [`emit`] for the events of one change.
pub async fn emit_one<S: WebhookSql>(sql: &S, change: Change<'_>, resource_id: &str) -> Result<()> {
    let mut outbox = Outbox::default();
    outbox.record(change, resource_id);
    emit(sql, outbox).await
}
