//! `GET /v1/openapi.json`: the API described from the code that serves it.
//!
//! Each handler carries a `#[utoipa::path]` (method, path, parameters, body, answers, the
//! credentials it accepts) and the router is built from those same annotations
//! (`utoipa_axum::routes!` in `routes::api`), so a route cannot be served without being
//! described, nor described without being served. The schemas are derived from the
//! `mnemo-api` types serde reads and writes. What no annotation says is added here once: the
//! document's header, the credential schemes, the error envelope as every operation's
//! `default` answer, and the `type` constants of tagged objects.

use std::sync::LazyLock;

use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use mnemo_api::ErrorEnvelope;
use utoipa::ToSchema;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ContentBuilder, InfoBuilder, LicenseBuilder, OpenApi, RefOr, ResponseBuilder, Tag};

/// The credential schemes, by the name operations refer to them with.
pub(crate) mod scheme {
    /// An API key in `x-api-key`.
    pub(crate) const API_KEY: &str = "api_key";
    /// An API key as `Authorization: Bearer`.
    pub(crate) const API_KEY_BEARER: &str = "api_key_bearer";
    /// An environment key as `Authorization: Bearer`.
    pub(crate) const ENVIRONMENT_KEY: &str = "environment_key";
    /// A work item's sessions token as `Authorization: Bearer`.
    pub(crate) const SESSIONS_TOKEN: &str = "sessions_token";
    /// An admin key in `x-api-key`.
    pub(crate) const ADMIN_KEY: &str = "admin_key";
    /// An admin key as `Authorization: Bearer`.
    pub(crate) const ADMIN_KEY_BEARER: &str = "admin_key_bearer";
}

/// The tags operations are grouped under, with what each covers.
const TAGS: &[(&str, &str)] = &[
    ("memory stores", "Memory stores and their settings."),
    ("memories", "Text documents addressed by path inside a store."),
    ("memory versions", "The immutable history of every memory; redaction."),
    ("memory changes", "A store's change feed (a mnemo extension)."),
    ("environments", "Self-hosted environments and their keys."),
    ("work", "An environment's work queue, as workers poll it."),
    ("agents", "Agent configurations, versioned."),
    ("sessions", "Sessions: an agent at work in an environment, with memory stores attached."),
    ("events", "A session's event log and live stream."),
    ("webhooks", "Webhook endpoints and their deliveries (a mnemo extension)."),
    (
        "organization",
        "The Admin API (admin keys only): the organization, its workspaces, API keys and rate limits, and the \
         audit log.",
    ),
    ("service", "Health and this document."),
];

/// The finished document, serialised once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| document().to_json().expect("the OpenAPI document serialises"));

/// The whole document: the router's annotations, finished.
pub fn document() -> OpenApi {
    let (_, doc) = crate::routes::api().split_for_parts();
    finish(doc)
}

fn finish(mut doc: OpenApi) -> OpenApi {
    doc.info = InfoBuilder::new()
        .title("mnemo")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "The HTTP API of `mnemo serve`: Anthropic's Managed Agents beta (memory stores, self-hosted \
             environments' work queue, agents, sessions and their events) plus mnemo's extensions (a \
             store's change feed, work queue statistics, healthcheck items). Every error answers with \
             Anthropic's error envelope; every answer carries a `request-id` header.",
        ))
        .license(Some(LicenseBuilder::new().name("Apache-2.0").identifier(Some("Apache-2.0")).build()))
        .build();
    let components = doc.components.get_or_insert_with(Default::default);
    let bearer = |what: &str| {
        let mut http = Http::new(HttpAuthScheme::Bearer);
        http.description = Some(format!("`Authorization: Bearer <secret>` with {what}."));
        SecurityScheme::Http(http)
    };
    components.add_security_scheme(
        scheme::API_KEY,
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "x-api-key",
            "An API key (`--api-key` of `mnemo serve`); it wins over `Authorization` when both are sent.",
        ))),
    );
    components.add_security_scheme(scheme::API_KEY_BEARER, bearer("an API key"));
    components.add_security_scheme(
        scheme::ADMIN_KEY,
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "x-api-key",
            "An admin key (`sk-mnemo-admin-…`: `mnemo serve --admin-key`, `mnemo admin bootstrap`), which reaches \
             the Admin API (`/v1/organizations/…`) and nothing else.",
        ))),
    );
    components.add_security_scheme(scheme::ADMIN_KEY_BEARER, bearer("an admin key"));
    components.add_security_scheme(
        scheme::ENVIRONMENT_KEY,
        bearer("an environment key (`POST /v1/environments/{environment}/keys`), which reaches that environment's work queue and sessions"),
    );
    components.add_security_scheme(
        scheme::SESSIONS_TOKEN,
        bearer(
            "a work item's sessions token (in the `secret` of a polled item), which reaches that item, its \
             session and the memory stores attached to the session, as they are attached",
        ),
    );
    // The error envelope, and what only parameters refer to (parameters do not collect
    // schemas the way bodies do).
    let mut schemas = Vec::new();
    collect::<ErrorEnvelope>(&mut schemas);
    collect::<mnemo_api::View>(&mut schemas);
    collect::<mnemo_api::Operation>(&mut schemas);
    collect::<mnemo_api::SessionStatus>(&mut schemas);
    collect::<mnemo_api::EventId>(&mut schemas);
    collect::<mnemo_api::EnvironmentKeyId>(&mut schemas);
    collect::<mnemo_api::ApiKeyId>(&mut schemas);
    collect::<mnemo_api::MemoryId>(&mut schemas);
    collect::<mnemo_api::MemoryVersionId>(&mut schemas);
    collect::<mnemo_api::AgentId>(&mut schemas);
    collect::<mnemo_api::WorkId>(&mut schemas);
    components.schemas.extend(schemas);
    mnemo_api::openapi::complete(&mut doc);

    let error = ResponseBuilder::new()
        .description(
            "An error, as Anthropic's error envelope: `invalid_request_error` (400, or 412 for a failed \
             heartbeat precondition), `authentication_error` (401), `permission_error` (403), \
             `not_found_error` (404), `conflict_error` and the memory conflict types (409), \
             `request_too_large` (413), `api_error` (500), `overloaded_error` (503/529, with \
             `retry-after`).",
        )
        .content("application/json", ContentBuilder::new().schema(Some(RefOr::Ref(ref_to("ErrorEnvelope")))).build())
        .build();
    for item in doc.paths.paths.values_mut() {
        for op in operations(item) {
            op.responses.responses.entry("default".to_owned()).or_insert_with(|| error.clone().into());
        }
    }
    doc.tags = Some(
        TAGS.iter()
            .map(|(name, about)| {
                let mut tag = Tag::new(*name);
                tag.description = Some((*about).to_owned());
                tag
            })
            .collect(),
    );
    doc
}

/// Adds `T`'s schema and every schema it refers to.
fn collect<T: ToSchema>(schemas: &mut Vec<(String, RefOr<utoipa::openapi::schema::Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}

fn ref_to(schema: &str) -> utoipa::openapi::Ref {
    utoipa::openapi::Ref::from_schema_name(schema)
}

/// Every operation of a path item.
fn operations(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.options.as_mut(),
        item.head.as_mut(),
        item.patch.as_mut(),
        item.trace.as_mut(),
    ]
    .into_iter()
    .flatten()
}

/// This document.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "service.openapi",
    tag = "service",
    summary = "This API described as OpenAPI 3.1",
    security(()),
    responses((status = 200, description = "The OpenAPI document.", content_type = "application/json", body = Object)),
)]
pub(crate) async fn serve() -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/json")], DOCUMENT.as_str())
}
