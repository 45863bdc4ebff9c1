//! `/v1/environments`: create, retrieve, update, list, archive, delete — and environment keys,
//! a mnemo extension (the hosted product mints them in its console).

use axum::extract::State;
use mnemo_api::{
    CreateEnvironment, Environment, EnvironmentDeleted, EnvironmentId, EnvironmentKey, EnvironmentKeyId, Page,
    UpdateEnvironment, config_type, generate_secret, validate_metadata, validate_store_description,
    validate_store_name,
};
use mnemo_http::{ArchivablePaging, Id, Query};
use mnemo_store::{EnvironmentPatch, NewEnvironment};
use serde_json::Value;

use crate::auth::ApiKeyCaller;
use crate::extract::Json;
use crate::{ApiError, AppState, hash_credential};

type Reply<T> = Result<axum::Json<T>, ApiError>;

use mnemo_api::ENVIRONMENT_KEY_PREFIX;

fn invalid(e: mnemo_api::Invalid) -> ApiError {
    ApiError::invalid(e.0)
}

fn check_config(config: &Value) -> Result<(), ApiError> {
    match config_type(config) {
        Some("self_hosted" | "cloud") => Ok(()),
        Some(other) => Err(ApiError::invalid(format!("config.type must be `self_hosted` or `cloud` (got `{other}`)"))),
        None => Err(ApiError::invalid("config must be an object with a `type` (`self_hosted` or `cloud`)")),
    }
}

fn check_scope(scope: Option<&str>) -> Result<(), ApiError> {
    match scope {
        None | Some("organization" | "account") => Ok(()),
        Some(other) => Err(ApiError::invalid(format!("scope must be `organization` or `account` (got `{other}`)"))),
    }
}

#[utoipa::path(
    post,
    path = "/v1/environments",
    operation_id = "environments.create",
    tag = "environments",
    summary = "Create an environment",
    request_body = mnemo_api::CreateEnvironment,
    responses((status = 200, description = "The new environment.", body = mnemo_api::Environment)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Json(body): Json<CreateEnvironment>,
) -> Reply<Environment> {
    validate_store_name(&body.name).map_err(invalid)?;
    if let Some(d) = &body.description {
        validate_store_description(d).map_err(invalid)?;
    }
    let metadata = body.metadata.unwrap_or_default();
    validate_metadata(&metadata).map_err(|e| ApiError::invalid(e.0).with_code("invalid_metadata"))?;
    // mnemo serves self-hosted environments; that is also the default.
    let config = body.config.unwrap_or_else(|| serde_json::json!({"type": "self_hosted"}));
    check_config(&config)?;
    check_scope(body.scope.as_deref())?;
    let new = NewEnvironment {
        name: body.name,
        description: body.description,
        metadata,
        config,
        scope: Some(body.scope.unwrap_or_else(|| "organization".into())),
    };
    let env = state.store.create_environment(caller.0.workspace()?, new).await?;
    tracing::info!(environment.id = %env.id, "created environment");
    Ok(axum::Json(env))
}

#[utoipa::path(
    get,
    path = "/v1/environments/{environment}",
    operation_id = "environments.retrieve",
    tag = "environments",
    summary = "Retrieve an environment",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment.")),
    responses((status = 200, description = "OK.", body = mnemo_api::Environment)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Id(id): Id<EnvironmentId>,
) -> Reply<Environment> {
    Ok(axum::Json(state.store.get_environment(caller.0.workspace()?, &id).await?))
}

#[utoipa::path(
    post,
    path = "/v1/environments/{environment}",
    operation_id = "environments.update",
    tag = "environments",
    summary = "Update an environment",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment.")),
    request_body = mnemo_api::UpdateEnvironment,
    responses((status = 200, description = "The updated environment.", body = mnemo_api::Environment)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Id(id): Id<EnvironmentId>,
    Json(body): Json<UpdateEnvironment>,
) -> Reply<Environment> {
    if let Some(name) = &body.name {
        validate_store_name(name).map_err(invalid)?;
    }
    if let Some(Some(d)) = &body.description {
        validate_store_description(d).map_err(invalid)?;
    }
    if let Some(config) = &body.config {
        check_config(config)?;
    }
    check_scope(body.scope.as_deref())?;
    let patch = EnvironmentPatch {
        name: body.name,
        description: body.description,
        config: body.config,
        metadata: body.metadata,
        scope: body.scope,
    };
    Ok(axum::Json(state.store.update_environment(caller.0.workspace()?, &id, patch).await?))
}

#[utoipa::path(
    get,
    path = "/v1/environments",
    operation_id = "environments.list",
    tag = "environments",
    summary = "List environments",
    params(ArchivablePaging),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::Environment>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Query(q): Query<ArchivablePaging>,
) -> Reply<Page<Environment>> {
    Ok(axum::Json(mnemo_http::page(
        state.store.list_environments(caller.0.workspace()?, q.include_archived, q.limit, q.after).await?,
    )))
}

#[utoipa::path(
    post,
    path = "/v1/environments/{environment}/archive",
    operation_id = "environments.archive",
    tag = "environments",
    summary = "Archive an environment",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment.")),
    responses((status = 200, description = "The archived environment.", body = mnemo_api::Environment)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn archive(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Id(id): Id<EnvironmentId>,
) -> Reply<Environment> {
    let env = state.store.archive_environment(caller.0.workspace()?, &id).await?;
    tracing::info!(environment.id = %env.id, "archived environment");
    Ok(axum::Json(env))
}

#[utoipa::path(
    delete,
    path = "/v1/environments/{environment}",
    operation_id = "environments.delete",
    tag = "environments",
    summary = "Delete an environment",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment.")),
    responses((status = 200, description = "OK.", body = mnemo_api::EnvironmentDeleted)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Id(id): Id<EnvironmentId>,
) -> Reply<EnvironmentDeleted> {
    state.store.delete_environment(caller.0.workspace()?, &id).await?;
    state.auth.forget_all();
    tracing::info!(environment.id = %id, "deleted environment");
    Ok(axum::Json(EnvironmentDeleted { id }))
}

/// Mints a key; the answer is the only place the secret ever appears.
#[utoipa::path(
    post,
    path = "/v1/environments/{environment}/keys",
    operation_id = "environments.create_key",
    tag = "environments",
    summary = "Create an environment key (its secret is shown once)",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment.")),
    responses((status = 200, description = "The new key, with its `secret`.", body = mnemo_api::EnvironmentKey)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn create_key(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Id(id): Id<EnvironmentId>,
) -> Reply<EnvironmentKey> {
    let secret = generate_secret(ENVIRONMENT_KEY_PREFIX);
    let mut key = state.store.create_environment_key(caller.0.workspace()?, &id, hash_credential(&secret)).await?;
    tracing::info!(environment.id = %id, environment_key.id = %key.id, "created environment key");
    key.key = Some(secret.into());
    Ok(axum::Json(key))
}

#[utoipa::path(
    get,
    path = "/v1/environments/{environment}/keys",
    operation_id = "environments.list_keys",
    tag = "environments",
    summary = "List an environment's keys (never their secrets)",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment.")),
    responses((status = 200, description = "OK.", body = mnemo_api::Page<mnemo_api::EnvironmentKey>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list_keys(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Id(id): Id<EnvironmentId>,
) -> Reply<Page<EnvironmentKey>> {
    let keys = state.store.list_environment_keys(caller.0.workspace()?, &id).await?;
    Ok(axum::Json(Page { data: keys, next_page: None }))
}

#[utoipa::path(
    post,
    path = "/v1/environments/{environment}/keys/{key}/revoke",
    operation_id = "environments.revoke_key",
    tag = "environments",
    summary = "Revoke an environment key",
    params(("environment" = mnemo_api::EnvironmentId, Path, description = "The environment."), ("key" = mnemo_api::EnvironmentKeyId, Path, description = "The environment key.")),
    responses((status = 200, description = "The revoked key.", body = mnemo_api::EnvironmentKey)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn revoke_key(
    State(state): State<AppState>,
    caller: ApiKeyCaller,
    Id(env): Id<EnvironmentId>,
    Id(key_id): Id<EnvironmentKeyId>,
) -> Reply<EnvironmentKey> {
    let key = state.store.revoke_environment_key(caller.0.workspace()?, &env, &key_id).await?;
    // Cached lookups must not outlive the revocation.
    state.auth.forget_all();
    tracing::info!(environment.id = %env, environment_key.id = %key_id, "revoked environment key");
    Ok(axum::Json(key))
}
