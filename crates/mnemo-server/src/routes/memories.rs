//! `/v1/memory_stores/{store}/memories`: create, retrieve, update, delete, list — and two mnemo
//! extensions, named in the `mnemo-extensions` header of every answer:
//!
//! - `memories:stream` (`memory-stream`, unless `mnemo serve --no-memory-stream` hides it): one
//!   snapshot of every live memory ([`mnemo_store::Store::export_memories`]) as JSON Lines,
//!   ended by a `memory_stream_end` line only once the export is done, so a failure mid-way cuts
//!   the connection instead of ending a short stream.
//! - `memories:batch` (`memory-batch`): each write checked as its own request would be, the
//!   valid ones written together ([`mnemo_store::Store::write_memories`]), each answered with
//!   the status and body its own request would have had.

use axum::extract::State;
use axum::http::header::{CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use mnemo_api::limits::MAX_BATCH_WRITES;
use mnemo_api::{
    CreateMemory, Memory, MemoryDeleted, MemoryId, MemoryListItem, MemoryPath, MemoryStoreId, MemoryWrite,
    MemoryWriteBatch, MemoryWriteResult, MemoryWriteResults, Page, PathPrefix, Precondition, UpdateMemory, View,
    is_sha256_hex, validate_content_size,
};
use mnemo_http::{BadInput, FromQuery, Id, Params, PathId, Query, ViewPaging, ViewParam};
use mnemo_store::{ListMemories, MemoryChange, MemoryWriteOp};

use crate::auth::MemoryCaller;
use crate::extract::{Json, Writer};
use crate::{ApiError, AppState};

type Reply<T> = Result<axum::Json<T>, ApiError>;

/// `view` of one memory, described for the API document (read as a [`ViewParam`]).
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct MemoryView {
    /// `basic` (no content) or `full`; the default is `full` when reading one memory, `basic` when writing.
    view: Option<View>,
}

fn memory_path(raw: &str) -> Result<MemoryPath, ApiError> {
    MemoryPath::parse_request(raw).map_err(ApiError::invalid)
}

/// A content digest as a request gives it: 64 lowercase hexadecimal characters.
#[derive(Debug)]
pub(crate) struct Sha256Hex(String);

impl Sha256Hex {
    fn parse(name: &str, raw: &str) -> Result<Self, BadInput> {
        if is_sha256_hex(raw) {
            Ok(Self(raw.to_owned()))
        } else {
            Err(BadInput::Invalid(format!("{name} must be 64 lowercase hexadecimal characters")))
        }
    }
}

fn sha(name: &str, raw: &str) -> Result<String, ApiError> {
    Ok(Sha256Hex::parse(name, raw)?.0)
}

/// Drops the content unless the caller asked for it.
fn shaped(mut memory: Memory, view: View) -> Memory {
    if view == View::Basic {
        memory.content = None;
    }
    memory
}

#[utoipa::path(
    post,
    path = "/v1/memory_stores/{store}/memories",
    operation_id = "memories.create",
    tag = "memories",
    summary = "Create a memory at a path",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), MemoryView, ("mnemo-writer" = Option<String>, Header, description = "The client's writer id (a mnemo extension): its change feed leaves out the content of this write's version.")),
    request_body = mnemo_api::CreateMemory,
    responses((status = 200, description = "The new memory (content only under `view=full`).", body = mnemo_api::Memory), (status = 409, description = "A memory already exists at this path (`memory_path_conflict_error`, with `conflicting_memory_id`).", body = mnemo_api::ErrorEnvelope)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: MemoryCaller,
    writer: Writer,
    Id(store): Id<MemoryStoreId>,
    Query(view): Query<ViewParam>,
    Json(body): Json<CreateMemory>,
) -> Reply<Memory> {
    let view = view.or(View::Basic);
    let (path, content) = new_memory(body)?;
    let memory = state.store.create_memory(caller.workspace()?, &store, path, content, caller.actor()).await?;
    wrote(&state, &store, writer, [&memory]);
    Ok(axum::Json(shaped(memory, view)))
}

/// A create's body, checked: the path and the content.
fn new_memory(body: CreateMemory) -> Result<(MemoryPath, String), ApiError> {
    let path = memory_path(&body.path)?;
    let content =
        body.content.ok_or_else(|| ApiError::invalid("content is required (use \"\" for an empty memory)"))?;
    validate_content_size(&content).map_err(ApiError::content_too_large)?;
    Ok((path, content))
}

/// An update's body, checked.
fn memory_change(body: UpdateMemory) -> Result<MemoryChange, ApiError> {
    if let Some(content) = &body.content {
        validate_content_size(content).map_err(ApiError::content_too_large)?;
    }
    let path = body.path.as_deref().map(memory_path).transpose()?;
    let expected_sha256 = match &body.precondition {
        None => None,
        Some(Precondition::ContentSha256 { content_sha256 }) => {
            Some(sha("precondition.content_sha256", content_sha256)?)
        }
    };
    Ok(MemoryChange { content: body.content, path, expected_sha256 })
}

#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/memories/{memory}",
    operation_id = "memories.retrieve",
    tag = "memories",
    summary = "Retrieve a memory",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ("memory" = mnemo_api::MemoryId, Path, description = "The memory."), MemoryView),
    responses((status = 200, description = "The memory (with content unless `view=basic`).", body = mnemo_api::Memory)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn retrieve(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Id(store): Id<MemoryStoreId>,
    Id(id): Id<MemoryId>,
    Query(view): Query<ViewParam>,
) -> Reply<Memory> {
    let view = view.or(View::Full);
    Ok(axum::Json(shaped(state.store.get_memory(caller.workspace()?, &store, &id).await?, view)))
}

#[utoipa::path(
    post,
    path = "/v1/memory_stores/{store}/memories/{memory}",
    operation_id = "memories.update",
    tag = "memories",
    summary = "Change a memory's content or path, optionally under a precondition",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ("memory" = mnemo_api::MemoryId, Path, description = "The memory."), MemoryView, ("mnemo-writer" = Option<String>, Header, description = "The client's writer id (a mnemo extension): its change feed leaves out the content of this write's version.")),
    request_body = mnemo_api::UpdateMemory,
    responses((status = 200, description = "The updated memory.", body = mnemo_api::Memory), (status = 409, description = "The precondition failed (`memory_precondition_failed_error`) or the new path is taken (`memory_path_conflict_error`).", body = mnemo_api::ErrorEnvelope)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    caller: MemoryCaller,
    writer: Writer,
    Id(store): Id<MemoryStoreId>,
    Id(id): Id<MemoryId>,
    Query(view): Query<ViewParam>,
    Json(body): Json<UpdateMemory>,
) -> Reply<Memory> {
    let view = view.or(View::Basic);
    let change = memory_change(body)?;
    let memory = state.store.update_memory(caller.workspace()?, &store, &id, change, caller.actor()).await?;
    wrote(&state, &store, writer, [&memory]);
    Ok(axum::Json(shaped(memory, view)))
}

/// Tells the change hub who wrote `memories`' versions, if the client named itself.
fn wrote<'a>(
    state: &AppState,
    store: &MemoryStoreId,
    Writer(writer): Writer,
    memories: impl IntoIterator<Item = &'a Memory>,
) {
    if let Some(writer) = writer {
        state.changes.wrote(store, &writer, memories.into_iter().map(|m| &m.memory_version_id));
    }
}

/// Applies creates and updates of one store in order, in one request: each write is checked
/// and judged as its own request would be (on the state the writes before it left), and gets
/// the status and the memory (`view=basic`) or the error that request would have been answered
/// with; a refused write changes nothing and does not stop the ones after it. On SQLite the
/// writes commit together, so a batch costs one flush to disk instead of one per write. A mnemo
/// extension, named `memory-batch` in the `mnemo-extensions` header; callers and scopes are
/// those of the single writes.
#[utoipa::path(
    post,
    path = "/v1/memory_stores/{store}/memories:batch",
    operation_id = "memories.batch",
    tag = "memories",
    summary = "Apply up to 100 creates and updates in order, each with its own outcome (a mnemo extension)",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ("mnemo-writer" = Option<String>, Header, description = "The client's writer id (a mnemo extension): its change feed leaves out the content of this write's version.")),
    request_body = mnemo_api::MemoryWriteBatch,
    responses((status = 200, description = "One result per write, in order: `status` 200 with the memory (`view=basic`), or the status and `error` of its own request.", body = mnemo_api::MemoryWriteResults)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn batch(
    State(state): State<AppState>,
    caller: MemoryCaller,
    writer: Writer,
    Id(store): Id<MemoryStoreId>,
    Json(body): Json<MemoryWriteBatch>,
) -> Reply<MemoryWriteResults> {
    let count = body.writes.len();
    if !(1..=MAX_BATCH_WRITES).contains(&count) {
        return Err(ApiError::invalid(format!("writes must hold 1 to {MAX_BATCH_WRITES} writes (got {count})")));
    }
    // Each write checked as its own request would be; a refused one keeps its place.
    let mut results: Vec<Option<MemoryWriteResult>> = Vec::with_capacity(count);
    let mut ops = Vec::with_capacity(count);
    for (i, write) in body.writes.into_iter().enumerate() {
        let op = match write {
            MemoryWrite::Create(body) => {
                new_memory(body).map(|(path, content)| MemoryWriteOp::Create { path, content })
            }
            // The id is judged as the single update's path judges it.
            MemoryWrite::Update { memory_id, change } => MemoryId::from_path(&memory_id)
                .map_err(ApiError::from)
                .and_then(|id| Ok(MemoryWriteOp::Update { id, change: memory_change(change)? })),
        };
        match op {
            Ok(op) => {
                ops.push(op);
                results.push(None);
            }
            Err(e) => results.push(Some(refused(e, i))),
        }
    }
    let outcomes = state.store.write_memories(caller.workspace()?, &store, ops, caller.actor()).await?;
    wrote(&state, &store, writer, outcomes.iter().filter_map(|o| o.as_ref().ok()));
    let mut outcomes = outcomes.into_iter();
    let results = results
        .into_iter()
        .enumerate()
        .map(|(i, checked)| match checked {
            Some(refusal) => refusal,
            None => match outcomes.next() {
                Some(Ok(memory)) => {
                    MemoryWriteResult { status: 200, memory: Some(shaped(memory, View::Basic)), error: None }
                }
                Some(Err(e)) => refused(ApiError::from(e), i),
                None => refused(
                    ApiError::from(mnemo_store::StoreError::backend(std::io::Error::other(
                        "the store answered fewer writes than it was given",
                    ))),
                    i,
                ),
            },
        })
        .collect();
    Ok(axum::Json(MemoryWriteResults { results }))
}

/// A write of a batch that did not apply, as its own request would have been answered.
fn refused(e: ApiError, index: usize) -> MemoryWriteResult {
    let status = e.status();
    let mut error = e.into_body();
    error.message = format!("writes[{index}]: {}", error.message);
    MemoryWriteResult { status, memory: None, error: Some(error) }
}

#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct DeleteParams {
    /// Delete only if the content still hashes to this (64 lowercase hex characters).
    #[param(value_type = Option<String>)]
    expected_content_sha256: Option<Sha256Hex>,
}

impl FromQuery for DeleteParams {
    const ONCE: &'static [&'static str] = &["expected_content_sha256"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let name = "expected_content_sha256";
        Ok(Self { expected_content_sha256: q.one(name).map(|s| Sha256Hex::parse(name, s)).transpose()? })
    }
}

#[utoipa::path(
    delete,
    path = "/v1/memory_stores/{store}/memories/{memory}",
    operation_id = "memories.delete",
    tag = "memories",
    summary = "Delete a memory, optionally only if its content is unchanged",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ("memory" = mnemo_api::MemoryId, Path, description = "The memory."), DeleteParams),
    responses((status = 200, description = "OK.", body = mnemo_api::MemoryDeleted), (status = 409, description = "`expected_content_sha256` does not match (`memory_precondition_failed_error`).", body = mnemo_api::ErrorEnvelope)),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: MemoryCaller,
    Id(store): Id<MemoryStoreId>,
    Id(id): Id<MemoryId>,
    Query(q): Query<DeleteParams>,
) -> Reply<MemoryDeleted> {
    let expected = q.expected_content_sha256.map(|Sha256Hex(s)| s);
    state.store.delete_memory(caller.workspace()?, &store, &id, expected, caller.actor()).await?;
    Ok(axum::Json(MemoryDeleted { id }))
}

/// What the memory list is narrowed to: a prefix, and how deep it looks.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListFilters {
    /// Only paths under this prefix (`/` or a path ending in `/`; whole segments).
    #[param(value_type = Option<String>)]
    path_prefix: PathPrefix,
    /// `1` rolls everything below the next level up into `memory_prefix` entries (default `0`).
    #[param(value_type = Option<u8>, minimum = 0, maximum = 1)]
    depth: u32,
}

impl FromQuery for ListFilters {
    const ONCE: &'static [&'static str] = &["path_prefix", "depth"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let path_prefix = match q.one("path_prefix") {
            None => PathPrefix::root(),
            Some(p) => PathPrefix::parse(p)
                .map_err(|e| BadInput::Invalid(format!("invalid path_prefix `{}`: {e}", p.escape_debug())))?,
        };
        let depth = match q.one("depth") {
            None | Some("0") => 0,
            Some("1") => 1,
            Some(other) => return Err(BadInput::Invalid(format!("depth must be 0 or 1 (got `{other}`)"))),
        };
        Ok(Self { path_prefix, depth })
    }
}

/// Lists memories. The answer carries an `ETag` naming the store's state; a first-page request
/// with a matching `If-None-Match` is answered `304` without a body (a mnemo extension that lets
/// a sync skip re-listing an unchanged store; clients that never send it see no difference).
#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/memories",
    operation_id = "memories.list",
    tag = "memories",
    summary = "List memories in path order, optionally under a prefix and rolled up one level",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store."), ViewPaging, ListFilters, ("If-None-Match" = Option<String>, Header, description = "The `ETag` of an earlier first page: answered `304` while the store is unchanged (a mnemo extension).")),
    responses((status = 200, description = "A page of memories (and `memory_prefix` entries under `depth=1`).", body = mnemo_api::Page<mnemo_api::MemoryListItem>, headers(("ETag" = String, description = "Names the store's state."))), (status = 304, description = "Unchanged since the `If-None-Match` tag.")),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: MemoryCaller,
    headers: HeaderMap,
    Id(store): Id<MemoryStoreId>,
    Query(paging): Query<ViewPaging>,
    Query(f): Query<ListFilters>,
) -> Result<Response, ApiError> {
    // Read before the listing: if a write lands in between, the tag is older than the data and
    // the next conditional request simply lists again.
    let etag = format!("\"m{}\"", state.store.memory_change_seq(caller.workspace()?, &store).await?);
    let first_page = paging.after.is_none();
    if first_page && headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        return Ok((StatusCode::NOT_MODIFIED, [(ETAG, etag)]).into_response());
    }
    let query = ListMemories {
        prefix: f.path_prefix,
        depth: f.depth,
        limit: paging.limit,
        view: paging.view,
        after: paging.after,
    };
    let page: Page<MemoryListItem> =
        mnemo_http::page(state.store.list_memories(caller.workspace()?, &store, query).await?);
    Ok(([(ETAG, etag)], axum::Json(page)).into_response())
}

/// Every live memory of a store with its content, as JSON Lines: one `memory` object per line
/// in path order (bytes), then one `memory_stream_end` line with the count and the snapshot's
/// change position. Read from one snapshot and produced chunk by chunk, so the server never
/// holds the whole store; a failure mid-way breaks the connection before the end line, so a
/// client never mistakes a cut stream for a whole one. A mnemo extension (the hosted API's
/// full listing is pages of 20); callers and scopes are the listing's.
#[utoipa::path(
    get,
    path = "/v1/memory_stores/{store}/memories:stream",
    operation_id = "memories.stream",
    tag = "memories",
    summary = "Every live memory with content from one snapshot, as JSON Lines (a mnemo extension)",
    params(("store" = mnemo_api::MemoryStoreId, Path, description = "The memory store.")),
    responses((status = 200, description = "One `Memory` per line (full view) in byte order of path, then a `MemoryStreamEnd` line; a stream without that line was cut short. A mnemo extension, named in the `mnemo-extensions` header (`memory-stream`) of every answer of a server that serves it.", content((mnemo_api::Memory = "application/jsonl"), (mnemo_api::MemoryStreamEnd = "application/jsonl")), headers(("ETag" = String, description = "The snapshot's state, as the listing's `ETag` names it.")))),
    security(("api_key" = []), ("api_key_bearer" = []), ("sessions_token" = [])),
)]
pub(crate) async fn stream(
    State(state): State<AppState>,
    caller: MemoryCaller,
    uri: axum::http::Uri,
    Id(store): Id<MemoryStoreId>,
) -> Result<Response, ApiError> {
    if !state.memory_stream {
        return Err(super::no_such_endpoint(&axum::http::Method::GET, uri.path()));
    }
    let export = state.store.export_memories(caller.workspace()?, &store, mnemo_store::EXPORT_CHUNK).await?;
    let etag = format!("\"m{}\"", export.seq);
    let body = axum::body::Body::from_stream(jsonl(export, store));
    Ok(([(CONTENT_TYPE, "application/jsonl"), (ETAG, etag.as_str())], body).into_response())
}

/// The export's chunks as lines, one buffer per chunk, then the end line; an error (or an export
/// that stops without its `Done`) ends the body with an error, which breaks the connection.
fn jsonl(
    export: mnemo_store::MemoryExport,
    store: MemoryStoreId,
) -> impl futures::Stream<Item = Result<axum::body::Bytes, std::io::Error>> {
    use mnemo_store::ExportPart;
    let mnemo_store::MemoryExport { seq, parts } = export;
    futures::stream::unfold(Some((parts, 0_u64)), move |state| {
        let store = store.clone();
        async move {
            let (mut parts, count) = state?;
            let cut = |why: String| {
                tracing::warn!(memory_store.id = %store, "memory stream cut after {count} memories: {why}");
                Some((Err(std::io::Error::other(why)), None))
            };
            match parts.recv().await {
                Some(Ok(ExportPart::Memories(batch))) => {
                    let mut buf = Vec::with_capacity(batch.iter().map(|m| m.content_size_bytes as usize + 400).sum());
                    for memory in &batch {
                        crate::jsonl::memory_line(&mut buf, memory);
                    }
                    let count = count + batch.len() as u64;
                    Some((Ok(buf.into()), Some((parts, count))))
                }
                Some(Ok(ExportPart::Done)) => {
                    let end = mnemo_api::MemoryStreamEnd { memory_count: count, change_seq: seq };
                    let mut line = serde_json::to_vec(&end).expect("the end line serialises");
                    line.push(b'\n');
                    Some((Ok(line.into()), None))
                }
                Some(Err(e)) => cut(e.to_string()),
                None => cut("the export stopped before its end".to_owned()),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use mnemo_store::{ExportPart, MemoryExport, StoreError};

    use super::*;

    fn memory(store: &MemoryStoreId, path: &str) -> Memory {
        let now = chrono::Utc::now();
        Memory {
            id: MemoryId::generate(),
            memory_store_id: store.clone(),
            path: path.into(),
            content: Some("c".into()),
            content_sha256: mnemo_api::content_sha256(b"c"),
            content_size_bytes: 1,
            memory_version_id: mnemo_api::MemoryVersionId::generate(),
            created_at: now,
            updated_at: now,
        }
    }

    /// An export that sends `parts`, then closes.
    fn scripted(parts: Vec<mnemo_store::Result<ExportPart>>) -> MemoryExport {
        let (tx, rx) = tokio::sync::mpsc::channel(parts.len().max(1));
        for part in parts {
            tx.try_send(part).unwrap();
        }
        MemoryExport { seq: 9, parts: rx }
    }

    /// What the body stream yields: each chunk's text, or `None` for an error.
    async fn body_of(export: MemoryExport, store: &MemoryStoreId) -> Vec<Option<String>> {
        jsonl(export, store.clone())
            .map(|item| item.ok().map(|bytes| String::from_utf8(bytes.to_vec()).unwrap()))
            .collect()
            .await
    }

    #[tokio::test]
    async fn the_end_line_comes_only_after_done_and_a_failure_breaks_the_body() {
        let store = MemoryStoreId::generate();
        let chunk = || Ok(ExportPart::Memories(vec![memory(&store, "/a"), memory(&store, "/b")]));
        let whole = body_of(scripted(vec![chunk(), Ok(ExportPart::Done)]), &store).await;
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].as_deref().unwrap().lines().count(), 2);
        assert_eq!(whole[1].as_deref(), Some("{\"type\":\"memory_stream_end\",\"memory_count\":2,\"change_seq\":9}\n"));
        // A failed read, or an export that stops without `Done`: an error instead of the end.
        let failed = scripted(vec![chunk(), Err(StoreError::Unavailable("the database went away".into()))]);
        let cut = body_of(failed, &store).await;
        assert_eq!((cut.len(), cut[0].is_some(), cut[1].is_none()), (2, true, true), "{cut:?}");
        let stopped = body_of(scripted(vec![chunk()]), &store).await;
        assert_eq!((stopped.len(), stopped[1].is_none()), (2, true), "{stopped:?}");
    }

    /// Over HTTP, a body that fails is a cut connection: the client sees the memories sent so
    /// far and then a transient error, never an end.
    #[tokio::test]
    async fn a_client_refuses_a_stream_the_server_broke_off() {
        let store = MemoryStoreId::generate();
        // The handler's export is fed by the test, one part at a time.
        type Feed = tokio::sync::mpsc::Sender<mnemo_store::Result<ExportPart>>;
        let feed: std::sync::Arc<std::sync::Mutex<Option<Feed>>> = Default::default();
        let (id, slot) = (store.clone(), std::sync::Arc::clone(&feed));
        let app = axum::Router::new().route(
            "/v1/memory_stores/{store}/memories:stream",
            axum::routing::get(move || {
                let (store, slot) = (id.clone(), std::sync::Arc::clone(&slot));
                async move {
                    let (tx, parts) = tokio::sync::mpsc::channel(1);
                    tx.send(Ok(ExportPart::Memories(vec![memory(&store, "/a")]))).await.unwrap();
                    *slot.lock().unwrap() = Some(tx);
                    axum::body::Body::from_stream(jsonl(MemoryExport { seq: 1, parts }, store))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = mnemo_client::Client::new(&base, "k").unwrap().with_max_retries(0);
        let mut stream = match client.open_memory_stream(&store).await {
            Ok(Some(stream)) => stream,
            other => panic!("the stream opens: {other:?}"),
        };
        let first = stream.next_batch::<Memory>().await.unwrap().unwrap();
        assert_eq!(first[0].path, "/a");
        let tx = feed.lock().unwrap().take().unwrap();
        tx.send(Err(StoreError::Unavailable("lost".into()))).await.unwrap();
        let err = stream.next_batch::<Memory>().await.unwrap_err();
        assert!(err.status().is_none() && !err.is_permanent(), "a transient failure: {err:?}");
        assert_eq!(stream.end(), None);
    }
}
