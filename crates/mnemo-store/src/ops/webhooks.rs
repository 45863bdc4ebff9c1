//! Webhooks: endpoints, the outbox of a write (recorded in the write's transaction), and the
//! claims and outcomes of delivery attempts, each decided by [`crate::rules::webhook`].
//!
//! Locks: an endpoint's update, rotation and deletion lock its row ([`WebhookSql::lock_endpoint`])
//! before anything else; a claim locks the due deliveries it takes, skipping those another claim
//! holds ([`WebhookSql::lock_due_deliveries`]); a report locks its delivery
//! ([`WebhookSql::lock_delivery`]). No operation takes two of these, so none waits in a cycle.

use std::time::Duration;

use mnemo_api::{
    DeliveryStatus, EventFilter, WebhookDelivery, WebhookDeliveryId, WebhookEndpoint, WebhookEndpointId,
    WebhookEventId, WebhookEventType, WorkspaceId,
};

use super::{Clock, Micros, Seq};
use crate::row::{page, ts, ts_opt};
use crate::rules::webhook::{self as rule, Change, Outbox, Planned, Recorded};
use crate::webhook::short_error;
use crate::{
    ClaimedDelivery, Cursor, ListWebhookDeliveries, Listing, NewWebhookEndpoint, Result, StoreError, WebhookAttempt,
    WebhookEndpointPatch,
};

/// An endpoint as stored, secrets included.
#[derive(Clone)]
pub struct EndpointRow {
    pub seq: Seq,
    pub id: WebhookEndpointId,
    pub url: String,
    pub event_types: EventFilter,
    pub description: Option<String>,
    pub created_at: Micros,
    pub updated_at: Micros,
    pub secret: String,
    /// The secret a rotation replaced, kept until `previous_secret_expires_at` (whether it still
    /// signs is [`rule::previous_secret_signs`]'s to say).
    pub previous_secret: Option<String>,
    pub previous_secret_expires_at: Option<Micros>,
}

impl std::fmt::Debug for EndpointRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointRow").field("seq", &self.seq).field("id", &self.id).finish_non_exhaustive()
    }
}

impl EndpointRow {
    /// The endpoint as the API shows it at `now`: the replaced secret's expiry only while it
    /// still signs, the secret only if `with_secret`.
    pub fn view(self, now: Micros, with_secret: bool) -> WebhookEndpoint {
        let until = self.previous_secret_expires_at;
        WebhookEndpoint {
            id: self.id,
            url: self.url,
            event_types: self.event_types,
            description: self.description,
            created_at: ts(self.created_at),
            updated_at: ts(self.updated_at),
            previous_secret_expires_at: ts_opt(until.filter(|_| rule::previous_secret_signs(until, now))),
            secret: with_secret.then_some(self.secret.into()),
        }
    }
}

/// A new endpoint's row.
#[derive(Debug, Clone, Copy)]
pub struct NewEndpointRow<'a> {
    /// The workspace it belongs to: it receives that workspace's events only.
    pub ws: &'a WorkspaceId,
    pub id: &'a WebhookEndpointId,
    pub new: &'a NewWebhookEndpoint,
    pub now: Micros,
}

/// A delivery as a claim or a report judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryRow {
    pub seq: Seq,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub next_attempt_at: Option<Micros>,
}

/// What sending a claimed delivery needs, as stored.
#[derive(Clone)]
pub struct SendRow {
    pub seq: Seq,
    pub id: WebhookDeliveryId,
    pub endpoint: WebhookEndpointId,
    pub url: String,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_secret_expires_at: Option<Micros>,
    pub event: WebhookEventId,
    pub event_type: WebhookEventType,
    pub resource_id: String,
    /// When the event happened.
    pub created_at: Micros,
    /// The endpoint's workspace: the event's (an endpoint receives its own workspace's events
    /// only).
    pub workspace_id: WorkspaceId,
    /// The id of the organization every workspace belongs to.
    pub organization_id: String,
}

impl std::fmt::Debug for SendRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendRow")
            .field("seq", &self.seq)
            .field("id", &self.id)
            .field("endpoint", &self.endpoint)
            .field("event", &self.event)
            .finish_non_exhaustive()
    }
}

/// SQL over webhook endpoints, events and deliveries. Endpoints are looked up in one workspace:
/// another workspace's endpoint is not found, and is never subscribed to its events.
pub trait WebhookSql: Clock {
    /// Every endpoint of workspace `ws`: its row number and event filter, held against deletion
    /// until the transaction ends (a deletion that committed first is simply not seen).
    async fn webhook_filters(&self, ws: &WorkspaceId) -> Result<Vec<(Seq, EventFilter)>>;
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

    /// Records a new endpoint.
    async fn insert_endpoint(&self, row: NewEndpointRow<'_>) -> Result<()>;
    /// Workspace `ws`'s endpoint, if it exists there (no lock: reads).
    async fn find_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<Option<EndpointRow>>;
    /// Workspace `ws`'s endpoint, if it exists there, locked against other updates, rotations
    /// and deletion until the transaction ends (PostgreSQL: `FOR UPDATE`).
    async fn lock_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<Option<EndpointRow>>;
    /// Up to `limit` endpoints of workspace `ws` with row numbers below `before`, newest first.
    async fn endpoints_before(&self, ws: &WorkspaceId, before: Seq, limit: u32) -> Result<Vec<EndpointRow>>;
    /// Writes endpoint `seq`'s URL, filter and description.
    async fn set_endpoint(
        &self,
        seq: Seq,
        url: &str,
        filter: &EventFilter,
        description: Option<&str>,
        now: Micros,
    ) -> Result<()>;
    /// Writes endpoint `seq`'s secret, and the replaced one kept (`None`: none) until `until`.
    async fn set_secret(
        &self,
        seq: Seq,
        secret: &str,
        previous: Option<&str>,
        until: Option<Micros>,
        now: Micros,
    ) -> Result<()>;
    /// Deletes endpoint `seq`'s deliveries.
    async fn delete_endpoint_deliveries(&self, seq: Seq) -> Result<()>;
    /// Deletes endpoint `seq` (its deliveries first: [`Self::delete_endpoint_deliveries`]).
    async fn delete_endpoint_row(&self, seq: Seq) -> Result<()>;
    /// Deletes the events no delivery refers to; how many.
    async fn delete_orphan_events(&self) -> Result<u64>;
    /// Up to `limit` deliveries of endpoint `endpoint` with row numbers below `before`, in
    /// `status` if given, newest first.
    async fn deliveries_before(
        &self,
        endpoint: &EndpointRow,
        status: Option<DeliveryStatus>,
        before: Seq,
        limit: u32,
    ) -> Result<Vec<(WebhookDelivery, Seq)>>;
    /// Up to `limit` deliveries in `status` whose next attempt is at `now` or before, first in
    /// [`rule::claim_order`] (`ORDER BY next_attempt_at, seq`), each locked; on PostgreSQL a row
    /// another transaction holds is skipped, not waited for (`FOR UPDATE SKIP LOCKED`).
    async fn lock_due_deliveries(&self, status: DeliveryStatus, now: Micros, limit: u32) -> Result<Vec<DeliveryRow>>;
    /// The earliest `next_attempt_at` of the deliveries in `status` (`None`: there are none);
    /// no lock, it only reads.
    async fn earliest_next_attempt(&self, status: DeliveryStatus) -> Result<Option<Micros>>;
    /// Writes the claims of deliveries (by row number).
    async fn start_attempts(&self, claims: &[(Seq, rule::Claim)]) -> Result<()>;
    /// What sending deliveries `seqs` needs, in any order.
    async fn deliveries_to_send(&self, seqs: &[Seq]) -> Result<Vec<SendRow>>;
    /// The delivery, if it exists, locked until the transaction ends (PostgreSQL: `FOR UPDATE`).
    async fn lock_delivery(&self, id: &WebhookDeliveryId) -> Result<Option<DeliveryRow>>;
    /// Writes an attempt's outcome to delivery `seq`.
    async fn record_attempt(
        &self,
        seq: Seq,
        recorded: &Recorded,
        status_code: Option<u16>,
        error: Option<&str>,
    ) -> Result<()>;
    /// Deletes the deliveries in `status` that finished before `before`; how many.
    async fn delete_finished_deliveries(&self, status: DeliveryStatus, before: Micros) -> Result<u64>;
}

fn endpoint_not_found(id: &WebhookEndpointId) -> StoreError {
    StoreError::not_found("webhook endpoint", id)
}

/// Registers an endpoint; the answer carries its secret.
pub async fn create_endpoint<S: WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    new: &NewWebhookEndpoint,
) -> Result<WebhookEndpoint> {
    let id = WebhookEndpointId::generate();
    let now = sql.now().await?;
    sql.insert_endpoint(NewEndpointRow { ws, id: &id, new, now }).await?;
    let row = sql.find_endpoint(ws, &id).await?.ok_or_else(|| endpoint_not_found(&id))?;
    Ok(row.view(now, true))
}

/// An endpoint, with its secret only if `with_secret`.
pub async fn get_endpoint<S: WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &WebhookEndpointId,
    with_secret: bool,
) -> Result<WebhookEndpoint> {
    let row = sql.find_endpoint(ws, id).await?.ok_or_else(|| endpoint_not_found(id))?;
    Ok(row.view(sql.now().await?, with_secret))
}

/// Endpoints, newest first, without secrets.
pub async fn list_endpoints<S: WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<WebhookEndpoint>> {
    let before = crate::row::before(after)?;
    let rows = sql.endpoints_before(ws, before, limit.saturating_add(1)).await?;
    let now = sql.now().await?;
    Ok(page(rows.into_iter().map(|r| (r.seq, r.view(now, false))).map(|(seq, e)| (e, seq)).collect(), limit))
}

/// Applies `patch` to an endpoint ([`rule::patch_endpoint`]), its row locked.
pub async fn update_endpoint<S: WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &WebhookEndpointId,
    patch: WebhookEndpointPatch,
) -> Result<WebhookEndpoint> {
    let mut row = sql.lock_endpoint(ws, id).await?.ok_or_else(|| endpoint_not_found(id))?;
    let (url, filter, description) =
        rule::patch_endpoint(&row.url, &row.event_types, row.description.as_deref(), patch);
    let now = sql.now().await?;
    sql.set_endpoint(row.seq, &url, &filter, description.as_deref(), now).await?;
    (row.url, row.event_types, row.description, row.updated_at) = (url, filter, description, now);
    Ok(row.view(now, false))
}

/// Replaces an endpoint's secret with `secret`, its row locked; the replaced one signs beside it
/// until [`rule::previous_secret_until`]. The answer carries the new secret.
pub async fn rotate_secret<S: WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    id: &WebhookEndpointId,
    secret: &str,
    keep_previous: Duration,
) -> Result<WebhookEndpoint> {
    let mut row = sql.lock_endpoint(ws, id).await?.ok_or_else(|| endpoint_not_found(id))?;
    let now = sql.now().await?;
    let until = rule::previous_secret_until(now, keep_previous);
    let previous = until.map(|_| row.secret.as_str());
    sql.set_secret(row.seq, secret, previous, until, now).await?;
    row.previous_secret = previous.map(str::to_owned);
    (row.secret, row.previous_secret_expires_at, row.updated_at) = (secret.to_owned(), until, now);
    Ok(row.view(now, true))
}

/// Removes an endpoint, its row locked, with its deliveries and the events only they referred
/// to.
pub async fn delete_endpoint<S: WebhookSql>(sql: &S, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<()> {
    let row = sql.lock_endpoint(ws, id).await?.ok_or_else(|| endpoint_not_found(id))?;
    sql.delete_endpoint_deliveries(row.seq).await?;
    sql.delete_endpoint_row(row.seq).await?;
    sql.delete_orphan_events().await?;
    Ok(())
}

/// An endpoint's deliveries, newest first.
pub async fn list_deliveries<S: WebhookSql>(
    sql: &S,
    ws: &WorkspaceId,
    endpoint: &WebhookEndpointId,
    q: &ListWebhookDeliveries,
) -> Result<Listing<WebhookDelivery>> {
    let row = sql.find_endpoint(ws, endpoint).await?.ok_or_else(|| endpoint_not_found(endpoint))?;
    let before = crate::row::before(q.after.as_ref())?;
    let rows = sql.deliveries_before(&row, q.status, before, q.limit.saturating_add(1)).await?;
    Ok(page(rows, q.limit))
}

/// Whether any delivery is due now: a look that claims nothing, which SQLite takes on a reader
/// before it spends the writer's turn on a [`claim`] (most looks find nothing due).
pub async fn any_due<S: WebhookSql>(sql: &S) -> Result<bool> {
    let now = sql.now().await?;
    Ok(!sql.lock_due_deliveries(rule::CLAIMABLE, now, 1).await?.is_empty())
}

/// How long until the earliest [`rule::CLAIMABLE`] delivery is due on the store's clock
/// ([`rule::due_in`]; zero: one is due now); `None` when none is pending. A claimed delivery
/// counts from the end of its lease, when it is made again if its attempt is never reported.
pub async fn next_due_in<S: WebhookSql>(sql: &S) -> Result<Option<Duration>> {
    let Some(at) = sql.earliest_next_attempt(rule::CLAIMABLE).await? else { return Ok(None) };
    Ok(Some(rule::due_in(at, sql.now().await?)))
}

/// Claims up to `limit` ([`rule::claim_limit`]) due deliveries for one attempt each
/// ([`rule::claim`]), first in [`rule::claim_order`], and returns them in that order with what
/// sending them needs (the replaced secret only while it signs).
pub async fn claim<S: WebhookSql>(sql: &S, limit: u32, lease: Duration) -> Result<Vec<ClaimedDelivery>> {
    let now = sql.now().await?;
    let mut due = sql.lock_due_deliveries(rule::CLAIMABLE, now, rule::claim_limit(limit)).await?;
    // Judged again: a row is claimed only if the rule finds it due, in the rule's order.
    due.retain(|d| rule::is_due(d.status, d.next_attempt_at, now));
    due.sort_by_key(|d| rule::claim_order(d.next_attempt_at.unwrap_or(Micros::MIN), d.seq));
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let claims: Vec<(Seq, rule::Claim)> = due.iter().map(|d| (d.seq, rule::claim(d.attempts, now, lease))).collect();
    sql.start_attempts(&claims).await?;
    let mut rows = sql.deliveries_to_send(&claims.iter().map(|(seq, _)| *seq).collect::<Vec<_>>()).await?;
    let mut claimed = Vec::with_capacity(claims.len());
    for (seq, c) in &claims {
        let at = rows.iter().position(|r| r.seq == *seq).ok_or_else(|| {
            StoreError::backend(format!("webhook delivery {seq} was claimed but could not be read back"))
        })?;
        let r = rows.swap_remove(at);
        let signs = rule::previous_secret_signs(r.previous_secret_expires_at, now);
        claimed.push(ClaimedDelivery {
            id: r.id,
            attempt: c.attempt,
            endpoint: r.endpoint,
            url: r.url,
            secret: r.secret.into(),
            previous_secret: r.previous_secret.filter(|_| signs).map(mnemo_api::Secret::from),
            event: r.event,
            event_type: r.event_type,
            resource_id: r.resource_id,
            created_at: ts(r.created_at),
            workspace_id: r.workspace_id,
            organization_id: r.organization_id,
        });
    }
    Ok(claimed)
}

/// Records an attempt's outcome ([`rule::record`]), the delivery locked; false (nothing
/// changed) when the rule records nothing or the delivery is gone.
pub async fn finish_attempt<S: WebhookSql>(sql: &S, a: &WebhookAttempt) -> Result<bool> {
    let Some(d) = sql.lock_delivery(&a.delivery).await? else { return Ok(false) };
    let now = sql.now().await?;
    let Some(recorded) = rule::record(d.status, d.attempts, a.attempt, a.next, now) else { return Ok(false) };
    let error = a.error.as_deref().map(short_error);
    sql.record_attempt(d.seq, &recorded, a.status_code, error.as_deref()).await?;
    Ok(true)
}

/// Deletes the deliveries that finished ([`rule::FINISHED`]) before [`rule::prune_before`], and
/// then the events no delivery refers to; how many deliveries went.
pub async fn prune<S: WebhookSql>(sql: &S, age: Duration) -> Result<u64> {
    let before = rule::prune_before(sql.now().await?, age);
    let mut n = 0;
    for status in rule::FINISHED {
        n += sql.delete_finished_deliveries(status, before).await?;
    }
    if n > 0 {
        sql.delete_orphan_events().await?;
    }
    Ok(n)
}

/// Records the events of `outbox` — changes of resources of workspace `ws` — and a delivery to
/// every endpoint of `ws` subscribed to each ([`Outbox::plan`]), in the caller's transaction: an
/// event exists if and only if its change commits, and no other workspace's endpoint hears of it.
pub async fn emit<S: WebhookSql>(sql: &S, ws: &WorkspaceId, outbox: Outbox) -> Result<()> {
    if outbox.is_empty() {
        return Ok(());
    }
    let planned = outbox.plan(&sql.webhook_filters(ws).await?);
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
pub async fn emit_one<S: WebhookSql>(sql: &S, ws: &WorkspaceId, change: Change<'_>, resource_id: &str) -> Result<()> {
    let mut outbox = Outbox::default();
    outbox.record(change, resource_id);
    emit(sql, ws, outbox).await
}
