//! Webhooks: the SQL of [`ops::webhooks`] (endpoints, the outbox a write fills in its own
//! transaction, the claims and outcomes of delivery attempts).
//!
//! Several replicas send deliveries at once. A claim locks due deliveries `FOR UPDATE SKIP
//! LOCKED` (a row another claim is taking is skipped, not waited for) and moves each one's
//! `next_attempt_at` past the attempt's lease before it commits, so no other claim sees it as
//! due until the lease ends. Times are the database's clock, as for work leases.

use mnemo_api::{DeliveryStatus, EventFilter, WebhookDelivery, WebhookDeliveryId, WebhookEndpointId, WorkspaceId};
use mnemo_store::Result;
use mnemo_store::ops::{self, DeliveryRow, EndpointRow, NewEndpointRow, SendRow};
use mnemo_store::rules::webhook::{Claim, Planned, Recorded};
use mnemo_store::webhook::{event_type_from_column, filter_from_column, filter_to_column, status_from_column};
use tokio_postgres::Row;

use crate::engine::{Pg, all, col, exec, one, opt};
use crate::{parse_id, ts, ts_opt};

const ENDPOINT_COLUMNS: &str = "seq, id, url, event_types, description, created_at, updated_at, secret, \
     previous_secret, previous_secret_expires_at";

fn endpoint_from_row(r: &Row) -> Result<EndpointRow> {
    Ok(EndpointRow {
        seq: col(r, 0)?,
        id: parse_id(&col::<String>(r, 1)?)?,
        url: col(r, 2)?,
        event_types: filter_from_column(col::<Option<String>>(r, 3)?.as_deref())?,
        description: col(r, 4)?,
        created_at: col(r, 5)?,
        updated_at: col(r, 6)?,
        secret: col(r, 7)?,
        previous_secret: col(r, 8)?,
        previous_secret_expires_at: col(r, 9)?,
    })
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

fn delivery_state(r: &Row) -> Result<DeliveryRow> {
    Ok(DeliveryRow {
        seq: col(r, 0)?,
        status: status_from_column(&col::<String>(r, 1)?)?,
        attempts: u32::try_from(col::<i64>(r, 2)?).unwrap_or(u32::MAX),
        next_attempt_at: col(r, 3)?,
    })
}

impl ops::WebhookSql for Pg<'_, '_> {
    async fn webhook_filters(&self, ws: &WorkspaceId) -> Result<Vec<(i64, EventFilter)>> {
        // Held against deletion until the deliveries commit (a deletion that committed first is
        // simply not seen), so a write never fails on an endpoint deleted meanwhile.
        let sql = "SELECT seq, event_types FROM webhook_endpoints WHERE workspace_id = $1 ORDER BY seq FOR KEY SHARE";
        let rows = all(self, sql, &[&ws.as_str()]).await?;
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

    async fn insert_endpoint(&self, row: NewEndpointRow<'_>) -> Result<()> {
        let new = row.new;
        exec(
            self,
            "INSERT INTO webhook_endpoints \
             (id, url, secret, event_types, description, created_at, updated_at, workspace_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $6, $7)",
            &[
                &row.id.as_str(),
                &new.url,
                &new.secret.expose(),
                &filter_to_column(&new.event_types),
                &new.description,
                &row.now,
                &row.ws.as_str(),
            ],
        )
        .await
        .map(drop)
    }

    async fn find_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<Option<EndpointRow>> {
        let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1 AND workspace_id = $2");
        let row = opt(self, &sql, &[&id.as_str(), &ws.as_str()]).await?;
        row.as_ref().map(endpoint_from_row).transpose()
    }

    async fn lock_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<Option<EndpointRow>> {
        let sql =
            format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1 AND workspace_id = $2 FOR UPDATE");
        let row = opt(self, &sql, &[&id.as_str(), &ws.as_str()]).await?;
        row.as_ref().map(endpoint_from_row).transpose()
    }

    async fn endpoints_before(&self, ws: &WorkspaceId, before: i64, limit: u32) -> Result<Vec<EndpointRow>> {
        let rows = all(
            self,
            &format!(
                "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE workspace_id = $3 AND seq < $1 \
                 ORDER BY seq DESC LIMIT $2"
            ),
            &[&before, &i64::from(limit), &ws.as_str()],
        )
        .await?;
        rows.iter().map(endpoint_from_row).collect()
    }

    async fn set_endpoint(
        &self,
        seq: i64,
        url: &str,
        filter: &EventFilter,
        description: Option<&str>,
        now: i64,
    ) -> Result<()> {
        exec(
            self,
            "UPDATE webhook_endpoints SET url = $1, event_types = $2, description = $3, updated_at = $4 WHERE seq = $5",
            &[&url, &filter_to_column(filter), &description, &now, &seq],
        )
        .await
        .map(drop)
    }

    async fn set_secret(
        &self,
        seq: i64,
        secret: &str,
        previous: Option<&str>,
        until: Option<i64>,
        now: i64,
    ) -> Result<()> {
        exec(
            self,
            "UPDATE webhook_endpoints SET secret = $1, previous_secret = $2, previous_secret_expires_at = $3, \
             updated_at = $4 WHERE seq = $5",
            &[&secret, &previous, &until, &now, &seq],
        )
        .await
        .map(drop)
    }

    async fn delete_endpoint_deliveries(&self, seq: i64) -> Result<()> {
        exec(self, "DELETE FROM webhook_deliveries WHERE endpoint_seq = $1", &[&seq]).await.map(drop)
    }

    async fn delete_endpoint_row(&self, seq: i64) -> Result<()> {
        exec(self, "DELETE FROM webhook_endpoints WHERE seq = $1", &[&seq]).await.map(drop)
    }

    async fn delete_orphan_events(&self) -> Result<u64> {
        exec(
            self,
            "DELETE FROM webhook_events e WHERE NOT EXISTS \
             (SELECT 1 FROM webhook_deliveries d WHERE d.event_seq = e.seq)",
            &[],
        )
        .await
    }

    async fn deliveries_before(
        &self,
        endpoint: &EndpointRow,
        status: Option<DeliveryStatus>,
        before: i64,
        limit: u32,
    ) -> Result<Vec<(WebhookDelivery, i64)>> {
        let rows = all(
            self,
            &format!(
                "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d \
                 JOIN webhook_endpoints p ON p.seq = d.endpoint_seq JOIN webhook_events e ON e.seq = d.event_seq \
                 WHERE d.endpoint_seq = $1 AND d.seq < $2 AND ($3::text IS NULL OR d.status = $3) \
                 ORDER BY d.seq DESC LIMIT $4"
            ),
            &[&endpoint.seq, &before, &status.map(DeliveryStatus::as_str), &i64::from(limit)],
        )
        .await?;
        rows.iter().map(delivery_from_row).collect()
    }

    async fn lock_due_deliveries(&self, status: DeliveryStatus, now: i64, limit: u32) -> Result<Vec<DeliveryRow>> {
        let rows = all(
            self,
            "SELECT seq, status, attempts, next_attempt_at FROM webhook_deliveries \
             WHERE status = $1 AND next_attempt_at <= $2 ORDER BY next_attempt_at, seq LIMIT $3 \
             FOR UPDATE SKIP LOCKED",
            &[&status.as_str(), &now, &i64::from(limit)],
        )
        .await?;
        rows.iter().map(delivery_state).collect()
    }

    async fn earliest_next_attempt(&self, status: DeliveryStatus) -> Result<Option<i64>> {
        let row =
            one(self, "SELECT MIN(next_attempt_at) FROM webhook_deliveries WHERE status = $1", &[&status.as_str()])
                .await?;
        col(&row, 0)
    }

    async fn start_attempts(&self, claims: &[(i64, Claim)]) -> Result<()> {
        let seqs: Vec<i64> = claims.iter().map(|(seq, _)| *seq).collect();
        let attempts: Vec<i64> = claims.iter().map(|(_, c)| i64::from(c.attempt)).collect();
        let last: Vec<i64> = claims.iter().map(|(_, c)| c.last_attempt_at).collect();
        let next: Vec<i64> = claims.iter().map(|(_, c)| c.next_attempt_at).collect();
        exec(
            self,
            "UPDATE webhook_deliveries d SET attempts = c.attempts, last_attempt_at = c.last_at, \
             next_attempt_at = c.next_at \
             FROM unnest($1::int8[], $2::int8[], $3::int8[], $4::int8[]) AS c(seq, attempts, last_at, next_at) \
             WHERE d.seq = c.seq",
            &[&seqs, &attempts, &last, &next],
        )
        .await
        .map(drop)
    }

    async fn deliveries_to_send(&self, seqs: &[i64]) -> Result<Vec<SendRow>> {
        let rows = all(
            self,
            "SELECT d.seq, d.id, p.id, p.url, p.secret, p.previous_secret, p.previous_secret_expires_at, \
                    e.id, e.type, e.resource_id, e.created_at, p.workspace_id, \
                    (SELECT id FROM organization LIMIT 1) \
             FROM webhook_deliveries d JOIN webhook_endpoints p ON p.seq = d.endpoint_seq \
             JOIN webhook_events e ON e.seq = d.event_seq WHERE d.seq = ANY($1)",
            &[&seqs],
        )
        .await?;
        rows.iter()
            .map(|r| {
                Ok(SendRow {
                    seq: col(r, 0)?,
                    id: parse_id(&col::<String>(r, 1)?)?,
                    endpoint: parse_id(&col::<String>(r, 2)?)?,
                    url: col(r, 3)?,
                    secret: col(r, 4)?,
                    previous_secret: col(r, 5)?,
                    previous_secret_expires_at: col(r, 6)?,
                    event: parse_id(&col::<String>(r, 7)?)?,
                    event_type: event_type_from_column(&col::<String>(r, 8)?)?,
                    resource_id: col(r, 9)?,
                    created_at: col(r, 10)?,
                    workspace_id: parse_id(&col::<String>(r, 11)?)?,
                    organization_id: col(r, 12)?,
                })
            })
            .collect()
    }

    async fn lock_delivery(&self, id: &WebhookDeliveryId) -> Result<Option<DeliveryRow>> {
        let row = opt(
            self,
            "SELECT seq, status, attempts, next_attempt_at FROM webhook_deliveries WHERE id = $1 FOR UPDATE",
            &[&id.as_str()],
        )
        .await?;
        row.as_ref().map(delivery_state).transpose()
    }

    async fn record_attempt(
        &self,
        seq: i64,
        recorded: &Recorded,
        status_code: Option<u16>,
        error: Option<&str>,
    ) -> Result<()> {
        exec(
            self,
            "UPDATE webhook_deliveries SET status = $1, next_attempt_at = $2, finished_at = $3, \
             last_status_code = $4, last_error = $5 WHERE seq = $6",
            &[
                &recorded.status.as_str(),
                &recorded.next_attempt_at,
                &recorded.finished_at,
                &status_code.map(i64::from),
                &error,
                &seq,
            ],
        )
        .await
        .map(drop)
    }

    async fn delete_finished_deliveries(&self, status: DeliveryStatus, before: i64) -> Result<u64> {
        exec(
            self,
            "DELETE FROM webhook_deliveries WHERE status = $1 AND finished_at < $2",
            &[&status.as_str(), &before],
        )
        .await
    }
}
