//! People of the organization (admin-api.md §4.3, §8.6, §8.7): users, invites and workspace
//! members.
//!
//! Every change first holds the people of the organization ([`PeopleSql::hold_people`]) so the
//! judgement it makes — the last admin, a pending invite for that email, a membership — holds
//! on the state it commits on, across replicas. What may change is
//! [`crate::rules::people`]'s; a backend stores and reads rows.

use std::collections::HashMap;

use mnemo_api::{
    AdminPage, AdminPageQuery, Invite, InviteDeleted, InviteId, InviteStatus, MemberAdd, NewInvite, OrgRole, User,
    UserDeleted, UserId, WorkspaceId, WorkspaceMember, WorkspaceMemberDeleted, WorkspaceRole,
};

use super::workspaces::{self, WorkspaceSql};
use super::{Clock, Micros};
use crate::row::{ts, ts_opt};
use crate::rules::console;
use crate::rules::people::{self as rule, MemberChange, Via};
use crate::rules::scope::PersonRole;
use crate::rules::workspace::{self as ws_rule, Change};
use crate::{Credential, CredentialHash, PersonSession, Principal, Result, StoreError};

/// A person as stored (never their password hash).
#[derive(Debug, Clone)]
pub struct UserRow {
    pub id: String,
    pub email: String,
    pub name: String,
    pub role: String,
    pub added_at: Micros,
}

/// A new person.
#[derive(Debug, Clone)]
pub struct NewUserRow<'a> {
    pub id: &'a UserId,
    /// Normalized.
    pub email: &'a str,
    pub name: &'a str,
    pub role: &'a str,
    /// The PHC string of their password's hash; `None` for a person who signs in otherwise.
    pub password_hash: Option<&'a str>,
    pub added_at: Micros,
}

/// An invite as stored.
#[derive(Debug, Clone)]
pub struct InviteRow {
    pub id: String,
    pub email: String,
    pub role: String,
    pub invited_at: Micros,
    pub expires_at: Micros,
    pub accepted_at: Option<Micros>,
    pub deleted_at: Option<Micros>,
}

/// A new invite; its link's secret is kept as a hash only.
#[derive(Debug, Clone)]
pub struct NewInviteRow<'a> {
    pub id: &'a InviteId,
    pub email: &'a str,
    pub role: &'a str,
    pub secret_hash: &'a CredentialHash,
    pub invited_at: Micros,
    pub expires_at: Micros,
}

/// A membership as stored: (user id, workspace role).
pub type MemberRow = (String, String);

/// SQL over people, invites and memberships.
pub trait PeopleSql: Clock {
    /// Holds every change to people until the transaction ends (PostgreSQL: a transaction-scoped
    /// advisory lock; SQLite's single writer already excludes other writers).
    async fn hold_people(&self) -> Result<()>;
    async fn insert_user(&self, row: NewUserRow<'_>) -> Result<()>;
    /// People in the order they joined: every one, or only `only`, or only the one with `email`.
    async fn user_rows(&self, only: Option<&UserId>, email: Option<&str>) -> Result<Vec<UserRow>>;
    async fn set_user_role(&self, id: &UserId, role: &str) -> Result<()>;
    /// Sets a person's address (already normalized and free) and name.
    async fn set_user_profile(&self, id: &UserId, email: &str, name: &str) -> Result<()>;
    /// Deletes a person with their memberships and console sessions.
    async fn delete_user(&self, id: &UserId) -> Result<()>;
    async fn insert_invite(&self, row: NewInviteRow<'_>) -> Result<()>;
    /// Invites in the order they were made: every one, or only `only`, or only those for `email`.
    async fn invite_rows(&self, only: Option<&InviteId>, email: Option<&str>) -> Result<Vec<InviteRow>>;
    /// Records that an invite was deleted at `at`.
    async fn set_invite_deleted(&self, id: &InviteId, at: Micros) -> Result<()>;
    /// The memberships of workspace `ws` (or only `user`'s), in the order they were made.
    async fn member_rows(&self, ws: &WorkspaceId, user: Option<&UserId>) -> Result<Vec<MemberRow>>;
    /// Adds `user` to `ws` with `role`, or changes their role there.
    async fn put_member(&self, ws: &WorkspaceId, user: &UserId, role: &str, at: Micros) -> Result<()>;
    async fn delete_member(&self, ws: &WorkspaceId, user: &UserId) -> Result<()>;
    /// The invite whose link's secret hashes to `hash`.
    async fn invite_by_hash(&self, hash: &CredentialHash) -> Result<Option<InviteRow>>;
    /// Records that an invite was accepted at `at`.
    async fn set_invite_accepted(&self, id: &InviteId, at: Micros) -> Result<()>;
    async fn insert_setup_link(&self, hash: &CredentialHash, created_at: Micros, expires_at: Micros) -> Result<()>;
    /// The setup link whose secret hashes to `hash`: `(expires_at, used_at)`.
    async fn setup_link_by_hash(&self, hash: &CredentialHash) -> Result<Option<(Micros, Option<Micros>)>>;
    async fn set_setup_link_used(&self, hash: &CredentialHash, at: Micros) -> Result<()>;
    /// Deletes `user`'s console sessions that expired or were revoked before `cutoff`.
    async fn delete_person_sessions_ended_before(&self, user: &UserId, cutoff: Micros) -> Result<()>;
    /// Records a console session of person `user`.
    async fn insert_person_session(
        &self,
        hash: &CredentialHash,
        user: &UserId,
        created_at: Micros,
        expires_at: Micros,
    ) -> Result<()>;
    /// The person console session with secret `hash` that is not revoked and expires after
    /// `now`: `(user id, created_at, expires_at)`.
    async fn person_session_by_hash(
        &self,
        hash: &CredentialHash,
        now: Micros,
    ) -> Result<Option<(String, Micros, Micros)>>;
    /// Revokes the person console session with secret `hash` at `now` if it is not revoked;
    /// whether one was.
    async fn revoke_person_session(&self, hash: &CredentialHash, now: Micros) -> Result<bool>;
    /// Revokes every unrevoked console session of `user` at `now`; how many were.
    async fn revoke_person_sessions(&self, user: &UserId, now: Micros) -> Result<u64>;
    /// The PHC string of person `id`'s password hash, if they have a password.
    async fn password_hash(&self, id: &UserId) -> Result<Option<String>>;
    /// `user`'s console sessions that are not revoked and expire after `now`, newest first:
    /// `(created_at, expires_at)`.
    async fn live_person_sessions(&self, user: &UserId, now: Micros) -> Result<Vec<(Micros, Micros)>>;
}

fn org_role(table: &'static str, id: &str, raw: &str) -> Result<OrgRole> {
    OrgRole::parse(raw).ok_or_else(|| StoreError::corrupt(table, &id, "role", format!("unknown role `{raw}`")))
}

impl UserRow {
    /// The person as the API shows them.
    pub fn decode(&self) -> Result<User> {
        Ok(User {
            id: crate::row::parse_id(&self.id)?,
            email: self.email.clone(),
            name: self.name.clone(),
            role: org_role("users", &self.id, &self.role)?,
            added_at: ts(self.added_at),
        })
    }
}

impl InviteRow {
    /// The invite as the API shows it at `now`.
    pub fn decode(&self, now: Micros) -> Result<Invite> {
        Ok(Invite {
            id: crate::row::parse_id(&self.id)?,
            email: self.email.clone(),
            role: org_role("invites", &self.id, &self.role)?,
            status: self.status(now),
            invited_at: ts(self.invited_at),
            expires_at: ts(self.expires_at),
            accepted_at: ts_opt(self.accepted_at),
            rbac_group_ids: Vec::new(),
        })
    }

    fn status(&self, now: Micros) -> InviteStatus {
        rule::invite_status(self.accepted_at, self.deleted_at, self.expires_at, now)
    }
}

fn decode_users(rows: &[UserRow]) -> Result<Vec<User>> {
    rows.iter().map(UserRow::decode).collect()
}

async fn user_of<S: PeopleSql>(sql: &S, id: &UserId) -> Result<User> {
    let rows = sql.user_rows(Some(id), None).await?;
    rows.first().ok_or_else(|| StoreError::not_found("user", id))?.decode()
}

fn admins(people: &[User]) -> usize {
    people.iter().filter(|p| p.role == OrgRole::Admin).count()
}

// ---------------------------------------------------------------------------------------------
// Invites

/// Invites `new.email` as `new.role` for `ttl_secs` (the API's invite: `admin` is refused), its
/// link's secret stored as `hash`. Refused when a person has that email or a pending invite
/// names it.
pub async fn create_invite<S: PeopleSql>(
    sql: &S,
    new: &NewInvite,
    hash: &CredentialHash,
    ttl_secs: u64,
) -> Result<Invite> {
    rule::check_assignable(new.role, Via::Api)?;
    sql.hold_people().await?;
    let now = sql.now().await?;
    let is_member = !sql.user_rows(None, Some(&new.email)).await?.is_empty();
    let pending = sql.invite_rows(None, Some(&new.email)).await?.iter().any(|i| i.status(now) == InviteStatus::Pending);
    rule::check_invite(&new.email, is_member, pending)?;
    let id = InviteId::generate();
    sql.insert_invite(NewInviteRow {
        id: &id,
        email: &new.email,
        role: new.role.as_str(),
        secret_hash: hash,
        invited_at: now,
        expires_at: rule::invite_expiry(now, ttl_secs),
    })
    .await?;
    get_invite(sql, &id).await
}

/// One invite, whatever its status.
pub async fn get_invite<S: PeopleSql>(sql: &S, id: &InviteId) -> Result<Invite> {
    let now = sql.now().await?;
    let rows = sql.invite_rows(Some(id), None).await?;
    rows.first().ok_or_else(|| StoreError::not_found("invite", id))?.decode(now)
}

/// Which invites a list shows.
#[derive(Debug, Clone)]
pub struct ListInvites {
    /// Normalized.
    pub email: Option<String>,
    /// Any of these roles; empty: every role.
    pub roles: Vec<OrgRole>,
    /// Any of these; empty: pending, accepted and expired (as hosted).
    pub statuses: Vec<InviteStatus>,
    pub page: AdminPageQuery,
}

/// A page of invites in the order they were made.
pub async fn list_invites<S: PeopleSql>(sql: &S, query: &ListInvites) -> Result<AdminPage<Invite>> {
    let now = sql.now().await?;
    let statuses: &[InviteStatus] = if query.statuses.is_empty() {
        &[InviteStatus::Pending, InviteStatus::Accepted, InviteStatus::Expired]
    } else {
        &query.statuses
    };
    let mut shown = Vec::new();
    for row in sql.invite_rows(None, query.email.as_deref()).await? {
        let invite = row.decode(now)?;
        if statuses.contains(&invite.status) && (query.roles.is_empty() || query.roles.contains(&invite.role)) {
            shown.push(invite);
        }
    }
    workspaces::page(shown, |i| i.id.to_string(), &query.page)
}

/// Deletes a pending invite; any other is refused.
pub async fn delete_invite<S: PeopleSql>(sql: &S, id: &InviteId) -> Result<InviteDeleted> {
    sql.hold_people().await?;
    let invite = get_invite(sql, id).await?;
    rule::check_invite_delete(invite.status)?;
    sql.set_invite_deleted(id, sql.now().await?).await?;
    Ok(InviteDeleted { id: id.clone() })
}

// ---------------------------------------------------------------------------------------------
// Users

/// One person.
pub async fn get_user<S: PeopleSql>(sql: &S, id: &UserId) -> Result<User> {
    user_of(sql, id).await
}

/// Which people a list shows.
#[derive(Debug, Clone)]
pub struct ListUsers {
    /// Normalized.
    pub email: Option<String>,
    /// Any of these roles; empty: every role.
    pub roles: Vec<OrgRole>,
    pub page: AdminPageQuery,
}

/// A page of people in the order they joined.
pub async fn list_users<S: PeopleSql>(sql: &S, query: &ListUsers) -> Result<AdminPage<User>> {
    let people = decode_users(&sql.user_rows(None, query.email.as_deref()).await?)?;
    let shown = people.into_iter().filter(|u| query.roles.is_empty() || query.roles.contains(&u.role)).collect();
    workspaces::page(shown, |u| u.id.to_string(), &query.page)
}

/// Gives person `id` the org role `role`, as `via` may ([`rule::check_role_change`]).
pub async fn update_user<S: PeopleSql>(sql: &S, id: &UserId, role: OrgRole, via: Via) -> Result<User> {
    sql.hold_people().await?;
    let people = decode_users(&sql.user_rows(None, None).await?)?;
    let person = people.iter().find(|p| p.id == *id).ok_or_else(|| StoreError::not_found("user", id))?;
    rule::check_role_change(person.role, role, via, admins(&people))?;
    if person.role != role {
        sql.set_user_role(id, role.as_str()).await?;
    }
    user_of(sql, id).await
}

/// Removes person `id`, as `via` may ([`rule::check_removal`]): their memberships and console
/// sessions end in the same transaction. API keys they minted keep working (as hosted).
pub async fn remove_user<S: PeopleSql>(sql: &S, id: &UserId, via: Via) -> Result<UserDeleted> {
    sql.hold_people().await?;
    let people = decode_users(&sql.user_rows(None, None).await?)?;
    let person = people.iter().find(|p| p.id == *id).ok_or_else(|| StoreError::not_found("user", id))?;
    rule::check_removal(person.role, via, admins(&people))?;
    sql.delete_user(id).await?;
    Ok(UserDeleted { id: id.clone() })
}

/// Ends every console session of person `id` at once (`users.sign_out`, or their own "sign out
/// everywhere"); they keep their role and the API keys they minted. Answers the person and how
/// many sessions ended, so a backend shared by replicas can tell them to forget cached ones.
pub async fn sign_out_user<S: PeopleSql>(sql: &S, id: &UserId) -> Result<(User, u64)> {
    let person = user_of(sql, id).await?;
    let ended = sql.revoke_person_sessions(id, sql.now().await?).await?;
    Ok((person, ended))
}

// ---------------------------------------------------------------------------------------------
// Person console sessions

/// Who signs in with `email` (normalized here, so it matches however it was typed) and their
/// password's PHC hash if they have one. An address that is no email, or no person's: none —
/// the console answers both like a wrong password.
pub async fn sign_in_candidate<S: PeopleSql>(sql: &S, email: &str) -> Result<Option<(User, Option<String>)>> {
    let Ok(email) = mnemo_api::normalize_email(email) else { return Ok(None) };
    let Some(row) = sql.user_rows(None, Some(&email)).await?.pop() else { return Ok(None) };
    let person = row.decode()?;
    let hash = sql.password_hash(&person.id).await?;
    Ok(Some((person, hash)))
}

/// Starts a console session for person `user` (the seam every way of signing in ends at: a
/// password today, OIDC later), first deleting their sessions that ended longer ago than
/// [`console::ENDED_KEPT_MICROS`]; it lasts
/// `ttl_seconds`. An unknown person: not found.
pub async fn create_person_session<S: PeopleSql>(
    sql: &S,
    hash: &CredentialHash,
    user: &UserId,
    ttl_seconds: u64,
) -> Result<PersonSession> {
    sql.hold_people().await?;
    let person = user_of(sql, user).await?;
    let now = sql.now().await?;
    sql.delete_person_sessions_ended_before(user, console::kept_since(now)).await?;
    let expires_at = console::expiry(now, ttl_seconds);
    sql.insert_person_session(hash, user, now, expires_at).await?;
    Ok(PersonSession { user: person, created_at: ts(now), expires_at: ts(expires_at) })
}

/// The live person console session with secret `hash`, with the person as they are now (their
/// current role): none once it expired, was revoked, or the person was removed.
pub async fn find_person_session<S: PeopleSql>(sql: &S, hash: &CredentialHash) -> Result<Option<PersonSession>> {
    let now = sql.now().await?;
    let Some((user, created_at, expires_at)) = sql.person_session_by_hash(hash, now).await? else {
        return Ok(None);
    };
    let Some(row) = sql.user_rows(Some(&crate::row::parse_id(&user)?), None).await?.pop() else {
        return Ok(None);
    };
    Ok(Some(PersonSession { user: row.decode()?, created_at: ts(created_at), expires_at: ts(expires_at) }))
}

/// Person `user`'s live console sessions, newest first (their own page lists them); none for
/// an unknown person.
pub async fn person_sessions<S: PeopleSql>(sql: &S, user: &UserId) -> Result<Vec<crate::PersonSessionTimes>> {
    let now = sql.now().await?;
    let rows = sql.live_person_sessions(user, now).await?;
    Ok(rows
        .into_iter()
        .map(|(created_at, expires_at)| crate::PersonSessionTimes {
            created_at: ts(created_at),
            expires_at: ts(expires_at),
        })
        .collect())
}

/// Ends the person console session with secret `hash` (signing out); whether a live one was.
pub async fn revoke_person_session<S: PeopleSql>(sql: &S, hash: &CredentialHash) -> Result<bool> {
    let now = sql.now().await?;
    sql.revoke_person_session(hash, now).await
}

// ---------------------------------------------------------------------------------------------
// A person acting

/// Why a person who no longer exists cannot act (their session or token outlived them).
pub const PERSON_GONE: &str = "this sign-in belongs to nobody in the organization any more; sign in again";
/// Why a person in no workspace cannot act in one.
pub const NO_WORKSPACE: &str = "you are not a member of any workspace yet; ask a workspace admin to add you";

/// The workspaces person `user` (org role `org`) has a role in, with that role: every open
/// workspace for an org admin; the workspaces of their memberships; every one for billing.
/// Archived workspaces are left out unless `include_archived`.
pub async fn person_workspaces<S: PeopleSql + WorkspaceSql>(
    sql: &S,
    user: &UserId,
    org: OrgRole,
    include_archived: bool,
) -> Result<Vec<(mnemo_api::Workspace, WorkspaceRole)>> {
    let mut found = Vec::new();
    for row in sql.workspace_rows(None, false).await? {
        if row.archived_at.is_some() && !include_archived {
            continue;
        }
        let ws = row.decode()?;
        if let Some(role) = rule::workspace_role(org, membership(sql, &ws.id, user).await?) {
            found.push((ws, role));
        }
    }
    Ok(found)
}

/// The principal of person `user` acting in `workspace` (spec §8.2, §8.6): their org role and
/// their role there. `None` picks their only open workspace (the Default one for an org admin);
/// a person in several must name one ([`StoreError::WorkspaceUnspecified`]). A workspace they
/// have no role in answers exactly like an unknown one; a removed person is unauthenticated.
pub async fn person_principal<S: PeopleSql + WorkspaceSql>(
    sql: &S,
    user: &UserId,
    workspace: Option<&WorkspaceId>,
) -> Result<Principal> {
    let Some(row) = sql.user_rows(Some(user), None).await?.pop() else {
        return Err(StoreError::Unauthenticated(PERSON_GONE.into()));
    };
    let person = row.decode()?;
    let principal = |ws: WorkspaceId, role: WorkspaceRole| Principal {
        credential: Credential::Person {
            user: person.id.clone(),
            role: PersonRole { org: person.role, workspace: role },
        },
        workspace: Some(ws),
    };
    if let Some(ws) = workspace {
        // An unknown workspace is not found here, before any membership is read.
        workspaces::archived(sql, ws).await?;
        let role = rule::workspace_role(person.role, membership(sql, ws, user).await?)
            .ok_or_else(|| StoreError::not_found("workspace", ws))?;
        return Ok(principal(ws.clone(), role));
    }
    if person.role == OrgRole::Admin {
        let default = sql
            .workspace_rows(None, false)
            .await?
            .into_iter()
            .find(|w| w.is_default)
            .ok_or_else(|| StoreError::backend("the organization has no Default workspace"))?;
        return Ok(principal(crate::row::parse_id(&default.id)?, WorkspaceRole::WorkspaceAdmin));
    }
    let mut theirs = person_workspaces(sql, user, person.role, false).await?;
    match theirs.len() {
        0 => Err(StoreError::Forbidden(NO_WORKSPACE.into())),
        1 => {
            let (ws, role) = theirs.remove(0);
            Ok(principal(ws.id, role))
        }
        count => Err(StoreError::WorkspaceUnspecified { count }),
    }
}

/// The open workspaces of person `user` with their role in each; none for an unknown person.
pub async fn workspaces_of<S: PeopleSql + WorkspaceSql>(
    sql: &S,
    user: &UserId,
) -> Result<Vec<(mnemo_api::Workspace, WorkspaceRole)>> {
    let Some(row) = sql.user_rows(Some(user), None).await?.pop() else { return Ok(Vec::new()) };
    person_workspaces(sql, user, row.decode()?.role, false).await
}

// ---------------------------------------------------------------------------------------------
// Workspace members

fn member_role(ws: &WorkspaceId, raw: &str) -> Result<WorkspaceRole> {
    WorkspaceRole::parse(raw)
        .ok_or_else(|| StoreError::corrupt("workspace_members", &ws, "workspace_role", format!("unknown role `{raw}`")))
}

/// `user`'s membership role in `ws`, if they have one.
async fn membership<S: PeopleSql>(sql: &S, ws: &WorkspaceId, user: &UserId) -> Result<Option<WorkspaceRole>> {
    sql.member_rows(ws, Some(user)).await?.first().map(|(_, role)| member_role(ws, role)).transpose()
}

/// The person a member path or body names: an id that is not one names nobody.
fn user_id(raw: &str) -> Result<UserId> {
    raw.parse().map_err(|_| StoreError::not_found("user", &raw.chars().take(64).collect::<String>()))
}

/// Changes `user`'s membership of `ws` as `change` says; the workspace must be open.
async fn change_member<S: PeopleSql + WorkspaceSql>(
    sql: &S,
    ws: &WorkspaceId,
    user: &UserId,
    change: MemberChange,
) -> Result<Option<WorkspaceMember>> {
    sql.hold_people().await?;
    let archived = workspaces::archived(sql, ws).await?;
    ws_rule::check_open(ws, archived, Change::Members)?;
    let person = user_of(sql, user).await?;
    let current = membership(sql, ws, user).await?;
    rule::check_member_change(person.role, current, change, user.as_str())?;
    match change {
        MemberChange::Add(role) | MemberChange::Update(role) => {
            sql.put_member(ws, user, role.as_str(), sql.now().await?).await?;
            Ok(Some(WorkspaceMember { user_id: user.clone(), workspace_id: ws.clone(), workspace_role: role }))
        }
        MemberChange::Remove => {
            sql.delete_member(ws, user).await?;
            Ok(None)
        }
    }
}

fn the_member(answer: Option<WorkspaceMember>) -> Result<WorkspaceMember> {
    answer.ok_or_else(|| StoreError::backend("a member change that keeps the member answered none"))
}

/// Adds a person to a workspace (`workspace_billing` and org admins refused).
pub async fn add_member<S: PeopleSql + WorkspaceSql>(
    sql: &S,
    ws: &WorkspaceId,
    body: &MemberAdd,
) -> Result<WorkspaceMember> {
    let role = WorkspaceRole::parse_or_explain("workspace_role", &body.workspace_role)
        .map_err(|e| StoreError::Invalid(e.0))?;
    // The workspace is judged first: an unknown one answers 404 whatever the body says.
    workspaces::archived(sql, ws).await?;
    let user = user_id(&body.user_id)?;
    the_member(change_member(sql, ws, &user, MemberChange::Add(role)).await?)
}

/// Changes a member's workspace role.
pub async fn update_member<S: PeopleSql + WorkspaceSql>(
    sql: &S,
    ws: &WorkspaceId,
    user: &UserId,
    role: &str,
) -> Result<WorkspaceMember> {
    let role = WorkspaceRole::parse_or_explain("workspace_role", role).map_err(|e| StoreError::Invalid(e.0))?;
    the_member(change_member(sql, ws, user, MemberChange::Update(role)).await?)
}

/// Removes a person from a workspace.
pub async fn remove_member<S: PeopleSql + WorkspaceSql>(
    sql: &S,
    ws: &WorkspaceId,
    user: &UserId,
) -> Result<WorkspaceMemberDeleted> {
    change_member(sql, ws, user, MemberChange::Remove).await?;
    Ok(WorkspaceMemberDeleted { user_id: user.clone(), workspace_id: ws.clone() })
}

/// A person's role in a workspace: the member as the API shows them, implicit roles included
/// ([`rule::workspace_role`]); someone without one is not found.
pub async fn get_member<S: PeopleSql + WorkspaceSql>(
    sql: &S,
    ws: &WorkspaceId,
    user: &UserId,
) -> Result<WorkspaceMember> {
    workspaces::archived(sql, ws).await?;
    let not_found = || StoreError::not_found("workspace member", user);
    let person = match user_of(sql, user).await {
        Err(StoreError::NotFound { .. }) => return Err(not_found()),
        other => other?,
    };
    let role = rule::workspace_role(person.role, membership(sql, ws, user).await?).ok_or_else(not_found)?;
    Ok(WorkspaceMember { user_id: user.clone(), workspace_id: ws.clone(), workspace_role: role })
}

/// A page of a workspace's members, implicit ones (org admins, billing) included, in the order
/// the people joined.
pub async fn list_members<S: PeopleSql + WorkspaceSql>(
    sql: &S,
    ws: &WorkspaceId,
    page: &AdminPageQuery,
) -> Result<AdminPage<WorkspaceMember>> {
    workspaces::archived(sql, ws).await?;
    let mut memberships = HashMap::new();
    for (user, role) in sql.member_rows(ws, None).await? {
        memberships.insert(user, member_role(ws, &role)?);
    }
    let mut shown = Vec::new();
    for person in decode_users(&sql.user_rows(None, None).await?)? {
        let own = memberships.get(person.id.as_str()).copied();
        if let Some(role) = rule::workspace_role(person.role, own) {
            shown.push(WorkspaceMember { user_id: person.id, workspace_id: ws.clone(), workspace_role: role });
        }
    }
    workspaces::page(shown, |m| m.user_id.to_string(), page)
}

// ---------------------------------------------------------------------------------------------
// Joining: invites accepted, the setup link

/// What a person chooses when they join: their name and password (its hash, made by the
/// caller), and for the setup link their email too.
#[derive(Debug, Clone)]
pub struct Joining {
    pub name: String,
    /// The PHC string of the password's argon2id hash (never the password).
    pub password_hash: String,
}

/// The invite whose link's secret hashes to `hash`, as the API shows it now.
pub async fn invite_by_link<S: PeopleSql>(sql: &S, hash: &CredentialHash) -> Result<Option<Invite>> {
    let now = sql.now().await?;
    sql.invite_by_hash(hash).await?.map(|row| row.decode(now)).transpose()
}

/// Accepts the pending invite whose link hashes to `hash`: the person joins with the invite's
/// email and role. Any link that cannot be used answers the same.
pub async fn accept_invite<S: PeopleSql>(sql: &S, hash: &CredentialHash, joining: &Joining) -> Result<User> {
    mnemo_api::validate_person_name(&joining.name).map_err(|e| StoreError::Invalid(e.0))?;
    sql.hold_people().await?;
    let now = sql.now().await?;
    let row = sql.invite_by_hash(hash).await?;
    let status = row.as_ref().map_or(InviteStatus::Deleted, |r| r.status(now));
    rule::check_invite_accept(status)?;
    let row = row.ok_or_else(|| StoreError::backend("a usable invite vanished"))?;
    let is_member = !sql.user_rows(None, Some(&row.email)).await?.is_empty();
    rule::check_invite(&row.email, is_member, false)?;
    let id = UserId::generate();
    let new = NewUserRow {
        id: &id,
        email: &row.email,
        name: joining.name.trim(),
        role: &row.role,
        password_hash: Some(&joining.password_hash),
        added_at: now,
    };
    sql.insert_user(new).await?;
    sql.set_invite_accepted(
        &row.id.parse().map_err(|_| StoreError::corrupt("invites", &row.id, "id", "not an invite id"))?,
        now,
    )
    .await?;
    user_of(sql, &id).await
}

async fn active_admins<S: PeopleSql>(sql: &S) -> Result<usize> {
    Ok(admins(&decode_users(&sql.user_rows(None, None).await?)?))
}

/// Whether the organization has no active admin, so a setup link is wanted (spec §8.3).
pub async fn setup_wanted<S: PeopleSql>(sql: &S) -> Result<bool> {
    Ok(rule::setup_link_wanted(active_admins(sql).await?))
}

/// Records a setup link (its secret's hash) valid for `ttl_secs`.
pub async fn create_setup_link<S: PeopleSql>(sql: &S, hash: &CredentialHash, ttl_secs: u64) -> Result<()> {
    let now = sql.now().await?;
    sql.insert_setup_link(hash, now, rule::invite_expiry(now, ttl_secs)).await
}

/// Whether the setup link hashing to `hash` would make an admin now.
pub async fn setup_link_usable<S: PeopleSql>(sql: &S, hash: &CredentialHash) -> Result<bool> {
    let now = sql.now().await?;
    let found = sql.setup_link_by_hash(hash).await?;
    Ok(rule::check_setup_link(found, now, active_admins(sql).await?).is_ok())
}

/// Uses the setup link hashing to `hash`: the person joins as org `admin` with `email`. The link
/// is spent in the same transaction.
pub async fn use_setup_link<S: PeopleSql>(
    sql: &S,
    hash: &CredentialHash,
    email: &str,
    joining: &Joining,
) -> Result<User> {
    let email = mnemo_api::normalize_email(email).map_err(|e| StoreError::Invalid(e.0))?;
    mnemo_api::validate_person_name(&joining.name).map_err(|e| StoreError::Invalid(e.0))?;
    sql.hold_people().await?;
    let now = sql.now().await?;
    let found = sql.setup_link_by_hash(hash).await?;
    rule::check_setup_link(found, now, active_admins(sql).await?)?;
    let is_member = !sql.user_rows(None, Some(&email)).await?.is_empty();
    rule::check_invite(&email, is_member, false)?;
    let id = UserId::generate();
    let new = NewUserRow {
        id: &id,
        email: &email,
        name: joining.name.trim(),
        role: OrgRole::Admin.as_str(),
        password_hash: Some(&joining.password_hash),
        added_at: now,
    };
    sql.insert_user(new).await?;
    sql.set_setup_link_used(hash, now).await?;
    user_of(sql, &id).await
}
