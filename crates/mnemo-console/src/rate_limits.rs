//! The workspace's rate limits: every limiter of every entry of this server (admin-api.md
//! §8.9), with the organization's value (`--rate-limit`), the workspace's override and the one
//! that applies (the lower of the two).
//!
//! The page only reads. Changing an override is workspace-admin work (§8.6), and a console
//! session of an API key is a `workspace_developer` (§8.2); overrides are set through the
//! Admin API with an admin key, which the page names.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use mnemo_store::rules::rate_limit::{Entry, OrgLimits, effective};

use crate::Console;
use crate::auth::Signed;
use crate::page::{Chrome, PageError, Section, render};

/// One limiter of one entry, as the page shows it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LimitRow {
    /// The entry's group, as a person reads it (a model family's name, or what it limits).
    group: String,
    entry: String,
    limiter: String,
    org: String,
    own: String,
    applies: String,
}

/// `N per unit` figures read as numbers; no value is "no limit" / "not set".
fn figure(value: Option<u64>, none: &str) -> String {
    value.map_or_else(|| none.to_owned(), |v| v.to_string())
}

/// The rows of every entry's limiters for a workspace with `overrides`.
pub(crate) fn rows(
    entries: &[Entry],
    org: &OrgLimits,
    overrides: &mnemo_store::ops::workspaces::Overrides,
) -> Vec<LimitRow> {
    let mut out = Vec::new();
    for entry in entries {
        let group = entry.group.display_name.clone().unwrap_or_else(|| match entry.group.kind.as_str() {
            "managed_agents" => "Managed Agents API requests".to_owned(),
            other => other.replace('_', " "),
        });
        for limiter in &entry.limiters {
            let org_value = org.get(&(entry.id.clone(), limiter.clone())).copied();
            let own = overrides.get(&entry.id).and_then(|o| o.get(limiter)).copied();
            out.push(LimitRow {
                group: group.clone(),
                entry: entry.id.clone(),
                limiter: limiter.as_str().replace('_', " "),
                org: figure(org_value, "no limit"),
                own: figure(own, "not set"),
                applies: figure(effective(own, org_value), "no limit"),
            });
        }
    }
    out
}

#[derive(Debug, Template)]
#[template(path = "rate_limits.html")]
struct RateLimitsPage {
    chrome: Chrome,
    workspace: String,
    workspace_id: String,
    rows: Vec<LimitRow>,
}

pub(crate) async fn page(State(console): State<Console>, who: Signed) -> Result<Response, PageError> {
    let (entries, org) = console.hooks.rate_limits();
    let overrides = console.store.workspace_rate_limits(&who.workspace).await?;
    Ok(render(&RateLimitsPage {
        chrome: who.chrome(Section::RateLimits),
        workspace: who.workspace_name.clone(),
        workspace_id: who.workspace.to_string(),
        rows: rows(&entries, &org, &overrides),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mnemo_api::LimiterType;
    use mnemo_store::rules::rate_limit::{ModelFamily, catalogue};

    #[test]
    fn each_limiter_shows_the_org_value_the_override_and_the_lower_one_applies() {
        let entries = catalogue(&[ModelFamily { display_name: "Claude Sonnet".into(), models: vec!["s".into()] }]);
        let api = entries[0].id.clone();
        let model = entries[1].id.clone();
        let org: OrgLimits = [
            ((api.clone(), LimiterType::RequestsPerMinute), 600),
            ((model.clone(), LimiterType::InputTokensPerMinute), 1000),
        ]
        .into_iter()
        .collect();
        let mut overrides = mnemo_store::ops::workspaces::Overrides::new();
        overrides.insert(api, [(LimiterType::RequestsPerMinute, 60)].into_iter().collect());
        overrides.insert(
            model,
            [(LimiterType::InputTokensPerMinute, 5000), (LimiterType::OutputTokensPerMinute, 7)].into_iter().collect(),
        );
        let shown: Vec<(String, String, String, String, String)> = rows(&entries, &org, &overrides)
            .into_iter()
            .map(|r| (r.group, r.limiter, r.org, r.own, r.applies))
            .collect();
        let row = |g: &str, l: &str, o: &str, w: &str, a: &str| (g.into(), l.into(), o.into(), w.into(), a.into());
        assert_eq!(
            shown,
            vec![
                // (group, limiter, org, workspace, applies)
                row("Managed Agents API requests", "requests per minute", "600", "60", "60"),
                row("Claude Sonnet", "requests per minute", "no limit", "not set", "no limit"),
                // An override above the org value is kept but the lower one applies.
                row("Claude Sonnet", "input tokens per minute", "1000", "5000", "1000"),
                row("Claude Sonnet", "output tokens per minute", "no limit", "7", "7"),
            ]
        );
    }
}
