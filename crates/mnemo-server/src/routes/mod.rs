//! The route table and the helpers every resource shares.

mod agents;
mod dreams;
mod environments;
mod events;
mod memories;
mod memory_changes;
mod memory_retention;
mod memory_search;
mod memory_stores;
mod memory_versions;
mod organizations;
mod people;
mod sessions;
mod webhooks;
mod work;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::{ApiError, AppState, MAX_BODY_BYTES, request};

use mnemo_api::headers::{
    BETA_HEADER, EXTENSIONS_HEADER, MANAGED_AGENTS_BETA, MEMORY_BATCH_EXTENSION, MEMORY_BETA, MEMORY_SEARCH_EXTENSION,
    MEMORY_SEARCH_SEMANTIC_EXTENSION, MEMORY_STREAM_EXTENSION, VERSION_RETENTION_EXTENSION,
};

/// Every documented route: the API's router and its OpenAPI description, from the handlers'
/// `#[utoipa::path]` annotations (see [`crate::openapi`]).
pub(crate) fn api() -> OpenApiRouter<AppState> {
    let memory = OpenApiRouter::new()
        .routes(routes!(memory_stores::create, memory_stores::list))
        .routes(routes!(memory_stores::retrieve, memory_stores::update, memory_stores::delete))
        .routes(routes!(memory_stores::archive))
        .routes(routes!(memories::create, memories::list))
        .routes(routes!(memories::retrieve, memories::update, memories::delete))
        .routes(routes!(memories::stream))
        .routes(routes!(memories::batch))
        .routes(routes!(memory_search::in_store))
        .routes(routes!(memory_search::everywhere))
        .routes(routes!(memory_retention::retrieve, memory_retention::update))
        .routes(routes!(dreams::create, dreams::list))
        .routes(routes!(dreams::retrieve))
        .routes(routes!(dreams::cancel))
        .routes(routes!(dreams::archive))
        .routes(routes!(memory_changes::changes))
        .routes(routes!(memory_versions::list))
        .routes(routes!(memory_versions::retrieve))
        .routes(routes!(memory_versions::redact))
        .route_layer(middleware::from_fn(memory_betas));
    OpenApiRouter::new()
        .merge(memory)
        .routes(routes!(environments::create, environments::list))
        .routes(routes!(environments::retrieve, environments::update, environments::delete))
        .routes(routes!(environments::archive))
        .routes(routes!(environments::create_key, environments::list_keys))
        .routes(routes!(environments::revoke_key))
        .routes(routes!(work::list))
        .routes(routes!(work::poll))
        .routes(routes!(work::stats))
        .routes(routes!(work::healthcheck))
        .routes(routes!(work::retrieve, work::update))
        .routes(routes!(work::ack))
        .routes(routes!(work::heartbeat))
        .routes(routes!(work::stop))
        .routes(routes!(agents::create, agents::list))
        .routes(routes!(agents::retrieve, agents::update))
        .routes(routes!(agents::archive))
        .routes(routes!(sessions::create, sessions::list))
        .routes(routes!(sessions::retrieve, sessions::update, sessions::delete))
        .routes(routes!(sessions::archive))
        .routes(routes!(events::list, events::send))
        .routes(routes!(events::stream))
        .routes(routes!(webhooks::create, webhooks::list))
        .routes(routes!(webhooks::retrieve, webhooks::update, webhooks::delete))
        .routes(routes!(webhooks::secret))
        .routes(routes!(webhooks::rotate_secret))
        .routes(routes!(webhooks::deliveries))
        .routes(routes!(organizations::me))
        .routes(routes!(organizations::create_workspace, organizations::list_workspaces))
        .routes(routes!(organizations::retrieve_workspace, organizations::update_workspace))
        .routes(routes!(organizations::archive_workspace))
        .routes(routes!(organizations::list_workspace_rate_limits))
        .routes(routes!(organizations::update_workspace_rate_limit))
        .routes(routes!(organizations::create_api_key, organizations::list_api_keys))
        .routes(routes!(organizations::retrieve_api_key, organizations::update_api_key))
        .routes(routes!(organizations::list_rate_limits))
        .routes(routes!(people::list_users))
        .routes(routes!(people::retrieve_user, people::update_user, people::remove_user))
        .routes(routes!(people::sign_out_user))
        .routes(routes!(people::create_invite, people::list_invites))
        .routes(routes!(people::retrieve_invite, people::delete_invite))
        .routes(routes!(people::add_member, people::list_members))
        .routes(routes!(people::retrieve_member, people::update_member, people::remove_member))
        .routes(routes!(crate::audit::list))
        .routes(routes!(healthz))
        .routes(routes!(crate::openapi::serve))
}

pub(crate) fn router(state: AppState) -> Router {
    let console = state.console();
    let extensions = extensions_header(&state);
    let (api, _) = api().split_for_parts();
    let mut router = Router::new();
    if let Some(console) = console {
        router = router.merge(mnemo_console::router(console));
    }
    if let Some(mcp) = state.mcp.clone() {
        let checked = mcp.layer(middleware::from_fn_with_state(state.clone(), crate::auth::memory_credential));
        router = router.nest_service("/mcp", checked);
    }
    router
        .merge(api)
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        // Innermost: it needs the route matched and the caller known, and sees the answer.
        .layer(middleware::from_fn_with_state(state.clone(), crate::audit::record))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(request::check_head))
        .layer(middleware::from_fn_with_state(state.clone(), organization_header))
        .layer(middleware::from_fn(request::track))
        .layer(middleware::map_response(move |mut response: Response| {
            let value = extensions.clone();
            async move {
                response.headers_mut().insert(EXTENSIONS_HEADER, value);
                response
            }
        }))
        .with_state(state)
}

/// The extensions header every answer carries: what a client may use beyond the hosted API's
/// routes without trying first.
/// `anthropic-organization-id` on every response (admin-api.md §8.1): the organization's UUID.
async fn organization_header(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let mut response = next.run(req).await;
    if let Some(value) = state.organization_id().await.and_then(|id| HeaderValue::from_str(id).ok()) {
        response.headers_mut().insert("anthropic-organization-id", value);
    }
    response
}

fn extensions_header(state: &AppState) -> HeaderValue {
    let mut names = vec!["change-feed", MEMORY_BATCH_EXTENSION, MEMORY_SEARCH_EXTENSION, VERSION_RETENTION_EXTENSION];
    if state.memory_stream {
        names.push(MEMORY_STREAM_EXTENSION);
    }
    if state.mcp.is_some() {
        names.push("mcp");
    }
    if state.semantic.is_some() {
        names.push(MEMORY_SEARCH_SEMANTIC_EXTENSION);
    }
    HeaderValue::from_str(&names.join(", ")).expect("extension names are header-safe")
}

/// Whether the server is up.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "service.healthz",
    tag = "service",
    summary = "Liveness: answers while the server runs",
    security(()),
    responses((status = 200, description = "Up.", body = Object, example = json!({"status": "ok"}))),
)]
async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({"status": "ok"}))
}

async fn unknown_route(req: Request) -> ApiError {
    no_such_endpoint(req.method(), req.uri().path())
}

/// What a route that is not served answers.
pub(crate) fn no_such_endpoint(method: &axum::http::Method, path: &str) -> ApiError {
    ApiError::not_found(format!("no such endpoint: {method} {path}"))
}

async fn method_not_allowed(req: Request) -> Response {
    let err = ApiError::invalid(format!("{} is not allowed on {}", req.method(), req.uri().path()));
    let mut response = err.into_response();
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response
}

/// The hosted API refuses memory requests that opt into both the memory beta and the managed
/// agents beta at once; so does mnemo. Neither is required.
async fn memory_betas(headers: HeaderMap, req: Request, next: Next) -> Response {
    let betas: Vec<&str> = headers
        .get_all(BETA_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    if betas.contains(&MEMORY_BETA) && betas.contains(&MANAGED_AGENTS_BETA) {
        return ApiError::invalid(format!(
            "send either `{MEMORY_BETA}` or `{MANAGED_AGENTS_BETA}` in anthropic-beta for memory endpoints, not both"
        ))
        .into_response();
    }
    next.run(req).await
}
