//! People in the console: the organization's people and invites (org admins), a workspace's
//! members (its admins), and a person's own page ("sign out everywhere").
//!
//! Every change goes through the same store calls as the Admin API, judged by
//! `rules::people` (the last admin stays; `admin` is granted only here, `Via::Console`), after
//! the scope decision let the signed-in person in. Invites send no mail: the page shows the
//! accept link once, to hand over; "resend" makes a new link (the old one dies with its invite).

use askama::Template;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use mnemo_api::{
    AdminCursor, AdminPageQuery, Invite, InviteId, InviteStatus, MemberAdd, NewInvite, OrgRole, User, UserId,
    WorkspaceRole,
};
use mnemo_http::{BadInput, FromQuery, Id, Params, Query};
use mnemo_store::ops::people::{ListInvites, ListUsers};
use mnemo_store::rules::audit::AuditAction;
use mnemo_store::rules::people::Via;
use mnemo_store::rules::scope::{Action, OrgOp, WorkspaceOp};
use serde::Deserialize;

use crate::Console;
use crate::auth::{NoFields, Posted, Signed, over_tls};
use crate::page::{Chrome, PageError, Section, refusal, render, render_with, see_other};
use crate::text::when;

/// The prefix of an invite link's secret (as the Admin API makes them).
const INVITE_SECRET_PREFIX: &str = "mnemo-invite-";

fn everything() -> AdminPageQuery {
    AdminPageQuery { limit: 1000, cursor: AdminCursor::Start }
}

/// Records a change to people in the log it belongs to (people and invites: the
/// organization's; members: the workspace's).
async fn record(console: &Console, who: &Signed, action: AuditAction, id: &str, details: serde_json::Value) {
    crate::audit_log::record_in(console, who, action, id, action.org_level(), details).await;
}

/// Where this console is reached, for an invite's accept link: `--public-url`, else the
/// address the browser used.
fn console_base(console: &Console, headers: &HeaderMap) -> String {
    if let Some(url) = &console.config.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    format!("{}://{host}", if over_tls(console, headers) { "https" } else { "http" })
}

// ---------------------------------------------------------------------------------------------
// People and invites

#[derive(Debug)]
pub(crate) struct PersonRow {
    id: String,
    name: String,
    email: String,
    role: &'static str,
    joined: String,
    you: bool,
}

#[derive(Debug)]
pub(crate) struct InviteRow {
    id: String,
    email: String,
    role: &'static str,
    status: &'static str,
    expires: String,
    pending: bool,
}

#[derive(Debug, Template)]
#[template(path = "people.html")]
struct PeoplePage {
    chrome: Chrome,
    people: Vec<PersonRow>,
    invites: Vec<InviteRow>,
    roles: Vec<&'static str>,
    /// A link just made: (email, accept link), shown this once.
    link: Option<(String, String)>,
    /// What the last change did ("Rita Role is now developer."), read from the stored person.
    notice: Option<String>,
    message: Option<String>,
}

async fn people_page(
    console: &Console,
    who: &Signed,
    link: Option<(String, String)>,
    message: Option<String>,
) -> Result<Response, PageError> {
    people_page_noting(console, who, link, None, message).await
}

async fn people_page_noting(
    console: &Console,
    who: &Signed,
    link: Option<(String, String)>,
    changed: Option<&UserId>,
    message: Option<String>,
) -> Result<Response, PageError> {
    let people = console.store.list_users(ListUsers { email: None, roles: vec![], page: everything() }).await?;
    let invites = console
        .store
        .list_invites(ListInvites {
            email: None,
            roles: vec![],
            statuses: vec![InviteStatus::Pending, InviteStatus::Expired],
            page: everything(),
        })
        .await?;
    let me = who.person.as_ref().map(|p| p.id.clone());
    let notice = changed
        .and_then(|id| people.data.iter().find(|u| &u.id == id))
        .map(|u| format!("{} is now {}.", u.name, u.role.as_str()));
    let page = PeoplePage {
        chrome: who.chrome(Section::People),
        people: people
            .data
            .iter()
            .map(|u| PersonRow {
                id: u.id.to_string(),
                name: u.name.clone(),
                email: u.email.clone(),
                role: u.role.as_str(),
                joined: when(&u.added_at),
                you: me.as_ref() == Some(&u.id),
            })
            .collect(),
        invites: invites.data.iter().map(invite_row).collect(),
        roles: OrgRole::ALL.iter().map(|r| r.as_str()).collect(),
        link,
        notice,
        message: message.clone(),
    };
    let status = if message.is_some() { axum::http::StatusCode::BAD_REQUEST } else { axum::http::StatusCode::OK };
    Ok(render_with(status, &page))
}

fn invite_row(i: &Invite) -> InviteRow {
    InviteRow {
        id: i.id.to_string(),
        email: i.email.clone(),
        role: i.role.as_str(),
        status: i.status.as_str(),
        expires: when(&i.expires_at),
        pending: i.status == InviteStatus::Pending,
    }
}

#[derive(Debug)]
pub(crate) struct PeopleQuery {
    /// The person whose role was just changed: the page says what it is now.
    changed: Option<UserId>,
}

impl FromQuery for PeopleQuery {
    const ONCE: &'static [&'static str] = &["changed"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        Ok(Self { changed: mnemo_http::filter_id("changed", q.one("changed").filter(|s| !s.is_empty()))? })
    }
}

pub(crate) async fn people(
    State(console): State<Console>,
    who: Signed,
    Query(query): Query<PeopleQuery>,
) -> Result<Response, PageError> {
    who.allow(Action::Organization(OrgOp::People))?;
    people_page_noting(&console, &who, None, query.changed.as_ref(), None).await
}

#[derive(Debug, Deserialize)]
pub(crate) struct InviteForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    role: String,
}

/// Makes an invite and its link; answers the page showing the link once.
async fn invite_with_link(
    console: &Console,
    headers: &HeaderMap,
    who: &Signed,
    email: &str,
    role: &str,
) -> Result<Response, PageError> {
    let body = mnemo_api::InviteCreate { email: email.to_owned(), role: role.to_owned(), ..Default::default() };
    let new: NewInvite = match body.validate() {
        Ok(new) => new,
        Err(e) => return people_page(console, who, None, Some(e.0)).await,
    };
    let secret = mnemo_api::generate_secret(INVITE_SECRET_PREFIX);
    let invite =
        match console.store.create_invite(new, crate::auth::hash(&secret), console.config.invite_ttl_secs).await {
            Ok(invite) => invite,
            Err(err) => return people_page(console, who, None, Some(refusal(err)?)).await,
        };
    record(
        console,
        who,
        AuditAction::InviteCreate,
        invite.id.as_str(),
        serde_json::json!({"role": invite.role.as_str()}),
    )
    .await;
    tracing::info!(invite.id = %invite.id, by = %who.label(), "invited a person in the console");
    let link = format!("{}/console/invite/{secret}", console_base(console, headers));
    people_page(console, who, Some((invite.email, link)), None).await
}

pub(crate) async fn invite(
    State(console): State<Console>,
    headers: HeaderMap,
    posted: Posted<InviteForm>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Organization(OrgOp::People))?;
    invite_with_link(&console, &headers, &posted.who, &posted.form.email, &posted.form.role).await
}

/// A new link for a pending (or expired) invite: the old invite is revoked, a new one made for
/// the same email and role.
pub(crate) async fn resend(
    State(console): State<Console>,
    headers: HeaderMap,
    Id(id): Id<InviteId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Organization(OrgOp::People))?;
    let old = console.store.get_invite(&id).await?;
    if old.status == InviteStatus::Pending {
        console.store.delete_invite(&id).await?;
        record(&console, &posted.who, AuditAction::InviteDelete, id.as_str(), serde_json::json!({})).await;
    }
    invite_with_link(&console, &headers, &posted.who, &old.email, old.role.as_str()).await
}

pub(crate) async fn revoke_invite(
    State(console): State<Console>,
    Id(id): Id<InviteId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Organization(OrgOp::People))?;
    if let Err(err) = console.store.delete_invite(&id).await {
        return people_page(&console, &posted.who, None, Some(refusal(err)?)).await;
    }
    record(&console, &posted.who, AuditAction::InviteDelete, id.as_str(), serde_json::json!({})).await;
    Ok(see_other("/console/people"))
}

#[derive(Debug, Deserialize)]
pub(crate) struct RoleForm {
    #[serde(default)]
    role: String,
}

pub(crate) async fn change_role(
    State(console): State<Console>,
    Id(id): Id<UserId>,
    posted: Posted<RoleForm>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Organization(OrgOp::People))?;
    let role = match OrgRole::parse_or_explain("role", &posted.form.role) {
        Ok(role) => role,
        Err(e) => return people_page(&console, &posted.who, None, Some(e.0)).await,
    };
    match console.store.update_user(&id, role, Via::Console).await {
        Ok(_) => {
            record(
                &console,
                &posted.who,
                AuditAction::UserUpdate,
                id.as_str(),
                serde_json::json!({"role": role.as_str()}),
            )
            .await;
            Ok(see_other(&format!("/console/people?changed={id}")))
        }
        Err(err) => people_page(&console, &posted.who, None, Some(refusal(err)?)).await,
    }
}

pub(crate) async fn remove(
    State(console): State<Console>,
    Id(id): Id<UserId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Organization(OrgOp::People))?;
    match console.store.remove_user(&id, Via::Console).await {
        Ok(_) => {
            console.hooks.credentials_changed();
            record(&console, &posted.who, AuditAction::UserRemove, id.as_str(), serde_json::json!({})).await;
            Ok(see_other("/console/people"))
        }
        Err(err) => people_page(&console, &posted.who, None, Some(refusal(err)?)).await,
    }
}

// ---------------------------------------------------------------------------------------------
// Workspace members

#[derive(Debug)]
pub(crate) struct MemberRow {
    id: String,
    name: String,
    email: String,
    role: &'static str,
    /// An org admin's or billing member's role comes with their org role: no controls.
    implicit: bool,
}

#[derive(Debug, Template)]
#[template(path = "members.html")]
struct MembersPage {
    chrome: Chrome,
    members: Vec<MemberRow>,
    /// People who could be added: (id, "name (email)").
    others: Vec<(String, String)>,
    roles: Vec<&'static str>,
    message: Option<String>,
}

/// Roles a member may be given (never `workspace_billing`).
fn assignable() -> Vec<&'static str> {
    WorkspaceRole::ALL.iter().filter(|r| **r != WorkspaceRole::WorkspaceBilling).map(|r| r.as_str()).collect()
}

async fn members_page(console: &Console, who: &Signed, message: Option<String>) -> Result<Response, PageError> {
    let people = console.store.list_users(ListUsers { email: None, roles: vec![], page: everything() }).await?.data;
    let members = console.store.list_members(&who.workspace, everything()).await?.data;
    let person = |id: &UserId| people.iter().find(|p| p.id == *id);
    let rows = members
        .iter()
        .map(|m| {
            let p: Option<&User> = person(&m.user_id);
            MemberRow {
                id: m.user_id.to_string(),
                name: p.map(|p| p.name.clone()).unwrap_or_default(),
                email: p.map(|p| p.email.clone()).unwrap_or_default(),
                role: m.workspace_role.as_str(),
                implicit: p.is_some_and(|p| p.role == OrgRole::Admin)
                    || m.workspace_role == WorkspaceRole::WorkspaceBilling,
            }
        })
        .collect();
    let others = people
        .iter()
        .filter(|p| p.role != OrgRole::Admin && !members.iter().any(|m| m.user_id == p.id))
        .map(|p| (p.id.to_string(), format!("{} ({})", p.name, p.email)))
        .collect();
    let status = if message.is_some() { axum::http::StatusCode::BAD_REQUEST } else { axum::http::StatusCode::OK };
    Ok(render_with(
        status,
        &MembersPage { chrome: who.chrome(Section::Members), members: rows, others, roles: assignable(), message },
    ))
}

pub(crate) async fn members(State(console): State<Console>, who: Signed) -> Result<Response, PageError> {
    who.allow(Action::Workspace(WorkspaceOp::Members))?;
    members_page(&console, &who, None).await
}

#[derive(Debug, Deserialize)]
pub(crate) struct AddForm {
    #[serde(default)]
    user: String,
    #[serde(default)]
    role: String,
}

pub(crate) async fn add_member(State(console): State<Console>, posted: Posted<AddForm>) -> Result<Response, PageError> {
    let who = &posted.who;
    who.allow(Action::Workspace(WorkspaceOp::Members))?;
    let body = MemberAdd { user_id: posted.form.user.clone(), workspace_role: posted.form.role.clone() };
    match console.store.add_member(&who.workspace, body).await {
        Ok(m) => {
            let details = serde_json::json!({"workspace_role": m.workspace_role.as_str()});
            record(&console, who, AuditAction::WorkspaceMemberAdd, m.user_id.as_str(), details).await;
            Ok(see_other("/console/members"))
        }
        Err(err) => members_page(&console, who, Some(refusal(err)?)).await,
    }
}

pub(crate) async fn change_member(
    State(console): State<Console>,
    Id(id): Id<UserId>,
    posted: Posted<RoleForm>,
) -> Result<Response, PageError> {
    let who = &posted.who;
    who.allow(Action::Workspace(WorkspaceOp::Members))?;
    match console.store.update_member(&who.workspace, &id, posted.form.role.clone()).await {
        Ok(m) => {
            let details = serde_json::json!({"workspace_role": m.workspace_role.as_str()});
            record(&console, who, AuditAction::WorkspaceMemberUpdate, id.as_str(), details).await;
            Ok(see_other("/console/members"))
        }
        Err(err) => members_page(&console, who, Some(refusal(err)?)).await,
    }
}

pub(crate) async fn remove_member(
    State(console): State<Console>,
    Id(id): Id<UserId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    let who = &posted.who;
    who.allow(Action::Workspace(WorkspaceOp::Members))?;
    match console.store.remove_member(&who.workspace, &id).await {
        Ok(_) => {
            record(&console, who, AuditAction::WorkspaceMemberRemove, id.as_str(), serde_json::json!({})).await;
            Ok(see_other("/console/members"))
        }
        Err(err) => members_page(&console, who, Some(refusal(err)?)).await,
    }
}

// ---------------------------------------------------------------------------------------------
// A person's own page

#[derive(Debug, Template)]
#[template(path = "me.html")]
struct MePage {
    chrome: Chrome,
    name: String,
    email: String,
    role: &'static str,
    /// (workspace name, their role there).
    workspaces: Vec<(String, &'static str)>,
    /// Their live sessions: (began, ends, this one).
    sessions: Vec<(String, String, bool)>,
}

pub(crate) async fn me(State(console): State<Console>, headers: HeaderMap, who: Signed) -> Result<Response, PageError> {
    let Some(person) = &who.person else {
        return Err(PageError::NotFound("a sign-in with an API key has no account page; people have one".into()));
    };
    let this = crate::auth::person_of(&console, &headers).await?;
    let sessions = console
        .store
        .person_sessions(&person.id)
        .await?
        .iter()
        .map(|t| {
            let current = this.as_ref().is_some_and(|s| s.created_at == t.created_at && s.expires_at == t.expires_at);
            (when(&t.created_at), when(&t.expires_at), current)
        })
        .collect();
    let workspaces = console
        .store
        .person_workspaces(&person.id)
        .await?
        .into_iter()
        .map(|(w, role)| (w.name, role.as_str()))
        .collect();
    Ok(render(&MePage {
        chrome: who.chrome(Section::Me),
        name: person.name.clone(),
        email: person.email.clone(),
        role: person.role.as_str(),
        workspaces,
        sessions,
    }))
}

/// Ends every console session of the signed-in person, this one included.
pub(crate) async fn sign_out_everywhere(
    State(console): State<Console>,
    headers: HeaderMap,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    let Some(person) = &posted.who.person else {
        return Err(PageError::NotFound("a sign-in with an API key has no account page; people have one".into()));
    };
    console.store.sign_out_user(&person.id).await?;
    console.hooks.credentials_changed();
    record(&console, &posted.who, AuditAction::UserSignOut, person.id.as_str(), serde_json::json!({})).await;
    tracing::info!(user.id = %person.id, "signed out everywhere from the console");
    let mut response = see_other("/console/sign-in").into_response();
    response
        .headers_mut()
        .append(axum::http::header::SET_COOKIE, crate::auth::clear_session_cookie(over_tls(&console, &headers)));
    Ok(response)
}
