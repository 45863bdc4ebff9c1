//! Single sign-on (issue 33 item 3): the identity provider's groups decide a person's roles.
//!
//! `mnemo serve --oidc-role GROUP=WORKSPACE:ROLE` (or `GROUP=admin`) maps a group to a role;
//! at every sign-in the groups in the token are turned into [`Grants`] by [`grants`], and the
//! person's org role and memberships are SET to them — a group taken away at the provider takes
//! the role away at the next sign-in. Groups that map to nothing give nothing; a person whose
//! groups give nothing at all is refused ([`NO_MAPPED_GROUP`]).
//!
//! The provider is authoritative: a person it no longer puts in an admin group stops being an
//! admin even when they were the last one (whoever runs the host recovers with `mnemo admin
//! bootstrap`), as a company that removes someone from its admin group expects.

use std::collections::BTreeMap;

use mnemo_api::{OrgRole, WorkspaceRole};

/// What one group gives: the org `admin` role, or a role in one workspace `W` (the workspace as
/// written on the command line, then resolved to its id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant<W> {
    OrgAdmin,
    Workspace(W, WorkspaceRole),
}

/// One `--oidc-role` mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleMapping<W> {
    pub group: String,
    pub grant: Grant<W>,
}

/// Why a person is refused when none of their groups is mapped.
pub const NO_MAPPED_GROUP: &str = "Your account at the identity provider is in no group that gives access to mnemo. \
     Ask your administrator to add you to one.";

/// Reads `GROUP=admin` or `GROUP=WORKSPACE:ROLE` (ROLE one of `workspace_user`,
/// `workspace_restricted_developer`, `workspace_developer`, `workspace_admin`). The first `=`
/// ends GROUP (a group name cannot hold one); the last `:` splits WORKSPACE from ROLE, so a
/// workspace name may hold `:`.
pub fn parse_mapping(raw: &str) -> Result<RoleMapping<String>, String> {
    let explain = || {
        format!(
            "--oidc-role `{raw}`: expected GROUP=admin or GROUP=WORKSPACE:ROLE, ROLE one of workspace_user, \
             workspace_restricted_developer, workspace_developer, workspace_admin"
        )
    };
    let (group, target) = raw.split_once('=').ok_or_else(explain)?;
    let (group, target) = (group.trim(), target.trim());
    if group.is_empty() || target.is_empty() {
        return Err(explain());
    }
    let grant = if target == "admin" {
        Grant::OrgAdmin
    } else {
        let (workspace, role) = target.rsplit_once(':').ok_or_else(explain)?;
        let role = WorkspaceRole::parse(role.trim()).filter(|r| *r != WorkspaceRole::WorkspaceBilling);
        match (workspace.trim(), role) {
            (w, Some(role)) if !w.is_empty() => Grant::Workspace(w.to_owned(), role),
            _ => return Err(explain()),
        }
    };
    Ok(RoleMapping { group: group.to_owned(), grant })
}

/// How much a workspace role allows, to keep the highest when several groups name one workspace.
fn rank(role: WorkspaceRole) -> u8 {
    match role {
        WorkspaceRole::WorkspaceBilling => 0,
        WorkspaceRole::WorkspaceUser => 1,
        WorkspaceRole::WorkspaceRestrictedDeveloper => 2,
        WorkspaceRole::WorkspaceDeveloper => 3,
        WorkspaceRole::WorkspaceAdmin => 4,
    }
}

/// What a person's groups give them: their org role (`admin`, else `user`: membership alone
/// gives workspaces) and their role in each workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants<W: Ord> {
    pub org_role: OrgRole,
    pub workspaces: BTreeMap<W, WorkspaceRole>,
}

/// The grants of `groups` under `mappings`: `None` when no group is mapped (the person is
/// refused). Group names are compared exactly, as providers send them.
pub fn grants<W: Ord + Clone>(mappings: &[RoleMapping<W>], groups: &[String]) -> Option<Grants<W>> {
    let mut any = false;
    let mut org_role = OrgRole::User;
    let mut workspaces: BTreeMap<W, WorkspaceRole> = BTreeMap::new();
    for mapping in mappings.iter().filter(|m| groups.contains(&m.group)) {
        any = true;
        match &mapping.grant {
            Grant::OrgAdmin => org_role = OrgRole::Admin,
            Grant::Workspace(w, role) => {
                let slot = workspaces.entry(w.clone()).or_insert(*role);
                if rank(*role) > rank(*slot) {
                    *slot = *role;
                }
            }
        }
    }
    if !any {
        return None;
    }
    // An org admin is workspace_admin everywhere already; memberships would only be noise.
    if org_role == OrgRole::Admin {
        workspaces.clear();
    }
    Some(Grants { org_role, workspaces })
}

/// What a sign-in changes of a known person's name and address: the identity provider is the
/// source of truth for who they are, so a changed `name` or `email` claim is taken (an address
/// already normalized, a name that passes the person-name rules); a claim absent or unusable
/// leaves the stored value. `(email, name)`, each `Some` only when it changes.
pub fn profile_changes(
    stored_email: &str,
    stored_name: &str,
    claimed_email: Option<&str>,
    claimed_name: Option<&str>,
) -> (Option<String>, Option<String>) {
    let email = claimed_email.and_then(|e| mnemo_api::normalize_email(e).ok()).filter(|e| e != stored_email);
    let name = claimed_name
        .map(str::trim)
        .filter(|n| mnemo_api::validate_person_name(n).is_ok() && *n != stored_name)
        .map(str::to_owned);
    (email, name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use WorkspaceRole::*;

    #[test]
    fn a_sign_in_takes_a_changed_name_and_address() {
        type Changes = (Option<String>, Option<String>);
        let some = |s: &str| Some(s.to_owned());
        #[rustfmt::skip]
        let rows: &[(Option<&str>, Option<&str>, Changes)] = &[
            (Some("ann@example.com"), Some("Ann"),              (None, None)),
            (Some("ANN@Example.com"), Some(" Ann "),            (None, None)),
            (Some("ann.b@example.com"), Some("Ann B"),          (some("ann.b@example.com"), some("Ann B"))),
            (None, None,                                        (None, None)),
            (Some("not an address"), Some(""),                  (None, None)),
            (Some("ann@example.com"), Some("Ann Married"),      (None, some("Ann Married"))),
        ];
        for (email, name, want) in rows {
            assert_eq!(profile_changes("ann@example.com", "Ann", *email, *name), *want, "{email:?} {name:?}");
        }
    }

    fn m(raw: &str) -> RoleMapping<String> {
        parse_mapping(raw).unwrap()
    }

    #[test]
    fn mappings_parse_or_explain() {
        let table: &[(&str, Option<RoleMapping<String>>)] = &[
            ("admins=admin", Some(RoleMapping { group: "admins".into(), grant: Grant::OrgAdmin })),
            (
                "eng=Default:workspace_developer",
                Some(RoleMapping {
                    group: "eng".into(),
                    grant: Grant::Workspace("Default".into(), WorkspaceDeveloper),
                }),
            ),
            (
                "cn=x=wrkspc_01:workspace_user",
                Some(RoleMapping { group: "cn".into(), grant: Grant::Workspace("x=wrkspc_01".into(), WorkspaceUser) }),
            ),
            (
                "g=Team: Blue:workspace_admin",
                Some(RoleMapping { group: "g".into(), grant: Grant::Workspace("Team: Blue".into(), WorkspaceAdmin) }),
            ),
            ("g=Default:workspace_billing", None),
            ("g=Default:owner", None),
            ("g=Default", None),
            ("=admin", None),
            ("g=", None),
            ("g=:workspace_user", None),
            ("no-equals", None),
        ];
        for (raw, want) in table {
            assert_eq!(parse_mapping(raw).ok(), *want, "{raw}");
        }
    }

    #[test]
    fn groups_give_roles() {
        let mappings = [
            m("admins=admin"),
            m("eng=A:workspace_developer"),
            m("leads=A:workspace_admin"),
            m("ops=B:workspace_user"),
        ];
        let g = |names: &[&str]| grants(&mappings, &names.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let ws = |pairs: &[(&str, WorkspaceRole)]| pairs.iter().map(|(w, r)| (w.to_string(), *r)).collect();
        let table: Vec<(&[&str], Option<Grants<String>>)> = vec![
            (&[], None),
            (&["strangers"], None),
            (&["Eng"], None), // exact names only
            (&["eng"], Some(Grants { org_role: OrgRole::User, workspaces: ws(&[("A", WorkspaceDeveloper)]) })),
            (&["eng", "leads"], Some(Grants { org_role: OrgRole::User, workspaces: ws(&[("A", WorkspaceAdmin)]) })),
            (&["leads", "eng"], Some(Grants { org_role: OrgRole::User, workspaces: ws(&[("A", WorkspaceAdmin)]) })),
            (
                &["eng", "ops", "strangers"],
                Some(Grants {
                    org_role: OrgRole::User,
                    workspaces: ws(&[("A", WorkspaceDeveloper), ("B", WorkspaceUser)]),
                }),
            ),
            (&["admins", "eng"], Some(Grants { org_role: OrgRole::Admin, workspaces: ws(&[]) })),
        ];
        for (groups, want) in table {
            assert_eq!(g(groups), want, "{groups:?}");
        }
    }
}
