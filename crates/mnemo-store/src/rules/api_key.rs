//! API keys and admin keys: status at a time, status transitions, the active-key caps, the
//! redacted hint and the legacy `workspace_id` (spec `admin-api.md` §4.2, §8.2, §8.4).
//!
//! A key's row keeps the status a caller last set (`active`, `inactive` or `archived`) and its
//! `expires_at`; `expired` is never written by a request: a key is expired from its
//! `expires_at` on, whatever any replica last wrote ([`status_at`]), so every replica agrees at
//! the same instant without a sweeper.

use mnemo_api::{AdminErrorCode, ApiKey, ApiKeyStatus, ApiKeyUpdate, WorkspaceId};

use super::refusal::Refusal;
use crate::ops::Micros;

/// Most active API keys in one workspace (`workspace_api_key_limit_exceeded` past it).
pub const MAX_ACTIVE_KEYS_PER_WORKSPACE: u32 = 500;
/// Most active admin keys in the organization (`org_api_key_limit_exceeded` past it).
pub const MAX_ACTIVE_ADMIN_KEYS: u32 = 20;

/// A key's status at `now`: the stored one, except that an `active` or `inactive` key whose
/// `expires_at` has come is `expired`. An archived key stays archived (both are final; the
/// one that came first wins).
pub fn status_at(stored: ApiKeyStatus, expires_at: Option<Micros>, now: Micros) -> ApiKeyStatus {
    match stored {
        ApiKeyStatus::Active | ApiKeyStatus::Inactive if expires_at.is_some_and(|at| at <= now) => {
            ApiKeyStatus::Expired
        }
        other => other,
    }
}

/// Whether a key with this stored status and expiry authenticates a request at `now`.
pub fn authenticates(stored: ApiKeyStatus, expires_at: Option<Micros>, now: Micros) -> bool {
    status_at(stored, expires_at, now) == ApiKeyStatus::Active
}

/// What an accepted update does to a key's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyChange {
    /// The new name, if it changes.
    pub name: Option<String>,
    /// The status to store, if it changes.
    pub status: Option<ApiKeyStatus>,
    /// The key becomes active again: the caller must first count the active keys of its
    /// workspace against [`check_capacity`] (in the same transaction).
    pub reactivates: bool,
    /// The key stops authenticating: cached lookups of it must be dropped on every replica.
    pub revokes: bool,
}

/// The change `body` makes to key `id` (stored status `stored`, expiring at `expires_at`) at
/// `now`. `inactive` ↔ `active` is reversible; `archived` is final (every later update is
/// refused); an expired key keeps its status but may be renamed.
pub fn update(
    id: &str,
    stored: ApiKeyStatus,
    expires_at: Option<Micros>,
    body: &ApiKeyUpdate,
    now: Micros,
) -> Result<KeyChange, Refusal> {
    body.validate()?;
    let current = status_at(stored, expires_at, now);
    if current == ApiKeyStatus::Archived {
        return Err(Refusal::invalid(format!("API key `{id}` is archived; an archived key cannot be changed")));
    }
    let status = match body.status {
        Some(wanted) if wanted == current => None,
        Some(wanted) if current == ApiKeyStatus::Expired => {
            return Err(Refusal::invalid(format!(
                "API key `{id}` expired; an expired key cannot be made {wanted} (create a new key instead)"
            )));
        }
        other => other,
    };
    Ok(KeyChange {
        name: body.name.clone(),
        status,
        reactivates: status == Some(ApiKeyStatus::Active),
        revokes: matches!(status, Some(ApiKeyStatus::Inactive | ApiKeyStatus::Archived)),
    })
}

/// Which cap a new or reactivated key counts against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// The workspace's API keys.
    Workspace,
    /// The organization's admin keys.
    AdminKeys,
}

impl Cap {
    /// How many active keys it allows.
    pub fn limit(self) -> u32 {
        match self {
            Self::Workspace => MAX_ACTIVE_KEYS_PER_WORKSPACE,
            Self::AdminKeys => MAX_ACTIVE_ADMIN_KEYS,
        }
    }
}

/// Whether one more active key fits when `active` are active now (at `now`, expired ones not
/// counted by the caller).
pub fn check_capacity(cap: Cap, active: u32) -> Result<(), Refusal> {
    let limit = cap.limit();
    if active < limit {
        return Ok(());
    }
    Err(match cap {
        Cap::Workspace => Refusal::coded(
            AdminErrorCode::WorkspaceApiKeyLimitExceeded,
            format!(
                "this workspace already has {active} active API keys, the most it may have ({limit}); deactivate or archive one first"
            ),
        ),
        Cap::AdminKeys => Refusal::coded(
            AdminErrorCode::OrgApiKeyLimitExceeded,
            format!(
                "this organization already has {active} active admin keys, the most it may have ({limit}); revoke one first"
            ),
        ),
    })
}

/// Characters of a secret shown at the start of its hint.
pub const HINT_HEAD: usize = 12;
/// Characters of a secret shown at the end of its hint.
pub const HINT_TAIL: usize = 4;

/// The redacted hint of a secret: its first 12 characters, `…`, its last 4. A secret too short
/// for that to hide at least half of it (one given with `--api-key`) shows only its first
/// quarter, so the hint never gives the key away.
pub fn partial_key_hint(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    let n = chars.len();
    if n >= 2 * (HINT_HEAD + HINT_TAIL) {
        let head: String = chars[..HINT_HEAD].iter().collect();
        let tail: String = chars[n - HINT_TAIL..].iter().collect();
        format!("{head}…{tail}")
    } else {
        let head: String = chars[..n / 4].iter().collect();
        format!("{head}…")
    }
}

/// The top-level `workspace_id` older clients read: null for a Default-workspace key, the
/// workspace otherwise.
pub fn legacy_workspace_id(workspace: &WorkspaceId, default: &WorkspaceId) -> Option<WorkspaceId> {
    (workspace != default).then(|| workspace.clone())
}

/// A stored key as the API shows it at `now`: its status at that time and the legacy
/// `workspace_id` (`expires_at_micros` is the key's expiry as stored).
pub fn present(mut key: ApiKey, expires_at_micros: Option<Micros>, default: &WorkspaceId, now: Micros) -> ApiKey {
    key.status = status_at(key.status, expires_at_micros, now);
    key.workspace_id = match &key.scope {
        mnemo_api::ApiKeyScope::Workspace { workspace_id } => legacy_workspace_id(workspace_id, default),
        mnemo_api::ApiKeyScope::Organization => None,
    };
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use ApiKeyStatus::{Active, Archived, Expired, Inactive};
    use serde_json::json;

    const NOW: Micros = 1_800_000_000_000_000;

    #[test]
    fn status_at_a_time() {
        #[rustfmt::skip]
        let rows: Vec<(&str, ApiKeyStatus, Option<Micros>, ApiKeyStatus)> = vec![
            ("an active key without expiry stays active", Active, None, Active),
            ("an active key before its expiry is active", Active, Some(NOW + 1), Active),
            ("an active key at its expiry is expired", Active, Some(NOW), Expired),
            ("an inactive key past its expiry is expired", Inactive, Some(NOW - 1), Expired),
            ("an inactive key before its expiry is inactive", Inactive, Some(NOW + 1), Inactive),
            ("an archived key stays archived past its expiry", Archived, Some(NOW - 1), Archived),
            ("a stored expired key is expired", Expired, None, Expired),
        ];
        for (rule, stored, expires, expected) in rows {
            assert_eq!(status_at(stored, expires, NOW), expected, "rule: {rule}");
            assert_eq!(authenticates(stored, expires, NOW), expected == Active, "rule: {rule}");
        }
    }

    fn body(v: serde_json::Value) -> ApiKeyUpdate {
        serde_json::from_value(v).unwrap()
    }

    type Change = (Option<ApiKeyStatus>, bool, bool);
    /// (rule, stored status, expires_at, body, what it changes or the refusal)
    type TransitionRow = (&'static str, ApiKeyStatus, Option<Micros>, ApiKeyUpdate, Result<Change, &'static str>);

    #[test]
    fn status_transitions() {
        #[rustfmt::skip]
        let rows: Vec<TransitionRow> = vec![
            // (rule, stored, expires_at, body, Ok((status to store, reactivates, revokes)))
            ("deactivate", Active, None, body(json!({"status": "inactive"})), Ok((Some(Inactive), false, true))),
            ("reactivate", Inactive, None, body(json!({"status": "active"})), Ok((Some(Active), true, false))),
            ("archive an active key", Active, None, body(json!({"status": "archived"})), Ok((Some(Archived), false, true))),
            ("archive an inactive key", Inactive, None, body(json!({"status": "archived"})), Ok((Some(Archived), false, true))),
            ("the same status is no change", Active, None, body(json!({"status": "active"})), Ok((None, false, false))),
            ("a rename alone", Active, None, body(json!({"name": "ci"})), Ok((None, false, false))),
            ("an archived key refuses a status", Archived, None, body(json!({"status": "active"})),
                Err("API key `apikey_k` is archived; an archived key cannot be changed")),
            ("an archived key refuses a rename", Archived, None, body(json!({"name": "x"})),
                Err("API key `apikey_k` is archived; an archived key cannot be changed")),
            ("an expired key cannot come back", Active, Some(NOW), body(json!({"status": "active"})),
                Err("API key `apikey_k` expired; an expired key cannot be made active (create a new key instead)")),
            ("an expired key cannot be archived either", Inactive, Some(NOW - 1), body(json!({"status": "archived"})),
                Err("API key `apikey_k` expired; an expired key cannot be made archived (create a new key instead)")),
            ("an expired key may be renamed", Active, Some(NOW), body(json!({"name": "old"})), Ok((None, false, false))),
            ("nobody sets expired", Active, None, body(json!({"status": "expired"})),
                Err("status must be one of `active`, `inactive` or `archived`; a key becomes `expired` by itself at its expires_at")),
            ("a bad name", Active, None, body(json!({"name": ""})), Err("name must be 1 to 255 characters long (got 0)")),
        ];
        for (rule, stored, expires, update_body, expected) in rows {
            let got = update("apikey_k", stored, expires, &update_body, NOW);
            let got = got.as_ref().map(|c| (c.status, c.reactivates, c.revokes)).map_err(|e| e.message.as_str());
            assert_eq!(got, expected, "rule: {rule}");
        }
        let renamed = update("apikey_k", Active, None, &body(json!({"name": "ci"})), NOW).unwrap();
        assert_eq!(renamed.name.as_deref(), Some("ci"));
    }

    #[test]
    fn active_key_caps() {
        #[rustfmt::skip]
        let rows: Vec<(&str, Cap, u32, Option<AdminErrorCode>)> = vec![
            ("a workspace below its cap", Cap::Workspace, 499, None),
            ("a workspace at its cap", Cap::Workspace, 500, Some(AdminErrorCode::WorkspaceApiKeyLimitExceeded)),
            ("admin keys below their cap", Cap::AdminKeys, 19, None),
            ("admin keys at their cap", Cap::AdminKeys, 20, Some(AdminErrorCode::OrgApiKeyLimitExceeded)),
        ];
        for (rule, cap, active, expected) in rows {
            assert_eq!(check_capacity(cap, active).err().and_then(|e| e.code), expected, "rule: {rule}");
        }
        assert_eq!(
            check_capacity(Cap::Workspace, 500).unwrap_err().message,
            "this workspace already has 500 active API keys, the most it may have (500); deactivate or archive one first"
        );
    }

    #[test]
    fn hints_hide_the_secret() {
        let minted = format!("sk-mnemo-{}", "a".repeat(39) + "WXYZ");
        #[rustfmt::skip]
        let rows: Vec<(&str, String, String)> = vec![
            ("a minted key", minted, "sk-mnemo-aaa…WXYZ".to_owned()),
            ("an admin key", "sk-mnemo-admin-0123456789abcdefghijklmnopqrstuvwxyzABCD".to_owned(), "sk-mnemo-adm…ABCD".to_owned()),
            ("exactly long enough", "0123456789ab0123456789abcdefWXYZ".to_owned(), "0123456789ab…WXYZ".to_owned()),
            ("a short configured key shows a quarter", "short-key-1234".to_owned(), "sho…".to_owned()),
            ("an empty key shows nothing", String::new(), "…".to_owned()),
            ("characters, not bytes", "é".repeat(40), format!("{}…{}", "é".repeat(12), "é".repeat(4))),
        ];
        for (rule, secret, expected) in rows {
            assert_eq!(partial_key_hint(&secret), expected, "rule: {rule}");
        }
    }

    #[test]
    fn legacy_workspace_id_is_null_for_default() {
        let default: WorkspaceId = "wrkspc_d".parse().unwrap();
        let other: WorkspaceId = "wrkspc_o".parse().unwrap();
        assert_eq!(legacy_workspace_id(&default, &default), None);
        assert_eq!(legacy_workspace_id(&other, &default), Some(other.clone()));

        let key: ApiKey = serde_json::from_value(json!({
            "type": "api_key", "id": "apikey_k", "name": "k", "status": "active",
            "scope": {"type": "workspace", "workspace_id": "wrkspc_o"}, "principal": null, "created_by": null,
            "created_at": "2026-11-02T10:00:00Z", "expires_at": "2027-01-15T08:00:00Z",
            "partial_key_hint": null, "workspace_id": null
        }))
        .unwrap();
        let shown = present(key.clone(), Some(NOW), &default, NOW - 1);
        assert_eq!((shown.status, shown.workspace_id), (Active, Some(other)));
        let later = present(key, Some(NOW), &default, NOW);
        assert_eq!(later.status, Expired);
    }
}
