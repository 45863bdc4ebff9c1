//! A store's version retention (a mnemo extension, `version-retention` in the
//! `mnemo-extensions` header): `GET` and `POST /v1/memory_stores/{store}/version_retention`.
//! What a window means and which versions a purge deletes are
//! [`mnemo_store::rules::retention`]'s; the purge itself runs in the background
//! ([`crate::maintenance::purge_expired_versions`]).

use axum::extract::State;
use mnemo_api::{MemoryStoreId, SetVersionRetention, VersionRetention};
use mnemo_http::Id;
use mnemo_store::rules::retention::{self, Retention};

use crate::auth::MemoryCaller;
use crate::extract::Json;
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

fn view(state: &AppState, store: MemoryStoreId, own: Option<Retention>) -> VersionRetention {
    let server = state.version_retention;
    VersionRetention {
        memory_store_id: store,
        retention: own.map(|r| r.to_string()),
        server_default: server.to_string(),
        effective: retention::effective(server, own).to_string(),
    }
}

/// A store's version retention.
#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/version_retention",
    operation_id = "memory_stores.version_retention.retrieve",
    tag = "memory_stores",
    summary = "How long a store keeps its memories' versions (a mnemo extension)",
    description = "A mnemo extension (`version-retention` in the `mnemo-extensions` header). `retention` is the store's own window (`30d`, `12h`, `45m`, `90s`) or `forever`, null when it follows the server's `--version-retention` (`server_default`, `forever` unless set); `effective` is what applies. Versions older than `effective` are purged in the background, in small batches, except each live memory's newest version; a deleted memory's versions go as each ages out.",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store.")),
    responses((status = 200, description = "OK.", body = mnemo_api::VersionRetention)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Id(store): Id<MemoryStoreId>,
) -> Reply<VersionRetention> {
    let own = state.store.store_retention(caller.workspace()?, &store).await?;
    Ok(axum::Json(view(&state, store, own)))
}

/// Sets a store's version retention.
#[utoipa::path(
    post,
    path = "/v1/memory_stores/{store}/version_retention",
    operation_id = "memory_stores.version_retention.update",
    tag = "memory_stores",
    summary = "Set how long a store keeps its memories' versions (a mnemo extension)",
    description = "Body `{\"retention\": \"30d\"}` (a whole number of seconds `s`, minutes `m`, hours `h` or days `d`, at most 100 years), `\"forever\"`, or `null` to follow the server's `--version-retention` again. The key is required. A shorter window takes effect at the next purge pass (every `--version-purge-every`, default 60 s). Needs a credential that may administer the store (not a sessions token).",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store.")),
    request_body = mnemo_api::SetVersionRetention,
    responses(
        (status = 200, description = "The store's retention now.", body = mnemo_api::VersionRetention),
        (status = 400, description = "A malformed window, or no `retention` key (`invalid_request_error`).", body = mnemo_api::ErrorEnvelope),
    ),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Id(store): Id<MemoryStoreId>,
    Json(body): Json<SetVersionRetention>,
) -> Reply<VersionRetention> {
    let Some(raw) = body.retention else {
        return Err(ApiError::invalid(
            "retention is required: a window such as `30d`, `12h` or `90s`, `forever`, or null to follow the server's --version-retention",
        ));
    };
    let own = raw.map(|r| r.parse::<Retention>()).transpose().map_err(|e| ApiError::invalid(e.to_string()))?;
    let own = state.store.set_store_retention(caller.workspace()?, &store, own).await?;
    tracing::info!(memory_store.id = %store, retention = ?own.map(|r| r.to_string()), "set a store's version retention");
    Ok(axum::Json(view(&state, store, own)))
}
