//! The audit log's SQL primitives ([`ops::AuditSql`]).

use mnemo_api::{AuditEvent, AuditEventId};
use mnemo_store::Result;
use mnemo_store::ops::{self, AuditFilter, AuditWindow, NewAuditEvent, Seq};
use mnemo_store::row::{AUDIT_COLUMNS, audit_event};
use rusqlite::params;

use crate::engine::{Cols, Lite, backend, query_one};

/// The filter's conditions, parameters ?1–?6.
const FILTER: &str = "(?1 IS NULL OR workspace_id = ?1) AND (?2 IS NULL OR actor_type = ?2) \
                      AND (?3 IS NULL OR actor_id = ?3) AND (?4 IS NULL OR action = ?4) \
                      AND (?5 IS NULL OR created_at >= ?5) AND (?6 IS NULL OR created_at < ?6)";

impl ops::AuditSql for Lite<'_> {
    async fn insert_audit_event(&self, id: &AuditEventId, at: i64, e: &NewAuditEvent) -> Result<()> {
        let (resource_type, resource_id) = e.resource.as_ref().map(|r| (r.kind.as_str(), r.id.as_str())).unzip();
        self.prepare_cached(
            "INSERT INTO audit_events (id, created_at, workspace_id, actor_type, actor_id, action, resource_type, \
             resource_id, client_ip, outcome, details) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id.as_str(),
                at,
                e.workspace.as_ref().map(|w| w.as_str()),
                e.actor.kind.as_str(),
                e.actor.id,
                e.action.as_str(),
                resource_type,
                resource_id,
                e.client_ip,
                e.outcome.as_str(),
                e.details.to_string(),
            ])
        })
        .map_err(backend)?;
        Ok(())
    }

    async fn audit_seq(&self, id: &str) -> Result<Option<Seq>> {
        query_one(self, "SELECT seq FROM audit_events WHERE id = ?1", [id], |r| r.get(0))
    }

    async fn read_audit_events(&self, f: &AuditFilter, window: AuditWindow, limit: u32) -> Result<Vec<AuditEvent>> {
        let (bound, order) = match window {
            AuditWindow::Older { below } => (format!("seq < {below}"), "DESC"),
            AuditWindow::Newer { above } => (format!("seq > {above}"), "ASC"),
        };
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_events WHERE {FILTER} AND {bound} ORDER BY seq {order} LIMIT ?7"
        );
        let mut stmt = self.prepare_cached(&sql).map_err(backend)?;
        let rows = stmt
            .query_map(
                params![
                    f.workspace.as_ref().map(|w| w.as_str()),
                    f.actor_type,
                    f.actor_id,
                    f.action,
                    f.starting_at,
                    f.ending_at,
                    limit
                ],
                |r| Ok(audit_event(&Cols(r))),
            )
            .map_err(backend)?;
        rows.map(|r| r.map_err(backend)?).collect()
    }

    async fn delete_audit_events_before(&self, cutoff: i64) -> Result<u64> {
        let n = self
            .prepare_cached("DELETE FROM audit_events WHERE created_at < ?1")
            .and_then(|mut s| s.execute([cutoff]))
            .map_err(backend)?;
        Ok(n as u64)
    }
}
