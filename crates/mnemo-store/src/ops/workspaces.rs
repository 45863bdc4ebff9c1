//! Workspaces: the unit every Managed Agents resource belongs to (admin-api.md §8.1).

use mnemo_api::WorkspaceId;

use super::{Clock, Micros};
use crate::Result;

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

/// SQL over workspaces.
pub trait WorkspaceSql: Clock {
    async fn insert_workspace(&self, row: NewWorkspaceRow<'_>) -> Result<()>;
    /// The organization (one row, made by the migration).
    async fn organization(&self) -> Result<crate::Organization>;
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
