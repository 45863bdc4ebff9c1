//! Rule-by-rule tests of the sync engine against an in-process `mnemo serve`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mnemo_api::{CreateMemoryStore, MemoryStoreId, UpdateMemory, View};
use mnemo_client::Client;
use mnemo_server::{AppState, hash_credential};
use mnemo_store::Store;
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};
use mnemo_sync::{DeletionMode, StoreConfig, StoreSync};

const KEY: &str = "sk-engine-test";

struct Env {
    client: Client,
    /// Another client of the same server and key, as another machine would be: the engine's
    /// feed sends its writes' content (it leaves out only its own client's).
    elsewhere: Client,
    store: MemoryStoreId,
    dir: tempfile::TempDir,
    seen: Arc<Seen>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// How the test server answers, beyond `mnemo serve`'s defaults.
#[derive(Clone, Copy, Default)]
struct Serving {
    /// Hide the memory stream (answered like an unknown route).
    no_stream: bool,
    /// Strip the extensions header from every answer, as the hosted API (which has none) does.
    no_extensions_header: bool,
    /// Change feeds carry other bytes than their entries' digests name: every `genuine` in
    /// a feed's body reads `forged!` (as a faulty proxy or server might).
    forge_feed_bytes: bool,
}

/// Requests the test server saw, by kind.
#[derive(Default)]
struct Seen {
    streams: std::sync::atomic::AtomicUsize,
    full_pages: std::sync::atomic::AtomicUsize,
    /// Listings of memories (pages, conditional ones and folders alike).
    listings: std::sync::atomic::AtomicUsize,
    /// Memory batches, and creates or updates of one memory.
    batches: std::sync::atomic::AtomicUsize,
    single_writes: std::sync::atomic::AtomicUsize,
    /// The next memory batch is lost this way (then the fault is spent).
    lose_batch: std::sync::Mutex<Option<Lose>>,
    /// How many of the next reads of one memory (a pull's fetch) are answered `502`.
    lose_fetches: std::sync::atomic::AtomicUsize,
}

/// How an injected fault loses a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lose {
    /// Answered `502` before the server saw it: nothing applied.
    Request,
    /// Applied and committed by the server, then its answer replaced by a `502`.
    Answer,
}

impl Seen {
    fn counts(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.streams.load(Relaxed), self.full_pages.load(Relaxed))
    }

    fn writes(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.batches.load(Relaxed), self.single_writes.load(Relaxed))
    }
}

impl Env {
    async fn new(memories: &[(&str, &str)]) -> Self {
        Self::serving(memories, Serving::default()).await
    }

    async fn serving(memories: &[(&str, &str)], serving: Serving) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = SqliteSettings::from_url(&format!("sqlite://{}/db.sqlite", dir.path().display())).unwrap();
        settings.durability = Durability::Normal;
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&settings).unwrap());
        store.ensure_api_key(hash_credential(KEY), "test").await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let seen = Arc::new(Seen::default());
        let counter = Arc::clone(&seen);
        let router = mnemo_server::router(AppState::new(store).with_memory_stream(!serving.no_stream)).layer(
            axum::middleware::from_fn(move |req: axum::extract::Request, next: axum::middleware::Next| {
                let seen = Arc::clone(&counter);
                async move {
                    use axum::response::IntoResponse;
                    use std::sync::atomic::Ordering::Relaxed;
                    let path = req.uri().path();
                    let mut lose = None;
                    if req.method() == axum::http::Method::POST && path.contains("/memories") {
                        if path.ends_with("/memories:batch") {
                            seen.batches.fetch_add(1, Relaxed);
                            lose = seen.lose_batch.lock().unwrap().take();
                        } else {
                            seen.single_writes.fetch_add(1, Relaxed);
                        }
                    }
                    if req.method() == axum::http::Method::GET
                        && path.contains("/memories/mem_")
                        && seen.lose_fetches.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1)).is_ok()
                    {
                        lose = Some(Lose::Request);
                    }
                    if req.method() == axum::http::Method::GET && path.ends_with("/memories") {
                        seen.listings.fetch_add(1, Relaxed);
                    }
                    if req.uri().path().ends_with("/memories:stream") {
                        seen.streams.fetch_add(1, Relaxed);
                    } else if req.uri().path().ends_with("/memories")
                        && req.uri().query().is_some_and(|q| q.contains("view=full"))
                    {
                        seen.full_pages.fetch_add(1, Relaxed);
                    }
                    let lost =
                        || (axum::http::StatusCode::BAD_GATEWAY, "injected fault: lost in transit").into_response();
                    match lose {
                        None => next.run(req).await,
                        Some(Lose::Request) => lost(),
                        Some(Lose::Answer) => {
                            let _ = next.run(req).await;
                            lost()
                        }
                    }
                }
            }),
        );
        let router = if serving.forge_feed_bytes {
            router.layer(axum::middleware::map_response(|resp: axum::response::Response| async move {
                use futures::StreamExt;
                let is_feed =
                    resp.headers().get("content-type").is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
                if !is_feed {
                    return resp;
                }
                resp.map(|body| {
                    axum::body::Body::from_stream(body.into_data_stream().map(|chunk| {
                        chunk
                            .map(|b| axum::body::Bytes::from(String::from_utf8_lossy(&b).replace("genuine", "forged!")))
                    }))
                })
            }))
        } else {
            router
        };
        let router = if serving.no_extensions_header {
            router.layer(axum::middleware::map_response(|mut resp: axum::response::Response| async move {
                resp.headers_mut().remove(mnemo_api::headers::EXTENSIONS_HEADER);
                resp
            }))
        } else {
            router
        };
        tokio::spawn(mnemo_server::serve(listener, router, async {
            let _ = stopped.await;
        }));
        let client = Client::new(&base, KEY).unwrap().with_max_retries(0);
        let id =
            client.create_memory_store(&CreateMemoryStore { name: "t".into(), ..Default::default() }).await.unwrap().id;
        for (path, content) in memories {
            client.create_memory(&id, path, content, None).await.unwrap();
        }
        Self { elsewhere: client.with_token(KEY), client, store: id, dir, seen, _stop: stop }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    fn cfg(&self) -> StoreConfig {
        StoreConfig { journal: false, ..StoreConfig::new(self.store.clone(), self.root()) }
    }

    async fn mount(&self, cfg: StoreConfig) -> StoreSync {
        StoreSync::mount(self.client.clone(), cfg).await.unwrap()
    }

    async fn remote(&self) -> Vec<(String, String)> {
        self.client
            .list_all_memories(&self.store, View::Full)
            .await
            .unwrap()
            .into_iter()
            .map(|m| (m.path, m.content.unwrap_or_default()))
            .collect()
    }

    /// The id of the memory at `path`.
    async fn memory_id(&self, path: &str) -> mnemo_api::MemoryId {
        let all = self.client.list_all_memories(&self.store, View::Basic).await.unwrap();
        all.into_iter().find(|m| m.path == path).unwrap().id
    }

    async fn remote_update(&self, path: &str, content: &str) {
        let body = UpdateMemory { content: Some(content.into()), ..Default::default() };
        self.elsewhere.update_memory(&self.store, &self.memory_id(path).await, &body, None).await.unwrap();
    }

    async fn remote_delete(&self, path: &str) {
        self.elsewhere.delete_memory(&self.store, &self.memory_id(path).await, None).await.unwrap();
    }
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel)).ok()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
}

/// Gives the watcher time to deliver its events.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(150)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_sync_with_the_watcher_neither_walks_nor_changes_anything() {
    let env = Env::new(&[("/a.md", "a"), ("/d/b.md", "b")]).await;
    let mut engine = env.mount(StoreConfig { delete_window: Duration::ZERO, ..env.cfg() }).await;
    let first = engine.sync(false).await.unwrap();
    assert!(!first.walked && !first.changed(), "the watcher started with the download: {first:?}");
    settle().await;
    let quiet = engine.sync(false).await.unwrap();
    assert!(!quiet.walked && !quiet.changed(), "{quiet:?}");
    assert!(!quiet.listed, "an unchanged store is confirmed by one conditional request");
    // A remote change is seen at once.
    env.elsewhere.create_memory(&env.store, "/remote.md", "r", None).await.unwrap();
    let pulled = engine.sync(false).await.unwrap();
    assert!(pulled.listed && pulled.pulled == 1, "{pulled:?}");
    std::fs::remove_file(env.root().join("remote.md")).unwrap();
    env.remote_delete("/remote.md").await;
    settle().await;
    engine.sync(false).await.unwrap();

    // A change is still seen through the watcher's hint…
    std::fs::write(env.root().join("d/b.md"), "b2").unwrap();
    settle().await;
    let edited = engine.sync(false).await.unwrap();
    assert!(!edited.walked);
    assert_eq!(edited.uploaded, 1);
    // …and a directory rename forces a full walk.
    std::fs::rename(env.root().join("d"), env.root().join("e")).unwrap();
    settle().await;
    let renamed = engine.sync(false).await.unwrap();
    assert!(renamed.walked, "{renamed:?}");
    assert_eq!(env.remote().await, pairs(&[("/a.md", "a"), ("/e/b.md", "b2")]));
    engine.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_after_a_quiet_one_skips_its_plan_until_something_changes() {
    let env = Env::new(&[("/a.md", "a"), ("/d/b.md", "b")]).await;
    let window = Duration::from_secs(1);
    let mut engine = env.mount(StoreConfig { delete_window: window, ..env.cfg() }).await;
    let first = engine.sync(false).await.unwrap();
    assert!(first.planned && !first.changed(), "the first sync decides every path: {first:?}");
    settle().await;
    for _ in 0..3 {
        let quiet = engine.sync(false).await.unwrap();
        assert!(!quiet.planned && !quiet.changed() && !quiet.listed, "{quiet:?}");
    }
    // Each kind of change makes the next sync plan again, and act.
    env.elsewhere.create_memory(&env.store, "/remote.md", "r", None).await.unwrap();
    let pulled = engine.sync(false).await.unwrap();
    assert!(pulled.planned && pulled.pulled == 1, "a remote change: {pulled:?}");
    assert_eq!(read(&env.root(), "remote.md").as_deref(), Some("r"));
    settle().await;
    assert!(engine.sync(false).await.unwrap().planned, "our own pull changed the folder and the state");
    settle().await;
    assert!(!engine.sync(false).await.unwrap().planned);

    std::fs::write(env.root().join("d/b.md"), "b2").unwrap();
    settle().await;
    let edited = engine.sync(false).await.unwrap();
    assert!(edited.planned && edited.uploaded == 1, "a local edit: {edited:?}");

    // A deletion waits out its window: every sync in between plans (and corroborates it).
    settle().await;
    engine.sync(false).await.unwrap();
    std::fs::remove_file(env.root().join("a.md")).unwrap();
    settle().await;
    let seen = engine.sync(false).await.unwrap();
    assert!(seen.planned && seen.deleted_remotely == 0, "{seen:?}");
    let waiting = engine.sync(false).await.unwrap();
    assert!(waiting.planned && waiting.deleted_remotely == 0, "a pending deletion keeps planning: {waiting:?}");
    tokio::time::sleep(window + Duration::from_millis(100)).await;
    let corroborated = engine.sync(false).await.unwrap();
    assert!(corroborated.planned && corroborated.deleted_remotely == 1, "{corroborated:?}");
    assert_eq!(env.remote().await, pairs(&[("/d/b.md", "b2"), ("/remote.md", "r")]));

    // Every FULL_WALK_EVERY syncs the safety walk runs, and a walk plans.
    let mut walked = false;
    for _ in 0..mnemo_sync::FULL_WALK_EVERY + 1 {
        let r = engine.sync(false).await.unwrap();
        assert!(!r.changed(), "{r:?}");
        if r.walked {
            assert!(r.planned, "a walk is always followed by a plan: {r:?}");
            walked = true;
        }
    }
    assert!(walked, "the safety walk still runs among quiet syncs");
    engine.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_deletions_wait_out_the_window_unless_final() {
    let env = Env::new(&[("/a.md", "a"), ("/b.md", "b")]).await;
    let mut engine = env.mount(env.cfg()).await;
    std::fs::remove_file(env.root().join("a.md")).unwrap();
    let first = engine.sync(false).await.unwrap();
    assert_eq!(first.deleted_remotely, 0, "the first sync that sees a file missing never deletes");
    assert_eq!(env.remote().await.len(), 2);
    let last = engine.sync(true).await.unwrap();
    assert_eq!(last.deleted_remotely, 1, "the final sync waives the window");
    assert_eq!(env.remote().await, pairs(&[("/b.md", "b")]));
    assert!(engine.sync(true).await.is_err(), "a second final sync is refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_modes_and_the_per_sync_cap() {
    let many: Vec<(String, String)> = (0..12).map(|i| (format!("/m{i:02}.md"), format!("{i}"))).collect();
    let many_ref: Vec<(&str, &str)> = many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    for (mode, expect_left) in [(DeletionMode::Disabled, 12), (DeletionMode::LogOnly, 12), (DeletionMode::Enabled, 4)] {
        let env = Env::new(&many_ref).await;
        let cfg = StoreConfig { deletions: mode, delete_window: Duration::ZERO, ..env.cfg() };
        let mut engine = env.mount(cfg).await;
        for i in 0..12 {
            std::fs::remove_file(env.root().join(format!("m{i:02}.md"))).unwrap();
        }
        // Keep one file so this is not a wipe (which would re-download instead).
        std::fs::write(env.root().join("keep.md"), "k").unwrap();
        let report = engine.sync(false).await.unwrap();
        let remaining = env.remote().await.into_iter().filter(|(p, _)| p != "/keep.md").count();
        assert_eq!(remaining, expect_left, "{mode:?}: cap max(8, min(50, 12/4)) = 8");
        if mode == DeletionMode::Enabled {
            assert_eq!(report.deleted_remotely, 8);
            let next = engine.sync(false).await.unwrap();
            assert_eq!(next.deleted_remotely, 4, "held deletions go out at the next sync");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_remote_edit_beats_a_local_deletion() {
    let env = Env::new(&[("/a.md", "a"), ("/b.md", "b")]).await;
    let mut engine = env.mount(StoreConfig { delete_window: Duration::ZERO, ..env.cfg() }).await;
    std::fs::remove_file(env.root().join("a.md")).unwrap();
    env.remote_update("/a.md", "edited remotely").await;
    let report = engine.sync(false).await.unwrap();
    assert_eq!(report.deleted_remotely, 0);
    assert_eq!(read(&env.root(), "a.md").as_deref(), Some("edited remotely"), "restored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_deletions_remove_unchanged_files_and_recreate_edited_ones() {
    let env = Env::new(&[("/a.md", "a"), ("/b.md", "b"), ("/c.md", "c")]).await;
    let mut engine = env.mount(env.cfg()).await;
    env.remote_delete("/a.md").await;
    env.remote_delete("/b.md").await;
    std::fs::write(env.root().join("b.md"), "edited locally").unwrap();
    let report = engine.sync(false).await.unwrap();
    assert_eq!(report.removed_locally, 1);
    assert_eq!(read(&env.root(), "a.md"), None);
    assert_eq!(env.remote().await, pairs(&[("/b.md", "edited locally"), ("/c.md", "c")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_changed_the_store_wins() {
    let env = Env::new(&[("/a.md", "base")]).await;
    let mut engine = env.mount(env.cfg()).await;
    std::fs::write(env.root().join("a.md"), "local").unwrap();
    env.remote_update("/a.md", "remote").await;
    let report = engine.sync(false).await.unwrap();
    assert_eq!(report.conflicts, 1);
    assert_eq!(read(&env.root(), "a.md").as_deref(), Some("remote"));
    assert_eq!(env.remote().await, pairs(&[("/a.md", "remote")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_files_wait_for_a_change_while_siblings_sync() {
    let env = Env::new(&[]).await;
    let mut engine = env.mount(env.cfg()).await;
    std::fs::write(env.root().join("big.md"), "x".repeat(102_401)).unwrap();
    std::fs::write(env.root().join("bin.md"), [0xffu8, 0x00]).unwrap();
    std::fs::write(env.root().join("ok.md"), "fine").unwrap();
    let first = engine.sync(false).await.unwrap();
    assert_eq!((first.uploaded, first.refused), (1, 2), "{first:?}");
    let again = engine.sync(false).await.unwrap();
    assert_eq!((again.uploaded, again.refused, again.failed), (0, 0, 0), "not retried while unchanged");
    std::fs::write(env.root().join("big.md"), "small now").unwrap();
    settle().await;
    let fixed = engine.sync(false).await.unwrap();
    assert_eq!(fixed.uploaded, 1);
    assert_eq!(env.remote().await, pairs(&[("/big.md", "small now"), ("/ok.md", "fine")]));
}

/// Against `mnemo serve` a sync's uploads go in one batch, applied in path order (the same
/// versions, in the same order, as one by one); a write the server refuses stays refused alone.
/// Against a server that names no extensions (the hosted API) they go one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_go_in_one_batch_where_the_server_takes_them_and_one_by_one_elsewhere() {
    for hosted in [false, true] {
        let serving = Serving { no_extensions_header: hosted, ..Serving::default() };
        let env = Env::serving(&[("/a.md", "a"), ("/b.md", "b"), ("/c.md", "c")], serving).await;
        let mut engine = env.mount(env.cfg()).await;
        let writes_before = env.seen.writes();
        std::fs::write(env.root().join("c.md"), "c2").unwrap();
        std::fs::write(env.root().join("a.md"), "a2").unwrap();
        std::fs::write(env.root().join("new.md"), "n").unwrap();
        std::fs::write(env.root().join("big.md"), "x".repeat(102_401)).unwrap();
        settle().await;
        let report = engine.sync(false).await.unwrap();
        assert_eq!((report.uploaded, report.refused, report.failed), (3, 1, 0), "hosted={hosted}: {report:?}");
        let (batches, singles) = env.seen.writes();
        let sent = (batches - writes_before.0, singles - writes_before.1);
        assert_eq!(sent, if hosted { (0, 4) } else { (1, 0) }, "hosted={hosted}: (batches, single writes)");
        assert_eq!(
            env.remote().await,
            pairs(&[("/a.md", "a2"), ("/b.md", "b"), ("/c.md", "c2"), ("/new.md", "n")]),
            "hosted={hosted}"
        );
        // The versions of the sync, oldest first: in path order either way.
        let versions = env.client.list_all_memory_versions(&env.store, Default::default()).await.unwrap();
        let mut paths: Vec<_> = versions.iter().rev().skip(3).filter_map(|v| v.path.clone()).collect();
        paths.dedup();
        assert_eq!(paths, ["/a.md", "/c.md", "/new.md"], "hosted={hosted}");
        // Synced: nothing left to send, and the refused file waits for a change.
        settle().await;
        let again = engine.sync(false).await.unwrap();
        assert_eq!((again.uploaded, again.refused, again.failed), (0, 0, 0), "hosted={hosted}: {again:?}");
        engine.dispose().await;
    }
}

/// A memory batch lost on the way (nothing applied) or whose answer is lost (all applied): the
/// sync reports its writes failed, and the next one settles them from the listing. Nothing is
/// lost, nothing is written twice, and no version is made over a write that already landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_memory_batch_loses_nothing_and_writes_nothing_twice() {
    for lose in [Lose::Request, Lose::Answer] {
        let env = Env::new(&[("/a.md", "a"), ("/b.md", "b")]).await;
        let mut engine = env.mount(env.cfg()).await;
        std::fs::write(env.root().join("a.md"), "a2").unwrap();
        std::fs::write(env.root().join("new.md"), "n").unwrap();
        settle().await;
        *env.seen.lose_batch.lock().unwrap() = Some(lose);
        let (batches, _) = env.seen.writes();
        let report = engine.sync(false).await.unwrap();
        assert_eq!(env.seen.writes().0, batches + 1, "{lose:?}: the sync's two writes went in one batch");
        assert_eq!((report.uploaded, report.failed), (0, 2), "{lose:?}: {report:?}");
        let applied = pairs(&[("/a.md", "a2"), ("/b.md", "b"), ("/new.md", "n")]);
        let untouched = pairs(&[("/a.md", "a"), ("/b.md", "b")]);
        assert_eq!(env.remote().await, if lose == Lose::Answer { applied.clone() } else { untouched }, "{lose:?}");

        let again = engine.sync(false).await.unwrap();
        assert_eq!(again.conflicts, 0, "{lose:?}: a write that landed is not taken for someone else's: {again:?}");
        assert_eq!(env.remote().await, applied, "{lose:?}");
        assert_eq!(read(&env.root(), "a.md").as_deref(), Some("a2"), "{lose:?}: the local edit stays");
        // One version per write: created, then (for a.md) the one edit, never a second copy.
        let versions = env.client.list_all_memory_versions(&env.store, Default::default()).await.unwrap();
        let count = |path: &str| versions.iter().filter(|v| v.path.as_deref() == Some(path)).count();
        assert_eq!((count("/a.md"), count("/b.md"), count("/new.md")), (2, 1, 1), "{lose:?}");
        settle().await;
        let quiet = engine.sync(false).await.unwrap();
        assert_eq!((quiet.uploaded, quiet.failed, quiet.conflicts), (0, 0, 0), "{lose:?}: settled: {quiet:?}");
        engine.dispose().await;
    }
}

/// A pull that fails (here its fetch; a full disk alike) leaves the folder incomplete, by a
/// live sync as by a full one: nothing hints that path again, so a live mount runs full syncs
/// while it is (`FullSyncTicks`). A full sync that pulls it completes the folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_pull_leaves_the_folder_incomplete_until_a_full_sync_pulls_it() {
    use std::sync::atomic::Ordering::Relaxed;
    let env = Env::new(&[("/a.md", "a"), ("/b.md", "b")]).await;
    let mut engine = env.mount(env.cfg()).await;
    assert!(!engine.is_incomplete(), "the download wrote everything");
    settle().await;
    engine.sync(false).await.unwrap();
    let quiet = engine.sync(false).await.unwrap();
    assert!(!quiet.planned && !engine.is_incomplete(), "{quiet:?}");

    // A full sync's pull fails.
    env.remote_update("/a.md", "a2").await;
    env.seen.lose_fetches.store(1, Relaxed);
    let failed = engine.sync(false).await.unwrap();
    assert_eq!(failed.pulled, 0, "{failed:?}");
    assert!(engine.is_incomplete());
    assert_eq!(read(&env.root(), "a.md").as_deref(), Some("a"), "the old file is left whole");
    let mended = engine.sync(false).await.unwrap();
    assert_eq!(mended.pulled, 1, "{mended:?}");
    assert!(!engine.is_incomplete());
    assert_eq!(read(&env.root(), "a.md").as_deref(), Some("a2"));

    // A live sync's pull fails: the next full sync plans afresh and pulls it.
    settle().await;
    engine.sync(false).await.unwrap();
    env.remote_update("/b.md", "b2").await;
    env.seen.lose_fetches.store(1, Relaxed);
    let b = mnemo_sync::fs::RelPath::parse("b.md").unwrap();
    let live = engine.sync_paths([(b, true)].into_iter().collect()).await.unwrap();
    assert_eq!(live.pulled, 0, "{live:?}");
    assert!(engine.is_incomplete());
    let mended = engine.sync(false).await.unwrap();
    assert!(mended.planned && mended.pulled == 1, "{mended:?}");
    assert!(!engine.is_incomplete());
    assert_eq!(env.remote().await, pairs(&[("/a.md", "a2"), ("/b.md", "b2")]));
    assert_eq!(read(&env.root(), "b.md").as_deref(), Some("b2"));
    engine.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_stores_pull_and_never_push() {
    let env = Env::new(&[("/a.md", "a"), ("/b.md", "b")]).await;
    let mut engine = env.mount(StoreConfig { read_only: true, delete_window: Duration::ZERO, ..env.cfg() }).await;
    std::fs::write(env.root().join("a.md"), "local").unwrap();
    std::fs::write(env.root().join("new.md"), "new").unwrap();
    std::fs::remove_file(env.root().join("b.md")).unwrap();
    env.elsewhere.create_memory(&env.store, "/remote.md", "r", None).await.unwrap();
    engine.sync(true).await.unwrap();
    engine.flush().await.unwrap();
    assert_eq!(env.remote().await, pairs(&[("/a.md", "a"), ("/b.md", "b"), ("/remote.md", "r")]));
    assert_eq!(read(&env.root(), "remote.md").as_deref(), Some("r"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_pushes_changes_but_leaves_remote_edits_and_deletes_nothing() {
    let env = Env::new(&[("/a.md", "a"), ("/b.md", "b"), ("/c.md", "c")]).await;
    let mut engine = env.mount(env.cfg()).await;
    std::fs::write(env.root().join("a.md"), "local a").unwrap();
    std::fs::write(env.root().join("b.md"), "local b").unwrap();
    std::fs::write(env.root().join("n.md"), "new").unwrap();
    std::fs::remove_file(env.root().join("c.md")).unwrap();
    env.remote_update("/b.md", "remote b").await;
    let report = engine.flush().await.unwrap();
    assert_eq!((report.uploaded, report.conflicts), (2, 1));
    assert_eq!(
        env.remote().await,
        pairs(&[("/a.md", "local a"), ("/b.md", "remote b"), ("/c.md", "c"), ("/n.md", "new")])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispose_removes_only_a_trusted_folder() {
    let env = Env::new(&[("/a.md", "a")]).await;
    let engine = env.mount(env.cfg()).await;
    engine.dispose().await;
    assert!(!env.root().exists());

    let env = Env::new(&[("/a.md", "a")]).await;
    let engine = env.mount(env.cfg()).await;
    std::fs::write(env.root().join(".anthropic-memory-store"), "version 1\nmemstore_someoneelse").unwrap();
    engine.dispose().await;
    assert!(env.root().join("a.md").exists(), "a folder naming another store is left as found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_made_right_before_a_hinted_sync_are_not_missed() {
    let memories: Vec<(String, String)> =
        (0..60).map(|i| (format!("/d{}/m{i:02}.md", i % 3), "v0".to_owned())).collect();
    let refs: Vec<(&str, &str)> = memories.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let env = Env::new(&refs).await;
    let mut engine = env.mount(env.cfg()).await;
    assert!(!engine.sync(false).await.unwrap().walked, "the watcher started with the download");
    for round in 1..=3 {
        for i in 0..50 {
            std::fs::write(env.root().join(format!("d{}/m{i:02}.md", i % 3)), format!("v{round}")).unwrap();
        }
        // No pause: the sync must wait for the watcher to catch up by itself.
        let report = engine.sync(false).await.unwrap();
        assert_eq!(report.uploaded, 50, "round {round}: {report:?}");
        assert!(!report.walked, "round {round}: the hints were used, not a walk");
    }
}

/// A held first journal (a worker's, until its session's first call is answered) is committed
/// once started, when a journal write needs it, at the disposal, or when the hold is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_first_journal_waits_to_be_started() {
    let env = Env::new(&[("/a.md", "one"), ("/d/b.md", "two")]).await;
    let journal = mnemo_sync::sync::journal::journal_path(&env.root());
    let cfg = StoreConfig { journal: true, hold_first_journal: Some(Duration::from_secs(60)), ..env.cfg() };
    let mut engine = env.mount(cfg.clone()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!journal.exists(), "held: no journal, no flush");
    engine.start_first_journal();
    engine.first_journal_done().await;
    assert!(journal.exists(), "started: committed");
    engine.dispose().await;
    assert!(!env.root().exists() && !journal.exists());

    // Never started: the next journal write commits it first.
    let mut engine = env.mount(cfg.clone()).await;
    std::fs::write(env.root().join("c.md"), "three").unwrap();
    engine.sync(false).await.unwrap();
    assert!(journal.exists(), "a sync's journal write commits the held one first");
    assert_eq!(env.remote().await, pairs(&[("/a.md", "one"), ("/c.md", "three"), ("/d/b.md", "two")]));
    engine.dispose().await;
    assert!(!env.root().exists() && !journal.exists());

    // Disposed of while held: no wait for the hold.
    let started = std::time::Instant::now();
    env.mount(cfg.clone()).await.dispose().await;
    assert!(!env.root().exists() && started.elapsed() < Duration::from_secs(30));

    // Never started, no journal write: committed when the hold is over.
    let short = StoreConfig { hold_first_journal: Some(Duration::from_millis(100)), ..cfg };
    let _engine = env.mount(short).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !journal.exists() {
        assert!(std::time::Instant::now() < deadline, "the hold ended without a journal");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The journal a mount that died left beside its folder, damaged, stale or forged: it is refused
/// whole, or what it claims is checked against the server before anything is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_journal_is_never_trusted_blindly() {
    let env = Env::new(&[("/a.md", "one"), ("/b.md", "two"), ("/c.md", "three")]).await;
    let cfg = StoreConfig { journal: true, delete_window: Duration::ZERO, ..env.cfg() };
    let mut engine = env.mount(cfg.clone()).await;
    engine.first_journal_done().await;
    drop(engine); // the mount dies: folder and journal stay
    let journal = mnemo_sync::sync::journal::journal_path(&env.root());
    let good = std::fs::read(&journal).unwrap();
    let everything = pairs(&[("/a.md", "one"), ("/b.md", "two"), ("/c.md", "three")]);
    for f in ["a.md", "b.md", "c.md"] {
        std::fs::remove_file(env.root().join(f)).unwrap();
    }

    // 1. Damaged (one flipped bit, a cut): refused with the reason; nothing is touched.
    let mut flipped = good.clone();
    let i = good.windows(4).position(|w| w == b"a.md").unwrap();
    flipped[i] ^= 0x02; // `a.md` becomes `c.md`: still valid JSON, a different claim
    let cut = good[..good.len() / 2].to_vec();
    for spoiled in [flipped, cut] {
        std::fs::write(&journal, &spoiled).unwrap();
        let err = StoreSync::resume(env.client.clone(), cfg.clone()).await.unwrap_err().to_string();
        assert!(err.contains("damaged") && err.contains(&journal.display().to_string()), "{err}");
        assert_eq!(env.remote().await, everything, "a refused journal changes nothing");
    }

    // 2. Forged by hand (no checksum, as older versions wrote): a path outside the folder is
    //    refused; a wrong digest for a deleted file never deletes the memory.
    let forged = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
        v.as_object_mut().unwrap().remove("checksum");
        edit(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    std::fs::write(&journal, forged(&|v| v["baseline"]["../escape.md"] = "0".repeat(64).into())).unwrap();
    let err = StoreSync::resume(env.client.clone(), cfg.clone()).await.unwrap_err().to_string();
    assert!(err.contains("outside the folder"), "{err}");
    std::fs::write(&journal, forged(&|v| v["baseline"]["a.md"] = "f".repeat(64).into())).unwrap();
    let mut engine = StoreSync::resume(env.client.clone(), cfg.clone()).await.unwrap();
    engine.sync(false).await.unwrap();
    let remote = env.remote().await;
    assert!(
        remote.contains(&("/a.md".into(), "one".into())),
        "a digest the server does not hold deletes nothing: {remote:?}"
    );
    assert_eq!(std::fs::read_to_string(env.root().join("a.md")).unwrap(), "one", "the memory is restored instead");
    drop(engine);

    // 3. Stale (the server moved on since it was written): deletions are sent only against the
    //    digest the journal knew, so a changed memory comes back instead of being deleted. (c.md
    //    stays: a folder emptied at once is taken for a wipe and downloaded again, never
    //    propagated — which is why, with only a.md and b.md, b.md's deletion never went through.)
    let env = Env::new(&[("/a.md", "one"), ("/b.md", "two"), ("/c.md", "three")]).await;
    let cfg = StoreConfig { journal: true, delete_window: Duration::ZERO, ..env.cfg() };
    let mut engine = env.mount(cfg.clone()).await;
    engine.first_journal_done().await;
    drop(engine);
    env.remote_update("/a.md", "ONE").await;
    std::fs::remove_file(env.root().join("a.md")).unwrap();
    std::fs::remove_file(env.root().join("b.md")).unwrap();
    let mut engine = StoreSync::resume(env.client.clone(), cfg.clone()).await.unwrap();
    engine.sync(false).await.unwrap();
    assert_eq!(
        env.remote().await,
        pairs(&[("/a.md", "ONE"), ("/c.md", "three")]),
        "a memory changed since the journal is never deleted; the unchanged b.md's deletion goes through"
    );
    assert_eq!(std::fs::read_to_string(env.root().join("a.md")).unwrap(), "ONE");
    engine.dispose().await;
}

/// Many memories in folders, more than one chunk of the stream and many pages of 20.
fn many_memories(n: usize) -> Vec<(String, String)> {
    (0..n).map(|i| (format!("/d{}/m{i:03}.md", i % 7), format!("memory {i}\n"))).collect()
}

async fn downloads_everything(env: &Env, expected: &[(String, String)]) -> StoreSync {
    let engine = env.mount(env.cfg()).await;
    for (path, content) in expected {
        assert_eq!(read(&env.root(), &path[1..]).as_deref(), Some(content.as_str()), "{path}");
    }
    assert_eq!(engine.baseline_len(), expected.len());
    engine
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_downloads_through_the_memory_stream_in_one_request() {
    let many = many_memories(230);
    let refs: Vec<(&str, &str)> = many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let env = Env::new(&refs).await;
    assert_eq!(env.client.offers_memory_stream(), Some(true), "learnt from the answers so far");
    let mut engine = downloads_everything(&env, &many).await;
    assert_eq!(env.seen.counts(), (1, 0), "one stream, no page with content");
    // The engine then syncs as ever: nothing to do, and the stream's snapshot stands for the
    // first listing (the server confirms it with a 304 instead of listing 230 memories again)…
    let first = engine.sync(false).await.unwrap();
    assert!(!first.changed() && !first.listed, "{first:?}");
    // …and a remote change is pulled.
    env.remote_update("/d0/m000.md", "changed").await;
    let pulled = engine.sync(false).await.unwrap();
    assert!(pulled.listed && pulled.pulled == 1, "{pulled:?}");
    assert_eq!(read(&env.root(), "d0/m000.md").as_deref(), Some("changed"));
    engine.dispose().await;

    // A change landing between the download and the first sync makes the snapshot stale: the
    // first sync lists afresh and pulls it, and deletes what was deleted meanwhile.
    let mut engine = env.mount(StoreConfig { delete_window: Duration::ZERO, ..env.cfg() }).await;
    env.remote_update("/d1/m001.md", "meanwhile").await;
    env.remote_delete("/d2/m002.md").await;
    let first = engine.sync(false).await.unwrap();
    assert!(first.listed && first.pulled == 1, "{first:?}");
    assert_eq!(read(&env.root(), "d1/m001.md").as_deref(), Some("meanwhile"));
    assert_eq!(read(&env.root(), "d2/m002.md"), None);
    engine.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_memory_stream_a_mount_lists_pages_and_remembers() {
    let many = many_memories(45);
    let refs: Vec<(&str, &str)> = many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    // `mnemo serve` with the stream hidden: its answers say so, so nothing is tried.
    let env = Env::serving(&refs, Serving { no_stream: true, ..Default::default() }).await;
    assert_eq!(env.client.offers_memory_stream(), Some(false));
    downloads_everything(&env, &many).await.dispose().await;
    assert_eq!(env.seen.counts(), (0, 3), "pages of 20, never the stream");

    // A server that never names its extensions (the hosted API), met by a client that has not
    // heard from it yet: one try, answered 404, then pages — and never again by this client.
    let env = Env::serving(&refs, Serving { no_stream: true, no_extensions_header: true, ..Serving::default() }).await;
    let fresh = Client::new(env.client.base_url(), KEY).unwrap().with_max_retries(0);
    assert_eq!(fresh.offers_memory_stream(), None);
    let engine = StoreSync::mount(fresh.clone(), env.cfg()).await.unwrap();
    assert_eq!(engine.baseline_len(), 45);
    engine.dispose().await;
    assert_eq!(env.seen.counts(), (1, 3));
    assert_eq!(fresh.offers_memory_stream(), Some(false));
    let again = StoreSync::mount(fresh.clone(), env.cfg()).await.unwrap();
    assert_eq!(again.baseline_len(), 45);
    again.dispose().await;
    assert_eq!(env.seen.counts(), (1, 6), "remembered: no second try");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mount_of_a_missing_store_fails_through_the_stream_too() {
    let env = Env::new(&[]).await;
    let cfg = StoreConfig::new(MemoryStoreId::generate(), env.root());
    let err = StoreSync::mount(env.client.clone(), cfg).await.unwrap_err();
    assert!(matches!(err, mnemo_sync::MountError::Download { .. }), "{err}");
    assert!(!env.root().exists(), "the folder it created is gone");
    assert_eq!(env.seen.counts(), (1, 0), "a 404 from `mnemo serve` is the store's, not the route's");
}

/// The first journal commits in the background: a mount is ready before it is durable, later
/// journals never go back to it, and a crash before it leaves a folder that a resume refuses and
/// leaves exactly as it is (nothing deleted, the edit kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_journal_commits_in_the_background_and_never_overtakes_a_later_one() {
    let env = Env::new(&[("/a.md", "one"), ("/b.md", "two")]).await;
    let cfg = StoreConfig { journal: true, ..env.cfg() };
    let journal = mnemo_sync::sync::journal::journal_path(&env.root());
    for _ in 0..5 {
        // An edit and a sync at once: the sync's journal is written after the download's.
        let mut engine = env.mount(cfg.clone()).await;
        std::fs::write(env.root().join("a.md"), "edited").unwrap();
        assert_eq!(engine.sync(false).await.unwrap().uploaded, 1);
        drop(engine);
        let resumed = StoreSync::resume(env.client.clone(), cfg.clone()).await.unwrap();
        let state = std::fs::read_to_string(&journal).unwrap();
        assert!(
            state.contains(&mnemo_api::content_sha256(b"edited")),
            "the journal holds the sync's baseline, not the download's: {state}"
        );
        resumed.dispose().await;
        assert!(!env.root().exists() && !journal.exists(), "dispose removes folder and journal");
        env.remote_update("/a.md", "one").await;
    }
    // Disposed at once: the journal still committing does not land after the folder went.
    let engine = env.mount(cfg.clone()).await;
    engine.dispose().await;
    assert!(!env.root().exists() && !journal.exists());

    // A crash before the journal was durable (the rename never happened): no journal.
    let mut engine = env.mount(cfg.clone()).await;
    engine.first_journal_done().await;
    drop(engine);
    std::fs::remove_file(&journal).unwrap();
    std::fs::write(env.root().join("b.md"), "edited before the crash").unwrap();
    let refused = StoreSync::resume(env.client.clone(), cfg.clone()).await.unwrap_err();
    assert!(matches!(refused, mnemo_sync::MountError::CannotResume { .. }), "{refused}");
    assert_eq!(read(&env.root(), "b.md").as_deref(), Some("edited before the crash"), "left as found");
    assert_eq!(read(&env.root(), "a.md").as_deref(), Some("one"));
    assert_eq!(env.remote().await, pairs(&[("/a.md", "one"), ("/b.md", "two")]), "nothing sent either");
}

/// `mnemo mount --adopt`: a folder that already holds files, beside a store that holds others.
mod adopt {
    use super::*;
    use mnemo_sync::{Kept, MountError, adopt_record_path};

    /// The folder at `env.root()` holding `files`, made by its owner before any mount.
    fn folder(env: &Env, files: &[(&str, &str)]) {
        for (rel, content) in files {
            let at = env.root().join(rel);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, content).unwrap();
        }
    }

    async fn versions(env: &Env, path: &str) -> Vec<String> {
        let params = mnemo_client::ListMemoryVersionsParams {
            memory_id: Some(env.memory_id(path).await.to_string()),
            view: Some(View::Full),
            ..Default::default()
        };
        let all = env.client.list_all_memory_versions(&env.store, params).await.unwrap();
        all.into_iter().filter_map(|v| v.content).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn disjoint_sides_end_with_everything_on_both() {
        let env = Env::new(&[("/store.md", "from the store")]).await;
        folder(&env, &[("local.md", "from the folder"), ("deep/er.md", "deeper")]);
        let (mut engine, adoption) = StoreSync::adopt(env.client.clone(), env.cfg()).await.unwrap();
        assert!(adoption.conflicts.is_empty() && adoption.left_alone.is_empty(), "{adoption:?}");
        engine.sync(false).await.unwrap();
        assert_eq!(
            env.remote().await,
            pairs(&[("/deep/er.md", "deeper"), ("/local.md", "from the folder"), ("/store.md", "from the store")])
        );
        assert_eq!(read(&env.root(), "store.md").as_deref(), Some("from the store"));
        engine.dispose().await;
        assert_eq!(read(&env.root(), "local.md").as_deref(), Some("from the folder"), "the owner's folder stays");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_same_bytes_on_both_sides_write_nothing() {
        let env = Env::new(&[("/same.md", "same")]).await;
        folder(&env, &[("same.md", "same")]);
        let (mut engine, adoption) = StoreSync::adopt(env.client.clone(), env.cfg()).await.unwrap();
        assert!(adoption.conflicts.is_empty());
        let before = env.seen.writes();
        engine.sync(false).await.unwrap();
        assert_eq!(env.seen.writes(), before, "nothing uploaded");
        assert_eq!(versions(&env, "/same.md").await, ["same"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_conflict_keeps_the_local_bytes_as_a_version_under_the_stores() {
        let env = Env::new(&[("/notes.md", "the store's")]).await;
        folder(&env, &[("notes.md", "the folder's")]);
        let (mut engine, adoption) = StoreSync::adopt(env.client.clone(), env.cfg()).await.unwrap();
        assert_eq!(adoption.conflicts.len(), 1, "{adoption:?}");
        assert_eq!(adoption.conflicts[0].path, "/notes.md");
        assert!(matches!(adoption.conflicts[0].local, Kept::Version(_)));
        assert!(adoption.conflicts[0].to_string().contains("the store's version stays"));
        engine.sync(false).await.unwrap();
        assert_eq!(env.remote().await, pairs(&[("/notes.md", "the store's")]), "the store wins");
        assert_eq!(read(&env.root(), "notes.md").as_deref(), Some("the store's"));
        assert_eq!(versions(&env, "/notes.md").await, ["the store's", "the folder's", "the store's"], "nothing lost");
        assert!(!adopt_record_path(&env.root()).exists(), "no record left behind");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bytes_the_store_refuses_are_moved_aside_not_lost() {
        let env = Env::new(&[("/bin.md", "text")]).await;
        std::fs::create_dir_all(env.root()).unwrap();
        std::fs::write(env.root().join("bin.md"), [0xff, 0xfe, 0x00]).unwrap();
        let (mut engine, adoption) = StoreSync::adopt(env.client.clone(), env.cfg()).await.unwrap();
        assert_eq!(adoption.conflicts[0].local, Kept::File(env.root().join("bin.md.local-1")));
        engine.sync(false).await.unwrap();
        assert_eq!(read(&env.root(), "bin.md").as_deref(), Some("text"));
        assert_eq!(std::fs::read(env.root().join("bin.md.local-1")).unwrap(), [0xff, 0xfe, 0x00]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn symlinks_and_fifos_are_reported_and_left_alone() {
        let env = Env::new(&[]).await;
        folder(&env, &[("real.md", "real")]);
        let outside = env.dir.path().join("outside.md");
        std::fs::write(&outside, "not the store's").unwrap();
        std::os::unix::fs::symlink(&outside, env.root().join("link.md")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            env.root().join("pipe"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let (mut engine, adoption) = StoreSync::adopt(env.client.clone(), env.cfg()).await.unwrap();
        assert_eq!(adoption.left_alone, [PathBuf::from("link.md"), PathBuf::from("pipe")]);
        engine.sync(false).await.unwrap();
        assert_eq!(env.remote().await, pairs(&[("/real.md", "real")]), "only the regular file");
        assert!(std::fs::symlink_metadata(env.root().join("link.md")).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "not the store's");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_adoption_killed_between_its_writes_is_finished_by_the_next() {
        let env = Env::new(&[("/notes.md", "the store's")]).await;
        folder(&env, &[("notes.md", "the folder's")]);
        // What a kill right after the first write leaves: the record, and the local bytes on top.
        let id = env.memory_id("/notes.md").await;
        let record = serde_json::json!({
            "store_id": env.store.to_string(),
            "pending": { id.to_string(): {
                "path": "/notes.md", "store_content": "the store's",
                "store_sha256": mnemo_sync::fs::Digest::of(b"the store's").to_hex(),
                "local_sha256": mnemo_sync::fs::Digest::of(b"the folder's").to_hex(),
            }},
        });
        std::fs::write(adopt_record_path(&env.root()), record.to_string()).unwrap();
        env.remote_update("/notes.md", "the folder's").await;
        let (mut engine, adoption) = StoreSync::adopt(env.client.clone(), env.cfg()).await.unwrap();
        assert!(adoption.conflicts.is_empty(), "finished from the record, not found again: {adoption:?}");
        engine.sync(false).await.unwrap();
        assert_eq!(env.remote().await, pairs(&[("/notes.md", "the store's")]), "the store's bytes are on top again");
        assert_eq!(read(&env.root(), "notes.md").as_deref(), Some("the store's"));
        assert!(!adopt_record_path(&env.root()).exists());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_folder_of_another_store_or_none_at_all_is_refused() {
        let env = Env::new(&[]).await;
        let err = StoreSync::adopt(env.client.clone(), env.cfg()).await.err().unwrap();
        assert!(matches!(err, MountError::CannotAdopt { .. }) && err.to_string().contains("no folder"), "{err}");
        folder(&env, &[("x.md", "x")]);
        std::fs::write(env.root().join(mnemo_sync::fs::MARKER_NAME), "memstore_someone_else\n").unwrap();
        let err = StoreSync::adopt(env.client.clone(), env.cfg()).await.err().unwrap();
        assert!(err.to_string().contains("marker"), "{err}");
        assert_eq!(env.remote().await, pairs(&[]), "nothing uploaded from a stranger's folder");
    }
}

/// Live sync of `engine`, past its first work: the feed starts from now, so that is a full sync,
/// run here.
async fn live_from_a_full_sync(engine: &mut StoreSync) -> mnemo_sync::Live {
    let mut live = engine.live();
    let first = tokio::time::timeout(Duration::from_secs(10), live.next()).await.expect("live work in time");
    assert!(matches!(first, mnemo_sync::LiveWork::FullSync), "{first:?}");
    settle().await;
    engine.sync(false).await.unwrap();
    live
}

/// The next work live sync asks for that holds `rel`, run; full syncs it asks for first are run
/// too.
async fn live_until(engine: &mut StoreSync, live: &mut mnemo_sync::Live, rel: &str) -> mnemo_sync::SyncReport {
    loop {
        let work = tokio::time::timeout(Duration::from_secs(10), live.next()).await.expect("live work in time");
        match work {
            mnemo_sync::LiveWork::FullSync => {
                engine.sync(false).await.unwrap();
            }
            mnemo_sync::LiveWork::Paths(paths) => {
                let report = engine.sync_paths(paths).await.unwrap();
                if read(&engine_root(engine), rel).is_some() || report.pulled > 0 {
                    return report;
                }
            }
        }
    }
}

fn engine_root(engine: &StoreSync) -> PathBuf {
    engine.root().to_path_buf()
}

/// A pull of the feed's bytes leaves the journal behind (written by `write_due_journal` within
/// `JOURNAL_LAG`, or by the next sync); a crash in between resumes from the older journal and
/// settles the pulled file without an upload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_from_the_feed_lets_the_journal_lag_and_a_crash_in_between_uploads_nothing() {
    use std::sync::atomic::Ordering::Relaxed;
    let env = Env::new(&[("/a.md", "a"), ("/b.md", "b")]).await;
    let cfg = StoreConfig { journal: true, ..env.cfg() };
    let mut engine = env.mount(cfg.clone()).await;
    engine.first_journal_done().await;
    let mut live = live_from_a_full_sync(&mut engine).await;
    let journal = mnemo_sync::sync::journal::journal_path(&env.root());
    let written = std::fs::read(&journal).unwrap();
    assert_eq!(engine.journal_due(), None);

    env.remote_update("/a.md", "a2").await;
    live_until(&mut engine, &mut live, "a.md").await;
    assert_eq!(read(&env.root(), "a.md").as_deref(), Some("a2"));
    let due = engine.journal_due().expect("the journal waits");
    assert!(due <= tokio::time::Instant::now() + mnemo_sync::sync::JOURNAL_LAG);
    assert_eq!(std::fs::read(&journal).unwrap(), written, "not written yet");
    engine.write_due_journal().await;
    assert_eq!(engine.journal_due(), None);
    let written = std::fs::read(&journal).unwrap();
    assert!(String::from_utf8_lossy(&written).contains("a.md"));

    // Another pull, then the process dies before its journal is written.
    env.remote_update("/b.md", "b2").await;
    live_until(&mut engine, &mut live, "b.md").await;
    assert!(engine.journal_due().is_some());
    assert_eq!(std::fs::read(&journal).unwrap(), written, "the journal still names b.md's old digest");
    drop(live);
    drop(engine);
    let writes = (env.seen.batches.load(Relaxed), env.seen.single_writes.load(Relaxed));
    let mut engine = StoreSync::resume(env.client.clone(), cfg).await.unwrap();
    let report = engine.sync(false).await.unwrap();
    assert_eq!((report.uploaded, report.failed), (0, 0), "{report:?}");
    assert_eq!((env.seen.batches.load(Relaxed), env.seen.single_writes.load(Relaxed)), writes, "nothing sent");
    assert_eq!(env.remote().await, pairs(&[("/a.md", "a2"), ("/b.md", "b2")]));
    assert_eq!(read(&env.root(), "b.md").as_deref(), Some("b2"));
    assert_eq!(engine.journal_due(), None);
    engine.dispose().await;
}

/// A store change whose bytes come with the feed's entry is written with no request for them,
/// where the folder holds what both sides last agreed on; where the file changed here too, the
/// listing decides as before (the store wins, and the local bytes are not lost silently).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_change_with_its_bytes_is_written_without_a_fetch() {
    use std::sync::atomic::Ordering::Relaxed;
    let env = Env::new(&[("/a.md", "a"), ("/b.md", "b")]).await;
    let mut engine = env.mount(env.cfg()).await;
    let mut live = live_from_a_full_sync(&mut engine).await;

    // Every fetch of one memory would fail now: the file still arrives, from the feed.
    env.remote_update("/a.md", "a2 from elsewhere").await;
    env.seen.lose_fetches.store(100, Relaxed);
    let report = live_until(&mut engine, &mut live, "a.md").await;
    assert_eq!(report.pulled, 1, "{report:?}");
    assert_eq!(read(&env.root(), "a.md").as_deref(), Some("a2 from elsewhere"));
    assert_eq!(env.seen.lose_fetches.load(Relaxed), 100, "no memory was fetched");
    assert!(!engine.is_incomplete());
    // A new memory too.
    env.elsewhere.create_memory(&env.store, "/c.md", "c, new", None).await.unwrap();
    assert_eq!(env.seen.lose_fetches.load(Relaxed), 100, "the create fetched nothing");
    live_until(&mut engine, &mut live, "c.md").await;
    assert_eq!(read(&env.root(), "c.md").as_deref(), Some("c, new"));
    assert_eq!(env.seen.lose_fetches.load(Relaxed), 100, "no memory was fetched");
    env.seen.lose_fetches.store(0, Relaxed);

    // Both sides changed b.md: not written from the feed; the usual sync decides.
    std::fs::write(env.root().join("b.md"), "b, local").unwrap();
    env.remote_update("/b.md", "b, remote").await;
    settle().await;
    engine.sync(false).await.unwrap();
    assert_eq!(read(&env.root(), "b.md").as_deref(), Some("b, remote"), "the store wins");
    // Nothing is pending afterwards: a full sync finds the folder and the store agreeing.
    let quiet = engine.sync(false).await.unwrap();
    assert_eq!((quiet.pulled, quiet.uploaded, quiet.failed), (0, 0, 0), "{quiet:?}");
    assert_eq!(
        env.remote().await,
        pairs(&[("/a.md", "a2 from elsewhere"), ("/b.md", "b, remote"), ("/c.md", "c, new")])
    );
    drop(live);
    engine.dispose().await;
}

/// Edits of files both sides agreed on go up with no listing at all (the feed told of no change
/// of the store there), and leave nothing for a full sync; a local deletion, or an upload the
/// store refuses because it moved meanwhile (the feed had not told yet), is left to the next
/// full sync, which settles it as a listing would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_edits_go_up_without_a_listing_and_leave_a_full_sync_only_what_they_could_not_settle() {
    use std::sync::atomic::Ordering::Relaxed;
    let env = Env::new(&[("/a.md", "a"), ("/d/b.md", "b"), ("/d/c.md", "c")]).await;
    let mut engine = env.mount(StoreConfig { delete_window: Duration::ZERO, ..env.cfg() }).await;
    let mut live = live_from_a_full_sync(&mut engine).await;
    assert!(!engine.full_sync_needed(), "nothing changed since the full sync");

    // Two edits in two folders, twice: one batch each time, no listing.
    for round in 0..2 {
        let listings = env.seen.listings.load(Relaxed);
        std::fs::write(env.root().join("a.md"), format!("a{round}")).unwrap();
        std::fs::write(env.root().join("d/b.md"), format!("b{round}")).unwrap();
        let mut uploaded = 0;
        while uploaded < 2 {
            uploaded += live_until(&mut engine, &mut live, "a.md").await.uploaded;
        }
        assert_eq!(env.seen.listings.load(Relaxed), listings, "round {round}: no listing");
        assert!(!engine.full_sync_needed(), "round {round}: live sync settled both edits");
    }
    assert_eq!(env.remote().await, pairs(&[("/a.md", "a1"), ("/d/b.md", "b1"), ("/d/c.md", "c")]));

    // A local deletion is the full sync's (it waits for its window there).
    std::fs::remove_file(env.root().join("d/c.md")).unwrap();
    // (The feed's echoes of the uploads above may come first: nothing for a full sync.)
    while !engine.full_sync_needed() {
        let work = tokio::time::timeout(Duration::from_secs(10), live.next()).await.expect("the deletion's hint");
        let mnemo_sync::LiveWork::Paths(paths) = work else { panic!("{work:?}") };
        engine.sync_paths(paths).await.unwrap();
    }
    assert!(read(&env.root(), "d/c.md").is_none());
    assert_eq!(env.remote().await.len(), 3, "the deletion waits for a full sync");
    engine.sync(false).await.unwrap();
    assert!(!engine.full_sync_needed());
    assert_eq!(env.remote().await, pairs(&[("/a.md", "a1"), ("/d/b.md", "b1")]));

    // The store moves and the local file too, before the feed tells: the upload is refused
    // (its precondition), and the full sync it leaves behind keeps the store's bytes.
    drop(live);
    env.remote_update("/a.md", "a from elsewhere").await;
    std::fs::write(env.root().join("a.md"), "a, local").unwrap();
    settle().await;
    let paths: mnemo_sync::LivePaths = [(mnemo_sync::fs::RelPath::parse("a.md").unwrap(), false)].into_iter().collect();
    let report = engine.sync_paths(paths).await.unwrap();
    assert_eq!((report.uploaded, report.conflicts), (0, 1), "{report:?}");
    assert!(engine.full_sync_needed(), "the refused upload is the full sync's");
    engine.sync(false).await.unwrap();
    assert_eq!(read(&env.root(), "a.md").as_deref(), Some("a from elsewhere"), "the store wins");
    let quiet = engine.sync(false).await.unwrap();
    assert_eq!((quiet.pulled, quiet.uploaded, quiet.conflicts, quiet.failed), (0, 0, 0, 0), "{quiet:?}");
    engine.dispose().await;
}

/// Bytes that come with a feed's entry but are not what its digest names are never written:
/// the file is fetched instead, and holds the store's bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_bytes_that_do_not_match_their_digest_are_fetched_instead() {
    let env = Env::serving(&[("/a.md", "a")], Serving { forge_feed_bytes: true, ..Serving::default() }).await;
    let mut engine = env.mount(env.cfg()).await;
    let mut live = live_from_a_full_sync(&mut engine).await;

    env.remote_update("/a.md", "genuine bytes").await;
    live_until(&mut engine, &mut live, "a.md").await;
    assert_eq!(read(&env.root(), "a.md").as_deref(), Some("genuine bytes"), "fetched, not the feed's forgery");
    let quiet = engine.sync(false).await.unwrap();
    assert_eq!((quiet.pulled, quiet.uploaded, quiet.failed), (0, 0, 0), "{quiet:?}");
    assert_eq!(env.remote().await, pairs(&[("/a.md", "genuine bytes")]));
    drop(live);
    engine.dispose().await;
}
