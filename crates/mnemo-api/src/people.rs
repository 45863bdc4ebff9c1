//! The Admin API's people (spec `admin-api.md` §4.3, §5 #7–#19, #26): users, invites and
//! workspace members, with their request bodies.
//!
//! Shaped as the reference SDK (`anthropic` 2.10.0, `types/organization/organization_user.py`,
//! `organization_invite.py`, `workspace_member.py` and the `*_params.py` beside them) parses and
//! sends them. What the request alone reveals is checked here (a role's name, an email's shape, a
//! password's length); who may hold which role, and what a change may not do, needs stored state
//! and is `mnemo_store::rules::people`'s.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::Secret;
use crate::ids::{InviteId, UserId, WorkspaceId};
use crate::types::Invalid;

/// Longest email address, in bytes (RFC 5321's path limit).
pub const MAX_EMAIL_BYTES: usize = 254;
/// Shortest password a person may choose, in characters (spec §8.7).
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longest password, in bytes: hashing cost grows with it, so an unbounded one is a way to
/// make the server work.
pub const MAX_PASSWORD_BYTES: usize = 1_024;
/// Longest name of a person, in characters.
pub const MAX_PERSON_NAME_CHARS: usize = 255;

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident => $wire:literal,)+ }) => {
        $(#[$meta])*
        // Every wire name is its variant's name in snake case (checked in this module's tests);
        // `rename_all` is what the OpenAPI schema reads too.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)+
                }
            }

            /// Reads a wire name.
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }

            /// Reads a wire name, or says which names there are.
            pub fn parse_or_explain(field: &str, s: &str) -> Result<Self, Invalid> {
                Self::parse(s).ok_or_else(|| {
                    let names: Vec<String> = Self::ALL.iter().map(|v| format!("`{}`", v.as_str())).collect();
                    Invalid(format!(
                        "{field} must be one of {} (got `{}`)",
                        names.join(", "),
                        s.chars().take(40).collect::<String>()
                    ))
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum! {
    /// A person's role in the organization (spec §3.1, §8.6). mnemo has no billing or Claude
    /// Code: `billing` and `claude_code_user` act as `user` (`billing` also yields the read-only
    /// `workspace_billing` in every workspace).
    OrgRole, "role" {
        User => "user",
        Developer => "developer",
        Billing => "billing",
        ClaudeCodeUser => "claude_code_user",
        /// Every permission; an implicit `workspace_admin` everywhere. Never set through the API.
        Admin => "admin",
    }
}

wire_enum! {
    /// A person's role in one workspace (spec §3.3, §8.6).
    WorkspaceRole, "workspace_role" {
        WorkspaceUser => "workspace_user",
        /// "Limited developer": edits and keys, no transcripts or file downloads.
        WorkspaceRestrictedDeveloper => "workspace_restricted_developer",
        WorkspaceDeveloper => "workspace_developer",
        WorkspaceAdmin => "workspace_admin",
        /// Inherited from the org `billing` role; never assigned.
        WorkspaceBilling => "workspace_billing",
    }
}

wire_enum! {
    /// Where an invite stands. `expired` is read from `expires_at`, never stored.
    InviteStatus, "status" {
        Pending => "pending",
        Accepted => "accepted",
        Expired => "expired",
        Deleted => "deleted",
    }
}

/// A person of the organization (`type: "user"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "user")]
pub struct User {
    pub id: UserId,
    /// Lower-cased; unique in the organization.
    pub email: String,
    pub name: String,
    pub role: OrgRole,
    /// When they joined (accepted their invite, or used the setup link).
    pub added_at: DateTime<Utc>,
}

/// An invitation (`type: "invite"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "invite")]
pub struct Invite {
    pub id: InviteId,
    pub email: String,
    pub role: OrgRole,
    pub status: InviteStatus,
    pub invited_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub accepted_at: Option<DateTime<Utc>>,
    /// Always `[]`: RBAC groups are Claude Enterprise's.
    pub rbac_group_ids: Vec<String>,
}

/// The answer to `POST /v1/organizations/invites`: the invite and, in this answer only, the
/// link that accepts it (extension; mnemo sends no mail, spec §8.7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InviteCreated {
    #[serde(flatten)]
    pub invite: Invite,
    /// The console page where the invited person chooses their name and password. Whoever
    /// holds it can join as the invited role: hand it over as privately as a password.
    #[schema(value_type = String)]
    pub accept_url: Secret,
}

/// Body of `POST /v1/organizations/invites`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InviteCreate {
    pub email: String,
    /// `user`, `developer`, `billing` or `claude_code_user`; `admin` cannot be set through the API.
    pub role: String,
    /// Must be absent or empty: RBAC groups are Claude Enterprise's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rbac_group_ids: Option<Vec<String>>,
}

/// A checked invite body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInvite {
    /// Normalized ([`normalize_email`]).
    pub email: String,
    pub role: OrgRole,
}

impl InviteCreate {
    /// Checks the body alone: the email's shape, a known role, no RBAC groups. Whether the role
    /// may be given through the API is `mnemo_store::rules::people`'s.
    pub fn validate(&self) -> Result<NewInvite, Invalid> {
        if self.rbac_group_ids.as_ref().is_some_and(|ids| !ids.is_empty()) {
            return Err(Invalid(
                "rbac_group_ids must be empty: RBAC groups exist only in Claude Enterprise organizations".into(),
            ));
        }
        Ok(NewInvite { email: normalize_email(&self.email)?, role: OrgRole::parse_or_explain("role", &self.role)? })
    }
}

/// Body of `POST /v1/organizations/users/{user_id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserUpdate {
    /// `user`, `developer`, `billing` or `claude_code_user`; not `admin`.
    pub role: String,
}

impl UserUpdate {
    /// The role named.
    pub fn validate(&self) -> Result<OrgRole, Invalid> {
        OrgRole::parse_or_explain("role", &self.role)
    }
}

/// A member of a workspace (`type: "workspace_member"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "workspace_member")]
pub struct WorkspaceMember {
    pub user_id: UserId,
    pub workspace_id: WorkspaceId,
    pub workspace_role: WorkspaceRole,
}

/// Body of `POST /v1/organizations/workspaces/{workspace_id}/members`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemberAdd {
    pub user_id: String,
    /// Any workspace role but `workspace_billing`.
    pub workspace_role: String,
}

/// Body of `POST /v1/organizations/workspaces/{workspace_id}/members/{user_id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemberUpdate {
    pub workspace_role: String,
}

/// `DELETE /v1/organizations/users/{user_id}` (`type: "user_deleted"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "user_deleted")]
pub struct UserDeleted {
    pub id: UserId,
}

/// `DELETE /v1/organizations/invites/{invite_id}` (`type: "invite_deleted"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "invite_deleted")]
pub struct InviteDeleted {
    pub id: InviteId,
}

/// `DELETE …/workspaces/{workspace_id}/members/{user_id}` (`type: "workspace_member_deleted"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "workspace_member_deleted")]
pub struct WorkspaceMemberDeleted {
    pub user_id: UserId,
    pub workspace_id: WorkspaceId,
}

/// An email address as mnemo keeps it: trimmed and lower-cased, so one person is one address
/// however it is typed. Refuses what cannot be an address (no `@`, spaces, control characters,
/// too long); it does not try to be RFC 5322.
pub fn normalize_email(raw: &str) -> Result<String, Invalid> {
    let email = raw.trim().to_lowercase();
    let shown: String = raw.chars().take(80).collect();
    if email.len() > MAX_EMAIL_BYTES {
        return Err(Invalid(format!("email must be at most {MAX_EMAIL_BYTES} bytes long")));
    }
    let valid = match email.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        }
        None => false,
    };
    if valid {
        Ok(email)
    } else {
        Err(Invalid(format!("email must be an email address like `name@example.com` (got `{shown}`)")))
    }
}

/// Checks a person's name: 1 to [`MAX_PERSON_NAME_CHARS`] characters, no control characters.
pub fn validate_person_name(name: &str) -> Result<(), Invalid> {
    let n = name.trim().chars().count();
    if n == 0 || name.chars().count() > MAX_PERSON_NAME_CHARS {
        return Err(Invalid(format!("name must be 1 to {MAX_PERSON_NAME_CHARS} characters long")));
    }
    if name.chars().any(char::is_control) {
        return Err(Invalid("name must not contain control characters".into()));
    }
    Ok(())
}

/// Checks a new password: at least [`MIN_PASSWORD_CHARS`] characters, at most
/// [`MAX_PASSWORD_BYTES`] bytes. Length is what makes a password hard to guess; mnemo imposes
/// no character classes (NIST SP 800-63B).
pub fn validate_password(password: &str) -> Result<(), Invalid> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(Invalid(format!("the password must be at least {MIN_PASSWORD_CHARS} characters long")));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(Invalid(format!("the password must be at most {MAX_PASSWORD_BYTES} bytes long")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalized_or_refused() {
        #[rustfmt::skip]
        let rows: &[(&str, Option<&str>)] = &[
            ("Ada@Example.COM", Some("ada@example.com")),
            ("  bob@example.com \n", Some("bob@example.com")),
            ("no-at-sign", None),
            ("@example.com", None),
            ("ada@", None),
            ("a b@example.com", None),
            ("a@b@example.com", None),
            ("ada@.example.com", None),
        ];
        for (raw, want) in rows {
            assert_eq!(normalize_email(raw).ok().as_deref(), *want, "{raw:?}");
        }
        assert!(normalize_email(&format!("{}@example.com", "a".repeat(250))).is_err(), "too long");
    }

    #[test]
    fn passwords_need_twelve_characters_and_no_more_than_a_kilobyte() {
        assert!(validate_password("short").is_err());
        assert!(validate_password("elevenchars").is_err());
        assert!(validate_password("twelve chars").is_ok());
        assert!(validate_password("ünïcödé-12ch").is_ok(), "characters, not bytes");
        assert!(validate_password(&"x".repeat(MAX_PASSWORD_BYTES + 1)).is_err());
    }

    #[test]
    fn bodies_check_what_they_alone_reveal() {
        let ok = InviteCreate { email: "Ada@Example.com".into(), role: "developer".into(), rbac_group_ids: None };
        assert_eq!(ok.validate().unwrap(), NewInvite { email: "ada@example.com".into(), role: OrgRole::Developer });
        let groups = InviteCreate { rbac_group_ids: Some(vec!["g".into()]), ..ok.clone() };
        assert!(groups.validate().unwrap_err().0.contains("rbac_group_ids"));
        let empty = InviteCreate { rbac_group_ids: Some(vec![]), ..ok.clone() };
        assert!(empty.validate().is_ok());
        let managed = InviteCreate { role: "managed".into(), ..ok };
        assert!(managed.validate().unwrap_err().0.starts_with("role must be one of `user`"));
    }

    #[test]
    fn serde_and_the_wire_names_agree() {
        fn check<T: Serialize + Copy>(all: &[T], name: impl Fn(T) -> &'static str) {
            for v in all {
                assert_eq!(serde_json::to_value(v).unwrap(), name(*v));
            }
        }
        check(OrgRole::ALL, OrgRole::as_str);
        check(WorkspaceRole::ALL, WorkspaceRole::as_str);
        check(InviteStatus::ALL, InviteStatus::as_str);
    }

    #[test]
    fn objects_serialize_as_the_sdk_parses_them() {
        let member = WorkspaceMember {
            user_id: "user_a".parse().unwrap(),
            workspace_id: "wrkspc_a".parse().unwrap(),
            workspace_role: WorkspaceRole::WorkspaceRestrictedDeveloper,
        };
        assert_eq!(
            serde_json::to_value(&member).unwrap(),
            serde_json::json!({"type": "workspace_member", "user_id": "user_a", "workspace_id": "wrkspc_a",
                               "workspace_role": "workspace_restricted_developer"})
        );
        let gone =
            WorkspaceMemberDeleted { user_id: "user_a".parse().unwrap(), workspace_id: "wrkspc_a".parse().unwrap() };
        assert_eq!(serde_json::to_value(&gone).unwrap()["type"], "workspace_member_deleted");
        let at = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let invite = Invite {
            id: "invite_a".parse().unwrap(),
            email: "ada@example.com".into(),
            role: OrgRole::ClaudeCodeUser,
            status: InviteStatus::Pending,
            invited_at: at,
            expires_at: at,
            accepted_at: None,
            rbac_group_ids: vec![],
        };
        let created = InviteCreated { invite, accept_url: Secret::new("http://x/console/invite/t") };
        let v = serde_json::to_value(&created).unwrap();
        assert_eq!((v["type"].as_str(), v["role"].as_str()), (Some("invite"), Some("claude_code_user")));
        assert_eq!(v["accept_url"], "http://x/console/invite/t");
        assert!(v["accepted_at"].is_null());
        assert!(!format!("{created:?}").contains("console/invite/t"), "Debug hides the link");
    }
}
