//! `/v1/dreams` (beta `dreaming-2026-04-21`): create, retrieve, list, cancel, archive. A dream
//! runs on the server's agent loop (`agent::dream`); what a dream may do and when is
//! [`mnemo_store::rules::dream`]'s. API keys only.

use axum::extract::State;
use axum::http::HeaderMap;
use mnemo_api::{Dream, DreamId, DreamRequest, DreamStatus, Page, View};
use mnemo_http::{BadInput, FromQuery, Id, Paging, Params, Query, flag, time_range};
use mnemo_store::ops::dreams::ListDreams;
use mnemo_store::rules::scope::{Action, MemoryOp};
use sha2::Digest;

use crate::auth::ApiKeyCaller;
use crate::extract::Json;
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

/// The longest `Idempotency-Key` kept.
const MAX_IDEMPOTENCY_KEY: usize = 255;

#[utoipa::path(
    post,
    path = "/v1/dreams",
    operation_id = "dreams.create",
    tag = "dreams",
    summary = "Create a dream: a model curates a memory store from the sessions that used it",
    description = "Beta `dreaming-2026-04-21`. Runs on the server's agent loop, on the model the `--models` file maps `model` to (an id it maps to no provider is a 400). `create_new` (default) writes into a new store that starts as a copy of the input; `update_existing` rewrites the input. An `Idempotency-Key` header makes a retried create answer the same dream for 24 hours.",
    request_body = mnemo_api::CreateDream,
    responses(
        (status = 200, description = "The new dream, `pending`.", body = mnemo_api::Dream),
        (status = 400, description = "A malformed request, an archived input, or a model no provider runs.", body = mnemo_api::ErrorEnvelope),
        (status = 409, description = "Another `update_existing` dream holds the store.", body = mnemo_api::ErrorEnvelope),
        (status = 429, description = "The workspace's queue of dreams is full.", body = mnemo_api::ErrorEnvelope),
    ),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    headers: HeaderMap,
    Json(body): Json<serde_json::Value>,
) -> Reply<Dream> {
    let request = DreamRequest::parse(&body).map_err(|e| ApiError::invalid(e.0))?;
    // What the dream will do with the caller's stores, judged as if the caller did it.
    let op = if request.update_existing { MemoryOp::WriteMemories } else { MemoryOp::Read };
    caller.allow(Action::Memory { store: &request.store, op, attached: None })?;
    if !request.update_existing {
        caller.allow(Action::MemoryStores { create: true })?;
    }
    let Some(agent) = state.agent.as_ref().filter(|a| a.resolves(&request.model)) else {
        return Err(ApiError::invalid(format!(
            "model: `{}` maps to no configured model provider (dreams run on the models of `mnemo serve --models`)",
            request.model
        )));
    };
    let idempotency = match headers.get("idempotency-key") {
        None => None,
        Some(raw) => {
            let key = raw
                .to_str()
                .ok()
                .map(str::trim)
                .filter(|k| !k.is_empty() && k.len() <= MAX_IDEMPOTENCY_KEY)
                .ok_or_else(|| ApiError::invalid("Idempotency-Key must be 1 to 255 visible ASCII characters"))?;
            let digest = sha2::Sha256::digest(serde_json::to_vec(&request).unwrap_or_default())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            Some((key.to_owned(), digest))
        }
    };
    let limits = agent.dream_limits();
    let dream = state.store.create_dream(caller.workspace()?, request, idempotency, limits.max_pending).await?;
    agent.wake_dreams();
    tracing::info!(dream.id = %dream.id, "created a dream");
    Ok(axum::Json(dream))
}

#[utoipa::path(
    get,
    path = "/v1/dreams/{dream}",
    operation_id = "dreams.retrieve",
    tag = "dreams",
    summary = "Retrieve a dream (archived ones too)",
    params(("dream" = mnemo_api::DreamId, Path, description = "The dream.")),
    responses((status = 200, description = "OK.", body = mnemo_api::Dream)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Id(id): Id<DreamId>,
) -> Reply<Dream> {
    Ok(axum::Json(state.store.get_dream(caller.workspace()?, &id).await?))
}

/// The dream list's query.
#[derive(Debug)]
pub(crate) struct DreamFilter(ListDreams);

impl FromQuery for DreamFilter {
    const ONCE: &'static [&'static str] = &[];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let mut statuses = Vec::new();
        for s in q.all(&["statuses[]", "statuses"]) {
            statuses.push(DreamStatus::parse(&s).ok_or_else(|| {
                BadInput::Invalid(format!(
                    "statuses accepts pending, running, completed, failed and canceled (got `{s}`)"
                ))
            })?);
        }
        let (created_at_gte, created_at_lte) = time_range(q, "created_at")?;
        let paging = Paging::parse(q, View::Basic)?;
        Ok(Self(ListDreams {
            created_at_gte,
            created_at_lte,
            statuses,
            include_archived: flag("include_archived", q.one("include_archived"))?,
            limit: paging.limit,
            after: paging.after,
        }))
    }
}

#[utoipa::path(
    get,
    path = "/v1/dreams",
    operation_id = "dreams.list",
    tag = "dreams",
    summary = "List dreams, newest first",
    description = "Filters: `statuses[]` (repeatable), `created_at[gt]`, `created_at[lt]` (also `gte`/`lte`), `include_archived` (default false); `limit` 1–100 (default 20) and `page`.",
    responses((status = 200, description = "A page of dreams.", body = mnemo_api::Page<mnemo_api::Dream>)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Query(DreamFilter(query)): Query<DreamFilter>,
) -> Reply<Page<Dream>> {
    Ok(axum::Json(mnemo_http::page(state.store.list_dreams(caller.workspace()?, query).await?)))
}

#[utoipa::path(
    post,
    path = "/v1/dreams/{dream}/cancel",
    operation_id = "dreams.cancel",
    tag = "dreams",
    summary = "Cancel a pending or running dream",
    description = "`canceled` at once; the model call in flight is dropped. A canceled dream is returned unchanged; a completed or failed one is a 400. The output store keeps what was written.",
    params(("dream" = mnemo_api::DreamId, Path, description = "The dream.")),
    responses((status = 200, description = "The dream.", body = mnemo_api::Dream)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Id(id): Id<DreamId>,
) -> Reply<Dream> {
    let dream = state.store.cancel_dream(caller.workspace()?, &id).await?;
    if let Some(agent) = &state.agent {
        agent.dream_canceled(&id);
    }
    tracing::info!(dream.id = %id, "canceled a dream");
    Ok(axum::Json(dream))
}

#[utoipa::path(
    post,
    path = "/v1/dreams/{dream}/archive",
    operation_id = "dreams.archive",
    tag = "dreams",
    summary = "Archive a finished dream",
    description = "Only for completed, failed or canceled dreams (a pending or running one is a 400: cancel it first). Hides it from default lists; irreversible; the output store is untouched.",
    params(("dream" = mnemo_api::DreamId, Path, description = "The dream.")),
    responses((status = 200, description = "The dream.", body = mnemo_api::Dream)),
    security(("api_key" = []), ("api_key_bearer" = [])),
)]
pub(crate) async fn archive(
    State(state): State<AppState>,
    ApiKeyCaller(caller): ApiKeyCaller,
    Id(id): Id<DreamId>,
) -> Reply<Dream> {
    Ok(axum::Json(state.store.archive_dream(caller.workspace()?, &id).await?))
}
