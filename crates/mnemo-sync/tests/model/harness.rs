//! The machinery of the model test: an in-process server whose engine-facing listener can lose
//! requests or responses on demand, race them with another writer or with an edit of the agent
//! in the folder, a capture of the engine's log lines, and snapshots of folders.
//!
//! A memory batch (`POST …/memories:batch`) is logged as one [`Seen`] per write, each shaped like
//! the write's own request, so the model reads a batch's writes as it reads uploads sent one by
//! one: a lost batch or a lost answer is lost for every write in it (the server applied none, or
//! all), and a race meets the batch's first write (the other writer moves just before the batch
//! arrives, so before any of its writes is applied; the writes are of distinct paths).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mnemo_api::{MemoryStoreId, UpdateMemory};
use mnemo_client::Client;
use mnemo_server::{AppState, hash_credential};
use mnemo_store::Store;
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};
use tracing::field::{Field, Visit};
use tracing::span;

pub(crate) const KEY: &str = "sk-model-test";

/// How an injected fault loses one engine request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum FaultKind {
    /// Answered `502` before the server saw it: nothing was applied.
    LoseRequest,
    /// The server applied and committed it, then the answer was replaced by a `502`.
    LoseResponse,
    /// Just before the request reaches the server, another writer updates the memory it targets
    /// to [`RACED`] (for a creation: creates that path with [`RACED`] first).
    RaceUpdate,
    /// Just before the request reaches the server, another writer deletes the memory it targets
    /// (nothing for a creation).
    RaceDelete,
    /// An edit in flight: just before the request reaches the server, the agent writes this
    /// content to the file at this path of the case's folder ([`Faults::set_root`]); when the
    /// request is a fetch, to the fetched memory's file instead (fetches run concurrently, so
    /// only the fetched path's fate is determined). Nothing is written through a symlink or into
    /// a folder that is gone. The request itself goes through.
    RaceLocal(&'static str, &'static str),
}

/// What the other writer of a race writes.
pub(crate) const RACED: &str = "raced by another writer\n";

/// What the other writer of a race did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Raced {
    Updated,
    Created,
    Deleted,
}

/// One request the engine made, as the fault layer saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: String,
    /// The `path` field of a JSON body (a memory creation).
    pub(crate) body_path: Option<String>,
    /// The `content` field of a JSON body (an upload).
    pub(crate) body_content: Option<String>,
    pub(crate) fault: Option<FaultKind>,
    /// What a race fault's other writer did (nothing for a listing).
    pub(crate) raced: Option<Raced>,
    /// The file a [`FaultKind::RaceLocal`] wrote, if it wrote one, and what it held before.
    pub(crate) wrote_locally: Option<(String, Option<Vec<u8>>)>,
    /// This is write `i` of a memory batch (its `path`, `body_path` and `body_content` are those
    /// of the write's own request).
    pub(crate) in_batch: Option<usize>,
    /// The answer's status, for a request that is no batch and was answered.
    pub(crate) status: Option<StatusCode>,
}

/// How the engine's listener lets uploads come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Uploads {
    /// One request per upload, as the hosted API is served: `memory-batch` is left out of the
    /// extensions the engine hears of.
    OneByOne,
    /// Memory batches offered, as `mnemo serve` does.
    Batched,
}

/// One write of a memory batch, as its own request would have been.
struct BatchWrite {
    path: String,
    body_path: Option<String>,
    body_content: Option<String>,
}

/// The writes of a memory batch's body, each as the request it stands for (`None`: not a batch).
fn batch_writes(path: &str, json: Option<&serde_json::Value>) -> Option<Vec<BatchWrite>> {
    let memories = path.strip_suffix(":batch")?;
    let writes = json?.get("writes")?.as_array()?;
    let text = |w: &serde_json::Value, name: &str| w.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    Some(
        writes
            .iter()
            // An update names its memory (and has no `path`); a create posts to the collection.
            .map(|w| BatchWrite {
                path: text(w, "memory_id").map_or_else(|| memories.to_owned(), |id| format!("{memories}/{id}")),
                body_path: text(w, "path"),
                body_content: text(w, "content"),
            })
            .collect(),
    )
}

#[derive(Debug, Default)]
struct FaultState {
    /// The other writer of races (the test's own, unfaulted listener).
    racer: Option<Client>,
    /// One slot per coming engine request: `None` lets it through.
    schedule: VecDeque<Option<FaultKind>>,
    seen: Vec<Seen>,
    /// The folder a [`FaultKind::RaceLocal`] writes into.
    root: Option<PathBuf>,
}

/// The fault schedule of the engine's listener and the log of what went through it.
#[derive(Debug, Default)]
pub(crate) struct Faults(Mutex<FaultState>);

impl Faults {
    fn lock(&self) -> MutexGuard<'_, FaultState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lets `skip` more engine requests through (after those already scheduled), then loses one.
    pub(crate) fn arm(&self, skip: usize, kind: FaultKind) {
        let mut s = self.lock();
        s.schedule.extend(std::iter::repeat_n(None, skip));
        s.schedule.push_back(Some(kind));
    }

    fn set_racer(&self, racer: Client) {
        self.lock().racer = Some(racer);
    }

    /// The folder of the case that runs now (the target of [`FaultKind::RaceLocal`]).
    pub(crate) fn set_root(&self, root: &Path) {
        self.lock().root = Some(root.to_path_buf());
    }

    pub(crate) fn disarm(&self) {
        self.lock().schedule.clear();
    }

    /// Drops the edits in flight no request met (they belong to the call that armed them), and
    /// the slots that only led up to them.
    pub(crate) fn cancel_local_races(&self) {
        let mut s = self.lock();
        s.schedule.retain(|slot| !matches!(slot, Some(FaultKind::RaceLocal(..))));
        while s.schedule.back() == Some(&None) {
            s.schedule.pop_back();
        }
    }

    /// The engine requests since the last call, in arrival order.
    pub(crate) fn take_seen(&self) -> Vec<Seen> {
        std::mem::take(&mut self.lock().seen)
    }
}

/// The middleware in front of the engine's listener.
async fn inject(State(faults): State<Arc<Faults>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 20).await.unwrap_or_default();
    let json = serde_json::from_slice::<serde_json::Value>(&bytes).ok();
    let field = |name: &str| json.as_ref().and_then(|v| v.get(name)).and_then(|p| p.as_str()).map(str::to_owned);
    let (body_path, body_content) = (field("path"), field("content"));
    let batch = batch_writes(parts.uri.path(), json.as_ref());
    let (fault, racer, root) = {
        let mut s = faults.lock();
        (s.schedule.pop_front().flatten(), s.racer.clone(), s.root.clone())
    };
    // A race on a batch meets its first write.
    let (race_path, race_body_path) = match batch.as_deref() {
        Some([first, ..]) => (first.path.as_str(), first.body_path.as_deref()),
        _ => (parts.uri.path(), body_path.as_deref()),
    };
    let raced = match (fault, &racer) {
        (Some(kind @ (FaultKind::RaceUpdate | FaultKind::RaceDelete)), Some(racer)) => {
            race(racer, kind, &parts.method, race_path, race_body_path).await
        }
        _ => None,
    };
    if let (Some(_), Some(FaultKind::RaceLocal(..))) = (&batch, fault) {
        // Not modelled: the batch's contents were all read before it was sent, where one by one
        // each upload reads its file when its turn comes. The live properties run one by one.
        panic!("an edit in flight met a memory batch: run live scenarios with Uploads::OneByOne");
    }
    let wrote_locally = match (fault, &racer, root) {
        (Some(FaultKind::RaceLocal(target, content)), Some(racer), Some(root)) => {
            let fetched = if parts.method == Method::GET { fetched_path(racer, parts.uri.path()).await } else { None };
            let path = fetched.unwrap_or_else(|| target.to_owned());
            write_in_flight(&root, &path, content).map(|before| (path, before))
        }
        _ => None,
    };
    let single = batch.is_none();
    let at = faults.lock().seen.len();
    match batch {
        None => faults.lock().seen.push(Seen {
            method: parts.method.clone(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or("").to_owned(),
            body_path,
            body_content,
            fault,
            raced,
            wrote_locally,
            in_batch: None,
            status: None,
        }),
        Some(writes) => {
            let lose = matches!(fault, Some(FaultKind::LoseRequest | FaultKind::LoseResponse));
            let mut s = faults.lock();
            for (i, w) in writes.into_iter().enumerate() {
                s.seen.push(Seen {
                    method: Method::POST,
                    path: w.path,
                    query: String::new(),
                    body_path: w.body_path,
                    body_content: w.body_content,
                    fault: if i == 0 || lose { fault } else { None },
                    raced: if i == 0 { raced } else { None },
                    wrote_locally: None,
                    in_batch: Some(i),
                    status: None,
                });
            }
        }
    }
    let req = Request::from_parts(parts, Body::from(bytes));
    match fault {
        None | Some(FaultKind::RaceUpdate | FaultKind::RaceDelete | FaultKind::RaceLocal(..)) => {
            let response = next.run(req).await;
            if single && let Some(seen) = faults.lock().seen.get_mut(at) {
                seen.status = Some(response.status());
            }
            response
        }
        Some(FaultKind::LoseRequest) => lost(),
        Some(FaultKind::LoseResponse) => {
            // The handler has committed by the time it returns its response.
            drop(next.run(req).await);
            lost()
        }
    }
}

/// The other writer's move before an engine request on `/v1/memory_stores/{store}/memories[/{id}]`.
async fn race(racer: &Client, kind: FaultKind, method: &Method, path: &str, body_path: Option<&str>) -> Option<Raced> {
    let rest = path.strip_prefix("/v1/memory_stores/")?;
    let (store, rest) = rest.split_once("/memories")?;
    let store: MemoryStoreId = store.parse().ok()?;
    match (rest.strip_prefix('/'), kind) {
        (Some(id), FaultKind::RaceUpdate) => {
            let body = UpdateMemory { content: Some(RACED.to_owned()), ..Default::default() };
            racer.update_memory(&store, &id.parse().ok()?, &body, None).await.ok().map(|_| Raced::Updated)
        }
        (Some(id), _) => racer.delete_memory(&store, &id.parse().ok()?, None).await.ok().map(|_| Raced::Deleted),
        (None, FaultKind::RaceUpdate) if *method == Method::POST => {
            racer.create_memory(&store, body_path?, RACED, None).await.ok().map(|_| Raced::Created)
        }
        (None, _) => None,
    }
}

/// The path (no leading `/`) of the memory a fetch `GET …/memories/{id}` asks for.
async fn fetched_path(racer: &Client, path: &str) -> Option<String> {
    let rest = path.strip_prefix("/v1/memory_stores/")?;
    let (store, rest) = rest.split_once("/memories/")?;
    let store: MemoryStoreId = store.parse().ok()?;
    let memory = racer.get_memory(&store, &rest.parse().ok()?, None).await.ok()?;
    Some(memory.path.trim_start_matches('/').to_owned())
}

/// The agent's write of an edit in flight (never through a symlink, never re-creating a folder
/// that is gone): if it wrote, what the file held before (`None`: no file).
fn write_in_flight(root: &Path, rel: &str, content: &str) -> Option<Option<Vec<u8>>> {
    std::fs::symlink_metadata(root).ok()?;
    let mut at = root.to_path_buf();
    for seg in Path::new(rel) {
        at.push(seg);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return None;
        }
    }
    let path = root.join(rel);
    let before = std::fs::read(&path).ok();
    std::fs::create_dir_all(path.parent().expect("parent")).expect("create the folders of an edit in flight");
    std::fs::write(path, content).expect("write an edit in flight");
    Some(before)
}

fn lost() -> Response {
    (StatusCode::BAD_GATEWAY, "injected fault: lost in transit").into_response()
}

/// One server (SQLite in a scratch folder) on two listeners sharing the database: one for the
/// test's own API calls, one with the fault layer for the engine.
#[derive(Debug)]
pub(crate) struct Harness {
    /// The test's own client (never faulted, no retries).
    pub(crate) api: Client,
    engine_base: String,
    pub(crate) faults: Arc<Faults>,
    /// Scratch space for the database and the per-case folders (tmpfs when available).
    pub(crate) dir: tempfile::TempDir,
}

impl Harness {
    pub(crate) async fn start(uploads: Uploads) -> Self {
        capture_logs();
        let dir = scratch_dir();
        let mut settings =
            SqliteSettings::from_url(&format!("sqlite://{}/db.sqlite", dir.path().display())).expect("sqlite url");
        settings.durability = Durability::Normal;
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&settings).expect("open the database"));
        store.ensure_api_key(hash_credential(KEY), "model").await.expect("api key");
        let faults = Arc::new(Faults::default());
        let api_base = listen(mnemo_server::router(AppState::new(Arc::clone(&store)))).await;
        faults.set_racer(Client::new(&api_base, KEY).expect("client").with_max_retries(0));
        let engine_router = mnemo_server::router(AppState::new(store))
            .layer(axum::middleware::from_fn_with_state(Arc::clone(&faults), inject));
        // One by one: the memory batch is left out of the extensions (the stream stays).
        let engine_router = match uploads {
            Uploads::OneByOne => engine_router.layer(axum::middleware::map_response(without_memory_batch)),
            Uploads::Batched => engine_router,
        };
        let engine_base = listen(engine_router).await;
        Self { api: Client::new(&api_base, KEY).expect("client").with_max_retries(0), engine_base, faults, dir }
    }

    /// A client for the engine: through the fault layer, and a `502` is final.
    pub(crate) fn engine_client(&self) -> Client {
        Client::new(&self.engine_base, KEY).expect("client").with_max_retries(0)
    }
}

/// Drops `memory-batch` from the answer's extensions header.
async fn without_memory_batch(mut response: axum::response::Response) -> axum::response::Response {
    use mnemo_api::headers::{EXTENSIONS_HEADER, MEMORY_BATCH_EXTENSION};
    let kept = response.headers().get(EXTENSIONS_HEADER).and_then(|v| v.to_str().ok()).map(|v| {
        v.split(',').map(str::trim).filter(|name| *name != MEMORY_BATCH_EXTENSION).collect::<Vec<_>>().join(", ")
    });
    if let Some(value) = kept.and_then(|k| axum::http::HeaderValue::from_str(&k).ok()) {
        response.headers_mut().insert(EXTENSIONS_HEADER, value);
    }
    response
}

async fn listen(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(mnemo_server::serve(listener, router, std::future::pending()));
    base
}

/// A scratch folder, on tmpfs when there is one (fsyncs are free there).
fn scratch_dir() -> tempfile::TempDir {
    let mut builder = tempfile::Builder::new();
    builder.prefix("mnemo-model-");
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = builder.tempdir_in(shm)
    {
        return dir;
    }
    builder.tempdir().expect("scratch dir")
}

// ---- log capture -----------------------------------------------------------------------------

/// A debug-or-louder event of the engine about one store.
#[derive(Debug, Clone)]
pub(crate) struct LogLine {
    pub(crate) store: String,
    pub(crate) path: Option<String>,
    pub(crate) message: String,
}

static LOGS: Mutex<Vec<LogLine>> = Mutex::new(Vec::new());

/// Installs the capturing subscriber (once per test binary).
pub(crate) fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(Capture);
    });
}

/// The captured lines about `store` since the last call.
pub(crate) fn take_logs(store: &str) -> Vec<LogLine> {
    let mut all = LOGS.lock().unwrap_or_else(PoisonError::into_inner);
    let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut *all).into_iter().partition(|l| l.store == store);
    *all = rest;
    mine
}

struct Capture;

#[derive(Default)]
struct Fields {
    store: Option<String>,
    path: Option<String>,
    message: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "memory_store_id" => self.store = Some(format!("{value:?}")),
            "path" => self.path = Some(format!("{value:?}")),
            _ => {}
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => value.clone_into(&mut self.message),
            "memory_store_id" => self.store = Some(value.to_owned()),
            "path" => self.path = Some(value.to_owned()),
            _ => {}
        }
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        meta.target().starts_with("mnemo_sync") && *meta.level() <= tracing::Level::DEBUG
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::DEBUG)
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let Some(store) = fields.store {
            LOGS.lock().unwrap_or_else(PoisonError::into_inner).push(LogLine {
                store,
                path: fields.path,
                message: fields.message,
            });
        }
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

// ---- folders ---------------------------------------------------------------------------------

/// What a folder holds at one path: a regular file or a symlink (to a file or a folder).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    File(Vec<u8>),
    Link,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => write!(f, "{text:?}"),
                Err(_) => write!(f, "bytes{bytes:?}"),
            },
            Self::Link => f.write_str("symlink"),
        }
    }
}

/// Every file and symlink below `root` except the marker (folders are implied by their
/// contents); `Ok(None)` if `root` does not exist. Engine temp files left behind, or anything
/// that is neither a file, a folder nor a symlink, are errors.
pub(crate) fn snapshot(root: &Path, marker: &str) -> Result<Option<BTreeMap<String, Entry>>, String> {
    if std::fs::symlink_metadata(root).is_err() {
        return Ok(None);
    }
    let mut out = BTreeMap::new();
    walk(root, "", marker, &mut out)?;
    Ok(Some(out))
}

fn walk(dir: &Path, prefix: &str, marker: &str, out: &mut BTreeMap<String, Entry>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("read {}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        if rel == marker {
            continue;
        }
        if name.starts_with(".fs-") && name.ends_with(".tmp") {
            return Err(format!("the engine left a temp file behind: {rel}"));
        }
        let meta = std::fs::symlink_metadata(entry.path()).map_err(|e| format!("{rel}: {e}"))?;
        if meta.file_type().is_symlink() {
            out.insert(rel, Entry::Link);
        } else if meta.is_dir() {
            walk(&entry.path(), &format!("{rel}/"), marker, out)?;
        } else if meta.is_file() {
            let bytes = std::fs::read(entry.path()).map_err(|e| format!("{rel}: {e}"))?;
            out.insert(rel, Entry::File(bytes));
        } else {
            return Err(format!("unexpected file type at {rel}"));
        }
    }
    Ok(())
}

/// Every file below `dir` with its bytes, symlinks as their targets, following nothing.
pub(crate) fn tree_bytes(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn go(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let rel = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(entry.path()).unwrap_or_default();
                out.insert(format!("{rel} -> symlink"), target.to_string_lossy().into_owned().into_bytes());
            } else if meta.is_dir() {
                out.insert(format!("{rel}/"), Vec::new());
                go(&entry.path(), &format!("{rel}/"), out);
            } else {
                out.insert(rel, std::fs::read(entry.path()).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    go(dir, "", &mut out);
    out
}
