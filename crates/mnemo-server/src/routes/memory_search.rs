//! Searching memories (a mnemo extension, `memory-search` in the `mnemo-extensions` header):
//! `GET /v1/memory_stores/{store}/memories:search` in one store, and `GET /v1/memories:search`
//! across the caller's stores — an API key's workspace, a sessions token's attached stores
//! (read-only ones included). The query language and what matches are
//! [`mnemo_store::rules::search`]'s; results come best first with a snippet whose matched terms
//! are marked `«…»`.

use axum::extract::State;
use mnemo_api::{MemorySearchPage, MemoryStoreId, WorkspaceId};
use mnemo_http::{Id, Query, SearchParams};
use mnemo_store::search::{QueryEmbedder, SearchMemories, SearchScope, Searched, run};

use crate::auth::MemoryCaller;
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

/// Runs a search in `mode` ([`mnemo_store::search::run`]) with the server's embeddings provider.
async fn search(state: &AppState, ws: &WorkspaceId, scope: SearchScope, p: SearchParams) -> Reply<MemorySearchPage> {
    let request = SearchMemories { scope, query: p.query, path_prefix: p.path_prefix, limit: p.limit, after: p.after };
    let embedder = state.semantic.as_deref().map(|s| s as &dyn QueryEmbedder);
    let Searched { listing, mode, notice } = run(&*state.store, embedder, ws, request, p.mode).await?;
    let mnemo_api::Page { data, next_page } = mnemo_http::page(listing);
    Ok(axum::Json(MemorySearchPage { data, next_page, mode, notice }))
}

/// Searches one store.
#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/memories:search",
    operation_id = "memories.search",
    tag = "memories",
    summary = "Search a store's memories by words, phrases, prefixes and paths (a mnemo extension)",
    description = "A mnemo extension (`memory-search` in the `mnemo-extensions` header). Every term matches as a case-insensitive substring of a memory's path or current content: `words` (all must match), `\"exact phrases\"` (any whitespace between the words), `prefix*` (the start of a word), `-excluded` (also `-\"a phrase\"`, `-prefix*`), `path:notes/` (narrows to paths starting `/notes/`; several are alternatives) and `-path:old/`. A malformed query (empty, an unclosed `\"`, only exclusions, more than 16 terms or 512 bytes) is a `400 invalid_request_error` saying how to fix it. Results come best first (BM25 over a word index; `score` is comparable within a response only), each with a snippet of up to 200 characters of the content around the first match with every matched term between `«` and `»` and `…` where text was cut. A memory is found from the moment its write is acknowledged and never after its deletion. A sessions token searches only stores its session has attached. `mode=semantic` ranks by meaning and `mode=hybrid` fuses both rankings (reciprocal rank fusion; `score` is then the fused score; pages end at 1,000 results), when the server has an embeddings provider (the `memory-search-semantic` extension; without one, either is a `400` saying why). Narrowing terms (`path:`, `-path:`, `-excluded`) hold in every mode; a memory not yet embedded is still found by full text. If the provider cannot embed the query, the answer is ranked by full text with `mode: \"text\"` and a `notice`.",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), SearchParams),
    responses((status = 200, description = "A page of results, best first.", body = mnemo_api::MemorySearchPage), (status = 400, description = "A malformed query or `mode`, or `mode=semantic|hybrid` on a server without an embeddings provider (`invalid_request_error`).", body = mnemo_api::ErrorEnvelope)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn in_store(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Id(store): Id<MemoryStoreId>,
    Query(p): Query<SearchParams>,
) -> Reply<MemorySearchPage> {
    search(&state, caller.workspace()?, SearchScope::Store(store), p).await
}

/// Searches every store the caller reaches.
#[utoipa::path(
    get,
    path = "/v1/memories:search",
    operation_id = "memories.search_all",
    tag = "memories",
    summary = "Search the memories of every store the caller reaches (a mnemo extension)",
    description = "As `GET /v1/memory_stores/{store}/memories:search`, across every memory store of the API key's workspace (archived ones included), or, for a sessions token, across the stores its session has attached. Each result names its `memory_store_id`.",
    params(SearchParams),
    responses((status = 200, description = "A page of results, best first.", body = mnemo_api::MemorySearchPage), (status = 400, description = "A malformed query or `mode`, or `mode=semantic|hybrid` on a server without an embeddings provider (`invalid_request_error`).", body = mnemo_api::ErrorEnvelope)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn everywhere(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Query(p): Query<SearchParams>,
) -> Reply<MemorySearchPage> {
    let ws = caller.workspace()?;
    let only = match caller.attached_to() {
        Some(session) => {
            Some(state.store.get_session(ws, session).await?.resources.into_iter().map(|r| r.memory_store_id).collect())
        }
        None => None,
    };
    search(&state, ws, SearchScope::Workspace(only), p).await
}
