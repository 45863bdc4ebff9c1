//! People who sign in through the identity provider (issue 33 item 3): linked by the provider's
//! `(issuer, subject)`, created at their first sign-in, and given at every sign-in exactly the
//! org role and memberships their groups map to ([`crate::rules::sso`]).
//!
//! The link is by subject, never by email: an email is an attribute the provider may let people
//! change, a subject is not. So a provider's person whose email already belongs to a mnemo person
//! who signs in otherwise is refused, not merged into that account.

use std::collections::BTreeMap;

use mnemo_api::{OrgRole, User, UserId, WorkspaceId, WorkspaceRole};

use super::Micros;
use super::people::{NewUserRow, PeopleSql};
use super::workspaces::WorkspaceSql;
use crate::rules::sso::Grants;
use crate::{Result, StoreError};

/// SQL over the links between people and the identity provider's subjects.
pub trait SsoSql: PeopleSql + WorkspaceSql {
    /// The id of the person linked to `subject` at `issuer` (maybe a person since removed).
    async fn sso_user(&self, issuer: &str, subject: &str) -> Result<Option<String>>;
    /// Links `subject` at `issuer` to `user`, replacing a link to a removed person.
    async fn put_sso_identity(&self, issuer: &str, subject: &str, user: &UserId, at: Micros) -> Result<()>;
}

/// Who the provider says signed in.
#[derive(Debug, Clone)]
pub struct SsoIdentity {
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    pub name: Option<String>,
}

/// One change a sign-in made to a person's roles, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleChange {
    Org { from: OrgRole, to: OrgRole },
    Member { workspace: WorkspaceId, from: Option<WorkspaceRole>, to: Option<WorkspaceRole> },
}

/// What a sign-in did.
#[derive(Debug, Clone)]
pub struct SsoSignIn {
    pub user: User,
    /// Whether the person was created by this sign-in.
    pub created: bool,
    pub changes: Vec<RoleChange>,
}

/// Why a provider's person whose email a mnemo person already has is refused.
pub const EMAIL_TAKEN: &str = "A person with this email address already signs in to mnemo another way. \
     Ask an administrator to remove that person first; single sign-on then creates them again.";
/// Why a person the provider sends without an email is refused.
pub const NO_EMAIL: &str = "The identity provider did not send an email address for your account; \
     ask your administrator to release the `email` claim to mnemo.";

/// The person linked to `subject` at `issuer`, if they are still a person of the organization.
pub async fn person<S: SsoSql>(sql: &S, issuer: &str, subject: &str) -> Result<Option<User>> {
    let Some(id) = sql.sso_user(issuer, subject).await? else { return Ok(None) };
    let id: UserId = crate::row::parse_id(&id)?;
    sql.user_rows(Some(&id), None).await?.first().map(|r| r.decode()).transpose()
}

/// Signs in `identity`: creates the person at the first sign-in, then SETS their org role and
/// memberships to `grants` (the groups' roles), in one transaction. Archived workspaces are left
/// as they are (their members cannot change, spec §8.5).
pub async fn sign_in<S: SsoSql>(sql: &S, identity: &SsoIdentity, grants: &Grants<WorkspaceId>) -> Result<SsoSignIn> {
    sql.hold_people().await?;
    let now = sql.now().await?;
    let mut changes = Vec::new();
    let (user, created) = match person(sql, &identity.issuer, &identity.subject).await? {
        Some(user) => {
            if user.role != grants.org_role {
                sql.set_user_role(&user.id, grants.org_role.as_str()).await?;
                changes.push(RoleChange::Org { from: user.role, to: grants.org_role });
            }
            let (email, name) = crate::rules::sso::profile_changes(
                &user.email,
                &user.name,
                identity.email.as_deref(),
                identity.name.as_deref(),
            );
            // An address another person holds stays theirs; this person keeps the one they had.
            let email = match email {
                Some(e) if sql.user_rows(None, Some(&e)).await?.is_empty() => Some(e),
                _ => None,
            };
            if email.is_some() || name.is_some() {
                let email = email.as_deref().unwrap_or(&user.email);
                sql.set_user_profile(&user.id, email, name.as_deref().unwrap_or(&user.name)).await?;
            }
            (user.id, false)
        }
        None => {
            let email = identity
                .email
                .as_deref()
                .and_then(|e| mnemo_api::normalize_email(e).ok())
                .ok_or_else(|| StoreError::Forbidden(NO_EMAIL.into()))?;
            if !sql.user_rows(None, Some(&email)).await?.is_empty() {
                return Err(StoreError::Forbidden(EMAIL_TAKEN.into()));
            }
            let name = identity
                .name
                .as_deref()
                .map(str::trim)
                .filter(|n| mnemo_api::validate_person_name(n).is_ok())
                .unwrap_or(&email)
                .to_owned();
            let id = UserId::generate();
            sql.insert_user(NewUserRow {
                id: &id,
                email: &email,
                name: &name,
                role: grants.org_role.as_str(),
                password_hash: None,
                added_at: now,
            })
            .await?;
            sql.put_sso_identity(&identity.issuer, &identity.subject, &id, now).await?;
            (id, true)
        }
    };
    for ws in sql.workspace_rows(None, false).await? {
        if ws.archived_at.is_some() {
            continue;
        }
        let ws_id: WorkspaceId = crate::row::parse_id(&ws.id)?;
        let current =
            sql.member_rows(&ws_id, Some(&user)).await?.first().and_then(|(_, role)| WorkspaceRole::parse(role));
        let wanted = grants.workspaces.get(&ws_id).copied();
        if current == wanted {
            continue;
        }
        match wanted {
            Some(role) => sql.put_member(&ws_id, &user, role.as_str(), now).await?,
            None => sql.delete_member(&ws_id, &user).await?,
        }
        changes.push(RoleChange::Member { workspace: ws_id, from: current, to: wanted });
    }
    let user = sql
        .user_rows(Some(&user), None)
        .await?
        .first()
        .ok_or_else(|| StoreError::not_found("user", &user))?
        .decode()?;
    Ok(SsoSignIn { user, created, changes })
}

/// The grants a person holds now, in the shape [`sign_in`] sets them: to tell whether a token's
/// groups would change anything.
pub async fn current_grants<S: SsoSql>(sql: &S, user: &UserId) -> Result<Grants<WorkspaceId>> {
    let person =
        sql.user_rows(Some(user), None).await?.first().ok_or_else(|| StoreError::not_found("user", user))?.decode()?;
    let mut workspaces = BTreeMap::new();
    for ws in sql.workspace_rows(None, false).await? {
        if ws.archived_at.is_some() {
            continue;
        }
        let ws_id: WorkspaceId = crate::row::parse_id(&ws.id)?;
        if let Some(role) =
            sql.member_rows(&ws_id, Some(user)).await?.first().and_then(|(_, role)| WorkspaceRole::parse(role))
        {
            workspaces.insert(ws_id, role);
        }
    }
    Ok(Grants { org_role: person.role, workspaces })
}
