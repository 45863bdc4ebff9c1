//! Webhooks: endpoints, the outbox a write fills in its own transaction ([`emit`]), and the
//! claims and outcomes of delivery attempts.
//!
//! Several replicas send deliveries at once. A claim takes due deliveries `FOR UPDATE SKIP
//! LOCKED` (a row another claim is taking is skipped, not waited for) and moves each one's
//! `next_attempt_at` past the attempt's lease before it commits, so no other claim sees it as
//! due until the lease ends; an outcome is recorded only for the delivery's latest attempt.
//! Times are the database's clock, as for work leases.

use std::time::Duration;

use mnemo_api::{DeliveryStatus, EventFilter, WebhookDelivery, WebhookDeliveryId, WebhookEndpoint, WebhookEndpointId};
use mnemo_store::ops;
use mnemo_store::rules::webhook::{Change, Next, Planned};
use mnemo_store::webhook::{
    MAX_CLAIM, MIN_CLAIM_LEASE, event_type_from_column, filter_from_column, filter_to_column, short_error,
    status_from_column,
};
use mnemo_store::{
    ClaimedDelivery, Cursor, ListWebhookDeliveries, Listing, NewWebhookEndpoint, Result, StoreError, WebhookAttempt,
    WebhookEndpointPatch,
};
use tokio_postgres::Row;

use crate::engine::{Pg, Tx, all, col, exec, now, one, opt};
use crate::stores::page;
use crate::{parse_id, ts, ts_opt};

/// [`emit`] for the events of one change.
pub(crate) async fn emit_one(tx: &Tx<'_>, change: Change<'_>, resource_id: &str) -> Result<()> {
    ops::webhooks::emit_one(&Pg(tx), change, resource_id).await
}

impl ops::WebhookSql for Pg<'_, '_> {
    async fn webhook_filters(&self) -> Result<Vec<(i64, EventFilter)>> {
        // Held against deletion until the deliveries commit (a deletion that committed first is
        // simply not seen), so a write never fails on an endpoint deleted meanwhile.
        let rows = all(self, "SELECT seq, event_types FROM webhook_endpoints FOR KEY SHARE", &[]).await?;
        rows.iter()
            .map(|r| Ok((col::<i64>(r, 0)?, filter_from_column(col::<Option<String>>(r, 1)?.as_deref())?)))
            .collect()
    }

    async fn insert_webhook_event(&self, event: &Planned<i64>, now: i64) -> Result<i64> {
        let row = one(
            self,
            "INSERT INTO webhook_events (id, type, resource_id, created_at) VALUES ($1, $2, $3, $4) RETURNING seq",
            &[&event.id.as_str(), &event.kind.as_str(), &event.resource_id, &now],
        )
        .await?;
        col(&row, 0)
    }

    async fn insert_webhook_delivery(
        &self,
        id: &WebhookDeliveryId,
        endpoint: i64,
        event: i64,
        status: DeliveryStatus,
        now: i64,
    ) -> Result<()> {
        exec(
            self,
            "INSERT INTO webhook_deliveries (id, endpoint_seq, event_seq, status, attempts, next_attempt_at, created_at) \
             VALUES ($1, $2, $3, $4, 0, $5, $5)",
            &[&id.as_str(), &endpoint, &event, &status.as_str(), &now],
        )
        .await
        .map(drop)
    }
}

const ENDPOINT_COLUMNS: &str = "id, url, event_types, description, created_at, updated_at, secret, seq, \
     CASE WHEN previous_secret_expires_at > (extract(epoch FROM clock_timestamp()) * 1000000)::int8 \
     THEN previous_secret_expires_at END";

fn endpoint_from_row(r: &Row, with_secret: bool) -> Result<(WebhookEndpoint, i64)> {
    Ok((
        WebhookEndpoint {
            id: parse_id(&col::<String>(r, 0)?)?,
            url: col(r, 1)?,
            event_types: filter_from_column(col::<Option<String>>(r, 2)?.as_deref())?,
            description: col(r, 3)?,
            created_at: ts(col(r, 4)?),
            updated_at: ts(col(r, 5)?),
            previous_secret_expires_at: ts_opt(col(r, 8)?),
            secret: if with_secret { Some(col(r, 6)?) } else { None },
        },
        col(r, 7)?,
    ))
}

async fn endpoint_with_seq(
    tx: &Tx<'_>,
    id: &WebhookEndpointId,
    with_secret: bool,
    lock: bool,
) -> Result<(WebhookEndpoint, i64)> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    let row =
        opt(tx, &format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1{lock}"), &[&id.as_str()])
            .await?
            .ok_or_else(|| StoreError::not_found("webhook endpoint", id))?;
    endpoint_from_row(&row, with_secret)
}

pub(crate) async fn get_endpoint(tx: &Tx<'_>, id: &WebhookEndpointId, with_secret: bool) -> Result<WebhookEndpoint> {
    endpoint_with_seq(tx, id, with_secret, false).await.map(|(e, _)| e)
}

pub(crate) async fn create_endpoint(tx: &Tx<'_>, new: &NewWebhookEndpoint) -> Result<WebhookEndpoint> {
    let id = WebhookEndpointId::generate();
    let now = now(tx).await?;
    let row = one(
        tx,
        &format!(
            "INSERT INTO webhook_endpoints (id, url, secret, event_types, description, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING {ENDPOINT_COLUMNS}"
        ),
        &[&id.as_str(), &new.url, &new.secret, &filter_to_column(&new.event_types), &new.description, &now],
    )
    .await?;
    endpoint_from_row(&row, true).map(|(e, _)| e)
}

pub(crate) async fn update_endpoint(
    tx: &Tx<'_>,
    id: &WebhookEndpointId,
    patch: WebhookEndpointPatch,
) -> Result<WebhookEndpoint> {
    let (current, seq) = endpoint_with_seq(tx, id, false, true).await?;
    let url = patch.url.unwrap_or(current.url);
    let filter = patch.event_types.unwrap_or(current.event_types);
    let description = patch.description.unwrap_or(current.description);
    let now = now(tx).await?;
    let row = one(
        tx,
        &format!(
            "UPDATE webhook_endpoints SET url = $1, event_types = $2, description = $3, updated_at = $4 \
             WHERE seq = $5 RETURNING {ENDPOINT_COLUMNS}"
        ),
        &[&url, &filter_to_column(&filter), &description, &now, &seq],
    )
    .await?;
    endpoint_from_row(&row, false).map(|(e, _)| e)
}

pub(crate) async fn rotate_secret(
    tx: &Tx<'_>,
    id: &WebhookEndpointId,
    secret: &str,
    keep_previous: Duration,
) -> Result<WebhookEndpoint> {
    let (_, seq) = endpoint_with_seq(tx, id, false, true).await?;
    let now = now(tx).await?;
    let keep = (!keep_previous.is_zero()).then(|| now.saturating_add(micros(keep_previous)));
    let row = one(
        tx,
        &format!(
            "UPDATE webhook_endpoints SET previous_secret = CASE WHEN $2::int8 IS NULL THEN NULL ELSE secret END, \
             previous_secret_expires_at = $2, secret = $1, updated_at = $3 WHERE seq = $4 RETURNING {ENDPOINT_COLUMNS}"
        ),
        &[&secret, &keep, &now, &seq],
    )
    .await?;
    endpoint_from_row(&row, true).map(|(e, _)| e)
}

pub(crate) async fn list_endpoints(
    tx: &Tx<'_>,
    limit: u32,
    after: Option<&Cursor>,
) -> Result<Listing<WebhookEndpoint>> {
    let before = crate::stores::before(after)?;
    let rows = all(
        tx,
        &format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE seq < $1 ORDER BY seq DESC LIMIT $2"),
        &[&before, &(i64::from(limit) + 1)],
    )
    .await?;
    let rows = rows.iter().map(|r| endpoint_from_row(r, false)).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, limit))
}

pub(crate) async fn delete_endpoint(tx: &Tx<'_>, id: &WebhookEndpointId) -> Result<()> {
    let (_, seq) = endpoint_with_seq(tx, id, false, true).await?;
    exec(tx, "DELETE FROM webhook_deliveries WHERE endpoint_seq = $1", &[&seq]).await?;
    exec(tx, "DELETE FROM webhook_endpoints WHERE seq = $1", &[&seq]).await?;
    delete_orphan_events(tx).await?;
    Ok(())
}

/// Events no delivery refers to any more (their endpoints were deleted or their deliveries
/// pruned).
async fn delete_orphan_events(tx: &Tx<'_>) -> Result<u64> {
    exec(
        tx,
        "DELETE FROM webhook_events e WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_seq = e.seq)",
        &[],
    )
    .await
}

const DELIVERY_COLUMNS: &str = "d.id, p.id, e.id, e.type, e.resource_id, d.status, d.attempts, d.last_attempt_at, \
     d.last_status_code, d.last_error, d.next_attempt_at, d.created_at, d.finished_at, d.seq";

fn delivery_from_row(r: &Row) -> Result<(WebhookDelivery, i64)> {
    let small = |v: Option<i64>| v.map(|n| u16::try_from(n).unwrap_or(u16::MAX));
    Ok((
        WebhookDelivery {
            id: parse_id(&col::<String>(r, 0)?)?,
            endpoint_id: parse_id(&col::<String>(r, 1)?)?,
            event_id: parse_id(&col::<String>(r, 2)?)?,
            event_type: event_type_from_column(&col::<String>(r, 3)?)?,
            resource_id: col(r, 4)?,
            status: status_from_column(&col::<String>(r, 5)?)?,
            attempts: u32::try_from(col::<i64>(r, 6)?).unwrap_or(u32::MAX),
            last_attempt_at: ts_opt(col(r, 7)?),
            last_status_code: small(col(r, 8)?),
            last_error: col(r, 9)?,
            next_attempt_at: ts_opt(col(r, 10)?),
            created_at: ts(col(r, 11)?),
            finished_at: ts_opt(col(r, 12)?),
        },
        col(r, 13)?,
    ))
}

pub(crate) async fn list_deliveries(
    tx: &Tx<'_>,
    endpoint: &WebhookEndpointId,
    q: &ListWebhookDeliveries,
) -> Result<Listing<WebhookDelivery>> {
    let (_, endpoint_seq) = endpoint_with_seq(tx, endpoint, false, false).await?;
    let before = crate::stores::before(q.after.as_ref())?;
    let rows = all(
        tx,
        &format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d \
             JOIN webhook_endpoints p ON p.seq = d.endpoint_seq JOIN webhook_events e ON e.seq = d.event_seq \
             WHERE d.endpoint_seq = $1 AND d.seq < $2 AND ($3::text IS NULL OR d.status = $3) \
             ORDER BY d.seq DESC LIMIT $4"
        ),
        &[&endpoint_seq, &before, &q.status.map(DeliveryStatus::as_str), &(i64::from(q.limit) + 1)],
    )
    .await?;
    let rows = rows.iter().map(delivery_from_row).collect::<Result<Vec<_>>>()?;
    Ok(page(rows, q.limit))
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Claims due deliveries: rows another claim holds are skipped, and each claimed one is due
/// again only once its lease ends.
pub(crate) async fn claim(tx: &Tx<'_>, limit: u32, lease: Duration) -> Result<Vec<ClaimedDelivery>> {
    let now = now(tx).await?;
    let until = now.saturating_add(micros(lease.max(MIN_CLAIM_LEASE)));
    let rows = all(
        tx,
        "WITH due AS MATERIALIZED ( \
             SELECT seq FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= $1 \
             ORDER BY next_attempt_at, seq LIMIT $3 FOR UPDATE SKIP LOCKED), \
         claimed AS ( \
             UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = $2, last_attempt_at = $1 \
             FROM due WHERE d.seq = due.seq RETURNING d.id, d.attempts, d.endpoint_seq, d.event_seq) \
         SELECT c.id, c.attempts, p.id, p.url, p.secret, e.id, e.type, e.resource_id, e.created_at, \
                CASE WHEN p.previous_secret_expires_at > $1 THEN p.previous_secret END \
         FROM claimed c JOIN webhook_endpoints p ON p.seq = c.endpoint_seq \
         JOIN webhook_events e ON e.seq = c.event_seq ORDER BY e.created_at, e.seq",
        &[&now, &until, &i64::from(limit.min(MAX_CLAIM))],
    )
    .await?;
    rows.iter()
        .map(|r| {
            Ok(ClaimedDelivery {
                id: parse_id(&col::<String>(r, 0)?)?,
                attempt: u32::try_from(col::<i64>(r, 1)?).unwrap_or(u32::MAX),
                endpoint: parse_id(&col::<String>(r, 2)?)?,
                url: col(r, 3)?,
                secret: col(r, 4)?,
                previous_secret: col(r, 9)?,
                event: parse_id(&col::<String>(r, 5)?)?,
                event_type: event_type_from_column(&col::<String>(r, 6)?)?,
                resource_id: col(r, 7)?,
                created_at: ts(col(r, 8)?),
            })
        })
        .collect()
}

pub(crate) async fn finish(tx: &Tx<'_>, a: &WebhookAttempt) -> Result<bool> {
    let now = now(tx).await?;
    let (status, next_at, finished_at) = match a.next {
        Next::Delivered => ("delivered", None, Some(now)),
        Next::Failed => ("failed", None, Some(now)),
        Next::RetryIn(d) => ("pending", Some(now.saturating_add(micros(d))), None),
    };
    let n = exec(
        tx,
        "UPDATE webhook_deliveries SET status = $1, next_attempt_at = $2, finished_at = $3, \
         last_status_code = $4, last_error = $5 \
         WHERE id = $6 AND attempts = $7 AND status = 'pending'",
        &[
            &status,
            &next_at,
            &finished_at,
            &a.status_code.map(i64::from),
            &a.error.as_deref().map(short_error),
            &a.delivery.as_str(),
            &i64::from(a.attempt),
        ],
    )
    .await?;
    Ok(n == 1)
}

pub(crate) async fn prune(tx: &Tx<'_>, age: Duration) -> Result<u64> {
    let cutoff = now(tx).await?.saturating_sub(micros(age));
    let n =
        exec(tx, "DELETE FROM webhook_deliveries WHERE status <> 'pending' AND finished_at < $1", &[&cutoff]).await?;
    if n > 0 {
        delete_orphan_events(tx).await?;
    }
    Ok(n)
}
