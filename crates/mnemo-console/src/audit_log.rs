//! The workspace's audit log: newest first, filtered by action, actor type and day, paged.
//!
//! A console session of an API key sees its own workspace's entries only: what was done in
//! it, through the API or the console. Organization-level entries (sign-ins, workspaces made,
//! admin keys) have no workspace and stay with the Admin API's log, which needs an admin key.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use chrono::{NaiveDate, NaiveTime};
use mnemo_api::{AdminCursor, AdminPageQuery, AuditActorType, AuditEvent};
use mnemo_http::{BadInput, FromQuery, Params, Query};
use mnemo_store::ops::{AuditFilter, Micros};
use mnemo_store::rules::audit::AuditAction;

use crate::Console;
use crate::auth::Signed;
use crate::page::{Chrome, PageError, Section, render};
use crate::text::when;

/// Entries per page.
const PAGE: u32 = 50;

/// Records what a signed-in person did to resource `id` in their workspace, as the API's
/// recorder would for the same call (`details`: named fields only, never a secret).
pub(crate) async fn record(console: &Console, who: &Signed, action: AuditAction, id: &str, details: serde_json::Value) {
    let event = mnemo_store::ops::NewAuditEvent {
        action,
        workspace: Some(who.workspace.clone()),
        actor: mnemo_store::rules::audit::actor_of(&who.credential),
        resource: action.resource_type().map(|kind| mnemo_api::AuditResource { kind: kind.into(), id: id.to_owned() }),
        client_ip: who.peer.map(|ip| ip.to_string()),
        outcome: mnemo_api::AuditOutcome::Success,
        details,
    };
    if let Err(e) = console.store.record_audit_event(event).await {
        tracing::error!(error = %e.chain(), %action, "could not record an audit event");
    }
}

/// The page's filters and position, as its form and links write them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct AuditQuery {
    /// An action's wire name (`api_key.update`), or empty for any.
    action: String,
    /// An actor type's wire name (`api_key`), or empty for any.
    actor: String,
    /// First day shown (`YYYY-MM-DD`, UTC), or empty.
    from: String,
    /// Last day shown, inclusive, or empty.
    until: String,
    /// Entries older than this one (the next page), or newer (the previous page).
    older_than: Option<String>,
    newer_than: Option<String>,
}

/// A day's start in microseconds (UTC).
fn day_start(day: NaiveDate) -> Micros {
    day.and_time(NaiveTime::MIN).and_utc().timestamp_micros()
}

fn day(name: &str, raw: &str) -> Result<Option<NaiveDate>, BadInput> {
    if raw.is_empty() {
        return Ok(None);
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d").map(Some).map_err(|_| {
        BadInput::Invalid(format!(
            "{name} must be a day written YYYY-MM-DD (got `{}`)",
            raw.chars().take(40).collect::<String>()
        ))
    })
}

impl FromQuery for AuditQuery {
    const ONCE: &'static [&'static str] = &["action", "actor", "from", "until", "older_than", "newer_than"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let text = |name| q.one(name).map(str::trim).unwrap_or_default().to_owned();
        let action = text("action");
        if !action.is_empty() && AuditAction::parse(&action).is_none() {
            return Err(BadInput::Invalid(format!(
                "there is no audited action `{}`",
                action.chars().take(40).collect::<String>()
            )));
        }
        let actor = text("actor");
        if !actor.is_empty() && !AuditActorType::ALL.iter().any(|k| k.as_str() == actor) {
            return Err(BadInput::Invalid(format!(
                "there is no actor type `{}`",
                actor.chars().take(40).collect::<String>()
            )));
        }
        let (from, until) = (text("from"), text("until"));
        day("From", &from)?;
        day("Until", &until)?;
        let cursor = |name| q.one(name).filter(|c| !c.is_empty()).map(str::to_owned);
        Ok(Self { action, actor, from, until, older_than: cursor("older_than"), newer_than: cursor("newer_than") })
    }
}

impl AuditQuery {
    /// The store's filter for workspace `ws`: only its entries.
    fn filter(&self, ws: &mnemo_api::WorkspaceId) -> AuditFilter {
        let from = day("From", &self.from).ok().flatten();
        let until = day("Until", &self.until).ok().flatten();
        AuditFilter {
            workspace: Some(ws.clone()),
            actor_type: Some(self.actor.clone()).filter(|a| !a.is_empty()),
            actor_id: None,
            action: Some(self.action.clone()).filter(|a| !a.is_empty()),
            starting_at: from.map(day_start),
            // `until` is inclusive: everything before the next day's start.
            ending_at: until.and_then(|d| d.succ_opt()).map(day_start),
        }
    }

    fn page(&self) -> AdminPageQuery {
        let cursor = match (&self.older_than, &self.newer_than) {
            (Some(id), _) => AdminCursor::After(id.clone()),
            (None, Some(id)) => AdminCursor::Before(id.clone()),
            (None, None) => AdminCursor::Start,
        };
        AdminPageQuery { limit: PAGE, cursor }
    }

    /// The link to this list from entry `id` on (`older_than` / `newer_than`), filters kept.
    fn link(&self, direction: &str, id: &str) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (name, value) in
            [("action", &self.action), ("actor", &self.actor), ("from", &self.from), ("until", &self.until)]
        {
            if !value.is_empty() {
                q.append_pair(name, value);
            }
        }
        q.append_pair(direction, id);
        format!("/console/audit-log?{}", q.finish())
    }

    fn filtered(&self) -> bool {
        !(self.action.is_empty() && self.actor.is_empty() && self.from.is_empty() && self.until.is_empty())
    }
}

#[derive(Debug)]
pub(crate) struct EventRow {
    when: String,
    action: String,
    actor: String,
    resource: String,
    outcome: &'static str,
    client: String,
    details: String,
}

fn row(e: &AuditEvent) -> EventRow {
    let details = match &e.details {
        serde_json::Value::Object(m) if m.is_empty() => String::new(),
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}: {}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    };
    EventRow {
        when: when(&e.created_at),
        action: e.action.clone(),
        actor: format!("{} {}", e.actor.kind.as_str().replace('_', " "), e.actor.id),
        resource: e.resource.as_ref().map(|r| r.id.clone()).unwrap_or_default(),
        outcome: e.outcome.as_str(),
        client: e.client_ip.clone().unwrap_or_default(),
        details,
    }
}

#[derive(Debug, Template)]
#[template(path = "audit_log.html")]
struct AuditPage {
    chrome: Chrome,
    workspace: String,
    q: AuditQuery,
    actions: Vec<&'static str>,
    actors: Vec<&'static str>,
    rows: Vec<EventRow>,
    older: Option<String>,
    newer: Option<String>,
    clear: bool,
}

pub(crate) async fn page(
    State(console): State<Console>,
    who: Signed,
    Query(q): Query<AuditQuery>,
) -> Result<Response, PageError> {
    // A person reads it as one who manages the workspace; an API key's sign-in as before.
    if who.person.is_some() {
        who.allow(mnemo_store::rules::scope::Action::Workspace(mnemo_store::rules::scope::WorkspaceOp::Settings))?;
    }
    let listing = console.store.list_audit_events(q.filter(&who.workspace), q.page()).await?;
    let paged = q.older_than.is_some() || q.newer_than.is_some();
    // Reading older entries: more below when the store says so; newer ones exist above any
    // page that was reached by paging. Reading newer: the reverse.
    let (more_older, more_newer) =
        if q.newer_than.is_some() { (true, listing.has_more) } else { (listing.has_more, paged) };
    let older = listing.last_id.as_deref().filter(|_| more_older).map(|id| q.link("older_than", id));
    let newer = listing.first_id.as_deref().filter(|_| more_newer).map(|id| q.link("newer_than", id));
    Ok(render(&AuditPage {
        chrome: who.chrome(Section::AuditLog),
        workspace: who.workspace_name.clone(),
        actions: AuditAction::ALL.iter().filter(|a| !a.org_level()).map(|a| a.as_str()).collect(),
        actors: AuditActorType::ALL.iter().map(|k| k.as_str()).collect(),
        rows: listing.data.iter().map(row).collect(),
        clear: q.filtered(),
        q,
        older,
        newer,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(raw: &str) -> Result<AuditQuery, BadInput> {
        AuditQuery::from_query(&Params::parse(raw))
    }

    #[test]
    fn days_filter_whole_utc_days_and_bad_filters_are_refused() {
        let ws: mnemo_api::WorkspaceId = "wrkspc_01aaaaaaaaaaaaaaaaaaaaaaaa".parse().unwrap();
        let q = query("action=api_key.create&actor=api_key&from=2026-12-01&until=2026-12-02").unwrap();
        let f = q.filter(&ws);
        assert_eq!(f.workspace, Some(ws.clone()));
        assert_eq!((f.action.as_deref(), f.actor_type.as_deref()), (Some("api_key.create"), Some("api_key")));
        let day = 86_400_000_000;
        let dec1 = day_start(NaiveDate::from_ymd_opt(2026, 12, 1).unwrap());
        assert_eq!((f.starting_at, f.ending_at), (Some(dec1), Some(dec1 + 2 * day)));
        let empty = query("action=&actor=&from=&until=").unwrap().filter(&ws);
        assert_eq!((empty.action, empty.actor_type, empty.starting_at, empty.ending_at), (None, None, None, None));
        for bad in ["action=nope", "actor=robot", "from=12/01/2026", "until=yesterday"] {
            assert!(query(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn page_links_keep_the_filters() {
        let q = query("action=api_key.update&from=2026-12-01").unwrap();
        assert_eq!(
            q.link("older_than", "audit_1"),
            "/console/audit-log?action=api_key.update&from=2026-12-01&older_than=audit_1"
        );
        assert_eq!(q.page(), AdminPageQuery { limit: PAGE, cursor: AdminCursor::Start });
        let q = query("older_than=audit_9").unwrap();
        assert_eq!(q.page().cursor, AdminCursor::After("audit_9".into()));
    }
}
