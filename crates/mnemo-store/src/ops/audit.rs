//! The audit log: append an entry, list entries newest first with filters, and delete the ones
//! older than the retention (rules in [`crate::rules::audit`]).

use mnemo_api::{
    AdminCursor, AdminPage, AdminPageQuery, AuditActor, AuditEvent, AuditEventId, AuditOutcome, AuditResource,
    WorkspaceId,
};
use serde_json::Value;

use super::{Clock, Micros, Seq};
use crate::rules::audit::{AuditAction, check_details, retained_since};
use crate::{Result, StoreError};

/// An entry to append; the store gives it its id and time.
#[derive(Debug, Clone)]
pub struct NewAuditEvent {
    pub action: AuditAction,
    /// The workspace acted in; ignored (stored as null) for an organization-level action.
    pub workspace: Option<WorkspaceId>,
    pub actor: AuditActor,
    pub resource: Option<AuditResource>,
    pub client_ip: Option<String>,
    pub outcome: AuditOutcome,
    /// A small object of facts ([`check_details`]): never a secret or memory content.
    pub details: Value,
}

/// Which entries a listing shows; `None` filters nothing.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub workspace: Option<WorkspaceId>,
    pub actor_type: Option<String>,
    pub actor_id: Option<String>,
    pub action: Option<String>,
    /// Inclusive.
    pub starting_at: Option<Micros>,
    /// Exclusive.
    pub ending_at: Option<Micros>,
}

/// One page of rows to read: newest first below `below`, or oldest first above `above`.
#[derive(Debug, Clone, Copy)]
pub enum AuditWindow {
    /// Rows with `seq < below`, newest first.
    Older { below: Seq },
    /// Rows with `seq > above`, oldest first (the page before a cursor).
    Newer { above: Seq },
}

/// SQL over the audit log.
pub trait AuditSql: Clock {
    async fn insert_audit_event(&self, id: &AuditEventId, at: Micros, event: &NewAuditEvent) -> Result<()>;
    /// The row number of entry `id`.
    async fn audit_seq(&self, id: &str) -> Result<Option<Seq>>;
    /// Up to `limit` entries passing `filter` in `window`, in the window's order.
    async fn read_audit_events(&self, filter: &AuditFilter, window: AuditWindow, limit: u32)
    -> Result<Vec<AuditEvent>>;
    /// Deletes the entries created before `cutoff`; how many.
    async fn delete_audit_events_before(&self, cutoff: Micros) -> Result<u64>;
}

/// Appends an entry. Details that break [`check_details`] are refused (a caller's bug: the log
/// never holds a secret).
pub async fn record<S: AuditSql>(sql: &S, mut event: NewAuditEvent) -> Result<AuditEventId> {
    check_details(&event.details).map_err(StoreError::Invalid)?;
    if event.action.org_level() {
        event.workspace = None;
    }
    let id = AuditEventId::generate();
    sql.insert_audit_event(&id, sql.now().await?, &event).await?;
    Ok(id)
}

/// A page of entries passing `filter`, newest first, from `page`'s cursor.
pub async fn list<S: AuditSql>(sql: &S, filter: &AuditFilter, page: &AdminPageQuery) -> Result<AdminPage<AuditEvent>> {
    let seq_of = |id: &String| {
        let id = id.clone();
        async move {
            sql.audit_seq(&id).await?.ok_or_else(|| {
                StoreError::Invalid(format!(
                    "`{id}` is not an audit event of this server; page with the ids a listing returned"
                ))
            })
        }
    };
    let window = match &page.cursor {
        AdminCursor::Start => AuditWindow::Older { below: Seq::MAX },
        AdminCursor::After(id) => AuditWindow::Older { below: seq_of(id).await? },
        AdminCursor::Before(id) => AuditWindow::Newer { above: seq_of(id).await? },
    };
    let mut rows = sql.read_audit_events(filter, window, page.limit + 1).await?;
    let has_more = rows.len() > page.limit as usize;
    rows.truncate(page.limit as usize);
    if let AuditWindow::Newer { .. } = window {
        rows.reverse();
    }
    Ok(AdminPage::new(rows, has_more, |e| e.id.to_string()))
}

/// Deletes the entries older than `days` days; how many.
pub async fn prune<S: AuditSql>(sql: &S, days: u32) -> Result<u64> {
    let cutoff = retained_since(sql.now().await?, days);
    sql.delete_audit_events_before(cutoff).await
}
