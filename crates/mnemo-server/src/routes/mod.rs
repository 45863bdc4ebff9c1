//! The route table and the helpers every resource shares.

mod agents;
mod environments;
mod events;
mod memories;
mod memory_changes;
mod memory_stores;
mod memory_versions;
mod sessions;
mod webhooks;
mod work;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use mnemo_api::View;
use mnemo_api::limits::{DEFAULT_PAGE_LIMIT, MAX_FULL_VIEW_PAGE_LIMIT, MAX_PAGE_LIMIT};
use mnemo_store::Cursor;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::{ApiError, AppState, MAX_BODY_BYTES, request};

use mnemo_api::headers::{
    BETA_HEADER, EXTENSIONS_HEADER, MANAGED_AGENTS_BETA, MEMORY_BATCH_EXTENSION, MEMORY_BETA, MEMORY_STREAM_EXTENSION,
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
    router
        .merge(api)
        .fallback(unknown_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(request::check_head))
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
fn extensions_header(state: &AppState) -> HeaderValue {
    let mut names = vec!["change-feed", MEMORY_BATCH_EXTENSION];
    if state.memory_stream {
        names.push(MEMORY_STREAM_EXTENSION);
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

/// Query of the lists of archivable resources (environments, agents).
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ArchivableListParams {
    pub(crate) limit: Option<String>,
    pub(crate) page: Option<String>,
    pub(crate) include_archived: Option<String>,
}

/// Parses an id from the URL; an id that cannot exist is simply not found.
pub(crate) fn path_id<T: std::str::FromStr>(kind: &str, raw: &str) -> Result<T, ApiError> {
    raw.parse().map_err(|_| ApiError::not_found(format!("{kind} `{raw}` not found")))
}

/// `limit`: 1–100, default 20; under `view=full` silently capped at 20.
pub(crate) fn page_limit(raw: Option<&str>, view: View) -> Result<u32, ApiError> {
    let limit = match raw {
        None => DEFAULT_PAGE_LIMIT,
        Some(s) => s.parse::<u32>().ok().filter(|n| (1..=MAX_PAGE_LIMIT).contains(n)).ok_or_else(|| {
            ApiError::invalid(format!("limit must be an integer from 1 to {MAX_PAGE_LIMIT} (got `{s}`)"))
        })?,
    };
    Ok(if view == View::Full { limit.min(MAX_FULL_VIEW_PAGE_LIMIT) } else { limit })
}

/// `view`: `basic` or `full`, with a per-endpoint default.
pub(crate) fn view(raw: Option<&str>, default: View) -> Result<View, ApiError> {
    match raw {
        None => Ok(default),
        Some("basic") => Ok(View::Basic),
        Some("full") => Ok(View::Full),
        Some(other) => Err(ApiError::invalid(format!("view must be `basic` or `full` (got `{other}`)"))),
    }
}

/// `page`: a cursor handed out by a previous page.
pub(crate) fn page_cursor(raw: Option<&str>) -> Result<Option<Cursor>, ApiError> {
    raw.filter(|s| !s.is_empty()).map(Cursor::decode).transpose().map_err(ApiError::from)
}

/// A boolean query flag.
pub(crate) fn flag(name: &str, raw: Option<&str>) -> Result<bool, ApiError> {
    match raw {
        None | Some("false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(ApiError::invalid(format!("{name} must be `true` or `false` (got `{other}`)"))),
    }
}

/// An RFC 3339 timestamp filter (`Z` or an offset).
pub(crate) fn timestamp(name: &str, raw: Option<&str>) -> Result<Option<mnemo_api::Timestamp>, ApiError> {
    raw.map(|s| {
        chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| t.to_utc())
            .map_err(|e| ApiError::invalid(format!("{name} must be an RFC 3339 timestamp (got `{s}`: {e})")))
    })
    .transpose()
}

/// `name[gte]`, `name[gt]`, `name[lte]`, `name[lt]` as one inclusive range (timestamps have
/// microsecond resolution, so a strict bound is the inclusive one a microsecond inside).
pub(crate) fn time_range<'a>(
    name: &str,
    one: &impl Fn(&str) -> Option<&'a str>,
) -> Result<(Option<mnemo_api::Timestamp>, Option<mnemo_api::Timestamp>), ApiError> {
    let micro = chrono::Duration::microseconds(1);
    let get = |op: &str| {
        let key = format!("{name}[{op}]");
        timestamp(&key, one(&key))
    };
    let gte = match (get("gte")?, get("gt")?) {
        (a, Some(b)) => Some(a.map_or(b + micro, |a: mnemo_api::Timestamp| a.max(b + micro))),
        (a, None) => a,
    };
    let lte = match (get("lte")?, get("lt")?) {
        (a, Some(b)) => Some(a.map_or(b - micro, |a: mnemo_api::Timestamp| a.min(b - micro))),
        (a, None) => a,
    };
    Ok((gte, lte))
}
