//! Webhooks: endpoints, the outbox a write fills in its own transaction ([`emit`]), and the
//! claims and outcomes of delivery attempts. Every write runs on the single writer thread, so a
//! claim is one write job and two claims can never take the same delivery.

use std::time::Duration;

use mnemo_api::{DeliveryStatus, EventFilter, WebhookDelivery, WebhookDeliveryId, WebhookEndpoint, WebhookEndpointId};
use mnemo_store::ops::{self, run_ready};
use mnemo_store::rules::webhook::{Change, Next, Planned};
use mnemo_store::webhook::{
    MAX_CLAIM, MIN_CLAIM_LEASE, event_type_from_column, filter_from_column, filter_to_column, short_error,
    status_from_column,
};
use mnemo_store::{
    ClaimedDelivery, Cursor, ListWebhookDeliveries, Listing, NewWebhookEndpoint, Result, StoreError, WebhookAttempt,
    WebhookEndpointPatch,
};
use rusqlite::{Connection, Row, params};

use crate::engine::{Lite, backend, query_one};
use crate::stores::page;
use crate::{now_micros, parse_id, ts, ts_opt};

/// [`emit`] for the events of one change.
pub(crate) fn emit_one(c: &Connection, change: Change<'_>, resource_id: &str) -> Result<()> {
    run_ready(ops::webhooks::emit_one(&Lite(c), change, resource_id))
}

impl ops::WebhookSql for Lite<'_> {
    async fn webhook_filters(&self) -> Result<Vec<(i64, EventFilter)>> {
        self.prepare_cached("SELECT seq, event_types FROM webhook_endpoints")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(backend)?
            .into_iter()
            .map(|(seq, filter)| Ok((seq, filter_from_column(filter.as_deref())?)))
            .collect()
    }

    async fn insert_webhook_event(&self, event: &Planned<i64>, now: i64) -> Result<i64> {
        self.prepare_cached("INSERT INTO webhook_events (id, type, resource_id, created_at) VALUES (?1, ?2, ?3, ?4)")
            .and_then(|mut s| s.execute(params![event.id.as_str(), event.kind.as_str(), event.resource_id, now]))
            .map_err(backend)?;
        Ok(self.last_insert_rowid())
    }

    async fn insert_webhook_delivery(
        &self,
        id: &WebhookDeliveryId,
        endpoint: i64,
        event: i64,
        status: DeliveryStatus,
        now: i64,
    ) -> Result<()> {
        self.prepare_cached(
            "INSERT INTO webhook_deliveries (id, endpoint_seq, event_seq, status, attempts, next_attempt_at, created_at) \
             VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5)",
        )
        .and_then(|mut s| s.execute(params![id.as_str(), endpoint, event, status.as_str(), now]))
        .map_err(backend)?;
        Ok(())
    }
}

const ENDPOINT_COLUMNS: &str =
    "id, url, event_types, description, created_at, updated_at, secret, seq, previous_secret_expires_at";

fn endpoint_from_row(r: &Row<'_>, with_secret: bool) -> rusqlite::Result<(WebhookEndpoint, i64)> {
    let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
    Ok((
        WebhookEndpoint {
            id: parse_id(&r.get::<_, String>(0)?).map_err(bad)?,
            url: r.get(1)?,
            event_types: filter_from_column(r.get::<_, Option<String>>(2)?.as_deref()).map_err(bad)?,
            description: r.get(3)?,
            created_at: ts(r.get(4)?),
            updated_at: ts(r.get(5)?),
            previous_secret_expires_at: ts_opt(r.get::<_, Option<i64>>(8)?.filter(|at| *at > now_micros())),
            secret: if with_secret { Some(r.get(6)?) } else { None },
        },
        r.get(7)?,
    ))
}

fn endpoint_with_seq(c: &Connection, id: &WebhookEndpointId, with_secret: bool) -> Result<(WebhookEndpoint, i64)> {
    query_one(c, &format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?1"), [id.as_str()], |r| {
        endpoint_from_row(r, with_secret)
    })?
    .ok_or_else(|| StoreError::not_found("webhook endpoint", id))
}

pub(crate) fn get_endpoint(c: &Connection, id: &WebhookEndpointId, with_secret: bool) -> Result<WebhookEndpoint> {
    endpoint_with_seq(c, id, with_secret).map(|(e, _)| e)
}

pub(crate) fn create_endpoint(c: &Connection, new: &NewWebhookEndpoint) -> Result<WebhookEndpoint> {
    let id = WebhookEndpointId::generate();
    c.execute(
        "INSERT INTO webhook_endpoints (id, url, secret, event_types, description, created_at, updated_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        params![id.as_str(), new.url, new.secret, filter_to_column(&new.event_types), new.description, now_micros()],
    )
    .map_err(backend)?;
    get_endpoint(c, &id, true)
}

pub(crate) fn update_endpoint(
    c: &Connection,
    id: &WebhookEndpointId,
    patch: WebhookEndpointPatch,
) -> Result<WebhookEndpoint> {
    let (current, seq) = endpoint_with_seq(c, id, false)?;
    let url = patch.url.unwrap_or(current.url);
    let filter = patch.event_types.unwrap_or(current.event_types);
    let description = patch.description.unwrap_or(current.description);
    c.execute(
        "UPDATE webhook_endpoints SET url = ?1, event_types = ?2, description = ?3, updated_at = ?4 WHERE seq = ?5",
        params![url, filter_to_column(&filter), description, now_micros(), seq],
    )
    .map_err(backend)?;
    get_endpoint(c, id, false)
}

pub(crate) fn rotate_secret(
    c: &Connection,
    id: &WebhookEndpointId,
    secret: &str,
    keep_previous: Duration,
) -> Result<WebhookEndpoint> {
    let (_, seq) = endpoint_with_seq(c, id, false)?;
    let now = now_micros();
    let keep = (!keep_previous.is_zero()).then(|| now.saturating_add(micros(keep_previous)));
    c.execute(
        "UPDATE webhook_endpoints SET previous_secret = CASE WHEN ?2 IS NULL THEN NULL ELSE secret END, \
         previous_secret_expires_at = ?2, secret = ?1, updated_at = ?3 WHERE seq = ?4",
        params![secret, keep, now, seq],
    )
    .map_err(backend)?;
    get_endpoint(c, id, true)
}

pub(crate) fn list_endpoints(c: &Connection, limit: u32, after: Option<&Cursor>) -> Result<Listing<WebhookEndpoint>> {
    let before = crate::stores::before(after)?;
    let rows = c
        .prepare_cached(&format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE seq < ?1 ORDER BY seq DESC LIMIT ?2"
        ))
        .and_then(|mut s| {
            s.query_map(params![before, i64::from(limit) + 1], |r| endpoint_from_row(r, false))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(backend)?;
    Ok(page(rows, limit))
}

pub(crate) fn delete_endpoint(c: &Connection, id: &WebhookEndpointId) -> Result<()> {
    let (_, seq) = endpoint_with_seq(c, id, false)?;
    c.execute("DELETE FROM webhook_deliveries WHERE endpoint_seq = ?1", [seq]).map_err(backend)?;
    c.execute("DELETE FROM webhook_endpoints WHERE seq = ?1", [seq]).map_err(backend)?;
    delete_orphan_events(c)?;
    Ok(())
}

/// Events no delivery refers to any more (their endpoints were deleted or their deliveries
/// pruned).
fn delete_orphan_events(c: &Connection) -> Result<u64> {
    let n = c
        .execute(
            "DELETE FROM webhook_events WHERE NOT EXISTS \
             (SELECT 1 FROM webhook_deliveries d WHERE d.event_seq = webhook_events.seq)",
            [],
        )
        .map_err(backend)?;
    Ok(n as u64)
}

const DELIVERY_COLUMNS: &str = "d.id, p.id, e.id, e.type, e.resource_id, d.status, d.attempts, d.last_attempt_at, \
     d.last_status_code, d.last_error, d.next_attempt_at, d.created_at, d.finished_at, d.seq";

fn delivery_from_row(r: &Row<'_>) -> rusqlite::Result<(WebhookDelivery, i64)> {
    let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
    Ok((
        WebhookDelivery {
            id: parse_id(&r.get::<_, String>(0)?).map_err(bad)?,
            endpoint_id: parse_id(&r.get::<_, String>(1)?).map_err(bad)?,
            event_id: parse_id(&r.get::<_, String>(2)?).map_err(bad)?,
            event_type: event_type_from_column(&r.get::<_, String>(3)?).map_err(bad)?,
            resource_id: r.get(4)?,
            status: status_from_column(&r.get::<_, String>(5)?).map_err(bad)?,
            attempts: r.get(6)?,
            last_attempt_at: ts_opt(r.get(7)?),
            last_status_code: r.get(8)?,
            last_error: r.get(9)?,
            next_attempt_at: ts_opt(r.get(10)?),
            created_at: ts(r.get(11)?),
            finished_at: ts_opt(r.get(12)?),
        },
        r.get(13)?,
    ))
}

pub(crate) fn list_deliveries(
    c: &Connection,
    endpoint: &WebhookEndpointId,
    q: &ListWebhookDeliveries,
) -> Result<Listing<WebhookDelivery>> {
    let (_, endpoint_seq) = endpoint_with_seq(c, endpoint, false)?;
    let before = crate::stores::before(q.after.as_ref())?;
    let rows = c
        .prepare_cached(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d \
             JOIN webhook_endpoints p ON p.seq = d.endpoint_seq JOIN webhook_events e ON e.seq = d.event_seq \
             WHERE d.endpoint_seq = ?1 AND d.seq < ?2 AND (?3 IS NULL OR d.status = ?3) \
             ORDER BY d.seq DESC LIMIT ?4"
        ))
        .and_then(|mut s| {
            s.query_map(
                params![endpoint_seq, before, q.status.map(DeliveryStatus::as_str), i64::from(q.limit) + 1],
                delivery_from_row,
            )?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(backend)?;
    Ok(page(rows, q.limit))
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Whether any delivery is due now (a read: the claim itself is a write).
pub(crate) fn any_due(c: &Connection) -> Result<bool> {
    query_one(
        c,
        "SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?1 LIMIT 1",
        [now_micros()],
        |_| Ok(()),
    )
    .map(|row| row.is_some())
}

/// Claims due deliveries (one write job: the single writer makes claims exclusive).
pub(crate) fn claim(c: &Connection, limit: u32, lease: Duration) -> Result<Vec<ClaimedDelivery>> {
    let now = now_micros();
    let until = now.saturating_add(micros(lease.max(MIN_CLAIM_LEASE)));
    let rows = c
        .prepare_cached(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, next_attempt_at = ?2, last_attempt_at = ?1 \
             WHERE seq IN (SELECT seq FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?1 \
                           ORDER BY next_attempt_at, seq LIMIT ?3) \
             RETURNING seq",
        )
        .and_then(|mut s| {
            s.query_map(params![now, until, i64::from(limit.min(MAX_CLAIM))], |r| r.get::<_, i64>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(backend)?;
    let mut claimed = Vec::with_capacity(rows.len());
    for seq in rows {
        let d = c
            .prepare_cached(
                "SELECT d.id, d.attempts, p.id, p.url, p.secret, e.id, e.type, e.resource_id, e.created_at, \
                        CASE WHEN p.previous_secret_expires_at > ?2 THEN p.previous_secret END \
                 FROM webhook_deliveries d JOIN webhook_endpoints p ON p.seq = d.endpoint_seq \
                 JOIN webhook_events e ON e.seq = d.event_seq WHERE d.seq = ?1",
            )
            .and_then(|mut s| {
                s.query_row(params![seq, now], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, u32>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, String>(7)?,
                        r.get::<_, i64>(8)?,
                        r.get::<_, Option<String>>(9)?,
                    ))
                })
            })
            .map_err(backend)?;
        claimed.push(ClaimedDelivery {
            id: parse_id(&d.0)?,
            attempt: d.1,
            endpoint: parse_id(&d.2)?,
            url: d.3,
            secret: d.4,
            previous_secret: d.9,
            event: parse_id(&d.5)?,
            event_type: event_type_from_column(&d.6)?,
            resource_id: d.7,
            created_at: ts(d.8),
        });
    }
    claimed.sort_by_key(|d| d.created_at);
    Ok(claimed)
}

pub(crate) fn finish(c: &Connection, a: &WebhookAttempt) -> Result<bool> {
    let now = now_micros();
    let (status, next_at, finished_at) = match a.next {
        Next::Delivered => ("delivered", None, Some(now)),
        Next::Failed => ("failed", None, Some(now)),
        Next::RetryIn(d) => ("pending", Some(now.saturating_add(micros(d))), None),
    };
    let n = c
        .prepare_cached(
            "UPDATE webhook_deliveries SET status = ?1, next_attempt_at = ?2, finished_at = ?3, \
             last_status_code = ?4, last_error = ?5 \
             WHERE id = ?6 AND attempts = ?7 AND status = 'pending'",
        )
        .and_then(|mut s| {
            s.execute(params![
                status,
                next_at,
                finished_at,
                a.status_code,
                a.error.as_deref().map(short_error),
                a.delivery.as_str(),
                a.attempt
            ])
        })
        .map_err(backend)?;
    Ok(n == 1)
}

pub(crate) fn prune(c: &Connection, age: Duration) -> Result<u64> {
    let cutoff = now_micros().saturating_sub(micros(age));
    let n = c
        .execute("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND finished_at < ?1", [cutoff])
        .map_err(backend)?;
    if n > 0 {
        delete_orphan_events(c)?;
    }
    Ok(n as u64)
}
