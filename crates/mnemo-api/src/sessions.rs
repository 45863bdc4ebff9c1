//! Sessions and their memory-store resources: wire shapes and the mount-path rules.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::ids::{EnvironmentId, MemoryStoreId, SessionId};

/// Most memory stores one session may attach.
pub const MAX_SESSION_MEMORY_STORES: usize = 8;
/// Longest `instructions` of a memory-store attachment, in characters.
pub const MAX_MEMORY_INSTRUCTIONS_CHARS: usize = 4_096;
/// Where memory stores are mounted unless the server is told otherwise.
pub const DEFAULT_MEMORY_MOUNT_ROOT: &str = "/mnt/memory";

/// How a session may use an attached store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    #[default]
    ReadWrite,
    ReadOnly,
}

/// Where a session stands (`session.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    /// A transient error; the service retries.
    Rescheduling,
    /// The agent is working.
    Running,
    /// Waiting for input: a message, a tool result or a confirmation.
    Idle,
    /// Ended; accepts nothing more.
    Terminated,
}

impl SessionStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rescheduling => "rescheduling",
            Self::Running => "running",
            Self::Idle => "idle",
            Self::Terminated => "terminated",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Rescheduling, Self::Running, Self::Idle, Self::Terminated].into_iter().find(|v| v.as_str() == s)
    }
}

/// A `memory_store` resource as a session shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_store")]
pub struct MemoryStoreResource {
    pub memory_store_id: MemoryStoreId,
    pub access: Access,
    pub instructions: Option<String>,
    /// Snapshotted from the store at attach time.
    pub name: Option<String>,
    /// Snapshotted from the store at attach time; `""` when the store has none.
    pub description: Option<String>,
    /// Where the worker materialises the store.
    pub mount_path: Option<String>,
}

/// A session (`type: "session"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "session")]
pub struct Session {
    pub id: SessionId,
    pub status: SessionStatus,
    pub environment_id: EnvironmentId,
    pub title: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// The agent as it was when the session was created (with overrides applied).
    pub agent: Value,
    pub resources: Vec<MemoryStoreResource>,
    pub budget: Option<Value>,
    #[serde(default)]
    pub outcome_evaluations: Vec<Value>,
    pub stats: Value,
    pub usage: Value,
    #[serde(default)]
    pub vault_ids: Vec<String>,
    pub deployment_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub archived_at: Option<DateTime<Utc>>,
    /// mnemo extension: why the session last went idle (`end_turn`, `requires_action`, …).
    #[serde(default)]
    pub stop_reason: Option<crate::events::StopReason>,
    /// mnemo extension: the text an agent is given about its memory mounts.
    #[serde(default)]
    pub memory_prompt: Option<String>,
}

/// Deletion confirmation of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "session_deleted")]
pub struct SessionDeleted {
    pub id: SessionId,
}

/// A resource in a session creation request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ResourceParams {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub memory_store_id: Option<String>,
    #[serde(default)]
    pub access: Option<Access>,
    #[serde(default)]
    pub instructions: Option<String>,
}

/// Body of `POST /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CreateSession {
    /// An agent id, `{type: "agent", id, version?}` or `{type: "agent_with_overrides", …}`.
    pub agent: Value,
    pub environment_id: String,
    #[serde(default)]
    pub resources: Vec<ResourceParams>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub initial_events: Vec<Value>,
    #[serde(default)]
    pub budget: Option<Value>,
    #[serde(default)]
    pub vault_ids: Vec<String>,
}

/// The mount-path slug of a store name: lowercased, each run of characters other than ASCII
/// letters and digits turned into one hyphen, hyphens trimmed (`"User Preferences"` →
/// `user-preferences`). A name with no letter or digit slugs to `memory-store`.
pub fn mount_slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches('-');
    if trimmed.is_empty() { "memory-store".to_owned() } else { trimmed.to_owned() }
}

/// Mount paths for the stores of one session, in order. Two stores whose names slug alike get
/// distinct paths: the second `…-2`, the third `…-3`, and so on (skipping any suffix another
/// store's slug already uses).
pub fn mount_paths(root: &str, names: &[&str]) -> Vec<String> {
    let root = root.trim_end_matches('/');
    let mut taken: Vec<String> = Vec::new();
    let slugs: Vec<String> = names.iter().map(|n| mount_slug(n)).collect();
    for slug in &slugs {
        let mut candidate = slug.clone();
        let mut n = 2;
        while taken.contains(&candidate) || (candidate != *slug && slugs.contains(&candidate)) {
            candidate = format!("{slug}-{n}");
            n += 1;
        }
        taken.push(candidate);
    }
    taken.into_iter().map(|s| format!("{root}/{s}")).collect()
}

/// The text an agent is given about its memory mounts.
pub fn render_memory_prompt(resources: &[MemoryStoreResource]) -> Option<String> {
    if resources.is_empty() {
        return None;
    }
    let mut out = String::from(
        "You have persistent memory: each memory store below is a folder of text files that outlives this \
         session. Read it before you start; write what future sessions should know. Changes are saved as \
         you work, and other sessions sharing a store may change its files meanwhile: read a file again \
         before you change it.\n",
    );
    for r in resources {
        let access = match r.access {
            Access::ReadWrite => "read-write",
            Access::ReadOnly => "read-only: you can read these files but not change them",
        };
        out.push_str(&format!(
            "\n- {} at {} ({access})",
            r.name.as_deref().unwrap_or("memory store"),
            r.mount_path.as_deref().unwrap_or("?")
        ));
        if let Some(d) = r.description.as_deref().filter(|d| !d.is_empty()) {
            out.push_str(&format!("\n  About it: {d}"));
        }
        if let Some(i) = r.instructions.as_deref().filter(|i| !i.is_empty()) {
            out.push_str(&format!("\n  Instructions: {i}"));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_documented_rule() {
        assert_eq!(mount_slug("User Preferences"), "user-preferences");
        assert_eq!(mount_slug("  Team: Notes!! v2 "), "team-notes-v2");
        assert_eq!(mount_slug("Ünïcode"), "n-code");
        assert_eq!(mount_slug("!!!"), "memory-store");
    }

    #[test]
    fn colliding_slugs_get_distinct_paths() {
        let paths = mount_paths("/mnt/memory/", &["Notes", "notes", "NOTES!", "notes-2"]);
        assert_eq!(paths, ["/mnt/memory/notes", "/mnt/memory/notes-3", "/mnt/memory/notes-4", "/mnt/memory/notes-2"]);
        let unique: std::collections::HashSet<_> = paths.iter().collect();
        assert_eq!(unique.len(), paths.len());
    }
}
