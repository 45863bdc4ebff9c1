//! The audit log (issue 32, extension `GET /v1/organizations/audit_events`): which actions are
//! recorded, what their `details` may hold, and how long entries are kept.
//!
//! The log answers "who did what, when, from where, and did it work" for every admin action,
//! key and environment-key lifecycle, workspace and membership change, store or session
//! deletion, redaction and sign-in. It never holds a secret or memory content: [`check_details`]
//! refuses field names that would carry one, so a careless caller fails in tests, not in the
//! log.

use serde_json::Value;

use crate::ops::Micros;

macro_rules! actions {
    ($($(#[$meta:meta])* $variant:ident => $wire:literal, $resource:expr, $org_level:expr;)+) => {
        /// An audited action; its wire name is dotted (`resource.verb`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum AuditAction {
            $($(#[$meta])* $variant,)+
        }

        impl AuditAction {
            /// Every audited action.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// The wire name (`api_key.update`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)+
                }
            }

            /// The `type` of the resource the action acts on, if it acts on one.
            pub fn resource_type(self) -> Option<&'static str> {
                match self {
                    $(Self::$variant => $resource,)+
                }
            }

            /// Whether the action belongs to the organization rather than to one workspace (its
            /// event's `workspace_id` is null).
            pub fn org_level(self) -> bool {
                match self {
                    $(Self::$variant => $org_level,)+
                }
            }
        }
    };
}

actions! {
    /// A workspace was created (its id is the resource; the event is the organization's).
    WorkspaceCreate => "workspace.create", Some("workspace"), true;
    WorkspaceUpdate => "workspace.update", Some("workspace"), false;
    /// A workspace was archived, with its keys, environment keys, work and webhooks.
    WorkspaceArchive => "workspace.archive", Some("workspace"), false;
    /// A workspace rate-limit override was set or cleared.
    WorkspaceRateLimitUpdate => "workspace_rate_limit.update", Some("workspace_rate_limit"), false;
    WorkspaceMemberAdd => "workspace_member.add", Some("workspace_member"), false;
    WorkspaceMemberUpdate => "workspace_member.update", Some("workspace_member"), false;
    WorkspaceMemberRemove => "workspace_member.remove", Some("workspace_member"), false;
    /// A person's org role was changed (`details.role`: the new one).
    UserUpdate => "user.update", Some("user"), true;
    /// A person was removed, with their memberships and console sessions.
    UserRemove => "user.remove", Some("user"), true;
    /// Every console session of a person was ended.
    UserSignOut => "user.sign_out", Some("user"), true;
    InviteCreate => "invite.create", Some("invite"), true;
    InviteDelete => "invite.delete", Some("invite"), true;
    /// An invite was accepted: a person joined.
    InviteAccept => "invite.accept", Some("invite"), true;
    /// The one-time setup link made the first admin.
    SetupLinkUse => "setup_link.use", Some("user"), true;
    ApiKeyCreate => "api_key.create", Some("api_key"), false;
    /// A key was renamed, deactivated, reactivated or archived (`details` says which).
    ApiKeyUpdate => "api_key.update", Some("api_key"), false;
    AdminKeyCreate => "admin_key.create", Some("admin_key"), true;
    AdminKeyRevoke => "admin_key.revoke", Some("admin_key"), true;
    /// `mnemo admin bootstrap` made a new admin key (and maybe a setup link).
    AdminBootstrap => "admin.bootstrap", Some("admin_key"), true;
    EnvironmentKeyCreate => "environment_key.create", Some("environment_key"), false;
    EnvironmentKeyRevoke => "environment_key.revoke", Some("environment_key"), false;
    MemoryStoreDelete => "memory_store.delete", Some("memory_store"), false;
    SessionDelete => "session.delete", Some("session"), false;
    MemoryVersionRedact => "memory_version.redact", Some("memory_version"), false;
    /// A store's own version retention was set or cleared (`details.retention`, `.effective`).
    MemoryStoreRetentionUpdate => "memory_store.retention_update", Some("memory_store"), false;
    /// A purge pass deleted versions of a store past its retention (`details.versions`,
    /// `.bytes`, `.retention`; actor `system`/`retention`).
    MemoryVersionPurge => "memory_version.purge", Some("memory_store"), false;
    /// A person signed in to the console.
    SignIn => "sign_in", None, true;
    /// A console sign-in was refused (wrong password, unknown email, revoked key).
    SignInFailed => "sign_in.failed", None, true;
    SignOut => "sign_out", None, true;
}

impl AuditAction {
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|a| a.as_str() == s)
    }
}

impl std::fmt::Display for AuditAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How long entries are kept unless `--audit-retention-days` says otherwise.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u32 = 365;

const DAY: Micros = 86_400_000_000;

/// Entries created before this, at `now`, are deleted by the retention sweep (`days` ≥ 1).
pub fn retained_since(now: Micros, days: u32) -> Micros {
    now.saturating_sub(i64::from(days.max(1)).saturating_mul(DAY))
}

/// Checks a `--audit-retention-days` value: at least one day.
pub fn parse_retention_days(raw: &str) -> Result<u32, String> {
    match raw.trim().parse::<u32>() {
        Ok(days) if days >= 1 => Ok(days),
        _ => Err(format!("--audit-retention-days must be a whole number of days, at least 1 (got `{raw}`)")),
    }
}

/// Most bytes of an event's `details` as JSON.
pub const MAX_DETAILS_BYTES: usize = 4_096;

/// Field names `details` may never use, at any depth: they would carry a credential or memory
/// content.
pub const FORBIDDEN_DETAIL_FIELDS: &[&str] =
    &["key", "secret", "token", "password", "content", "sessions_token", "api_key", "authorization"];

/// Checks an event's `details`: an object, small, and no field named like a secret or content.
pub fn check_details(details: &Value) -> Result<(), String> {
    if !details.is_object() {
        return Err("audit details must be a JSON object".into());
    }
    let size = details.to_string().len();
    if size > MAX_DETAILS_BYTES {
        return Err(format!("audit details are {size} bytes; at most {MAX_DETAILS_BYTES}"));
    }
    let mut todo = vec![details];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(map) => {
                for (name, inner) in map {
                    let lower = name.to_ascii_lowercase();
                    if FORBIDDEN_DETAIL_FIELDS.contains(&lower.as_str()) {
                        return Err(format!("audit details must not hold a `{name}` field (no secrets, no content)"));
                    }
                    todo.push(inner);
                }
            }
            Value::Array(items) => todo.extend(items),
            _ => {}
        }
    }
    Ok(())
}

/// Who an entry names as its actor for a request made with `credential`: the key's id, or for
/// a sessions token its session (its work item's id for a healthcheck, which has none).
pub fn actor_of(credential: &crate::Credential) -> mnemo_api::AuditActor {
    use crate::Credential;
    use mnemo_api::{AuditActor, AuditActorType};
    let (kind, id) = match credential {
        Credential::AdminKey(id) => (AuditActorType::AdminKey, id.to_string()),
        Credential::ApiKey(id) => (AuditActorType::ApiKey, id.to_string()),
        Credential::EnvironmentKey { id, .. } => (AuditActorType::EnvironmentKey, id.to_string()),
        Credential::SessionToken { session: Some(session), .. } => (AuditActorType::Session, session.to_string()),
        Credential::SessionToken { work, session: None, .. } => (AuditActorType::Session, work.to_string()),
        Credential::Person { user, .. } => (AuditActorType::User, user.to_string()),
    };
    AuditActor { kind, id }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_action_has_a_unique_dotted_name() {
        let mut names: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
        for (action, name) in AuditAction::ALL.iter().zip(&names) {
            assert_eq!(AuditAction::parse(name), Some(*action));
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'.'), "{name}");
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), AuditAction::ALL.len());
        assert_eq!(AuditAction::parse("memory.read"), None);
    }

    #[test]
    fn the_catalogue_covers_what_the_issue_lists() {
        #[rustfmt::skip]
        let rows: Vec<(&str, &str, Option<&str>, bool)> = vec![
            // (what issue 32 asks for, action, resource type, org-level)
            ("workspace creation", "workspace.create", Some("workspace"), true),
            ("workspace archiving", "workspace.archive", Some("workspace"), false),
            ("membership change", "workspace_member.update", Some("workspace_member"), false),
            ("API key minting", "api_key.create", Some("api_key"), false),
            ("API key status change", "api_key.update", Some("api_key"), false),
            ("admin key lifecycle", "admin_key.revoke", Some("admin_key"), true),
            ("environment key minting", "environment_key.create", Some("environment_key"), false),
            ("environment key revocation", "environment_key.revoke", Some("environment_key"), false),
            ("store deletion", "memory_store.delete", Some("memory_store"), false),
            ("session deletion", "session.delete", Some("session"), false),
            ("redaction", "memory_version.redact", Some("memory_version"), false),
            ("rate-limit change", "workspace_rate_limit.update", Some("workspace_rate_limit"), false),
            ("sign-in", "sign_in", None, true),
            ("sign-in failure", "sign_in.failed", None, true),
        ];
        for (rule, name, resource, org_level) in rows {
            let action = AuditAction::parse(name).unwrap_or_else(|| panic!("rule: {rule}: `{name}` is not audited"));
            assert_eq!((action.resource_type(), action.org_level()), (resource, org_level), "rule: {rule}");
        }
    }

    #[test]
    fn retention() {
        const NOW: Micros = 1_800_000_000_000_000;
        #[rustfmt::skip]
        let rows: Vec<(&str, u32, Micros)> = vec![
            ("the default keeps a year", DEFAULT_AUDIT_RETENTION_DAYS, NOW - 365 * DAY),
            ("one day", 1, NOW - DAY),
            ("zero is read as one day", 0, NOW - DAY),
            ("a huge value never overflows", u32::MAX, NOW.saturating_sub(i64::MAX)),
        ];
        for (rule, days, since) in rows {
            assert_eq!(retained_since(NOW, days), since, "rule: {rule}");
        }
        assert_eq!(retained_since(i64::MIN + 5, 1), i64::MIN);
        assert_eq!(parse_retention_days("30"), Ok(30));
        assert!(parse_retention_days("0").is_err());
        assert!(parse_retention_days("-1").is_err());
        assert!(parse_retention_days("a year").unwrap_err().contains("a year"));
    }

    #[test]
    fn details_never_hold_secrets_or_content() {
        #[rustfmt::skip]
        let rows: Vec<(&str, Value, bool)> = vec![
            ("a status change", json!({"status": {"from": "active", "to": "inactive"}}), true),
            ("renamed fields", json!({"fields": ["name", "tags"]}), true),
            ("nothing", json!({}), true),
            ("a key secret", json!({"key": "sk-mnemo-x"}), false),
            ("a nested token", json!({"work": [{"Sessions_Token": "x"}]}), false),
            ("memory content", json!({"memory": {"content": "private"}}), false),
            ("a password", json!({"password": "hunter2hunter2"}), false),
            ("not an object", json!("text"), false),
            ("too big", json!({"note": "x".repeat(MAX_DETAILS_BYTES)}), false),
        ];
        for (rule, details, ok) in rows {
            assert_eq!(check_details(&details).is_ok(), ok, "rule: {rule}");
        }
    }

    #[test]
    fn the_actor_of_each_credential_is_its_id_or_its_session() {
        use crate::Credential;
        use mnemo_api::AuditActorType::*;
        let work: mnemo_api::WorkId = "work_a".parse().unwrap();
        let session: mnemo_api::SessionId = "sesn_a".parse().unwrap();
        let env: mnemo_api::EnvironmentId = "env_a".parse().unwrap();
        let rows = [
            (Credential::AdminKey("admkey_a".parse().unwrap()), AdminKey, "admkey_a"),
            (Credential::ApiKey("apikey_a".parse().unwrap()), ApiKey, "apikey_a"),
            (
                Credential::EnvironmentKey { id: "envkey_a".parse().unwrap(), environment: env.clone() },
                EnvironmentKey,
                "envkey_a",
            ),
            (
                Credential::SessionToken { work: work.clone(), session: Some(session), environment: env.clone() },
                Session,
                "sesn_a",
            ),
            (Credential::SessionToken { work, session: None, environment: env }, Session, "work_a"),
        ];
        for (credential, kind, id) in rows {
            let actor = actor_of(&credential);
            assert_eq!((actor.kind, actor.id.as_str()), (kind, id), "{credential:?}");
        }
    }
}
