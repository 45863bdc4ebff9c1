//! The organization and its workspaces: the unit every Managed Agents resource belongs to
//! (admin-api.md §8.1, §8.5), and each workspace's rate-limit overrides (§8.9).
//!
//! The backends store and read rows; whether a workspace may be created, renamed or archived,
//! and what archiving does, is decided here with [`crate::rules::workspace`].

use std::collections::BTreeMap;

use mnemo_api::{
    AdminCursor, AdminPage, AdminPageQuery, DataResidency, LimiterType, NewWorkspace, Organization, SessionId,
    Workspace, WorkspaceId, WorkspaceUpdate,
};

use super::{Clock, Micros};
use crate::row::{ts, ts_opt};
use crate::rules::rate_limit;
use crate::rules::rate_limit::Entry;
use crate::rules::workspace::{self as rule, Archive, Change};
use crate::{Result, StoreError};

/// The colour of a workspace that names none (admin-api.md §8.5).
pub const DEFAULT_DISPLAY_COLOR: &str = "#6C5BB9";
/// `data_residency` of a workspace that names none: stored and echoed, with no effect.
pub const DEFAULT_DATA_RESIDENCY: &str =
    r#"{"workspace_geo":"us","allowed_inference_geos":"unrestricted","default_inference_geo":"global"}"#;

/// A workspace as stored.
#[derive(Debug, Clone)]
pub struct NewWorkspaceRow<'a> {
    pub id: &'a WorkspaceId,
    pub name: &'a str,
    pub display_color: &'a str,
    /// JSON object of string values.
    pub tags: &'a str,
    /// JSON object.
    pub data_residency: &'a str,
    pub created_at: Micros,
}

/// A workspace row as read.
#[derive(Debug, Clone)]
pub struct WorkspaceRow {
    pub id: String,
    pub name: String,
    pub display_color: String,
    /// JSON object of string values.
    pub tags: String,
    /// JSON object.
    pub data_residency: String,
    pub is_default: bool,
    pub created_at: Micros,
    pub archived_at: Option<Micros>,
}

impl WorkspaceRow {
    /// The workspace as the API shows it.
    pub fn decode(&self) -> Result<Workspace> {
        let id: WorkspaceId = crate::row::parse_id(&self.id)?;
        let tags: BTreeMap<String, String> =
            serde_json::from_str(&self.tags).map_err(|e| StoreError::corrupt("workspaces", &self.id, "tags", e))?;
        let data_residency: DataResidency = serde_json::from_str(&self.data_residency)
            .map_err(|e| StoreError::corrupt("workspaces", &self.id, "data_residency", e))?;
        Ok(Workspace {
            compartment_id: id.to_string(),
            id,
            name: self.name.clone(),
            display_color: self.display_color.clone(),
            tags,
            created_at: ts(self.created_at),
            archived_at: ts_opt(self.archived_at),
            data_residency,
            external_key_id: None,
            user_profile_id: None,
        })
    }
}

/// One workspace rate-limit override as stored: (entry id, limiter, value).
pub type OverrideRow = (String, String, i64);

/// SQL over the organization, its workspaces and their rate-limit overrides.
pub trait WorkspaceSql: Clock {
    async fn insert_workspace(&self, row: NewWorkspaceRow<'_>) -> Result<()>;
    /// Every workspace (or only `only`), in creation order. `lock`: the rows are locked until
    /// the transaction ends (PostgreSQL `FOR UPDATE`), so a judgement on them holds.
    async fn workspace_rows(&self, only: Option<&WorkspaceId>, lock: bool) -> Result<Vec<WorkspaceRow>>;
    /// Writes a workspace's changeable fields.
    async fn write_workspace(&self, workspace: &Workspace, tags: &str, data_residency: &str) -> Result<()>;
    /// Archives workspace `id` at `at` and, in the same transaction, what archiving takes with
    /// it (spec §8.5): its API keys become `archived`, its environment keys are revoked, the
    /// pending deliveries to its webhook endpoints end as failed. Answers the sessions of the
    /// workspace with an item not yet stopped, their rows locked (the caller stops their items).
    async fn archive_workspace_rows(&self, id: &WorkspaceId, at: Micros) -> Result<Vec<SessionId>>;
    /// The organization's id and name.
    async fn organization_row(&self) -> Result<(String, String)>;
    /// Renames the organization.
    async fn set_organization_name(&self, name: &str) -> Result<()>;
    /// A workspace's rate-limit overrides.
    async fn rate_limit_overrides(&self, workspace: &WorkspaceId) -> Result<Vec<OverrideRow>>;
    /// Replaces the overrides of one entry of a workspace.
    async fn set_rate_limit_overrides(
        &self,
        workspace: &WorkspaceId,
        entry: &str,
        values: &[(String, i64)],
    ) -> Result<()>;
}

/// The organization.
pub async fn organization<S: WorkspaceSql>(sql: &S) -> Result<Organization> {
    let (id, name) = sql.organization_row().await?;
    Ok(Organization { id, name })
}

/// Renames the organization (from `mnemo serve --org-name`), unless it already has that name.
pub async fn rename_organization<S: WorkspaceSql>(sql: &S, name: &str) -> Result<Organization> {
    mnemo_api::validate_admin_name(name).map_err(|e| StoreError::Invalid(e.0))?;
    let current = organization(sql).await?;
    if current.name != name {
        sql.set_organization_name(name).await?;
    }
    organization(sql).await
}

/// Creates a workspace named `name` with the default colour, no tags and the default residency.
pub async fn create<S: WorkspaceSql>(sql: &S, name: &str) -> Result<WorkspaceId> {
    let id = WorkspaceId::generate();
    let row = NewWorkspaceRow {
        id: &id,
        name,
        display_color: DEFAULT_DISPLAY_COLOR,
        tags: "{}",
        data_residency: DEFAULT_DATA_RESIDENCY,
        created_at: sql.now().await?,
    };
    sql.insert_workspace(row).await?;
    Ok(id)
}

fn json(value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(StoreError::backend)
}

/// Creates a validated workspace unless the organization already has `max` active ones
/// (archived ones do not count). Every workspace row is locked first on PostgreSQL, so two
/// creates cannot both take the last place.
pub async fn create_workspace<S: WorkspaceSql>(sql: &S, new: &NewWorkspace, max: u32) -> Result<Workspace> {
    let rows = sql.workspace_rows(None, true).await?;
    let active = rows.iter().filter(|r| r.archived_at.is_none()).count();
    rule::check_create(u32::try_from(active).unwrap_or(u32::MAX), max)?;
    let id = WorkspaceId::generate();
    let (tags, residency) = (json(&new.tags)?, json(&new.data_residency)?);
    let row = NewWorkspaceRow {
        id: &id,
        name: &new.name,
        display_color: &new.display_color,
        tags: &tags,
        data_residency: &residency,
        created_at: sql.now().await?,
    };
    sql.insert_workspace(row).await?;
    get(sql, &id).await
}

async fn row_of<S: WorkspaceSql>(sql: &S, id: &WorkspaceId, lock: bool) -> Result<WorkspaceRow> {
    let mut rows = sql.workspace_rows(Some(id), lock).await?;
    rows.pop().ok_or_else(|| StoreError::not_found("workspace", id))
}

/// One workspace, archived or not.
pub async fn get<S: WorkspaceSql>(sql: &S, id: &WorkspaceId) -> Result<Workspace> {
    row_of(sql, id, false).await?.decode()
}

/// A workspace that exists, and whether it is archived.
pub async fn archived<S: WorkspaceSql>(sql: &S, id: &WorkspaceId) -> Result<bool> {
    Ok(row_of(sql, id, false).await?.archived_at.is_some())
}

/// Applies an update ([`rule::update`]: the Default workspace keeps its name).
pub async fn update<S: WorkspaceSql>(sql: &S, id: &WorkspaceId, body: &WorkspaceUpdate) -> Result<Workspace> {
    let row = row_of(sql, id, true).await?;
    let next = rule::update(&row.decode()?, row.is_default, body)?;
    sql.write_workspace(&next, &json(&next.tags)?, &json(&next.data_residency)?).await?;
    get(sql, id).await
}

/// Which workspaces a list shows.
#[derive(Debug, Clone)]
pub struct ListWorkspaces {
    /// Only these (others' ids silently dropped); `None`: every one.
    pub ids: Option<Vec<WorkspaceId>>,
    pub include_archived: bool,
    pub include_default: bool,
    pub page: AdminPageQuery,
}

/// A page of workspaces in creation order.
pub async fn list<S: WorkspaceSql>(sql: &S, query: &ListWorkspaces) -> Result<AdminPage<Workspace>> {
    let mut shown = Vec::new();
    for row in sql.workspace_rows(None, false).await? {
        if !rule::listed(row.is_default, row.archived_at.is_some(), query.include_archived, query.include_default) {
            continue;
        }
        let workspace = row.decode()?;
        if query.ids.as_ref().is_some_and(|ids| !ids.contains(&workspace.id)) {
            continue;
        }
        shown.push(workspace);
    }
    page(shown, |w| w.id.to_string(), &query.page)
}

/// Archives a workspace ([`rule::archive`]): irreversible and idempotent; at once its API keys
/// are archived, its environment keys revoked, its unstopped work items force-stopped (their
/// sessions tokens die with them) and its webhook deliveries ended. Answers the workspace and
/// whether credentials died (the caller then drops cached ones on every replica).
pub async fn archive<S: WorkspaceSql + super::WorkSql>(sql: &S, id: &WorkspaceId) -> Result<(Workspace, bool)> {
    let row = row_of(sql, id, true).await?;
    let now = sql.now().await?;
    match rule::archive(row.is_default, row.archived_at, now)? {
        Archive::Already(_) => Ok((row.decode()?, false)),
        Archive::Now(at) => {
            for session in sql.archive_workspace_rows(id, at).await? {
                super::work::stop_session_work(sql, &session).await?;
            }
            Ok((get(sql, id).await?, true))
        }
    }
}

/// A page of `items` (in list order) as [`AdminPageQuery`] asks: after or before an id of the
/// list (an id not in it is refused), at most `limit`.
pub fn page<T>(mut items: Vec<T>, id: impl Fn(&T) -> String, query: &AdminPageQuery) -> Result<AdminPage<T>> {
    let limit = query.limit as usize;
    let position = |wanted: &str, items: &[T]| {
        items.iter().position(|i| id(i) == wanted).ok_or_else(|| {
            StoreError::Invalid(format!(
                "`{}` is not an id of this list; pass the first_id or last_id of a page it returned",
                wanted.chars().take(64).collect::<String>()
            ))
        })
    };
    let (data, has_more) = match &query.cursor {
        AdminCursor::Start => {
            let more = items.len() > limit;
            items.truncate(limit);
            (items, more)
        }
        AdminCursor::After(after) => {
            let at = position(after, &items)?;
            let mut rest = items.split_off(at + 1);
            let more = rest.len() > limit;
            rest.truncate(limit);
            (rest, more)
        }
        AdminCursor::Before(before) => {
            let at = position(before, &items)?;
            items.truncate(at);
            let start = items.len().saturating_sub(limit);
            let more = start > 0;
            (items.split_off(start), more)
        }
    };
    Ok(AdminPage::new(data, has_more, id))
}

// ---------------------------------------------------------------------------------------------
// Rate-limit overrides

/// A workspace's overrides, by entry id.
pub type Overrides = BTreeMap<String, BTreeMap<LimiterType, u64>>;

/// The overrides of workspace `id` (which must exist).
pub async fn overrides<S: WorkspaceSql>(sql: &S, id: &WorkspaceId) -> Result<Overrides> {
    row_of(sql, id, false).await?;
    let mut out = Overrides::new();
    for (entry, limiter, value) in sql.rate_limit_overrides(id).await? {
        let value =
            u64::try_from(value).map_err(|e| StoreError::corrupt("workspace_rate_limits", &entry, "value", e))?;
        out.entry(entry).or_default().insert(LimiterType::parse(&limiter), value);
    }
    Ok(out)
}

/// Applies `body` to workspace `id`'s overrides of `entry` ([`rate_limit::apply_update`]);
/// an archived workspace refuses. Answers the entry's overrides after the change.
pub async fn update_overrides<S: WorkspaceSql>(
    sql: &S,
    id: &WorkspaceId,
    entry: &Entry,
    body: &mnemo_api::RateLimitUpdate,
) -> Result<BTreeMap<LimiterType, u64>> {
    let row = row_of(sql, id, true).await?;
    rule::check_open(id, row.archived_at.is_some(), Change::RateLimits)?;
    let current = overrides(sql, id).await?.remove(&entry.id).unwrap_or_default();
    let next = rate_limit::apply_update(entry, &current, body)?;
    let values: Vec<(String, i64)> =
        next.iter().map(|(l, v)| (l.to_string(), i64::try_from(*v).unwrap_or(i64::MAX))).collect();
    sql.set_rate_limit_overrides(id, &entry.id, &values).await?;
    Ok(next)
}

/// Whether a workspace takes new API keys: it exists and is not archived.
pub async fn check_takes_keys<S: WorkspaceSql>(sql: &S, id: &WorkspaceId) -> Result<()> {
    let row = row_of(sql, id, true).await?;
    Ok(rule::check_open(id, row.archived_at.is_some(), Change::ApiKeys)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(limit: u32, cursor: AdminCursor) -> AdminPageQuery {
        AdminPageQuery { limit, cursor }
    }

    /// (items, has_more, first_id, last_id)
    type Shown<'a> = (Vec<&'a str>, bool, Option<&'a str>, Option<&'a str>);

    fn ids<'a>(p: &'a AdminPage<&'a str>) -> Shown<'a> {
        (p.data.clone(), p.has_more, p.first_id.as_deref(), p.last_id.as_deref())
    }

    #[test]
    fn pages_walk_both_ways() {
        let items = vec!["a", "b", "c", "d", "e"];
        let id = |s: &&str| (*s).to_owned();
        #[rustfmt::skip]
        let rows: Vec<(&str, AdminPageQuery, Shown<'_>)> = vec![
            ("first page", q(2, AdminCursor::Start), (vec!["a", "b"], true, Some("a"), Some("b"))),
            ("everything fits", q(20, AdminCursor::Start), (vec!["a", "b", "c", "d", "e"], false, Some("a"), Some("e"))),
            ("after b", q(2, AdminCursor::After("b".into())), (vec!["c", "d"], true, Some("c"), Some("d"))),
            ("after d: the last one", q(2, AdminCursor::After("d".into())), (vec!["e"], false, Some("e"), Some("e"))),
            ("after the last: empty", q(2, AdminCursor::After("e".into())), (vec![], false, None, None)),
            ("before d", q(2, AdminCursor::Before("d".into())), (vec!["b", "c"], true, Some("b"), Some("c"))),
            ("before b: the first one", q(2, AdminCursor::Before("b".into())), (vec!["a"], false, Some("a"), Some("a"))),
        ];
        for (rule, query, expected) in rows {
            let got = page(items.clone(), id, &query).unwrap();
            assert_eq!(ids(&got), expected, "rule: {rule}");
        }
        let unknown = page(items, id, &q(2, AdminCursor::After("zz".into()))).unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "`zz` is not an id of this list; pass the first_id or last_id of a page it returned"
        );
    }
}
