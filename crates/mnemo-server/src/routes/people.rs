//! `/v1/organizations/{users,invites,workspaces/{id}/members}`: the people of admin-api.md §5
//! (#7–#19, #26). Who may call them is [`mnemo_store::rules::scope`]'s `OrgOp::People` and
//! `OrgOp::Members` rows; what a change may do is `rules::people`'s, judged in the store.

use axum::extract::State;
use axum::http::HeaderMap;
use mnemo_api::{
    AdminPage, Invite, InviteCreate, InviteCreated, InviteDeleted, InviteId, InviteStatus, MemberAdd, MemberUpdate,
    OrgRole, Secret, User, UserDeleted, UserId, UserUpdate, WorkspaceId, WorkspaceMember, WorkspaceMemberDeleted,
    generate_secret,
};
use mnemo_http::{Id, Params, Query};
use mnemo_store::ops::people::{ListInvites, ListUsers};
use mnemo_store::rules::people::Via;
use mnemo_store::rules::scope::{Action, OrgOp};

use super::organizations::page_query;
use crate::auth::{Allowed, AllowedIn, Permit, WorkspacePermit};
use crate::extract::Json;
use crate::{ApiError, AppState, hash_credential};

type Reply<T> = Result<axum::Json<T>, ApiError>;

/// The prefix of an invite link's secret (never a credential of the API: it only opens the
/// console's accept page).
pub(crate) const INVITE_SECRET_PREFIX: &str = "mnemo-invite-";

/// People and invites.
pub(crate) struct People;

impl Permit for People {
    const ACTION: Action<'static> = Action::Organization(OrgOp::People);
}

/// Workspace members (a person: of a workspace where their role manages members).
pub(crate) struct Members;

impl WorkspacePermit for Members {
    const OP: OrgOp = OrgOp::Members;
}

fn invalid(e: mnemo_api::Invalid) -> ApiError {
    ApiError::invalid(e.0)
}

/// Values of a repeatable filter (`roles[]=a&roles[]=b`, or without brackets), each parsed.
fn many<T>(
    q: &Params,
    name: &str,
    parse: impl Fn(&str, &str) -> Result<T, mnemo_api::Invalid>,
) -> Result<Vec<T>, ApiError> {
    let bracketed = format!("{name}[]");
    q.all(&[bracketed.as_str(), name]).iter().map(|raw| parse(name, raw).map_err(invalid)).collect()
}

/// The `email` filter, normalized as stored; one that cannot be an address matches nobody.
fn email_filter(q: &Params) -> Option<Option<String>> {
    q.one("email").map(|raw| mnemo_api::normalize_email(raw).ok())
}

// ---------------------------------------------------------------------------------------------
// Users

#[utoipa::path(
    get,
    path = "/v1/organizations/users",
    operation_id = "organization.users.list",
    tag = "organization",
    summary = "List the organization's people, in the order they joined",
    params(
        ("email" = Option<String>, Query, description = "Only the person with this email (case-insensitive)."),
        ("roles[]" = Option<Vec<String>>, Query, description = "Only people with one of these org roles."),
        ("limit" = Option<u32>, Query, description = "1 to 1000, default 20."),
        ("after_id" = Option<String>, Query, description = "The page after this id."),
        ("before_id" = Option<String>, Query, description = "The page before this id."),
    ),
    responses((status = 200, description = "OK.", body = mnemo_api::AdminPage<mnemo_api::User>)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn list_users(
    State(state): State<AppState>,
    _: Allowed<People>,
    Query(q): Query<Params>,
) -> Reply<AdminPage<User>> {
    let roles = many(&q, "roles", OrgRole::parse_or_explain)?;
    let page = page_query(&q)?;
    let email = match email_filter(&q) {
        Some(None) => return Ok(axum::Json(AdminPage::new(Vec::new(), false, |u: &User| u.id.to_string()))),
        Some(Some(email)) => Some(email),
        None => None,
    };
    Ok(axum::Json(state.store.list_users(ListUsers { email, roles, page }).await?))
}

#[utoipa::path(
    get,
    path = "/v1/organizations/users/{user_id}",
    operation_id = "organization.users.retrieve",
    tag = "organization",
    summary = "Get a person",
    params(("user_id" = mnemo_api::UserId, Path, description = "The person.")),
    responses((status = 200, description = "OK.", body = mnemo_api::User)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn retrieve_user(
    State(state): State<AppState>,
    _: Allowed<People>,
    Id(id): Id<UserId>,
) -> Reply<User> {
    Ok(axum::Json(state.store.get_user(&id).await?))
}

#[utoipa::path(
    post,
    path = "/v1/organizations/users/{user_id}",
    operation_id = "organization.users.update",
    tag = "organization",
    summary = "Change a person's org role (never to or from `admin` through the API)",
    params(("user_id" = mnemo_api::UserId, Path, description = "The person.")),
    request_body = mnemo_api::UserUpdate,
    responses((status = 200, description = "The person.", body = mnemo_api::User)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn update_user(
    State(state): State<AppState>,
    _: Allowed<People>,
    Id(id): Id<UserId>,
    Json(body): Json<UserUpdate>,
) -> Reply<User> {
    let role = body.validate().map_err(invalid)?;
    let user = state.store.update_user(&id, role, Via::Api).await?;
    tracing::info!(user.id = %id, role = %user.role, "changed a person's role");
    Ok(axum::Json(user))
}

#[utoipa::path(
    delete,
    path = "/v1/organizations/users/{user_id}",
    operation_id = "organization.users.remove",
    tag = "organization",
    summary = "Remove a person: their memberships and console sessions end at once (never an admin through the API)",
    params(("user_id" = mnemo_api::UserId, Path, description = "The person.")),
    responses((status = 200, description = "Removed.", body = mnemo_api::UserDeleted)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn remove_user(
    State(state): State<AppState>,
    _: Allowed<People>,
    Id(id): Id<UserId>,
) -> Reply<UserDeleted> {
    let removed = state.store.remove_user(&id, Via::Api).await?;
    // Their console sessions died with them: nothing remembered may outlive them.
    state.auth.forget_all();
    tracing::info!(user.id = %id, "removed a person");
    Ok(axum::Json(removed))
}

#[utoipa::path(
    post,
    path = "/v1/organizations/users/{user_id}/sign_out",
    operation_id = "organization.users.sign_out",
    tag = "organization",
    summary = "End every console session of a person (they keep their role and their API keys)",
    params(("user_id" = mnemo_api::UserId, Path, description = "The person.")),
    responses((status = 200, description = "The person.", body = mnemo_api::User)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn sign_out_user(
    State(state): State<AppState>,
    _: Allowed<People>,
    Id(id): Id<UserId>,
) -> Reply<User> {
    let user = state.store.sign_out_user(&id).await?;
    state.auth.forget_all();
    tracing::info!(user.id = %id, "signed a person out everywhere");
    Ok(axum::Json(user))
}

// ---------------------------------------------------------------------------------------------
// Invites

/// Where the console of this server is reached: `--public-url`, else the address the caller
/// used (its `Host`, over TLS when a proxy says `x-forwarded-proto: https`).
fn console_base(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.admin.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
    let tls = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').next().is_some_and(|p| p.trim().eq_ignore_ascii_case("https")));
    format!("{}://{host}", if tls { "https" } else { "http" })
}

#[utoipa::path(
    post,
    path = "/v1/organizations/invites",
    operation_id = "organization.invites.create",
    tag = "organization",
    summary = "Invite a person (no mail is sent: hand them `accept_url`, shown in this answer only)",
    request_body = mnemo_api::InviteCreate,
    responses((status = 200, description = "The invite, with its `accept_url` (extension).", body = mnemo_api::InviteCreated)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn create_invite(
    State(state): State<AppState>,
    _: Allowed<People>,
    headers: HeaderMap,
    Json(body): Json<InviteCreate>,
) -> Reply<InviteCreated> {
    let new = body.validate().map_err(invalid)?;
    let secret = generate_secret(INVITE_SECRET_PREFIX);
    let invite = state.store.create_invite(new, hash_credential(&secret), state.admin.invite_ttl_secs).await?;
    tracing::info!(invite.id = %invite.id, role = %invite.role, "created an invite");
    let accept_url = Secret::new(format!("{}/console/invite/{secret}", console_base(&state, &headers)));
    Ok(axum::Json(InviteCreated { invite, accept_url }))
}

#[utoipa::path(
    get,
    path = "/v1/organizations/invites",
    operation_id = "organization.invites.list",
    tag = "organization",
    summary = "List invites (pending, accepted and expired unless `statuses[]` says otherwise)",
    params(
        ("email" = Option<String>, Query, description = "Only invites for this email (case-insensitive)."),
        ("roles[]" = Option<Vec<String>>, Query, description = "Only invites with one of these roles."),
        ("statuses[]" = Option<Vec<String>>, Query, description = "Only invites in one of these statuses."),
        ("limit" = Option<u32>, Query, description = "1 to 1000, default 20."),
        ("after_id" = Option<String>, Query, description = "The page after this id."),
        ("before_id" = Option<String>, Query, description = "The page before this id."),
    ),
    responses((status = 200, description = "OK.", body = mnemo_api::AdminPage<mnemo_api::Invite>)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn list_invites(
    State(state): State<AppState>,
    _: Allowed<People>,
    Query(q): Query<Params>,
) -> Reply<AdminPage<Invite>> {
    let roles = many(&q, "roles", OrgRole::parse_or_explain)?;
    let statuses = many(&q, "statuses", InviteStatus::parse_or_explain)?;
    let page = page_query(&q)?;
    let email = match email_filter(&q) {
        Some(None) => return Ok(axum::Json(AdminPage::new(Vec::new(), false, |i: &Invite| i.id.to_string()))),
        Some(Some(email)) => Some(email),
        None => None,
    };
    Ok(axum::Json(state.store.list_invites(ListInvites { email, roles, statuses, page }).await?))
}

#[utoipa::path(
    get,
    path = "/v1/organizations/invites/{invite_id}",
    operation_id = "organization.invites.retrieve",
    tag = "organization",
    summary = "Get an invite (never its link)",
    params(("invite_id" = mnemo_api::InviteId, Path, description = "The invite.")),
    responses((status = 200, description = "OK.", body = mnemo_api::Invite)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn retrieve_invite(
    State(state): State<AppState>,
    _: Allowed<People>,
    Id(id): Id<InviteId>,
) -> Reply<Invite> {
    Ok(axum::Json(state.store.get_invite(&id).await?))
}

#[utoipa::path(
    delete,
    path = "/v1/organizations/invites/{invite_id}",
    operation_id = "organization.invites.delete",
    tag = "organization",
    summary = "Delete a pending invite: its link stops working",
    params(("invite_id" = mnemo_api::InviteId, Path, description = "The invite.")),
    responses((status = 200, description = "Deleted.", body = mnemo_api::InviteDeleted)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn delete_invite(
    State(state): State<AppState>,
    _: Allowed<People>,
    Id(id): Id<InviteId>,
) -> Reply<InviteDeleted> {
    let deleted = state.store.delete_invite(&id).await?;
    tracing::info!(invite.id = %id, "deleted an invite");
    Ok(axum::Json(deleted))
}

// ---------------------------------------------------------------------------------------------
// Workspace members

#[utoipa::path(
    post,
    path = "/v1/organizations/workspaces/{workspace_id}/members",
    operation_id = "organization.workspaces.members.add",
    tag = "organization",
    summary = "Add a person to a workspace (not as `workspace_billing`; org admins are members everywhere)",
    params(("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace.")),
    request_body = mnemo_api::MemberAdd,
    responses((status = 200, description = "The member.", body = mnemo_api::WorkspaceMember)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn add_member(
    State(state): State<AppState>,
    _: AllowedIn<Members>,
    Id(ws): Id<WorkspaceId>,
    Json(body): Json<MemberAdd>,
) -> Reply<WorkspaceMember> {
    let member = state.store.add_member(&ws, body).await?;
    tracing::info!(workspace.id = %ws, user.id = %member.user_id, "added a workspace member");
    Ok(axum::Json(member))
}

#[utoipa::path(
    get,
    path = "/v1/organizations/workspaces/{workspace_id}/members",
    operation_id = "organization.workspaces.members.list",
    tag = "organization",
    summary = "List a workspace's members, org admins and billing members included",
    params(
        ("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace."),
        ("limit" = Option<u32>, Query, description = "1 to 1000, default 20."),
        ("after_id" = Option<String>, Query, description = "The page after this user id."),
        ("before_id" = Option<String>, Query, description = "The page before this user id."),
    ),
    responses((status = 200, description = "OK.", body = mnemo_api::AdminPage<mnemo_api::WorkspaceMember>)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn list_members(
    State(state): State<AppState>,
    _: AllowedIn<Members>,
    Id(ws): Id<WorkspaceId>,
    Query(q): Query<Params>,
) -> Reply<AdminPage<WorkspaceMember>> {
    let page = page_query(&q)?;
    Ok(axum::Json(state.store.list_members(&ws, page).await?))
}

#[utoipa::path(
    get,
    path = "/v1/organizations/workspaces/{workspace_id}/members/{user_id}",
    operation_id = "organization.workspaces.members.retrieve",
    tag = "organization",
    summary = "Get a person's role in a workspace",
    params(
        ("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace."),
        ("user_id" = mnemo_api::UserId, Path, description = "The person."),
    ),
    responses((status = 200, description = "OK.", body = mnemo_api::WorkspaceMember)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn retrieve_member(
    State(state): State<AppState>,
    _: AllowedIn<Members>,
    Id(ws): Id<WorkspaceId>,
    Id(user): Id<UserId>,
) -> Reply<WorkspaceMember> {
    Ok(axum::Json(state.store.get_member(&ws, &user).await?))
}

#[utoipa::path(
    post,
    path = "/v1/organizations/workspaces/{workspace_id}/members/{user_id}",
    operation_id = "organization.workspaces.members.update",
    tag = "organization",
    summary = "Change a member's workspace role",
    params(
        ("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace."),
        ("user_id" = mnemo_api::UserId, Path, description = "The person."),
    ),
    request_body = mnemo_api::MemberUpdate,
    responses((status = 200, description = "The member.", body = mnemo_api::WorkspaceMember)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn update_member(
    State(state): State<AppState>,
    _: AllowedIn<Members>,
    Id(ws): Id<WorkspaceId>,
    Id(user): Id<UserId>,
    Json(body): Json<MemberUpdate>,
) -> Reply<WorkspaceMember> {
    let member = state.store.update_member(&ws, &user, body.workspace_role).await?;
    tracing::info!(workspace.id = %ws, user.id = %user, role = %member.workspace_role, "changed a member's role");
    Ok(axum::Json(member))
}

#[utoipa::path(
    delete,
    path = "/v1/organizations/workspaces/{workspace_id}/members/{user_id}",
    operation_id = "organization.workspaces.members.remove",
    tag = "organization",
    summary = "Remove a person from a workspace (not an org admin, nor billing's implicit role)",
    params(
        ("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace."),
        ("user_id" = mnemo_api::UserId, Path, description = "The person."),
    ),
    responses((status = 200, description = "Removed.", body = mnemo_api::WorkspaceMemberDeleted)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn remove_member(
    State(state): State<AppState>,
    _: AllowedIn<Members>,
    Id(ws): Id<WorkspaceId>,
    Id(user): Id<UserId>,
) -> Reply<WorkspaceMemberDeleted> {
    let removed = state.store.remove_member(&ws, &user).await?;
    tracing::info!(workspace.id = %ws, user.id = %user, "removed a workspace member");
    Ok(axum::Json(removed))
}
