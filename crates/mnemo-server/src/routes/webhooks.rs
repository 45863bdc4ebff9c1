//! `/v1/webhook_endpoints`: where `mnemo serve` POSTs webhook events, and what became of each
//! delivery — a mnemo extension (the hosted product registers endpoints in its console). API
//! keys only. The signing secret is shown on creation and can be read again at
//! `GET /v1/webhook_endpoints/{endpoint}/secret` (an integrator configuring a receiver needs
//! it); retrievals and listings never carry it.

use axum::extract::{Path, State};
use mnemo_api::{
    CreateWebhookEndpoint, DEFAULT_KEEP_PREVIOUS_SECRET_SECONDS, DeliveryStatus, MAX_KEEP_PREVIOUS_SECRET_SECONDS,
    Page, RotateWebhookSecret, UpdateWebhookEndpoint, View, WebhookDelivery, WebhookEndpoint, WebhookEndpointDeleted,
    WebhookEndpointId, generate_webhook_secret, parse_event_types, parse_webhook_url, validate_webhook_description,
};
use mnemo_store::{ListWebhookDeliveries, NewWebhookEndpoint, WebhookEndpointPatch};
use serde::Deserialize;

use super::{page_cursor, page_limit, path_id};
use crate::auth::ApiKeyCaller;
use crate::extract::{Json, Query};
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

fn invalid(e: mnemo_api::Invalid) -> ApiError {
    ApiError::invalid(e.0)
}

/// A webhook URL as registered: well-formed (`parse_webhook_url`), and — unless the server
/// allows private targets — not a literal private address or a local name. Other names are
/// judged when a delivery connects (see `crate::outbound`).
fn target_url(state: &AppState, raw: &str) -> Result<String, ApiError> {
    let url = parse_webhook_url(raw).map_err(invalid)?;
    let parsed = reqwest::Url::parse(&url).map_err(|e| ApiError::invalid(format!("url does not parse: {e}")))?;
    state.webhook_targets.check_url(&parsed).map_err(|refused| ApiError::invalid(refused.to_string()))?;
    Ok(url)
}

fn endpoint_id(raw: &str) -> Result<WebhookEndpointId, ApiError> {
    path_id("webhook endpoint", raw)
}

fn description(d: Option<String>) -> Result<Option<String>, ApiError> {
    match d {
        Some(d) if !d.is_empty() => {
            validate_webhook_description(&d).map_err(invalid)?;
            Ok(Some(d))
        }
        _ => Ok(None),
    }
}

#[utoipa::path(
    post,
    path = "/v1/webhook_endpoints",
    operation_id = "webhook_endpoints.create",
    tag = "webhooks",
    summary = "Register a webhook endpoint (its signing secret is in the answer)",
    request_body = mnemo_api::CreateWebhookEndpoint,
    responses((status = 200, description = "The new endpoint, with its `secret`.", body = mnemo_api::WebhookEndpoint)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Json(body): Json<CreateWebhookEndpoint>,
) -> Reply<WebhookEndpoint> {
    let url = target_url(&state, &body.url)?;
    let event_types = body.event_types.as_deref().map(parse_event_types).transpose().map_err(invalid)?;
    let new = NewWebhookEndpoint {
        url,
        event_types,
        description: description(body.description)?,
        secret: generate_webhook_secret(),
    };
    let endpoint = state.store.create_webhook_endpoint(new).await?;
    tracing::info!(webhook_endpoint.id = %endpoint.id, "registered webhook endpoint");
    Ok(axum::Json(endpoint))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListParams {
    /// Page size, 1–100 (default 20).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    limit: Option<String>,
    /// The `next_page` of the previous page.
    page: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/webhook_endpoints",
    operation_id = "webhook_endpoints.list",
    tag = "webhooks",
    summary = "List webhook endpoints, newest first (never their secrets)",
    params(ListParams),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::WebhookEndpoint>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Query(q): Query<ListParams>,
) -> Reply<Page<WebhookEndpoint>> {
    let listing = state
        .store
        .list_webhook_endpoints(page_limit(q.limit.as_deref(), View::Basic)?, page_cursor(q.page.as_deref())?)
        .await?;
    Ok(axum::Json(Page { data: listing.items, next_page: listing.next.map(|c| c.encode()) }))
}

#[utoipa::path(
    get,
    path = "/v1/webhook_endpoints/{endpoint}",
    operation_id = "webhook_endpoints.retrieve",
    tag = "webhooks",
    summary = "Retrieve a webhook endpoint (without its secret)",
    params(("endpoint" = mnemo_api::WebhookEndpointId, Path, description = "The endpoint.")),
    responses((status = 200, description = "OK.", body = mnemo_api::WebhookEndpoint)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Path(id): Path<String>,
) -> Reply<WebhookEndpoint> {
    Ok(axum::Json(state.store.get_webhook_endpoint(&endpoint_id(&id)?, false).await?))
}

#[utoipa::path(
    get,
    path = "/v1/webhook_endpoints/{endpoint}/secret",
    operation_id = "webhook_endpoints.secret",
    tag = "webhooks",
    summary = "Retrieve a webhook endpoint with its signing secret",
    params(("endpoint" = mnemo_api::WebhookEndpointId, Path, description = "The endpoint.")),
    responses((status = 200, description = "The endpoint, with its `secret`.", body = mnemo_api::WebhookEndpoint)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn secret(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Path(id): Path<String>,
) -> Reply<WebhookEndpoint> {
    let endpoint = state.store.get_webhook_endpoint(&endpoint_id(&id)?, true).await?;
    tracing::info!(webhook_endpoint.id = %endpoint.id, "read webhook signing secret");
    Ok(axum::Json(endpoint))
}

#[utoipa::path(
    post,
    path = "/v1/webhook_endpoints/{endpoint}/rotate_secret",
    operation_id = "webhook_endpoints.rotate_secret",
    tag = "webhooks",
    summary = "Replace an endpoint's signing secret; the old one keeps signing beside it for a while",
    params(("endpoint" = mnemo_api::WebhookEndpointId, Path, description = "The endpoint.")),
    request_body = mnemo_api::RotateWebhookSecret,
    responses((status = 200, description = "The endpoint, with its new `secret`.", body = mnemo_api::WebhookEndpoint)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn rotate_secret(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Path(id): Path<String>,
    Json(body): Json<RotateWebhookSecret>,
) -> Reply<WebhookEndpoint> {
    let id = endpoint_id(&id)?;
    let keep = body.keep_previous_seconds.unwrap_or(DEFAULT_KEEP_PREVIOUS_SECRET_SECONDS);
    if keep > MAX_KEEP_PREVIOUS_SECRET_SECONDS {
        return Err(ApiError::invalid(format!(
            "keep_previous_seconds must be from 0 to {MAX_KEEP_PREVIOUS_SECRET_SECONDS} (got {keep})"
        )));
    }
    let endpoint =
        state.store.rotate_webhook_secret(&id, generate_webhook_secret(), std::time::Duration::from_secs(keep)).await?;
    tracing::info!(webhook_endpoint.id = %endpoint.id, keep_previous_seconds = keep, "rotated webhook signing secret");
    Ok(axum::Json(endpoint))
}

#[utoipa::path(
    post,
    path = "/v1/webhook_endpoints/{endpoint}",
    operation_id = "webhook_endpoints.update",
    tag = "webhooks",
    summary = "Update a webhook endpoint's URL, event types or description",
    params(("endpoint" = mnemo_api::WebhookEndpointId, Path, description = "The endpoint.")),
    request_body = mnemo_api::UpdateWebhookEndpoint,
    responses((status = 200, description = "The updated endpoint.", body = mnemo_api::WebhookEndpoint)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Path(id): Path<String>,
    Json(body): Json<UpdateWebhookEndpoint>,
) -> Reply<WebhookEndpoint> {
    let id = endpoint_id(&id)?;
    let patch = WebhookEndpointPatch {
        url: body.url.as_deref().map(|raw| target_url(&state, raw)).transpose()?,
        event_types: body
            .event_types
            .map(|types| types.as_deref().map(parse_event_types).transpose())
            .transpose()
            .map_err(invalid)?,
        description: body.description.map(description).transpose()?,
    };
    let endpoint = state.store.update_webhook_endpoint(&id, patch).await?;
    tracing::info!(webhook_endpoint.id = %endpoint.id, "updated webhook endpoint");
    Ok(axum::Json(endpoint))
}

#[utoipa::path(
    delete,
    path = "/v1/webhook_endpoints/{endpoint}",
    operation_id = "webhook_endpoints.delete",
    tag = "webhooks",
    summary = "Remove a webhook endpoint and its deliveries (pending ones are never sent)",
    params(("endpoint" = mnemo_api::WebhookEndpointId, Path, description = "The endpoint.")),
    responses((status = 200, description = "OK.", body = mnemo_api::WebhookEndpointDeleted)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Path(id): Path<String>,
) -> Reply<WebhookEndpointDeleted> {
    let id = endpoint_id(&id)?;
    state.store.delete_webhook_endpoint(&id).await?;
    tracing::info!(webhook_endpoint.id = %id, "removed webhook endpoint");
    Ok(axum::Json(WebhookEndpointDeleted { id }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeliveryParams {
    /// Page size, 1–100 (default 20).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    limit: Option<String>,
    /// The `next_page` of the previous page.
    page: Option<String>,
    /// Only deliveries in this state.
    #[param(value_type = Option<mnemo_api::DeliveryStatus>)]
    status: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/webhook_endpoints/{endpoint}/deliveries",
    operation_id = "webhook_endpoints.deliveries",
    tag = "webhooks",
    summary = "List an endpoint's deliveries, newest first: status, attempts, last answer or error, next attempt",
    params(("endpoint" = mnemo_api::WebhookEndpointId, Path, description = "The endpoint."), DeliveryParams),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::WebhookDelivery>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn deliveries(
    State(state): State<AppState>,
    _: ApiKeyCaller,
    Path(id): Path<String>,
    Query(q): Query<DeliveryParams>,
) -> Reply<Page<WebhookDelivery>> {
    let id = endpoint_id(&id)?;
    let status = q
        .status
        .as_deref()
        .map(|s| {
            DeliveryStatus::parse(s).ok_or_else(|| {
                ApiError::invalid(format!("status must be `pending`, `delivered` or `failed` (got `{s}`)"))
            })
        })
        .transpose()?;
    let query = ListWebhookDeliveries {
        status,
        limit: page_limit(q.limit.as_deref(), View::Basic)?,
        after: page_cursor(q.page.as_deref())?,
    };
    let listing = state.store.list_webhook_deliveries(&id, query).await?;
    Ok(axum::Json(Page { data: listing.items, next_page: listing.next.map(|c| c.encode()) }))
}
