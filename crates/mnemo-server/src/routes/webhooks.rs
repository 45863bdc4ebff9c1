//! `/v1/webhook_endpoints`: where `mnemo serve` POSTs webhook events, and what became of each
//! delivery — a mnemo extension (the hosted product registers endpoints in its console). API
//! keys only. The signing secret is shown on creation and can be read again at
//! `GET /v1/webhook_endpoints/{endpoint}/secret` (an integrator configuring a receiver needs
//! it); retrievals and listings never carry it.

use axum::extract::State;
use mnemo_api::{
    CreateWebhookEndpoint, DEFAULT_KEEP_PREVIOUS_SECRET_SECONDS, DeliveryStatus, MAX_KEEP_PREVIOUS_SECRET_SECONDS,
    Page, RotateWebhookSecret, UpdateWebhookEndpoint, WebhookDelivery, WebhookEndpoint, WebhookEndpointDeleted,
    WebhookEndpointId, generate_webhook_secret, parse_event_types, parse_webhook_url, validate_webhook_description,
};
use mnemo_http::{BadInput, FromQuery, Id, Paging, Params, Query};
use mnemo_store::{ListWebhookDeliveries, NewWebhookEndpoint, WebhookEndpointPatch};

use crate::auth::ApiKeyCaller;
use crate::extract::Json;
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
    caller: ApiKeyCaller,
    Json(body): Json<CreateWebhookEndpoint>,
) -> Reply<WebhookEndpoint> {
    let url = target_url(&state, &body.url)?;
    let event_types = body.event_types.as_deref().map(parse_event_types).transpose().map_err(invalid)?;
    let new = NewWebhookEndpoint {
        url,
        event_types,
        description: description(body.description)?,
        secret: generate_webhook_secret().into(),
    };
    let endpoint = state.store.create_webhook_endpoint(caller.0.workspace()?, new).await?;
    tracing::info!(webhook_endpoint.id = %endpoint.id, "registered webhook endpoint");
    Ok(axum::Json(endpoint))
}

#[utoipa::path(
    get,
    path = "/v1/webhook_endpoints",
    operation_id = "webhook_endpoints.list",
    tag = "webhooks",
    summary = "List webhook endpoints, newest first (never their secrets)",
    params(Paging),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::WebhookEndpoint>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Query(paging): Query<Paging>,
) -> Reply<Page<WebhookEndpoint>> {
    Ok(axum::Json(mnemo_http::page(
        state.store.list_webhook_endpoints(caller.0.workspace()?, paging.limit, paging.after).await?,
    )))
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
    caller: ApiKeyCaller,
    Id(id): Id<WebhookEndpointId>,
) -> Reply<WebhookEndpoint> {
    Ok(axum::Json(state.store.get_webhook_endpoint(caller.0.workspace()?, &id, false).await?))
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
    caller: ApiKeyCaller,
    Id(id): Id<WebhookEndpointId>,
) -> Reply<WebhookEndpoint> {
    let endpoint = state.store.get_webhook_endpoint(caller.0.workspace()?, &id, true).await?;
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
    caller: ApiKeyCaller,
    Id(id): Id<WebhookEndpointId>,
    Json(body): Json<RotateWebhookSecret>,
) -> Reply<WebhookEndpoint> {
    let keep = body.keep_previous_seconds.unwrap_or(DEFAULT_KEEP_PREVIOUS_SECRET_SECONDS);
    if keep > MAX_KEEP_PREVIOUS_SECRET_SECONDS {
        return Err(ApiError::invalid(format!(
            "keep_previous_seconds must be from 0 to {MAX_KEEP_PREVIOUS_SECRET_SECONDS} (got {keep})"
        )));
    }
    let endpoint = state
        .store
        .rotate_webhook_secret(
            caller.0.workspace()?,
            &id,
            generate_webhook_secret(),
            std::time::Duration::from_secs(keep),
        )
        .await?;
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
    caller: ApiKeyCaller,
    Id(id): Id<WebhookEndpointId>,
    Json(body): Json<UpdateWebhookEndpoint>,
) -> Reply<WebhookEndpoint> {
    let patch = WebhookEndpointPatch {
        url: body.url.as_deref().map(|raw| target_url(&state, raw)).transpose()?,
        event_types: body
            .event_types
            .map(|types| types.as_deref().map(parse_event_types).transpose())
            .transpose()
            .map_err(invalid)?,
        description: body.description.map(description).transpose()?,
    };
    let endpoint = state.store.update_webhook_endpoint(caller.0.workspace()?, &id, patch).await?;
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
    caller: ApiKeyCaller,
    Id(id): Id<WebhookEndpointId>,
) -> Reply<WebhookEndpointDeleted> {
    state.store.delete_webhook_endpoint(caller.0.workspace()?, &id).await?;
    tracing::info!(webhook_endpoint.id = %id, "removed webhook endpoint");
    Ok(axum::Json(WebhookEndpointDeleted { id }))
}

#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeliveryFilter {
    /// Only deliveries in this state.
    #[param(value_type = Option<mnemo_api::DeliveryStatus>)]
    status: Option<DeliveryStatus>,
}

impl FromQuery for DeliveryFilter {
    const ONCE: &'static [&'static str] = &["status"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let status = q
            .one("status")
            .map(|s| {
                DeliveryStatus::parse(s).ok_or_else(|| {
                    BadInput::Invalid(format!("status must be `pending`, `delivered` or `failed` (got `{s}`)"))
                })
            })
            .transpose()?;
        Ok(Self { status })
    }
}

#[utoipa::path(
    get,
    path = "/v1/webhook_endpoints/{endpoint}/deliveries",
    operation_id = "webhook_endpoints.deliveries",
    tag = "webhooks",
    summary = "List an endpoint's deliveries, newest first: status, attempts, last answer or error, next attempt",
    params(("endpoint" = mnemo_api::WebhookEndpointId, Path, description = "The endpoint."), Paging, DeliveryFilter),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::WebhookDelivery>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn deliveries(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Id(id): Id<WebhookEndpointId>,
    Query(f): Query<DeliveryFilter>,
    Query(paging): Query<Paging>,
) -> Reply<Page<WebhookDelivery>> {
    let query = ListWebhookDeliveries { status: f.status, limit: paging.limit, after: paging.after };
    Ok(axum::Json(mnemo_http::page(state.store.list_webhook_deliveries(caller.0.workspace()?, &id, query).await?)))
}
