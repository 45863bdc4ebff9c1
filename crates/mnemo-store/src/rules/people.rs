//! People (admin-api.md §8.6, §8.7): which org roles the API may give, what a role change or a
//! removal may not do, invites' states, and a person's role in each workspace.
//!
//! The one rule that matters most: the organization never loses its last active `admin`, and the
//! API (an admin key, a script) can neither make nor unmake an admin — that stays with a person
//! who is one, in the console, or with whoever runs the host (`mnemo admin bootstrap`).

use mnemo_api::{AdminErrorCode, InviteStatus, OrgRole, WorkspaceRole};

use crate::StoreError;
use crate::ops::Micros;
use crate::rules::refusal::Refusal;

/// How long an invite stays acceptable unless `--invite-ttl` says otherwise: 7 days.
pub const DEFAULT_INVITE_TTL_SECS: u64 = 7 * 86_400;
/// How long the one-time setup link of a first start stays usable: 24 hours (spec §8.3).
pub const SETUP_LINK_TTL_SECS: u64 = 86_400;

/// Who asks for a change to a person: the Admin API (an admin key) or an admin in the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Api,
    Console,
}

/// Why a change to people is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// `400`, maybe with a code.
    Invalid(Refusal),
    /// `403`: the caller may not do this to that person.
    Forbidden(String),
    /// `404`: no such member.
    NotFound { kind: &'static str, id: String },
}

impl From<Refusal> for Refused {
    fn from(r: Refusal) -> Self {
        Self::Invalid(r)
    }
}

impl From<Refused> for StoreError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Invalid(r) => r.into(),
            Refused::Forbidden(m) => StoreError::Forbidden(m),
            Refused::NotFound { kind, id } => StoreError::NotFound { kind, id },
        }
    }
}

/// Why the API cannot give the `admin` role (spec §3.1, as hosted).
pub const ADMIN_NOT_ASSIGNABLE: &str =
    "the `admin` role cannot be assigned through the API; an admin grants it in the console";
/// Why the API cannot change or remove an admin (spec §8.6).
pub const API_CANNOT_TOUCH_ADMIN: &str =
    "an admin's role cannot be changed and an admin cannot be removed through the API; an admin does it in the console";
/// Why the last admin stays (spec §8.6).
pub const LAST_ADMIN: &str =
    "this is the organization's last admin; make another person admin first, or use `mnemo admin bootstrap`";

/// Whether `role` may be given by `via` (an invite's role, or a role change).
pub fn check_assignable(role: OrgRole, via: Via) -> Result<(), Refused> {
    if role == OrgRole::Admin && via == Via::Api {
        return Err(Refusal::invalid(ADMIN_NOT_ASSIGNABLE).into());
    }
    Ok(())
}

/// Whether a person whose role is `current` may get `next`, by `via`, when `active_admins`
/// admins exist (this person included if one).
pub fn check_role_change(current: OrgRole, next: OrgRole, via: Via, active_admins: usize) -> Result<(), Refused> {
    check_assignable(next, via)?;
    if current == OrgRole::Admin && via == Via::Api {
        return Err(Refused::Forbidden(API_CANNOT_TOUCH_ADMIN.into()));
    }
    if current == OrgRole::Admin && next != OrgRole::Admin && active_admins <= 1 {
        return Err(Refusal::invalid(LAST_ADMIN).into());
    }
    Ok(())
}

/// Whether a person whose role is `role` may be removed, by `via`, when the organization has
/// `active_admins` admins. Unlike the hosted API, removing the only person is allowed: a mnemo
/// organization stays administrable by its admin keys and `mnemo admin bootstrap`, so nobody is
/// locked out; only the last admin person is kept.
pub fn check_removal(role: OrgRole, via: Via, active_admins: usize) -> Result<(), Refused> {
    if role == OrgRole::Admin && via == Via::Api {
        return Err(Refused::Forbidden(API_CANNOT_TOUCH_ADMIN.into()));
    }
    if role == OrgRole::Admin && active_admins <= 1 {
        return Err(Refusal::invalid(LAST_ADMIN).into());
    }
    Ok(())
}

/// Whether an invite for `email` may be made: no person has it, and no pending invite names it.
pub fn check_invite(email: &str, is_member: bool, pending_invite: bool) -> Result<(), Refusal> {
    if is_member {
        return Err(Refusal::coded(
            AdminErrorCode::AlreadyMember,
            format!("`{email}` already belongs to a person of this organization"),
        ));
    }
    if pending_invite {
        return Err(Refusal::coded(
            AdminErrorCode::InviteAlreadyExists,
            format!("a pending invite for `{email}` exists; delete it first to invite again"),
        ));
    }
    Ok(())
}

/// When an invite made at `now` expires.
pub fn invite_expiry(now: Micros, ttl_secs: u64) -> Micros {
    now.saturating_add(i64::try_from(ttl_secs).unwrap_or(i64::MAX).saturating_mul(1_000_000))
}

/// An invite's status at `now`: accepted and deleted are stored; a pending one past its
/// `expires_at` is `expired`.
pub fn invite_status(
    accepted_at: Option<Micros>,
    deleted_at: Option<Micros>,
    expires_at: Micros,
    now: Micros,
) -> InviteStatus {
    match (accepted_at, deleted_at) {
        (Some(_), _) => InviteStatus::Accepted,
        (None, Some(_)) => InviteStatus::Deleted,
        (None, None) if now >= expires_at => InviteStatus::Expired,
        (None, None) => InviteStatus::Pending,
    }
}

/// Whether an invite in `status` may be deleted: only a pending one (spec §5 #19).
pub fn check_invite_delete(status: InviteStatus) -> Result<(), Refusal> {
    match status {
        InviteStatus::Pending => Ok(()),
        other => Err(Refusal::invalid(format!("only a pending invite can be deleted; this one is {other}"))),
    }
}

/// Whether an invite in `status` may be accepted. The refusal names no reason the holder of a
/// link could not already see on the page.
pub fn check_invite_accept(status: InviteStatus) -> Result<(), Refusal> {
    match status {
        InviteStatus::Pending => Ok(()),
        _ => Err(Refusal::invalid("this invite link is no longer valid; ask an admin for a new invite")),
    }
}

/// Why a setup link cannot be used: unknown, used, expired, or an admin already exists — one
/// answer for all, so the page tells a guesser nothing.
pub const SETUP_LINK_INVALID: &str =
    "this setup link is no longer valid; whoever runs the server can make a new one with `mnemo admin bootstrap`";

/// Whether a setup link is wanted: only while no admin is active (spec §8.3).
pub fn setup_link_wanted(active_admins: usize) -> bool {
    active_admins == 0
}

/// Whether a setup link (if one was found: `(expires_at, used_at)`) makes an admin at `now`.
pub fn check_setup_link(
    found: Option<(Micros, Option<Micros>)>,
    now: Micros,
    active_admins: usize,
) -> Result<(), Refusal> {
    match found {
        Some((expires_at, None)) if now < expires_at && setup_link_wanted(active_admins) => Ok(()),
        _ => Err(Refusal::invalid(SETUP_LINK_INVALID)),
    }
}

/// A person's role in a workspace: an org `admin` is `workspace_admin` everywhere; otherwise
/// their membership's role; otherwise org `billing` yields `workspace_billing`; otherwise none.
pub fn workspace_role(org: OrgRole, membership: Option<WorkspaceRole>) -> Option<WorkspaceRole> {
    match (org, membership) {
        (OrgRole::Admin, _) => Some(WorkspaceRole::WorkspaceAdmin),
        (_, Some(role)) => Some(role),
        (OrgRole::Billing, None) => Some(WorkspaceRole::WorkspaceBilling),
        _ => None,
    }
}

/// A change to one person's membership of one workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberChange {
    Add(WorkspaceRole),
    Update(WorkspaceRole),
    Remove,
}

/// Whether `change` may be made to a person whose org role is `org` and whose membership of the
/// workspace is `membership` (`user`, `workspace`: the ids, for the not-found answer).
pub fn check_member_change(
    org: OrgRole,
    membership: Option<WorkspaceRole>,
    change: MemberChange,
    member: &str,
) -> Result<(), Refused> {
    if let MemberChange::Add(WorkspaceRole::WorkspaceBilling) | MemberChange::Update(WorkspaceRole::WorkspaceBilling) =
        change
    {
        return Err(Refusal::invalid(
            "workspace_role cannot be `workspace_billing`: it comes with the org `billing` role and is never assigned",
        )
        .into());
    }
    if org == OrgRole::Admin {
        return Err(Refusal::invalid(
            "an org admin is workspace_admin in every workspace; their workspace role cannot be changed while they are admin",
        )
        .into());
    }
    match (change, membership) {
        (MemberChange::Add(_), Some(_)) => Err(Refusal::invalid(
            "this person is already a member of the workspace; update their workspace_role instead",
        )
        .into()),
        (MemberChange::Add(_), None) => Ok(()),
        (_, Some(_)) => Ok(()),
        (_, None) if org == OrgRole::Billing => Err(Refusal::invalid(
            "a billing member is workspace_billing in every workspace; add them with another role instead",
        )
        .into()),
        (_, None) => Err(Refused::NotFound { kind: "workspace member", id: member.to_owned() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use OrgRole::*;
    use WorkspaceRole::*;

    /// (rule, accepted_at, deleted_at, now, status) with `expires_at` 10.
    type StatusRow = (&'static str, Option<Micros>, Option<Micros>, Micros, InviteStatus);
    /// (rule, the link found, now, active admins, usable).
    type SetupRow = (&'static str, Option<(Micros, Option<Micros>)>, Micros, usize, bool);

    fn verdict(r: Result<(), Refused>) -> String {
        match r {
            Ok(()) => "ok".into(),
            Err(Refused::Invalid(r)) => {
                format!("400{} {}", r.code.map(|c| format!(" {}", c.as_str())).unwrap_or_default(), r.message)
            }
            Err(Refused::Forbidden(m)) => format!("403 {m}"),
            Err(Refused::NotFound { kind, id }) => format!("404 {kind} `{id}` not found"),
        }
    }

    #[test]
    fn role_changes() {
        let not_assignable = format!("400 {ADMIN_NOT_ASSIGNABLE}");
        let untouchable = format!("403 {API_CANNOT_TOUCH_ADMIN}");
        let last = format!("400 {LAST_ADMIN}");
        #[rustfmt::skip]
        let rows: &[(&str, OrgRole, OrgRole, Via, usize, &str)] = &[
            ("the API changes a user to developer", User, Developer, Via::Api, 1, "ok"),
            ("the API gives billing", Developer, Billing, Via::Api, 0, "ok"),
            ("the API cannot make an admin", User, Admin, Via::Api, 1, &not_assignable),
            ("the API cannot demote an admin", Admin, User, Via::Api, 2, &untouchable),
            ("nor even keep one admin", Admin, Admin, Via::Api, 2, &not_assignable),
            ("the console makes an admin", User, Admin, Via::Console, 1, "ok"),
            ("the console demotes one of two admins", Admin, Developer, Via::Console, 2, "ok"),
            ("but never the last", Admin, Developer, Via::Console, 1, &last),
            ("keeping the last admin admin is fine", Admin, Admin, Via::Console, 1, "ok"),
        ];
        for (rule, current, next, via, admins, want) in rows {
            assert_eq!(verdict(check_role_change(*current, *next, *via, *admins)), *want, "rule: {rule}");
        }
    }

    #[test]
    fn removals() {
        let untouchable = format!("403 {API_CANNOT_TOUCH_ADMIN}");
        let last = format!("400 {LAST_ADMIN}");
        #[rustfmt::skip]
        let rows: &[(&str, OrgRole, Via, usize, &str)] = &[
            ("the API removes a developer", Developer, Via::Api, 1, "ok"),
            ("even the only person, when no admin exists", User, Via::Api, 0, "ok"),
            ("the API cannot remove an admin", Admin, Via::Api, 2, &untouchable),
            ("the console removes one of two admins", Admin, Via::Console, 2, "ok"),
            ("but not the last admin", Admin, Via::Console, 1, &last),
        ];
        for (rule, role, via, admins, want) in rows {
            assert_eq!(verdict(check_removal(*role, *via, *admins)), *want, "rule: {rule}");
        }
    }

    #[test]
    fn invites() {
        assert_eq!(check_invite("a@x.io", false, false), Ok(()));
        assert_eq!(check_invite("a@x.io", true, true).unwrap_err().code, Some(AdminErrorCode::AlreadyMember));
        assert_eq!(check_invite("a@x.io", false, true).unwrap_err().code, Some(AdminErrorCode::InviteAlreadyExists));
        #[rustfmt::skip]
        let rows: &[StatusRow] = &[
            ("before expiry: pending", None, None, 9, InviteStatus::Pending),
            ("at expiry: expired", None, None, 10, InviteStatus::Expired),
            ("accepted stays accepted", Some(5), None, 99, InviteStatus::Accepted),
            ("deleted stays deleted", None, Some(5), 99, InviteStatus::Deleted),
        ];
        for (rule, accepted, deleted, now, want) in rows {
            assert_eq!(invite_status(*accepted, *deleted, 10, *now), *want, "rule: {rule}");
        }
        assert!(check_invite_delete(InviteStatus::Pending).is_ok());
        for status in [InviteStatus::Accepted, InviteStatus::Expired, InviteStatus::Deleted] {
            assert_eq!(
                check_invite_delete(status).unwrap_err().message,
                format!("only a pending invite can be deleted; this one is {status}")
            );
            assert!(check_invite_accept(status).is_err());
        }
        assert_eq!(invite_expiry(1, DEFAULT_INVITE_TTL_SECS), 1 + 7 * 86_400 * 1_000_000);
    }

    #[test]
    fn setup_links() {
        #[rustfmt::skip]
        let rows: &[SetupRow] = &[
            ("a fresh link with no admin makes one", Some((10, None)), 5, 0, true),
            ("an unknown link does not", None, 5, 0, false),
            ("nor a used one", Some((10, Some(3))), 5, 0, false),
            ("nor an expired one", Some((10, None)), 10, 0, false),
            ("nor any once an admin exists", Some((10, None)), 5, 1, false),
        ];
        for (rule, found, now, admins, ok) in rows {
            let got = check_setup_link(*found, *now, *admins);
            assert_eq!(got.is_ok(), *ok, "rule: {rule}");
            if let Err(r) = got {
                assert_eq!(r.message, SETUP_LINK_INVALID, "one answer for every refusal: {rule}");
            }
        }
        assert!(setup_link_wanted(0) && !setup_link_wanted(1));
    }

    #[test]
    fn workspace_roles() {
        #[rustfmt::skip]
        let rows: &[(&str, OrgRole, Option<WorkspaceRole>, Option<WorkspaceRole>)] = &[
            ("an org admin is workspace_admin everywhere", Admin, None, Some(WorkspaceAdmin)),
            ("whatever their membership says", Admin, Some(WorkspaceUser), Some(WorkspaceAdmin)),
            ("a member has their membership's role", Developer, Some(WorkspaceRestrictedDeveloper), Some(WorkspaceRestrictedDeveloper)),
            ("org developer alone grants no workspace", Developer, None, None),
            ("billing yields workspace_billing", Billing, None, Some(WorkspaceBilling)),
            ("unless a membership gives more", Billing, Some(WorkspaceDeveloper), Some(WorkspaceDeveloper)),
            ("a user without membership has none", User, None, None),
        ];
        for (rule, org, membership, want) in rows {
            assert_eq!(workspace_role(*org, *membership), *want, "rule: {rule}");
        }
    }

    #[test]
    fn member_changes() {
        let billing_role = "400 workspace_role cannot be `workspace_billing`: it comes with the org `billing` role and is never assigned";
        let admin = "400 an org admin is workspace_admin in every workspace; their workspace role cannot be changed while they are admin";
        let already = "400 this person is already a member of the workspace; update their workspace_role instead";
        let billing =
            "400 a billing member is workspace_billing in every workspace; add them with another role instead";
        let missing = "404 workspace member `user_a` not found";
        use MemberChange::*;
        #[rustfmt::skip]
        let rows: &[(&str, OrgRole, Option<WorkspaceRole>, MemberChange, &str)] = &[
            ("add a developer", Developer, None, Add(WorkspaceDeveloper), "ok"),
            ("never as workspace_billing", Developer, None, Add(WorkspaceBilling), billing_role),
            ("nor update to it", Developer, Some(WorkspaceUser), Update(WorkspaceBilling), billing_role),
            ("an org admin is not added", Admin, None, Add(WorkspaceUser), admin),
            ("nor demoted", Admin, None, Update(WorkspaceUser), admin),
            ("nor removed", Admin, None, Remove, admin),
            ("a member is not added twice", User, Some(WorkspaceUser), Add(WorkspaceAdmin), already),
            ("a member's role changes", User, Some(WorkspaceUser), Update(WorkspaceAdmin), "ok"),
            ("a member is removed", User, Some(WorkspaceUser), Remove, "ok"),
            ("a non-member is not updated", User, None, Update(WorkspaceAdmin), missing),
            ("nor removed", User, None, Remove, missing),
            ("billing's implicit role is not removed", Billing, None, Remove, billing),
            ("a billing member can be added with more", Billing, None, Add(WorkspaceDeveloper), "ok"),
        ];
        for (rule, org, membership, change, want) in rows {
            assert_eq!(verdict(check_member_change(*org, *membership, *change, "user_a")), *want, "rule: {rule}");
        }
    }
}
