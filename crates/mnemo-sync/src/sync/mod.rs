//! The engine that keeps one memory store and one local folder in sync.
//!
//! [`StoreSync::mount`] creates the folder and downloads the store; [`StoreSync::sync`] runs one
//! reconciliation (scan, list, decide with [`plan::decide`], then upload, pull, delete);
//! [`StoreSync::flush`] is the push-only pass of a teardown; [`StoreSync::dispose`] removes the
//! folder if this engine created it; [`teardown::teardown`] runs the three in the bounded order
//! every caller shares. The rules are those of `worker-behaviour.md` §6.

pub mod adopt;
mod execute;
mod flush;
pub mod journal;
mod live;
mod metrics;
pub mod plan;
mod run;
pub mod teardown;
mod upload;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mnemo_api::{Memory, MemoryId, MemoryListItem, MemoryStoreId, View};
use mnemo_client::{Client, ClientError, ListMemoriesParams, StreamedMemory};

use crate::fs::{Digest, Durability, FileStore, FsError, MARKER_NAME, MarkerState, RelPath};

pub use live::{FullSyncTicks, LIVE_FULL_SYNC_EVERY, Live, LivePaths, LiveWork, QUIET};
pub use run::SyncReport;

/// How long a file must stay missing before its deletion is sent to the server.
pub const DELETE_WINDOW: Duration = Duration::from_secs(30);
/// Content fetches in flight per store during a sync.
pub const FETCH_CONCURRENCY: usize = 16;
/// Uploads in flight per store.
pub const UPLOAD_CONCURRENCY: usize = 32;
/// Memories per page of a content-free listing.
pub const BASIC_PAGE: u32 = 100;
/// Memories per page of a listing with content.
pub const FULL_PAGE: u32 = 20;
/// With a watcher, the tree is still walked in full at least every this many syncs…
pub const FULL_WALK_EVERY: u32 = 20;
/// …and whenever the last full walk is older than this.
pub const FULL_WALK_MAX_AGE: Duration = Duration::from_secs(300);

/// What a sync does with local deletions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeletionMode {
    /// Corroborated local deletions are sent to the server.
    #[default]
    Enabled,
    /// The same checks run, but the deletion is only logged.
    LogOnly,
    /// Local deletions never reach the server.
    Disabled,
}

/// What a sync needs to know of a listed memory: which it is, and its digest. Kept instead of
/// the whole [`Memory`] (timestamps, version ids, …), so a listing of many memories stays small.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remote {
    pub(crate) id: MemoryId,
    pub(crate) content_sha256: Digest,
}

impl Remote {
    /// The memory as a sync sees it, unless its digest is not a SHA-256 ([`server_digest`]).
    pub(crate) fn of(m: &Memory) -> Option<Self> {
        Some(Self { id: m.id.clone(), content_sha256: server_digest(m)? })
    }
}

impl plan::Listed for Remote {
    fn content_sha256(&self) -> Digest {
        self.content_sha256
    }
}

/// The digest a server gave for `memory`, if it is a SHA-256. A memory whose digest is not
/// cannot be reconciled, so it is left alone (and logged), like one whose path cannot live in a
/// folder.
pub(crate) fn server_digest(memory: &Memory) -> Option<Digest> {
    checked_digest(Digest::parse_hex(&memory.content_sha256), &memory.path, &memory.id)
}

/// `digest`, or a warning that the memory at `path` is skipped for want of one.
fn checked_digest(digest: Option<Digest>, path: &str, id: &MemoryId) -> Option<Digest> {
    if digest.is_none() {
        tracing::warn!(path, memory_id = %id, "skipping memory: the server's content_sha256 is not a SHA-256");
    }
    digest
}

/// A store's listing by local path.
pub(crate) type RemoteMap = BTreeMap<RelPath, Remote>;
/// The folder's files by path, as a scan or the watcher's patched view has them.
pub(crate) type LocalMap = BTreeMap<RelPath, crate::fs::LocalFile>;

/// One store attached to a folder.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub store_id: MemoryStoreId,
    pub root: PathBuf,
    pub read_only: bool,
    pub deletions: DeletionMode,
    /// Keep a durable journal beside the folder so `resume` works after a crash.
    pub journal: bool,
    /// How long a file must stay missing before its deletion reaches the server
    /// ([`DELETE_WINDOW`] unless a test needs otherwise).
    pub delete_window: Duration,
    /// Use a filesystem watcher so syncs only re-read changed paths.
    pub watch: bool,
    /// A fresh mount's first journal, and the `syncfs` that makes its download durable before
    /// the journal names the files, wait up to this long for [`StoreSync::start_first_journal`]
    /// (or a journal write, or the disposal) instead of starting as the download ends. `None`:
    /// they start at once. A worker holds them until its session's first tool call is answered:
    /// the flush is the kernel writing back everything downloaded so far, which took a core
    /// from the other stores' downloads and queued the server's own commits behind 16 MB of
    /// writes (~100 ms of writeback in a 300 ms first call on this machine's disk).
    pub hold_first_journal: Option<Duration>,
}

impl StoreConfig {
    /// A read-write store with deletions enabled, a journal and the standard window.
    pub fn new(store_id: MemoryStoreId, root: impl Into<PathBuf>) -> Self {
        Self {
            store_id,
            root: root.into(),
            read_only: false,
            deletions: DeletionMode::Enabled,
            journal: true,
            delete_window: DELETE_WINDOW,
            watch: true,
            hold_first_journal: None,
        }
    }
}

/// A fresh mount's first journal, committing in the background.
#[derive(Debug)]
struct FirstJournal {
    task: tokio::task::JoinHandle<Result<bool, SyncError>>,
    /// The fingerprint of the state it records.
    fingerprint: u64,
    /// Opens a held one ([`StoreConfig::hold_first_journal`]).
    gate: Option<Arc<tokio::sync::Notify>>,
}

/// Why a store could not be mounted. The messages are the documented ones operators search for.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error(
        "something already exists at the memory store's path: {path} (memory_store_id={store}); it must not exist when the session starts"
    )]
    AlreadyExists { path: PathBuf, store: MemoryStoreId },
    #[error(
        "cannot create the memory store's folder: {path} (memory_store_id={store}): {source}; the worker host must make this mount path writable"
    )]
    CannotCreate { path: PathBuf, store: MemoryStoreId, source: FsError },
    #[error("failed to download memory store memory_store_id={store}: {source}")]
    Download { store: MemoryStoreId, source: SyncError },
    #[error(
        "cannot resume the memory store folder {path} (memory_store_id={store}): {reason}; a folder is only resumed with its own journal and marker"
    )]
    CannotResume { path: PathBuf, store: MemoryStoreId, reason: String },
    #[error("cannot adopt the folder {path} for memory store memory_store_id={store}: {reason}")]
    CannotAdopt { path: PathBuf, store: MemoryStoreId, reason: String },
}

/// A failure of a whole sync step (individual files failing are logged, not returned).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Api(#[from] ClientError),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("the final sync already ran")]
    FinalTwice,
    #[error("a blocking task failed: {0}")]
    Task(String),
}

impl SyncError {
    /// A failure of the network or the server that another attempt may not meet (no answer,
    /// a broken connection, `408`, `409`, `429`, `5xx`): not a refusal, not a local problem.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Api(e) => !e.is_permanent() && !e.is_not_found() && !matches!(e, ClientError::Decode { .. }),
            Self::Fs(_) | Self::FinalTwice | Self::Task(_) => false,
        }
    }
}

/// How many times [`StoreSync::mount_retrying`] tries a download.
pub const MOUNT_ATTEMPTS: u32 = 5;

/// The pauses between the download's and the teardown's attempts at a final sync or a flush: 0.5 s doubling to
/// 4 s, up to a quarter off, within [`TEARDOWN_BOUND`](teardown::TEARDOWN_BOUND).
pub(crate) const TEARDOWN_RETRY: mnemo_api::Backoff =
    mnemo_api::Backoff::doubling(Duration::from_millis(500), Duration::from_secs(4))
        .with_jitter(mnemo_api::Jitter::Shave(0.25));

/// What the engine remembers between syncs.
#[derive(Debug, Default, Clone)]
pub(crate) struct State {
    /// Per path, the digest both sides agreed on at the last successful sync.
    pub(crate) baseline: BTreeMap<RelPath, Digest>,
    /// Digests sent in uploads whose answer never arrived; settled by the next listing.
    pub(crate) unsettled: HashMap<RelPath, Digest>,
    /// Per path, the local digest the server refused; not retried until the file changes.
    pub(crate) refused: HashMap<RelPath, Digest>,
    /// Per path, when the file was first seen missing.
    pub(crate) pending_deletes: HashMap<RelPath, Instant>,
}

/// Called with the number of memories written so far during a download.
pub type ProgressFn = Box<dyn Fn(usize) + Send + Sync>;

impl State {
    /// A hash of everything the journal records (pending deletes by path only: their times
    /// only matter once they exist). Compared within one process only, on every quiet sync, so
    /// a fast unkeyed hash (the `DefaultHasher` it replaced was unkeyed too, at a third of the
    /// speed over a 2,000-path baseline).
    fn fingerprint(&self) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut h = foldhash::fast::FixedState::with_seed(0x6d6e_656d_6f00_0001).build_hasher();
        self.baseline.hash(&mut h);
        let mut unsettled: Vec<_> = self.unsettled.iter().collect();
        unsettled.sort();
        unsettled.hash(&mut h);
        let mut refused: Vec<_> = self.refused.iter().collect();
        refused.sort();
        refused.hash(&mut h);
        let mut pending: Vec<_> = self.pending_deletes.keys().collect();
        pending.sort();
        pending.hash(&mut h);
        h.finish()
    }
}

/// One store kept in sync with one folder.
pub struct StoreSync {
    client: Client,
    cfg: StoreConfig,
    files: Arc<FileStore>,
    created_root: bool,
    state: State,
    final_done: bool,
    on_progress: Option<ProgressFn>,
    /// Change hints, when the config asks for them and the platform provides them.
    watch: Option<Arc<watch::Watch>>,
    /// The local files as of the last sync, patched with the watcher's hints (shared, so a sync
    /// that finds no hint costs no copy).
    last_local: Option<Arc<LocalMap>>,
    /// The inputs of the last sync that found nothing to do: a sync that finds the very same
    /// local view, listing and state has nothing to do either, and skips its plan.
    fixpoint: Option<run::Fixpoint>,
    syncs_since_walk: u32,
    last_walk: Instant,
    /// Fingerprint of the state last written to the journal.
    journaled: Option<u64>,
    /// The last content-free listing and the server's tag for it, if it gave one.
    remote_cache: Option<(String, Arc<RemoteMap>)>,
    /// Memories the engine learned of since that listing (its own creates, folder listings),
    /// where the listing names another or none: with it, the memory each path is
    /// ([`Self::known_id`]).
    learned_ids: HashMap<RelPath, MemoryId>,
    /// No write was sent and no change of the store heard of since the last listing of the
    /// whole store: a live sync then asks for the conditional listing (a bare `304` on the
    /// server) rather than one listing per folder.
    /// An atomic, as uploads run side by side on a shared borrow of the engine.
    listing_current: std::sync::atomic::AtomicBool,
    /// A pull did not land since the last full sync (a full disk, a failed fetch): the folder
    /// lacks a memory, or an update of one, until a full sync pulls it ([`Self::is_incomplete`]).
    incomplete: bool,
    /// Live sync left something of the paths it took to the next full sync (a deletion, a
    /// directory, an unreadable file, an upload that did not land): see
    /// [`Self::full_sync_needed`].
    live_left: bool,
    /// A re-download is in progress (writes must not overwrite files).
    recovering: bool,
    /// Where watchers send change hints once live sync runs ([`StoreSync::live`]).
    live: Option<watch::LiveSink>,
    /// The first journal after a fresh mount's download: every later journal write waits for
    /// it first.
    first_journal: Option<FirstJournal>,
    /// The download's files were not flushed (the first journal's flush failed): the next
    /// journal write flushes them first, so no journal names a file a power cut could tear.
    unflushed: bool,
    /// Files the change feed's bytes were written to whose renames are not durable yet
    /// ([`Durability::BytesOnly`]): the next journal write fsyncs their folders first.
    unsynced_renames: Vec<RelPath>,
    /// When the journal, left behind by pulls from the feed, is to be written
    /// ([`Self::journal_due`]).
    journal_due: Option<tokio::time::Instant>,
}

/// How long a journal may lag behind pulls of the change feed's bytes. A journal one step
/// behind is safe: after a crash, a file that holds what the store holds settles without an
/// upload, and one the store changed since is a conflict the store wins.
pub const JOURNAL_LAG: Duration = Duration::from_secs(5);

impl std::fmt::Debug for StoreSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSync")
            .field("cfg", &self.cfg)
            .field("paths", &self.state.baseline.len())
            .finish_non_exhaustive()
    }
}

/// Runs blocking filesystem work off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, SyncError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| SyncError::Task(e.to_string()))
}

impl StoreSync {
    /// Creates the folder (which must not exist yet) and downloads the store into it.
    pub async fn mount(client: Client, cfg: StoreConfig) -> Result<Self, MountError> {
        Self::mount_with_progress(client, cfg, None).await
    }

    /// [`mount`](Self::mount), tried again with back-off when the download fails on a
    /// transient fault (a `5xx` burst or a broken connection outlasting the client's retries),
    /// up to [`MOUNT_ATTEMPTS`] in all; each failed attempt removed the folder it created. A
    /// worker used to fail its work item for good on one such fault.
    pub async fn mount_retrying(client: Client, cfg: StoreConfig) -> Result<Self, MountError> {
        Self::mount_retrying_with_progress(client, cfg, || None).await
    }

    /// [`mount_retrying`](Self::mount_retrying) reporting progress: `progress` gives each
    /// attempt its reporter (`mnemo mount` used to give up on the first transient failure).
    pub async fn mount_retrying_with_progress(
        client: Client,
        cfg: StoreConfig,
        progress: impl Fn() -> Option<ProgressFn>,
    ) -> Result<Self, MountError> {
        let mut attempt = 0;
        loop {
            match Self::mount_with_progress(client.clone(), cfg.clone(), progress()).await {
                Err(MountError::Download { store, source })
                    if source.is_transient() && attempt + 1 < MOUNT_ATTEMPTS =>
                {
                    let delay = TEARDOWN_RETRY.delay(attempt);
                    tracing::warn!(memory_store_id = %store, ?delay, "memory store download failed, retrying: {source}");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// [`mount`](Self::mount), reporting the number of memories written as pages land.
    pub async fn mount_with_progress(
        client: Client,
        cfg: StoreConfig,
        on_progress: Option<ProgressFn>,
    ) -> Result<Self, MountError> {
        // Content is checked for UTF-8 here, after hashing, so a refusal can name the digest.
        let files = Arc::new(FileStore::new(&cfg.root).with_utf8_only(false));
        if std::fs::symlink_metadata(&cfg.root).is_ok() {
            return Err(MountError::AlreadyExists { path: cfg.root.clone(), store: cfg.store_id.clone() });
        }
        if let Err(source) = files.create_root() {
            return Err(MountError::CannotCreate { path: cfg.root.clone(), store: cfg.store_id.clone(), source });
        }
        let mut engine = Self::build(client, cfg, files, State::default(), on_progress);
        match engine.stamp_and_pull(false).await {
            // The watch starts before the journal is written: the journal tells a script or a
            // test that the folder is ready, and an edit made from then on must be seen (it
            // used to be missed until a full walk when it landed before the watch started).
            // The journal itself (a `syncfs` of the download and a rename) commits in the
            // background, off the path to the first tool call: until it is durable a crash
            // leaves a folder without a journal, which a resume refuses and leaves as it is.
            Ok(_) => {
                engine.watch_from_download();
                engine.spawn_first_journal();
                Ok(engine)
            }
            Err(source) => {
                let store = engine.cfg.store_id.clone();
                engine.dispose().await;
                Err(MountError::Download { store, source })
            }
        }
    }

    /// Takes over a folder left by a mount that died (kill -9, power cut), with the state its
    /// journal recorded. The folder must carry this store's marker and its own journal; then the
    /// first [`sync`](Self::sync) uploads edits made meanwhile and pulls remote changes.
    pub async fn resume(client: Client, cfg: StoreConfig) -> Result<Self, MountError> {
        let files = Arc::new(FileStore::new(&cfg.root).with_utf8_only(false));
        let refuse =
            |reason: String| MountError::CannotResume { path: cfg.root.clone(), store: cfg.store_id.clone(), reason };
        if !files.root_exists() {
            return Err(refuse("the folder does not exist (mount it without --resume)".into()));
        }
        let marker = files.check_marker(cfg.store_id.as_str());
        if marker != MarkerState::Matches {
            return Err(refuse(marker_reason(marker).into()));
        }
        let state = journal::load(&cfg.root, cfg.store_id.as_str()).map_err(|e| refuse(e.to_string()))?;
        tracing::info!(memory_store_id = %cfg.store_id, root = %cfg.root.display(), paths = state.baseline.len(), "resuming from the journal");
        Ok(Self::build(client, cfg, files, state, None))
    }

    /// An engine over a folder it owns (created by it, or resumed from its journal).
    fn build(
        client: Client,
        cfg: StoreConfig,
        files: Arc<FileStore>,
        state: State,
        on_progress: Option<ProgressFn>,
    ) -> Self {
        Self {
            client,
            cfg,
            files,
            created_root: true,
            state,
            final_done: false,
            on_progress,
            watch: None,
            last_local: None,
            fixpoint: None,
            syncs_since_walk: 0,
            last_walk: Instant::now(),
            journaled: None,
            remote_cache: None,
            learned_ids: HashMap::new(),
            listing_current: std::sync::atomic::AtomicBool::new(false),
            incomplete: false,
            live_left: false,
            recovering: false,
            live: None,
            first_journal: None,
            unflushed: false,
            unsynced_renames: Vec::new(),
            journal_due: None,
        }
    }

    /// Lets the first journal that [`StoreConfig::hold_first_journal`] holds start now; nothing
    /// if none is held. It commits in the background, as an unheld one does.
    pub fn start_first_journal(&self) {
        if let Some(gate) = self.first_journal.as_ref().and_then(|j| j.gate.as_ref()) {
            gate.notify_one();
        }
    }

    /// After the first download: the files and the journal's temp file are flushed together by
    /// one `syncfs`, then the journal is renamed into place (a crash before the rename leaves no
    /// journal, so the folder is refused rather than trusted). Runs in the background; every
    /// later journal write (and the disposal) waits for it first ([`Self::settle_first_journal`]).
    fn spawn_first_journal(&mut self) {
        let (files, root, id) = (Arc::clone(&self.files), self.cfg.root.clone(), self.cfg.store_id.to_string());
        // Encoded before the task, so it holds the bytes rather than a copy of the state.
        let encoded = self.cfg.journal.then(|| journal::encode(&root, &id, &self.state));
        let fingerprint = self.state.fingerprint();
        let commit = move || -> Result<bool, SyncError> {
            let started = Instant::now();
            let mut flushed = None;
            let written = encoded.map(|encoded| {
                journal::write_encoded(&root, &encoded?, Durability::FlushedByCaller, || {
                    let at = Instant::now();
                    let outcome = files.sync_filesystem();
                    let ok = outcome.is_ok();
                    flushed = Some((outcome, at.elapsed()));
                    ok
                })
            });
            // Without a journal written, the files still need their flush.
            let (outcome, flush) = flushed.unwrap_or_else(|| {
                let at = Instant::now();
                (files.sync_filesystem(), at.elapsed())
            });
            outcome?;
            tracing::debug!(memory_store_id = %id, flush = ?flush, total = ?started.elapsed(), "the download is flushed and its journal committed");
            Ok(match written {
                Some(Ok(committed)) => committed,
                Some(Err(e)) => {
                    tracing::warn!(memory_store_id = %id, "{e}");
                    false
                }
                None => false,
            })
        };
        let gate = self.cfg.hold_first_journal.map(|_| Arc::new(tokio::sync::Notify::new()));
        let held = self.cfg.hold_first_journal.zip(gate.clone());
        let task = tokio::spawn(async move {
            if let Some((hold, opened)) = held {
                // Opened, or the hold is over.
                let _ = tokio::time::timeout(hold, opened.notified()).await;
            }
            tokio::task::spawn_blocking(commit).await.map_err(|e| SyncError::Task(e.to_string()))?
        });
        self.first_journal = Some(FirstJournal { task, fingerprint, gate });
    }

    /// Waits for the first journal, if it is still committing, and records what it wrote.
    async fn settle_first_journal(&mut self) {
        // A held one is due now: what waits for it must not wait out the hold.
        self.start_first_journal();
        let Some(FirstJournal { task, fingerprint, .. }) = self.first_journal.take() else { return };
        match task.await {
            Ok(Ok(true)) => self.journaled = Some(fingerprint),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                self.unflushed = true;
                tracing::warn!(memory_store_id = %self.cfg.store_id, "cannot flush the downloaded memory store folder (its journal waits for the next sync): {e}");
            }
            Err(e) => {
                self.unflushed = true;
                tracing::warn!(memory_store_id = %self.cfg.store_id, "cannot write the first journal: {e}");
            }
        }
    }

    /// Whether the first journal is durable (or was not asked for); for tests and the bench.
    pub async fn first_journal_done(&mut self) {
        self.settle_first_journal().await;
    }

    /// When the journal, left behind by pulls of the change feed's bytes, is to be written
    /// ([`JOURNAL_LAG`] after the first such pull), unless a sync writes it first. Write it
    /// then with [`Self::write_due_journal`].
    pub fn journal_due(&self) -> Option<tokio::time::Instant> {
        self.journal_due
    }

    /// Writes the journal if pulls left it behind.
    pub async fn write_due_journal(&mut self) {
        if self.journal_due.is_some() {
            self.save_journal().await;
        }
    }

    /// The journal waits (at most [`JOURNAL_LAG`]) for what pulls of the feed's bytes changed.
    pub(crate) fn defer_journal(&mut self) {
        self.journal_due.get_or_insert_with(|| tokio::time::Instant::now() + JOURNAL_LAG);
    }

    /// Persists the state beside the folder; a failure is logged, never fatal.
    async fn save_journal(&mut self) {
        // Journals are written in order: never the download's after a newer one.
        self.settle_first_journal().await;
        self.journal_due = None;
        if !self.cfg.journal {
            self.unsynced_renames.clear();
            return;
        }
        // Quiet syncs change nothing: skip the write and its two fsyncs.
        let fingerprint = self.state.fingerprint();
        if self.journaled == Some(fingerprint) {
            return;
        }
        // No journal names a file a power cut could tear or a rename a crash could undo: the
        // whole filesystem after an unflushed download, else the folders of the feed's pulls.
        if self.unflushed || !self.unsynced_renames.is_empty() {
            let (files, whole) = (Arc::clone(&self.files), self.unflushed);
            let renamed = std::mem::take(&mut self.unsynced_renames);
            let flushed = blocking(move || {
                if whole {
                    return files.sync_filesystem();
                }
                let mut folders = BTreeSet::new();
                for rel in renamed.iter().filter(|rel| folders.insert(rel.as_str().rsplit_once('/').map(|(f, _)| f))) {
                    files.sync_folder_of(rel)?;
                }
                Ok(())
            })
            .await;
            match flushed.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| e.to_string())) {
                Ok(()) => self.unflushed = false,
                Err(e) => {
                    // The next journal write flushes everything first.
                    self.unflushed = true;
                    tracing::warn!(memory_store_id = %self.cfg.store_id, "cannot flush the memory store folder; its journal waits: {e}");
                    return;
                }
            }
        }
        // Encoded here, so the blocking write needs the bytes, not a copy of the state.
        let bytes = match journal::encode(&self.cfg.root, self.cfg.store_id.as_str(), &self.state) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(memory_store_id = %self.cfg.store_id, "{e}");
                return;
            }
        };
        let root = self.cfg.root.clone();
        match blocking(move || journal::write_encoded(&root, &bytes, Durability::Durable, || true)).await {
            Ok(Ok(_)) => self.journaled = Some(fingerprint),
            Ok(Err(e)) => tracing::warn!(memory_store_id = %self.cfg.store_id, "{e}"),
            Err(e) => {
                tracing::warn!(memory_store_id = %self.cfg.store_id, "cannot write the journal: {e}")
            }
        }
    }

    /// The folder.
    pub fn root(&self) -> &Path {
        &self.cfg.root
    }

    /// The store.
    pub fn store_id(&self) -> &MemoryStoreId {
        &self.cfg.store_id
    }

    /// How many paths both sides currently agree on.
    pub fn baseline_len(&self) -> usize {
        self.state.baseline.len()
    }

    /// Resets the state, stamps the marker and writes every memory of the store. Pages are
    /// fetched while the previous page is being written.
    async fn stamp_and_pull(&mut self, flush: bool) -> Result<usize, SyncError> {
        self.state = State::default();
        self.last_local = None;
        self.fixpoint = None;
        let files = Arc::clone(&self.files);
        let id = self.cfg.store_id.to_string();
        blocking(move || files.write_marker(&id)).await??;
        self.remote_cache = None;
        self.learned_ids.clear();
        self.wrote();
        // Until every memory listed is written (a download cut short leaves it so).
        self.incomplete = true;
        let mut source = Download::open(&self.client, &self.cfg.store_id).await?;
        let mut writing: Vec<tokio::task::JoinHandle<Vec<(RelPath, Digest)>>> = Vec::new();
        let (mut written, mut wanted) = (0, 0);
        // What a content-free listing of the downloaded snapshot would hold: with the stream's
        // tag it answers the first sync's (conditional) listing, which used to fetch and parse
        // every memory again right after the download. Pages carry no tag that covers them
        // all (the hosted API), so a paged download keeps none.
        let mut listed = RemoteMap::new();
        let keep_listing = matches!(source, Download::Stream(_));
        loop {
            let memories = match source.next(&self.client, &self.cfg.store_id).await {
                Ok(Some(memories)) => memories,
                Ok(None) => break,
                Err(e) => {
                    // The writers still under way finish before the caller disposes of the
                    // folder, so none of them writes into it while it is being removed.
                    let _ = self.finish_writes(std::mem::take(&mut writing)).await;
                    return Err(e);
                }
            };
            // Only the content goes to the writers: the rest of each memory is dropped here, on
            // the thread that parsed it, and its id moves into the listing.
            let mut batch: Vec<(RelPath, Digest, String)> = memories
                .into_iter()
                .filter_map(|m| {
                    let rel = self.local_path(&m.path)?;
                    let digest = checked_digest(m.content_sha256.map(Digest::from_bytes), &m.path, &m.id)?;
                    if keep_listing {
                        listed.insert(rel.clone(), Remote { id: m.id, content_sha256: digest });
                    }
                    Some((rel, digest, m.content))
                })
                .collect();
            wanted += batch.len();
            written += self.finish_writes(std::mem::take(&mut writing)).await?;
            // A batch is written by [`DOWNLOAD_WRITERS`] threads at once, each taking a share;
            // a file's cost is mostly the kernel's, which two threads do side by side.
            let share = batch.len().div_ceil(DOWNLOAD_WRITERS).max(1);
            while !batch.is_empty() {
                let part = batch.split_off(batch.len().saturating_sub(share));
                let (files, store, root) = (Arc::clone(&self.files), self.cfg.store_id.clone(), self.cfg.root.clone());
                let recovering = self.recovering;
                writing.push(tokio::task::spawn_blocking(move || {
                    write_downloaded(&files, part, recovering, &store, &root)
                }));
            }
        }
        written += self.finish_writes(writing).await?;
        // A file that could not be written (a full disk) was logged; a full sync pulls it.
        self.incomplete = written < wanted;
        if let Some(tag) = source.snapshot_tag() {
            self.remote_cache = Some((tag.to_owned(), Arc::new(listed)));
        }
        self.listed();
        // One flush for every file written, before any journal records them as synced: a power
        // cut can never leave a baseline entry pointing at a torn file.
        if flush {
            let files = Arc::clone(&self.files);
            blocking(move || files.sync_filesystem()).await??;
        }
        Ok(written)
    }

    /// Waits for a batch's writers and takes what they wrote into the baseline; how many.
    async fn finish_writes(
        &mut self,
        writers: Vec<tokio::task::JoinHandle<Vec<(RelPath, Digest)>>>,
    ) -> Result<usize, SyncError> {
        if writers.is_empty() {
            return Ok(0);
        }
        let mut count = 0;
        for writer in writers {
            let done = writer.await.map_err(|e| SyncError::Task(e.to_string()))?;
            count += done.len();
            self.state.baseline.extend(done);
        }
        self.progress(self.state.baseline.len());
        Ok(count)
    }

    fn progress(&self, written: usize) {
        if let Some(report) = &self.on_progress {
            report(written);
        }
    }

    /// The local path of a listed memory, unless it must be skipped (the reserved marker path,
    /// a path that cannot live in a folder).
    fn local_path(&self, path: &str) -> Option<RelPath> {
        if path.trim_start_matches('/') == MARKER_NAME {
            tracing::warn!(path, memory_store_id = %self.cfg.store_id, "the server listed the reserved marker path; skipping");
            return None;
        }
        RelPath::from_memory_path(path)
            .inspect_err(|e| tracing::warn!(path, memory_store_id = %self.cfg.store_id, "skipping memory: {e}"))
            .ok()
    }

    /// Every memory of the store by local path, content-free.
    async fn list(&self, view: View) -> Result<RemoteMap, SyncError> {
        let all = self.client.list_all_memories(&self.cfg.store_id, view).await?;
        Ok(self.remote_map(all))
    }

    fn remote_map(&self, all: Vec<Memory>) -> RemoteMap {
        all.into_iter().filter_map(|m| Some((self.local_path(&m.path)?, Remote::of(&m)?))).collect()
    }

    /// The store's memories for a sync: the previous listing again when the server says the
    /// store is unchanged since (a conditional request on a tagged listing), else a fresh one.
    async fn list_for_sync(&mut self) -> Result<(Arc<RemoteMap>, bool), SyncError> {
        let tag = self.remote_cache.as_ref().map(|(t, _)| t.as_str());
        let listed = self.client.list_all_memories_if_changed(&self.cfg.store_id, tag).await?;
        self.listed();
        match listed {
            None => Ok((self.remote_cache.as_ref().map(|(_, m)| Arc::clone(m)).unwrap_or_default(), false)),
            Some((all, tag)) => {
                let map = Arc::new(self.remote_map(all));
                self.remote_cache = tag.map(|t| (t, Arc::clone(&map)));
                self.learned_ids.clear();
                Ok((map, true))
            }
        }
    }

    /// The memory at `rel` as the engine last learned of it: from the last listing of the whole
    /// store, or from what it learned since ([`Self::learned_id`]).
    pub(crate) fn known_id(&self, rel: &RelPath) -> Option<&MemoryId> {
        self.learned_ids.get(rel).or_else(|| Some(&self.remote_cache.as_ref()?.1.get(rel)?.id))
    }

    /// The memory at `rel` is `id` (an upload's answer, a folder's listing).
    pub(crate) fn learned_id(&mut self, rel: &RelPath, id: MemoryId) {
        if self.known_id(rel) != Some(&id) {
            self.learned_ids.insert(rel.clone(), id);
        }
    }

    /// The whole store was just listed (or downloaded): the engine knows of no change since.
    fn listed(&self) {
        self.listing_current.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// A write is about to be sent (or the listing is being replaced): the store may change.
    pub(crate) fn wrote(&self) {
        self.listing_current.store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether no write was sent and no listing started since the last listing of the whole store.
    pub(crate) fn listing_is_current(&self) -> bool {
        self.listing_current.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn marker(&self) -> Result<MarkerState, SyncError> {
        let (files, id) = (Arc::clone(&self.files), self.cfg.store_id.to_string());
        blocking(move || files.check_marker(&id)).await
    }

    /// Re-downloads after the folder or its marker vanished with no files left, or after every
    /// file vanished at once. Sends nothing: a local wipe never reaches the server.
    async fn recover(&mut self, reason: &str) -> Result<(), SyncError> {
        tracing::warn!(memory_store_id = %self.cfg.store_id, root = %self.cfg.root.display(), "{reason}; re-downloading the memory store folder instead of syncing");
        let files = Arc::clone(&self.files);
        blocking(move || files.create_root()).await??;
        // Forget the old baseline durably first: files re-downloaded below are flushed only at
        // the end, and a crash in between must not find them named by a journal.
        self.state = State::default();
        self.save_journal().await;
        self.recovering = true;
        let pulled = self.stamp_and_pull(true).await.map(|_| ());
        self.recovering = false;
        pulled
    }

    /// Removes the folder if this engine created it and it still carries this store's marker
    /// (or holds no files). A folder that fails the marker check but holds files is left as found.
    pub async fn dispose(mut self) {
        // A first journal still committing must not land after the folder and journal are gone.
        self.settle_first_journal().await;
        let (files, id) = (Arc::clone(&self.files), self.cfg.store_id.to_string());
        let created = self.created_root;
        let journal = self.cfg.journal;
        let store = self.cfg.store_id.clone();
        let root = self.cfg.root.clone();
        let outcome = blocking(move || {
            let marker = files.check_marker(&id);
            // Only an untrusted folder needs the (full) scan for files.
            if marker != MarkerState::Matches && files.scan().is_ok_and(|f| !f.is_empty()) {
                let reason = marker_reason(marker);
                tracing::warn!(memory_store_id = %id, root = %files.root().display(), "{reason}; leaving the memory store folder on disk");
                return Ok(false);
            }
            if created && files.root_exists() {
                let removed = files.remove_root().map(|()| true);
                if journal && removed.is_ok() {
                    journal::remove(files.root());
                }
                removed
            } else {
                Ok(false)
            }
        })
        .await;
        match outcome {
            Ok(Ok(true)) => {
                tracing::info!(memory_store_id = %store, root = %root.display(), "removed memory store dir")
            }
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                tracing::warn!(memory_store_id = %store, "failed to remove memory store dir: {e}")
            }
            Err(e) => {
                tracing::warn!(memory_store_id = %store, "failed to remove memory store dir: {e}")
            }
        }
    }
}

pub(crate) fn marker_reason(marker: MarkerState) -> &'static str {
    match marker {
        MarkerState::Missing => "the marker file is gone",
        MarkerState::Mismatch | MarkerState::Matches => "the marker file does not match this store",
    }
}

/// Memories gathered per batch of a streamed download (a page holds [`FULL_PAGE`]).
pub const STREAM_BATCH: usize = 100;

/// Blocking threads that write one batch of a download side by side. Two halve the time to
/// write 2,000 small files on a 2-core machine; the batch's memory is the same.
const DOWNLOAD_WRITERS: usize = 2;

/// Writes a share of a downloaded batch; what was written, with its digest. A first download
/// fills a folder that did not exist: its files are created in place ([`crate::fs::NewFiles`]) and
/// flushed once before the journal names them. A re-download never overwrites a file that
/// appeared meanwhile (the next sync reconciles it). A file that cannot be written is logged
/// and left out of the baseline.
fn write_downloaded(
    files: &FileStore,
    part: Vec<(RelPath, Digest, String)>,
    recovering: bool,
    store: &MemoryStoreId,
    root: &Path,
) -> Vec<(RelPath, Digest)> {
    let mut done = Vec::with_capacity(part.len());
    let mut fresh: Option<crate::fs::NewFiles<'_>> = None;
    for (rel, digest, content) in part {
        let outcome = if recovering {
            files.write_if_unchanged(&rel, None, content.as_bytes()).map(|_| ())
        } else {
            // Opened on the first file (and again after a failure to open the root).
            match &mut fresh {
                Some(new) => new.create(&rel, content.as_bytes()),
                None => files.new_files().and_then(|new| fresh.insert(new).create(&rel, content.as_bytes())),
            }
        };
        match outcome {
            Ok(()) => done.push((rel, digest)),
            Err(e) => execute::write_failed(&rel, store, root, &e),
        }
    }
    done
}

/// Where a download reads the store from: the memory stream when the server offers it (one
/// response, one snapshot), else pages of [`FULL_PAGE`] with content (the hosted API's cap).
enum Download {
    Stream(Box<mnemo_client::MemoryStream>),
    /// The next page's query; `None` once the last page was read.
    Pages(Option<ListMemoriesParams>),
}

impl Download {
    async fn open(client: &Client, store: &MemoryStoreId) -> Result<Self, SyncError> {
        let pages = || {
            Self::Pages(Some(ListMemoriesParams {
                limit: Some(FULL_PAGE),
                view: Some(View::Full),
                ..Default::default()
            }))
        };
        match client.open_memory_stream(store).await {
            Ok(Some(stream)) => Ok(Self::Stream(Box::new(stream))),
            Ok(None) => Ok(pages()),
            Err(e) => {
                // A 404 from a server that offers the stream is the store's (the client turns
                // the route's own 404 into `Ok(None)`); a transient failure is the caller's to retry.
                let e = SyncError::from(e);
                if e.is_transient() || matches!(&e, SyncError::Api(api) if api.is_not_found()) {
                    return Err(e);
                }
                // A refusal of the stream alone (pages answer for themselves just after).
                tracing::warn!(memory_store_id = %store, "the memory stream was refused; listing pages: {e}");
                Ok(pages())
            }
        }
    }

    /// The listing tag of the snapshot downloaded, once it is complete (the stream's; pages
    /// carry none that covers them all).
    fn snapshot_tag(&self) -> Option<&str> {
        match self {
            Self::Stream(stream) => stream.snapshot_tag(),
            Self::Pages(_) => None,
        }
    }

    /// The next memories to write, or `None` at the end: a page, or up to [`STREAM_BATCH`]
    /// memories of the stream.
    async fn next(&mut self, client: &Client, store: &MemoryStoreId) -> Result<Option<Vec<StreamedMemory>>, SyncError> {
        match self {
            Self::Stream(stream) => {
                let mut out: Vec<StreamedMemory> = Vec::new();
                while out.len() < STREAM_BATCH {
                    match stream.next_batch().await? {
                        Some(batch) => out.extend(batch),
                        None => break,
                    }
                }
                Ok((!out.is_empty()).then_some(out))
            }
            Self::Pages(params) => loop {
                let Some(query) = params.as_mut() else { return Ok(None) };
                let page = client.list_memories(store, query).await?;
                match page.next_page.filter(|p| !p.is_empty()) {
                    Some(next) => query.page = Some(next),
                    None => *params = None,
                }
                let memories: Vec<StreamedMemory> = page
                    .data
                    .into_iter()
                    .filter_map(|item| match item {
                        MemoryListItem::Memory(m) => Some(StreamedMemory {
                            content_sha256: Digest::parse_hex(&m.content_sha256).map(Digest::into_bytes),
                            id: m.id,
                            path: m.path,
                            content: m.content.unwrap_or_default(),
                        }),
                        MemoryListItem::Prefix(_) => None,
                    })
                    .collect();
                // An empty page that points on is followed, as the reference client does.
                if !memories.is_empty() {
                    return Ok(Some(memories));
                }
            },
        }
    }
}
