//! Webhooks: the SQL of [`ops::webhooks`] (endpoints, the outbox a write fills in its own
//! transaction, the claims and outcomes of delivery attempts). Every write runs on the single
//! writer thread, so a claim is one write job and two claims can never take the same delivery.

use mnemo_api::{DeliveryStatus, EventFilter, WebhookDelivery, WebhookDeliveryId, WebhookEndpointId, WorkspaceId};
use mnemo_store::ops::{self, DeliveryRow, EndpointRow, NewEndpointRow, SendRow};
use mnemo_store::rules::webhook::{Claim, Planned, Recorded};
use mnemo_store::webhook::{event_type_from_column, filter_from_column, filter_to_column, status_from_column};
use mnemo_store::{Result, StoreError};
use rusqlite::{Row, params};

use crate::engine::{Lite, backend, query_all, query_one};
use crate::{parse_id, ts, ts_opt};

const ENDPOINT_COLUMNS: &str = "seq, id, url, event_types, description, created_at, updated_at, secret, \
     previous_secret, previous_secret_expires_at";

fn endpoint_from_row(r: &Row<'_>) -> rusqlite::Result<EndpointRow> {
    let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
    Ok(EndpointRow {
        seq: r.get(0)?,
        id: parse_id(&r.get::<_, String>(1)?).map_err(bad)?,
        url: r.get(2)?,
        event_types: filter_from_column(r.get::<_, Option<String>>(3)?.as_deref()).map_err(bad)?,
        description: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
        secret: r.get(7)?,
        previous_secret: r.get(8)?,
        previous_secret_expires_at: r.get(9)?,
    })
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

fn delivery_state(r: &Row<'_>) -> rusqlite::Result<DeliveryRow> {
    let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
    Ok(DeliveryRow {
        seq: r.get(0)?,
        status: status_from_column(&r.get::<_, String>(1)?).map_err(bad)?,
        attempts: r.get(2)?,
        next_attempt_at: r.get(3)?,
    })
}

impl ops::WebhookSql for Lite<'_> {
    async fn webhook_filters(&self, ws: &WorkspaceId) -> Result<Vec<(i64, EventFilter)>> {
        query_all(
            self,
            "SELECT seq, event_types FROM webhook_endpoints WHERE workspace_id = ?1 ORDER BY seq",
            [ws.as_str()],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)),
        )?
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

    async fn insert_endpoint(&self, row: NewEndpointRow<'_>) -> Result<()> {
        let new = row.new;
        self.execute(
            "INSERT INTO webhook_endpoints \
             (id, url, secret, event_types, description, created_at, updated_at, workspace_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)",
            params![
                row.id.as_str(),
                new.url,
                new.secret.expose(),
                filter_to_column(&new.event_types),
                new.description,
                row.now,
                row.ws.as_str()
            ],
        )
        .map_err(backend)?;
        Ok(())
    }

    async fn find_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<Option<EndpointRow>> {
        query_one(
            self,
            &format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = ?1 AND workspace_id = ?2"),
            [id.as_str(), ws.as_str()],
            endpoint_from_row,
        )
    }

    async fn lock_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<Option<EndpointRow>> {
        // The single writer excludes every other writer: reading is locking.
        self.find_endpoint(ws, id).await
    }

    async fn endpoints_before(&self, ws: &WorkspaceId, before: i64, limit: u32) -> Result<Vec<EndpointRow>> {
        query_all(
            self,
            &format!(
                "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE workspace_id = ?3 AND seq < ?1 \
                 ORDER BY seq DESC LIMIT ?2"
            ),
            params![before, limit, ws.as_str()],
            endpoint_from_row,
        )
    }

    async fn set_endpoint(
        &self,
        seq: i64,
        url: &str,
        filter: &EventFilter,
        description: Option<&str>,
        now: i64,
    ) -> Result<()> {
        self.execute(
            "UPDATE webhook_endpoints SET url = ?1, event_types = ?2, description = ?3, updated_at = ?4 WHERE seq = ?5",
            params![url, filter_to_column(filter), description, now, seq],
        )
        .map_err(backend)?;
        Ok(())
    }

    async fn set_secret(
        &self,
        seq: i64,
        secret: &str,
        previous: Option<&str>,
        until: Option<i64>,
        now: i64,
    ) -> Result<()> {
        self.execute(
            "UPDATE webhook_endpoints SET secret = ?1, previous_secret = ?2, previous_secret_expires_at = ?3, \
             updated_at = ?4 WHERE seq = ?5",
            params![secret, previous, until, now, seq],
        )
        .map_err(backend)?;
        Ok(())
    }

    async fn delete_endpoint_deliveries(&self, seq: i64) -> Result<()> {
        self.execute("DELETE FROM webhook_deliveries WHERE endpoint_seq = ?1", [seq]).map_err(backend)?;
        Ok(())
    }

    async fn delete_endpoint_row(&self, seq: i64) -> Result<()> {
        self.execute("DELETE FROM webhook_endpoints WHERE seq = ?1", [seq]).map_err(backend)?;
        Ok(())
    }

    async fn delete_orphan_events(&self) -> Result<u64> {
        let n = self
            .execute(
                "DELETE FROM webhook_events WHERE NOT EXISTS \
                 (SELECT 1 FROM webhook_deliveries d WHERE d.event_seq = webhook_events.seq)",
                [],
            )
            .map_err(backend)?;
        Ok(n as u64)
    }

    async fn deliveries_before(
        &self,
        endpoint: &EndpointRow,
        status: Option<DeliveryStatus>,
        before: i64,
        limit: u32,
    ) -> Result<Vec<(WebhookDelivery, i64)>> {
        query_all(
            self,
            &format!(
                "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries d \
                 JOIN webhook_endpoints p ON p.seq = d.endpoint_seq JOIN webhook_events e ON e.seq = d.event_seq \
                 WHERE d.endpoint_seq = ?1 AND d.seq < ?2 AND (?3 IS NULL OR d.status = ?3) \
                 ORDER BY d.seq DESC LIMIT ?4"
            ),
            params![endpoint.seq, before, status.map(DeliveryStatus::as_str), limit],
            delivery_from_row,
        )
    }

    async fn lock_due_deliveries(&self, status: DeliveryStatus, now: i64, limit: u32) -> Result<Vec<DeliveryRow>> {
        query_all(
            self,
            "SELECT seq, status, attempts, next_attempt_at FROM webhook_deliveries \
             WHERE status = ?1 AND next_attempt_at <= ?2 ORDER BY next_attempt_at, seq LIMIT ?3",
            params![status.as_str(), now, limit],
            delivery_state,
        )
    }

    async fn earliest_next_attempt(&self, status: DeliveryStatus) -> Result<Option<i64>> {
        self.prepare_cached("SELECT MIN(next_attempt_at) FROM webhook_deliveries WHERE status = ?1")
            .and_then(|mut s| s.query_row([status.as_str()], |r| r.get(0)))
            .map_err(backend)
    }

    async fn start_attempts(&self, claims: &[(i64, Claim)]) -> Result<()> {
        let mut stmt = self
            .prepare_cached(
                "UPDATE webhook_deliveries SET attempts = ?2, last_attempt_at = ?3, next_attempt_at = ?4 WHERE seq = ?1",
            )
            .map_err(backend)?;
        for (seq, c) in claims {
            stmt.execute(params![seq, c.attempt, c.last_attempt_at, c.next_attempt_at]).map_err(backend)?;
        }
        Ok(())
    }

    async fn deliveries_to_send(&self, seqs: &[i64]) -> Result<Vec<SendRow>> {
        let mut stmt = self
            .prepare_cached(
                "SELECT d.seq, d.id, p.id, p.url, p.secret, p.previous_secret, p.previous_secret_expires_at, \
                        e.id, e.type, e.resource_id, e.created_at, p.workspace_id, \
                        (SELECT id FROM organization LIMIT 1) \
                 FROM webhook_deliveries d JOIN webhook_endpoints p ON p.seq = d.endpoint_seq \
                 JOIN webhook_events e ON e.seq = d.event_seq WHERE d.seq = ?1",
            )
            .map_err(backend)?;
        let mut out = Vec::with_capacity(seqs.len());
        for seq in seqs {
            let bad = |e: StoreError| rusqlite::Error::InvalidColumnName(e.to_string());
            let row = stmt
                .query_row([seq], |r| {
                    Ok(SendRow {
                        seq: r.get(0)?,
                        id: parse_id(&r.get::<_, String>(1)?).map_err(bad)?,
                        endpoint: parse_id(&r.get::<_, String>(2)?).map_err(bad)?,
                        url: r.get(3)?,
                        secret: r.get(4)?,
                        previous_secret: r.get(5)?,
                        previous_secret_expires_at: r.get(6)?,
                        event: parse_id(&r.get::<_, String>(7)?).map_err(bad)?,
                        event_type: event_type_from_column(&r.get::<_, String>(8)?).map_err(bad)?,
                        resource_id: r.get(9)?,
                        created_at: r.get(10)?,
                        workspace_id: parse_id(&r.get::<_, String>(11)?).map_err(bad)?,
                        organization_id: r.get(12)?,
                    })
                })
                .map_err(backend)?;
            out.push(row);
        }
        Ok(out)
    }

    async fn lock_delivery(&self, id: &WebhookDeliveryId) -> Result<Option<DeliveryRow>> {
        query_one(
            self,
            "SELECT seq, status, attempts, next_attempt_at FROM webhook_deliveries WHERE id = ?1",
            [id.as_str()],
            delivery_state,
        )
    }

    async fn record_attempt(
        &self,
        seq: i64,
        recorded: &Recorded,
        status_code: Option<u16>,
        error: Option<&str>,
    ) -> Result<()> {
        self.prepare_cached(
            "UPDATE webhook_deliveries SET status = ?1, next_attempt_at = ?2, finished_at = ?3, \
             last_status_code = ?4, last_error = ?5 WHERE seq = ?6",
        )
        .and_then(|mut s| {
            s.execute(params![
                recorded.status.as_str(),
                recorded.next_attempt_at,
                recorded.finished_at,
                status_code,
                error,
                seq
            ])
        })
        .map_err(backend)?;
        Ok(())
    }

    async fn delete_finished_deliveries(&self, status: DeliveryStatus, before: i64) -> Result<u64> {
        let n = self
            .execute(
                "DELETE FROM webhook_deliveries WHERE status = ?1 AND finished_at < ?2",
                params![status.as_str(), before],
            )
            .map_err(backend)?;
        Ok(n as u64)
    }
}
