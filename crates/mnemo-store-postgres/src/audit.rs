//! The audit log's SQL primitives ([`ops::AuditSql`]).

use mnemo_api::{AuditEvent, AuditEventId};
use mnemo_store::Result;
use mnemo_store::ops::{self, AuditFilter, AuditWindow, NewAuditEvent, Seq};
use mnemo_store::row::{AUDIT_COLUMNS, audit_event};

use crate::engine::{Cols, Pg, all, col, exec, opt};

/// The filter's conditions, parameters $1–$6.
const FILTER: &str = "($1::text IS NULL OR workspace_id = $1) AND ($2::text IS NULL OR actor_type = $2) \
                      AND ($3::text IS NULL OR actor_id = $3) AND ($4::text IS NULL OR action = $4) \
                      AND ($5::bigint IS NULL OR created_at >= $5) AND ($6::bigint IS NULL OR created_at < $6)";

impl ops::AuditSql for Pg<'_, '_> {
    async fn insert_audit_event(&self, id: &AuditEventId, at: i64, e: &NewAuditEvent) -> Result<()> {
        let (resource_type, resource_id) = e.resource.as_ref().map(|r| (r.kind.as_str(), r.id.as_str())).unzip();
        let details = e.details.to_string();
        exec(
            self,
            "INSERT INTO audit_events (id, created_at, workspace_id, actor_type, actor_id, action, resource_type, \
             resource_id, client_ip, outcome, details) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                &id.as_str(),
                &at,
                &e.workspace.as_ref().map(|w| w.as_str()),
                &e.actor.kind.as_str(),
                &e.actor.id,
                &e.action.as_str(),
                &resource_type,
                &resource_id,
                &e.client_ip,
                &e.outcome.as_str(),
                &details,
            ],
        )
        .await
        .map(drop)
    }

    async fn audit_seq(&self, id: &str) -> Result<Option<Seq>> {
        let row = opt(self, "SELECT seq FROM audit_events WHERE id = $1", &[&id]).await?;
        row.map(|r| col(&r, 0)).transpose()
    }

    async fn read_audit_events(&self, f: &AuditFilter, window: AuditWindow, limit: u32) -> Result<Vec<AuditEvent>> {
        let (bound, order, seq) = match window {
            AuditWindow::Older { below } => ("seq < $7", "DESC", below),
            AuditWindow::Newer { above } => ("seq > $7", "ASC", above),
        };
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_events WHERE {FILTER} AND {bound} ORDER BY seq {order} LIMIT $8"
        );
        let limit = i64::from(limit);
        let rows = all(
            self,
            &sql,
            &[
                &f.workspace.as_ref().map(|w| w.as_str()),
                &f.actor_type,
                &f.actor_id,
                &f.action,
                &f.starting_at,
                &f.ending_at,
                &seq,
                &limit,
            ],
        )
        .await?;
        rows.iter().map(|r| audit_event(&Cols(r))).collect()
    }

    async fn delete_audit_events_before(&self, cutoff: i64) -> Result<u64> {
        exec(self, "DELETE FROM audit_events WHERE created_at < $1", &[&cutoff]).await
    }
}
