//! Workspaces: the Default workspace, the cap on active workspaces, archiving, and what an
//! archived workspace refuses (spec `admin-api.md` §3.2, §8.5).
//!
//! A backend loads the workspace (and whether it is the organization's Default one, which the
//! organization row names) in its transaction, asks these rules, and writes what they return.

use mnemo_api::{Workspace, WorkspaceId, WorkspaceUpdate};

use super::refusal::Refusal;
use crate::ops::Micros;

/// How many active (not archived) workspaces an organization may have unless
/// `--max-workspaces` says otherwise: the hosted default.
pub const DEFAULT_MAX_WORKSPACES: u32 = 100;

/// The `last_error` of a webhook delivery that was still pending when its endpoint's workspace
/// was archived (it ends `failed`, never sent).
pub const ARCHIVED_DELIVERY_ERROR: &str = "the endpoint's workspace was archived";

/// Whether one more workspace may be created when `active` are not archived (archived ones do
/// not count) and the server allows `max`.
pub fn check_create(active: u32, max: u32) -> Result<(), Refusal> {
    if active >= max {
        return Err(Refusal::invalid(format!(
            "this organization already has {active} active workspaces, the most this server allows \
             (--max-workspaces {max}); archive one before creating another"
        )));
    }
    Ok(())
}

/// `current` with `body` applied: every field rule of the body, and the Default workspace
/// cannot be renamed. Its colour, tags and residency may change, as hosted.
pub fn update(current: &Workspace, is_default: bool, body: &WorkspaceUpdate) -> Result<Workspace, Refusal> {
    if is_default && body.renames(current) {
        return Err(Refusal::invalid("the Default workspace cannot be renamed"));
    }
    Ok(body.apply(current)?)
}

/// What archiving a workspace does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archive {
    /// Archive it now, at this time (microseconds): its API keys become `archived`, its
    /// environment keys are revoked, its work items get a stop request, its webhook endpoints
    /// stop delivering, all in the same transaction.
    Now(Micros),
    /// It already is, since this time: answer with the workspace as it stands, change nothing.
    Already(Micros),
}

/// Archiving `archived_at` (its current archive time, if any) at `now`: irreversible and
/// idempotent; the Default workspace cannot be archived.
pub fn archive(is_default: bool, archived_at: Option<Micros>, now: Micros) -> Result<Archive, Refusal> {
    if is_default {
        return Err(Refusal::invalid("the Default workspace cannot be archived"));
    }
    Ok(match archived_at {
        Some(at) => Archive::Already(at),
        None => Archive::Now(now),
    })
}

/// A change an archived workspace refuses (spec §8.4, §8.5): its data is kept and readable, but
/// nothing about it changes any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Adding, updating or removing a member.
    Members,
    /// Setting or clearing a rate-limit override.
    RateLimits,
    /// Minting an API key in it.
    ApiKeys,
}

/// Refuses `change` on an archived workspace.
pub fn check_open(id: &WorkspaceId, archived: bool, change: Change) -> Result<(), Refusal> {
    if !archived {
        return Ok(());
    }
    let what = match change {
        Change::Members => "its members cannot change",
        Change::RateLimits => "its rate limits cannot change",
        Change::ApiKeys => "no API key can be created in it",
    };
    Err(Refusal::invalid(format!("workspace `{id}` is archived; {what}")))
}

/// Whether a workspace is in a list made with `include_archived` and `include_default` (both
/// false by default: the Default workspace is listed only when asked for, as hosted).
pub fn listed(is_default: bool, archived: bool, include_archived: bool, include_default: bool) -> bool {
    (!is_default || include_default) && (!archived || include_archived)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ws() -> Workspace {
        serde_json::from_value(json!({
            "type": "workspace", "id": "wrkspc_d1", "name": "Default", "display_color": "#6C5BB9",
            "tags": {}, "created_at": "2026-11-02T10:00:00Z", "archived_at": null,
            "data_residency": {"workspace_geo": "us", "allowed_inference_geos": "unrestricted",
                "default_inference_geo": "global"},
            "compartment_id": "wrkspc_d1", "external_key_id": null, "user_profile_id": null
        }))
        .unwrap()
    }

    fn body(v: serde_json::Value) -> WorkspaceUpdate {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_cap_counts_active_workspaces() {
        #[rustfmt::skip]
        let rows: Vec<(&str, u32, u32, bool)> = vec![
            ("below the default cap", 99, DEFAULT_MAX_WORKSPACES, true),
            ("at the default cap", 100, DEFAULT_MAX_WORKSPACES, false),
            ("a configured cap", 3, 4, true),
            ("past a lowered cap", 5, 4, false),
            ("a cap of zero allows none", 0, 0, false),
        ];
        for (rule, active, max, ok) in rows {
            assert_eq!(check_create(active, max).is_ok(), ok, "rule: {rule}");
        }
        assert_eq!(
            check_create(100, 100).unwrap_err().message,
            "this organization already has 100 active workspaces, the most this server allows (--max-workspaces 100); archive one before creating another"
        );
    }

    #[test]
    fn the_default_workspace_keeps_its_name() {
        #[rustfmt::skip]
        let rows: Vec<(&str, bool, WorkspaceUpdate, Result<&str, &str>)> = vec![
            ("Default cannot be renamed", true, body(json!({"name": "Prod"})), Err("the Default workspace cannot be renamed")),
            ("Default may be sent its own name", true, body(json!({"name": "Default", "display_color": "#000000"})), Ok("Default")),
            ("Default may change its tags", true, body(json!({"tags": {"team": "core"}})), Ok("Default")),
            ("another workspace may be renamed", false, body(json!({"name": "Prod"})), Ok("Prod")),
            ("the body's own rules still apply", false, body(json!({"name": ""})), Err("name must be 1 to 255 characters long (got 0)")),
        ];
        for (rule, is_default, update_body, expected) in rows {
            let got = update(&ws(), is_default, &update_body);
            assert_eq!(got.as_ref().map(|w| w.name.as_str()).map_err(|e| e.message.as_str()), expected, "rule: {rule}");
        }
    }

    /// (rule, is Default, archived_at, what archiving does or the refusal)
    type ArchiveRow = (&'static str, bool, Option<Micros>, Result<Archive, &'static str>);

    #[test]
    fn archiving_is_final_and_idempotent() {
        #[rustfmt::skip]
        let rows: Vec<ArchiveRow> = vec![
            ("an open workspace is archived now", false, None, Ok(Archive::Now(50))),
            ("archiving again keeps the first time", false, Some(7), Ok(Archive::Already(7))),
            ("Default cannot be archived", true, None, Err("the Default workspace cannot be archived")),
        ];
        for (rule, is_default, archived_at, expected) in rows {
            let got = archive(is_default, archived_at, 50);
            assert_eq!(got.as_ref().map_err(|e| e.message.as_str()).copied(), expected, "rule: {rule}");
        }
    }

    #[test]
    fn an_archived_workspace_refuses_changes() {
        let id: WorkspaceId = "wrkspc_w1".parse().unwrap();
        #[rustfmt::skip]
        let rows: Vec<(&str, bool, Change, Option<&str>)> = vec![
            ("an open workspace takes members", false, Change::Members, None),
            ("an open workspace takes rate limits", false, Change::RateLimits, None),
            ("an open workspace takes keys", false, Change::ApiKeys, None),
            ("archived: members", true, Change::Members, Some("workspace `wrkspc_w1` is archived; its members cannot change")),
            ("archived: rate limits", true, Change::RateLimits, Some("workspace `wrkspc_w1` is archived; its rate limits cannot change")),
            ("archived: keys", true, Change::ApiKeys, Some("workspace `wrkspc_w1` is archived; no API key can be created in it")),
        ];
        for (rule, archived, change, expected) in rows {
            assert_eq!(check_open(&id, archived, change).err().map(|e| e.message).as_deref(), expected, "rule: {rule}");
        }
    }

    #[test]
    fn lists_hide_default_and_archived_unless_asked() {
        #[rustfmt::skip]
        let rows: Vec<(&str, bool, bool, bool, bool, bool)> = vec![
            // (rule, is_default, archived, include_archived, include_default, listed)
            ("an open workspace is listed", false, false, false, false, true),
            ("Default is not listed by default", true, false, false, false, false),
            ("Default is listed when asked", true, false, false, true, true),
            ("an archived one is not listed by default", false, true, false, false, false),
            ("an archived one is listed when asked", false, true, true, false, true),
        ];
        for (rule, is_default, archived, inc_archived, inc_default, expected) in rows {
            assert_eq!(listed(is_default, archived, inc_archived, inc_default), expected, "rule: {rule}");
        }
    }
}
