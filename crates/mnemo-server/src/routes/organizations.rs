//! `/v1/organizations/…`: the Admin API subset of admin-api.md §5 — the organization,
//! workspaces, API keys (with the minting extension, §8.4) and rate limits. Who may call what
//! is [`mnemo_store::rules::scope`]'s `Action::Organization` row; an admin key reaches all of it.

use std::collections::HashMap;

use axum::extract::{Path, State};
use mnemo_api::{
    API_KEY_PREFIX, AdminPage, AdminPageParams, AdminPageQuery, ApiKey, ApiKeyCreated, ApiKeyId, ApiKeyScope,
    ApiKeyStatus, ApiKeyUpdate, CursorPage, NewApiKey, Organization, RateLimit, RateLimitGroupType, RateLimitUpdate,
    Workspace, WorkspaceCreate, WorkspaceId, WorkspaceRateLimit, WorkspaceUpdate, generate_secret,
};
use mnemo_http::{BadInput, Id, Params, Query, flag};
use mnemo_store::ops::credentials::ListApiKeys;
use mnemo_store::ops::workspaces::ListWorkspaces;
use mnemo_store::rules::api_key;
use mnemo_store::rules::rate_limit::{self, Entry};
use mnemo_store::rules::scope::{Action, OrgOp};

use crate::auth::{AdminCaller, Allowed, AllowedIn, Permit, WorkspacePermit};
use crate::extract::Json;
use crate::{ApiError, AppState, hash_credential};

type Reply<T> = Result<axum::Json<T>, ApiError>;

fn invalid(e: mnemo_api::Invalid) -> ApiError {
    ApiError::invalid(e.0)
}

// The permits of the Admin API's operations (see [`Allowed`]).

/// Reading which organization this is.
pub(crate) struct ReadOrganization;

impl Permit for ReadOrganization {
    const ACTION: Action<'static> = Action::Organization(OrgOp::ReadOrganization);
}

/// Workspaces: create, read, list, update, archive.
pub(crate) struct Workspaces;

impl Permit for Workspaces {
    const ACTION: Action<'static> = Action::Organization(OrgOp::Workspaces);
}

/// API keys: mint, read, list, update (a person: of a workspace where their role manages keys).
pub(crate) struct ApiKeys;

impl WorkspacePermit for ApiKeys {
    const OP: OrgOp = OrgOp::ApiKeys;
}

/// Rate limits: read and override.
pub(crate) struct RateLimits;

impl Permit for RateLimits {
    const ACTION: Action<'static> = Action::Organization(OrgOp::RateLimits);
}

impl WorkspacePermit for RateLimits {
    const OP: OrgOp = OrgOp::RateLimits;
}

#[utoipa::path(
    get,
    path = "/v1/organizations/me",
    operation_id = "organization.retrieve",
    tag = "organization",
    summary = "The organization this server is",
    responses((status = 200, description = "OK.", body = mnemo_api::Organization)),
    security(("api_key" = []), ("api_key_bearer" = []), ("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn me(State(state): State<AppState>, _: Allowed<ReadOrganization>) -> Reply<Organization> {
    Ok(axum::Json(state.store.organization().await?))
}

// ---------------------------------------------------------------------------------------------
// Workspaces

#[utoipa::path(
    post,
    path = "/v1/organizations/workspaces",
    operation_id = "organization.workspaces.create",
    tag = "organization",
    summary = "Create a workspace",
    request_body = mnemo_api::WorkspaceCreate,
    responses((status = 200, description = "The new workspace.", body = mnemo_api::Workspace)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn create_workspace(
    State(state): State<AppState>,
    _: Allowed<Workspaces>,
    Json(body): Json<WorkspaceCreate>,
) -> Reply<Workspace> {
    let new = body.validate().map_err(invalid)?;
    let workspace = state.store.create_workspace_with(new, state.admin.max_workspaces).await?;
    tracing::info!(workspace.id = %workspace.id, "created workspace");
    Ok(axum::Json(workspace))
}

#[utoipa::path(
    get,
    path = "/v1/organizations/workspaces/{workspace_id}",
    operation_id = "organization.workspaces.retrieve",
    tag = "organization",
    summary = "Get a workspace",
    params(("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace.")),
    responses((status = 200, description = "OK.", body = mnemo_api::Workspace)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn retrieve_workspace(
    State(state): State<AppState>,
    _: Allowed<Workspaces>,
    Id(id): Id<WorkspaceId>,
) -> Reply<Workspace> {
    Ok(axum::Json(state.store.get_workspace(&id).await?))
}

#[utoipa::path(
    post,
    path = "/v1/organizations/workspaces/{workspace_id}",
    operation_id = "organization.workspaces.update",
    tag = "organization",
    summary = "Update a workspace (the Default one keeps its name)",
    params(("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace.")),
    request_body = mnemo_api::WorkspaceUpdate,
    responses((status = 200, description = "The workspace.", body = mnemo_api::Workspace)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn update_workspace(
    State(state): State<AppState>,
    _: Allowed<Workspaces>,
    Id(id): Id<WorkspaceId>,
    Json(body): Json<WorkspaceUpdate>,
) -> Reply<Workspace> {
    Ok(axum::Json(state.store.update_workspace(&id, body).await?))
}

/// The Admin API's `Page` parameters (`limit`, `after_id`, `before_id`).
pub(crate) fn page_query(q: &Params) -> Result<AdminPageQuery, ApiError> {
    let limit = q
        .one("limit")
        .map(|s| {
            s.parse::<u32>().map_err(|_| {
                ApiError::invalid(format!(
                    "limit must be between 1 and {} (got `{}`)",
                    mnemo_api::MAX_ADMIN_PAGE_LIMIT,
                    s.chars().take(20).collect::<String>()
                ))
            })
        })
        .transpose()?;
    let params = AdminPageParams {
        limit,
        after_id: q.one("after_id").map(str::to_owned),
        before_id: q.one("before_id").map(str::to_owned),
    };
    params.resolve().map_err(invalid)
}

#[utoipa::path(
    get,
    path = "/v1/organizations/workspaces",
    operation_id = "organization.workspaces.list",
    tag = "organization",
    summary = "List workspaces",
    params(
        ("ids[]" = Option<Vec<String>>, Query, description = "Only these workspaces (at most 100)."),
        ("include_archived" = Option<bool>, Query, description = "List archived ones too."),
        ("include_default" = Option<bool>, Query, description = "List the Default workspace too."),
        ("limit" = Option<u32>, Query, description = "1 to 1000, default 20."),
        ("after_id" = Option<String>, Query, description = "The page after this id."),
        ("before_id" = Option<String>, Query, description = "The page before this id."),
    ),
    responses((status = 200, description = "OK.", body = mnemo_api::AdminPage<mnemo_api::Workspace>)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn list_workspaces(
    State(state): State<AppState>,
    _: Allowed<Workspaces>,
    Query(q): Query<Params>,
) -> Reply<AdminPage<Workspace>> {
    let raw_ids = q.all(&["ids[]", "ids"]);
    if raw_ids.len() > mnemo_api::MAX_WORKSPACE_IDS_FILTER {
        return Err(ApiError::invalid(format!(
            "ids may name at most {} workspaces (got {})",
            mnemo_api::MAX_WORKSPACE_IDS_FILTER,
            raw_ids.len()
        )));
    }
    // Ids that are not workspace ids name no workspace of this organization: dropped, as others' are.
    let ids = (!raw_ids.is_empty()).then(|| raw_ids.iter().filter_map(|s| s.parse().ok()).collect());
    let query = ListWorkspaces {
        ids,
        include_archived: flag("include_archived", q.one("include_archived"))?,
        include_default: flag("include_default", q.one("include_default"))?,
        page: page_query(&q)?,
    };
    Ok(axum::Json(state.store.list_workspaces(query).await?))
}

#[utoipa::path(
    post,
    path = "/v1/organizations/workspaces/{workspace_id}/archive",
    operation_id = "organization.workspaces.archive",
    tag = "organization",
    summary = "Archive a workspace: its keys, environment keys, work and webhook deliveries end at once",
    params(("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace.")),
    responses((status = 200, description = "The archived workspace.", body = mnemo_api::Workspace)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn archive_workspace(
    State(state): State<AppState>,
    _: Allowed<Workspaces>,
    Id(id): Id<WorkspaceId>,
) -> Reply<Workspace> {
    let workspace = state.store.archive_workspace(&id).await?;
    // Its keys died: cached lookups must not outlive them (other replicas hear the store's signal).
    state.auth.forget_all();
    state.work_signal.notify_waiters();
    tracing::info!(workspace.id = %id, "archived workspace");
    Ok(axum::Json(workspace))
}

// ---------------------------------------------------------------------------------------------
// API keys

#[utoipa::path(
    post,
    path = "/v1/organizations/api_keys",
    operation_id = "organization.api_keys.create",
    tag = "organization",
    summary = "Mint an API key in a workspace (extension; the secret is shown once)",
    request_body = mnemo_api::NewApiKey,
    responses((status = 200, description = "The new key, with its secret as `key`.", body = mnemo_api::ApiKeyCreated)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn create_api_key(
    State(state): State<AppState>,
    caller: AdminCaller<ApiKeys>,
    Json(body): Json<NewApiKey>,
) -> Reply<ApiKeyCreated> {
    caller.allow_in(&state, &body.workspace_id).await?;
    body.validate(chrono::Utc::now()).map_err(invalid)?;
    let secret = generate_secret(API_KEY_PREFIX);
    let hint = api_key::partial_key_hint(&secret);
    // A person's key names them (`created_by`); an admin key's names nobody (§8.4).
    let creator = caller.person().map(ToString::to_string);
    let key = state.store.create_api_key(body, hash_credential(&secret), &hint, creator.as_deref()).await?;
    tracing::info!(api_key.id = %key.id, "created API key");
    Ok(axum::Json(ApiKeyCreated { api_key: key, key: secret.into() }))
}

#[utoipa::path(
    get,
    path = "/v1/organizations/api_keys",
    operation_id = "organization.api_keys.list",
    tag = "organization",
    summary = "List API keys",
    params(
        ("status" = Option<mnemo_api::ApiKeyStatus>, Query, description = "Only keys in this status."),
        ("workspace_id" = Option<String>, Query, description = "Only keys of this workspace."),
        ("created_by_user_id" = Option<String>, Query, description = "Only keys this person minted."),
        ("limit" = Option<u32>, Query, description = "1 to 1000, default 20."),
        ("after_id" = Option<String>, Query, description = "The page after this id."),
        ("before_id" = Option<String>, Query, description = "The page before this id."),
    ),
    responses((status = 200, description = "OK.", body = mnemo_api::AdminPage<mnemo_api::ApiKey>)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn list_api_keys(
    State(state): State<AppState>,
    caller: AdminCaller<ApiKeys>,
    Query(q): Query<Params>,
) -> Reply<AdminPage<ApiKey>> {
    let status = q
        .one("status")
        .map(|s| {
            ApiKeyStatus::parse(s).ok_or_else(|| {
                ApiError::invalid(format!(
                    "status must be one of `active`, `inactive`, `archived` or `expired` (got `{}`)",
                    s.chars().take(40).collect::<String>()
                ))
            })
        })
        .transpose()?;
    let workspace = match q.one("workspace_id") {
        None => {
            caller.allow_everywhere()?;
            None
        }
        Some(raw) => match raw.parse::<WorkspaceId>() {
            Ok(id) => {
                caller.allow_in(&state, &id).await?;
                Some(id)
            }
            // No key is in a workspace that cannot exist.
            Err(_) => return Ok(axum::Json(AdminPage::new(Vec::new(), false, |k: &ApiKey| k.id.to_string()))),
        },
    };
    let query = ListApiKeys {
        status,
        workspace,
        created_by_user_id: q.one("created_by_user_id").map(str::to_owned),
        page: page_query(&q)?,
    };
    Ok(axum::Json(state.store.list_api_keys(query).await?))
}

#[utoipa::path(
    get,
    path = "/v1/organizations/api_keys/{api_key_id}",
    operation_id = "organization.api_keys.retrieve",
    tag = "organization",
    summary = "Get an API key (never its secret)",
    params(("api_key_id" = mnemo_api::ApiKeyId, Path, description = "The API key.")),
    responses((status = 200, description = "OK.", body = mnemo_api::ApiKey)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn retrieve_api_key(
    State(state): State<AppState>,
    caller: AdminCaller<ApiKeys>,
    Id(id): Id<ApiKeyId>,
) -> Reply<ApiKey> {
    Ok(axum::Json(key_in_reach(&state, &caller, &id).await?))
}

/// API key `id`, once `caller` may manage the keys of its workspace; to a person who may not
/// see that workspace, as unknown as a key that does not exist.
async fn key_in_reach(state: &AppState, caller: &AdminCaller<ApiKeys>, id: &ApiKeyId) -> Result<ApiKey, ApiError> {
    let key = state.store.get_api_key(id).await?;
    let ApiKeyScope::Workspace { workspace_id } = &key.scope else {
        caller.allow_everywhere()?;
        return Ok(key);
    };
    match caller.allow_in(state, workspace_id).await {
        Err(e) if e.status() == 404 => Err(mnemo_store::StoreError::not_found("API key", id).into()),
        other => other.map(|()| key),
    }
}

#[utoipa::path(
    post,
    path = "/v1/organizations/api_keys/{api_key_id}",
    operation_id = "organization.api_keys.update",
    tag = "organization",
    summary = "Rename an API key or change its status (`archived` is final)",
    params(("api_key_id" = mnemo_api::ApiKeyId, Path, description = "The API key.")),
    request_body = mnemo_api::ApiKeyUpdate,
    responses((status = 200, description = "The key.", body = mnemo_api::ApiKey)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn update_api_key(
    State(state): State<AppState>,
    caller: AdminCaller<ApiKeys>,
    Id(id): Id<ApiKeyId>,
    Json(body): Json<ApiKeyUpdate>,
) -> Reply<ApiKey> {
    key_in_reach(&state, &caller, &id).await?;
    let (key, revoked) = state.store.update_api_key(&id, body).await?;
    if revoked {
        // Cached lookups must not outlive the key.
        state.auth.forget_all();
    }
    tracing::info!(api_key.id = %id, status = %key.status, "updated API key");
    Ok(axum::Json(key))
}

// ---------------------------------------------------------------------------------------------
// Rate limits

/// `items` paged by `limit` (omitted: all in one page) from the position `page` names.
fn cursor_page<T>(items: Vec<T>, q: &Params) -> Result<CursorPage<T>, ApiError> {
    let limit = match q.one("limit") {
        None => None,
        Some(s) => Some(
            s.parse::<usize>().ok().filter(|n| (1..=mnemo_api::MAX_ADMIN_PAGE_LIMIT as usize).contains(n)).ok_or_else(
                || {
                    ApiError::invalid(format!(
                        "limit must be between 1 and {} (got `{}`)",
                        mnemo_api::MAX_ADMIN_PAGE_LIMIT,
                        s.chars().take(20).collect::<String>()
                    ))
                },
            )?,
        ),
    };
    let start = match q.one("page") {
        None => 0,
        Some(p) => p
            .strip_prefix("rlpage_")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n <= items.len())
            .ok_or_else(|| ApiError::from(mnemo_store::StoreError::InvalidCursor))?,
    };
    let end = limit.map_or(items.len(), |l| (start + l).min(items.len()));
    let next_page = (end < items.len()).then(|| format!("rlpage_{end}"));
    Ok(CursorPage { data: items.into_iter().skip(start).take(end - start).collect(), next_page })
}

fn group_filter(q: &Params) -> Option<RateLimitGroupType> {
    q.one("group_type").map(RateLimitGroupType::parse)
}

#[utoipa::path(
    get,
    path = "/v1/organizations/rate_limits",
    operation_id = "organization.rate_limits.list",
    tag = "organization",
    summary = "The organization's rate-limit entries and values (`--rate-limit`)",
    params(
        ("group_type" = Option<String>, Query, description = "Only entries of this group type."),
        ("model" = Option<String>, Query, description = "Only the entry of this model (404 if none)."),
        ("limit" = Option<u32>, Query, description = "1 to 1000; omitted: all in one page."),
        ("page" = Option<String>, Query, description = "The `next_page` of the previous page."),
    ),
    responses((status = 200, description = "OK.", body = CursorPage<mnemo_api::RateLimit>)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn list_rate_limits(
    State(state): State<AppState>,
    _: Allowed<RateLimits>,
    Query(q): Query<Params>,
) -> Reply<CursorPage<RateLimit>> {
    let catalogue = &state.admin.rate_limits;
    let entries: Vec<&Entry> = match q.one("model") {
        Some(model) => vec![rate_limit::entry_for_model(catalogue, model).ok_or_else(|| {
            ApiError::not_found(format!(
                "model `{}` has no rate limit here",
                model.chars().take(64).collect::<String>()
            ))
        })?],
        None => catalogue.iter().collect(),
    };
    let group = group_filter(&q);
    let items = entries
        .into_iter()
        .filter(|e| group.as_ref().is_none_or(|g| *g == e.group.kind))
        .map(|e| rate_limit::org_view(e, &state.admin.org_limits))
        .collect();
    Ok(axum::Json(cursor_page(items, &q)?))
}

#[utoipa::path(
    get,
    path = "/v1/organizations/workspaces/{workspace_id}/rate_limits",
    operation_id = "organization.workspaces.rate_limits.list",
    tag = "organization",
    summary = "A workspace's rate limits (its overrides, or with `include_inherited` every limiter)",
    params(
        ("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace."),
        ("group_type" = Option<String>, Query, description = "Only entries of this group type."),
        ("include_inherited" = Option<bool>, Query, description = "Also limiters the workspace does not override."),
        ("limit" = Option<u32>, Query, description = "1 to 1000; omitted: all in one page."),
        ("page" = Option<String>, Query, description = "The `next_page` of the previous page."),
    ),
    responses((status = 200, description = "OK.", body = CursorPage<mnemo_api::WorkspaceRateLimit>)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn list_workspace_rate_limits(
    State(state): State<AppState>,
    _: AllowedIn<RateLimits>,
    Id(id): Id<WorkspaceId>,
    Query(q): Query<Params>,
) -> Reply<CursorPage<WorkspaceRateLimit>> {
    let include_inherited = flag("include_inherited", q.one("include_inherited"))?;
    let overrides = state.store.workspace_rate_limits(&id).await?;
    let group = group_filter(&q);
    let none = Default::default();
    let items = state
        .admin
        .rate_limits
        .iter()
        .filter(|e| group.as_ref().is_none_or(|g| *g == e.group.kind))
        .map(|e| {
            let own = overrides.get(&e.id).unwrap_or(&none);
            rate_limit::workspace_view(e, &id, own, &state.admin.org_limits, include_inherited)
        })
        .filter(|view| include_inherited || !view.limits.is_empty())
        .collect();
    Ok(axum::Json(cursor_page(items, &q)?))
}

#[utoipa::path(
    post,
    path = "/v1/organizations/workspaces/{workspace_id}/rate_limits/{rate_limit_id}",
    operation_id = "organization.workspaces.rate_limits.update",
    tag = "organization",
    summary = "Set or clear a workspace's overrides of one rate-limit entry",
    params(
        ("workspace_id" = mnemo_api::WorkspaceId, Path, description = "The workspace."),
        ("rate_limit_id" = String, Path, description = "The entry (`ratelimit_api`, …)."),
    ),
    request_body = mnemo_api::RateLimitUpdate,
    responses((status = 200, description = "The workspace's entry.", body = mnemo_api::WorkspaceRateLimit)),
    security(("admin_key" = []), ("admin_key_bearer" = [])),
)]
pub(crate) async fn update_workspace_rate_limit(
    State(state): State<AppState>,
    _: AllowedIn<RateLimits>,
    Id(id): Id<WorkspaceId>,
    Path(params): Path<HashMap<String, String>>,
    Json(body): Json<RateLimitUpdate>,
) -> Reply<WorkspaceRateLimit> {
    let entry_id = params.get("rate_limit_id").map(String::as_str).unwrap_or_default();
    let Some(entry) = state.admin.rate_limits.iter().find(|e| e.id == entry_id) else {
        return Err(ApiError::from(BadInput::NotFound { noun: "rate limit", raw: entry_id.to_owned(), code: None }));
    };
    let own = state.store.update_workspace_rate_limits(&id, entry.clone(), body).await?;
    state.rate_limiter.forget(&id);
    tracing::info!(workspace.id = %id, rate_limit.id = %entry.id, "updated workspace rate limits");
    Ok(axum::Json(rate_limit::workspace_view(entry, &id, &own, &state.admin.org_limits, false)))
}
