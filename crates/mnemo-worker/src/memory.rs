//! A session's memory stores as folders: where each lands, the download, the cadence syncs, the
//! final sync, the flush and the removal — one [`StoreSync`] per store.
//!
//! Beyond the reference: a worker killed mid-session leaves its folders behind with their sync
//! journals. The worker records which folders it mounted for which session (in its state
//! directory); when it (or its successor on the same host) claims that session's item again, it
//! resumes those folders from their journals, so edits made before the crash still reach the
//! server. Any other leftover is refused exactly as the reference refuses it.

use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use mnemo_api::MemoryStoreId;
use mnemo_client::{Client, WorkerSession};
use mnemo_sync::fs::{RelPath, atomic_write, host};
use mnemo_sync::{
    DeletionMode, Live, LiveWork, MountError, StoreConfig, StoreSync, TEARDOWN_CONCURRENCY, Teardown, TeardownSteps,
    teardown_pipelined,
};
use serde::{Deserialize, Serialize};

use crate::WorkerError;
use crate::tools::sandbox::{self, Sandbox};

/// How many stores sync at the same time.
const SYNC_CONCURRENCY: usize = 2;

/// How many stores download at the same time. Each download holds a connection whose read
/// buffer grows to hyper's maximum (about 400 KB) and a few hundred memories in flight; on a
/// sandbox host the download is bound by the filesystem's file creation, which more downloads
/// at once do not speed up (measured in `docs/BENCHMARKS.md`).
const MOUNT_CONCURRENCY: usize = 4;

/// The longest a download's first journal waits for the session's first tool call to be
/// answered ([`Memory::first_call_done`]) before it flushes and commits anyway: the window in
/// which a crash leaves a folder a restart cannot resume grows by no more than this.
const FIRST_JOURNAL_HOLD: Duration = Duration::from_secs(1);

/// Where one attached store lands and how it may be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreMount {
    pub store_id: MemoryStoreId,
    pub root: PathBuf,
    pub read_only: bool,
}

/// The memory stores of a session's resources, in resource order, with the folder each lands
/// in (spec §6.1): a clean absolute `mount_path` verbatim, else `<workdir>/memory/<name or id>`.
///
/// A server's `mount_path` must lie strictly under `mount_root` (`--memory-mount-root`), both as
/// written and with symlinks resolved: the worker never creates, fills or later removes a folder
/// elsewhere on the host because a server said so. A path outside fails the item, as an unclean
/// one does: the agent's prompt names that path, so running the session without the store would
/// leave the agent writing memory that is never synced.
pub fn plan(session: &WorkerSession, workdir: &Path, mount_root: &Path) -> Result<Vec<StoreMount>, WorkerError> {
    let mut out = Vec::new();
    for r in session.memory_stores() {
        let id = r.memory_store_id.as_deref().unwrap_or_default();
        let store_id = id
            .parse::<MemoryStoreId>()
            .map_err(|_| WorkerError::Config(format!("the session names an invalid memory store id: {id:?}")))?;
        let read_only = r.read_only();
        let root = match r.mount_path.as_deref().filter(|p| !p.is_empty()) {
            Some(mount_path) => {
                let root = clean_absolute(mount_path).ok_or_else(|| WorkerError::BadMountPath {
                    mount_path: mount_path.to_owned(),
                    store: id.to_owned(),
                })?;
                if !within_mount_root(&root, mount_root) {
                    return Err(WorkerError::MountPathOutsideRoot {
                        mount_path: mount_path.to_owned(),
                        store: id.to_owned(),
                        mount_root: mount_root.to_owned(),
                    });
                }
                root
            }
            None => {
                let name = r.name.as_deref().filter(|n| !n.is_empty()).unwrap_or(id);
                workdir.join("memory").join(name)
            }
        };
        if let Some(other) = out.iter().find(|o: &&StoreMount| o.root.starts_with(&root) || root.starts_with(&o.root)) {
            return Err(WorkerError::Config(format!(
                "the mount paths of memory stores {} and {store_id} overlap: {} and {}; each store needs its own folder",
                other.store_id,
                other.root.display(),
                root.display()
            )));
        }
        out.push(StoreMount { store_id, root, read_only });
    }
    Ok(out)
}

/// An absolute POSIX path without `..`, with `.` segments and repeated slashes dropped.
fn clean_absolute(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let clean = p.is_absolute() && !p.components().any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)));
    clean.then(|| host::normalize(p))
}

/// Whether `path` lies strictly below `mount_root`, lexically and with every symlink on either
/// path resolved (a symlink under the root pointing elsewhere does not count as under it).
fn within_mount_root(path: &Path, mount_root: &Path) -> bool {
    let root = host::normalize(mount_root);
    if path == root || !path.starts_with(&root) {
        return false;
    }
    match (host::canonicalize(path), host::canonicalize(&root)) {
        (Ok(real), Ok(real_root)) => real != real_root && real.starts_with(&real_root),
        _ => false,
    }
}

/// What a worker remembers about the folders it mounted for a session.
#[derive(Debug, Serialize, Deserialize)]
struct SessionRecord {
    session_id: String,
    stores: Vec<StoreMount>,
}

fn record_path(state_dir: &Path, session_id: &str) -> PathBuf {
    state_dir.join("sessions").join(format!("{session_id}.json"))
}

fn read_record(state_dir: &Path, session_id: &str) -> Option<SessionRecord> {
    let bytes = std::fs::read(record_path(state_dir, session_id)).ok()?;
    serde_json::from_slice::<SessionRecord>(&bytes).ok().filter(|r| r.session_id == session_id)
}

/// Writes the record atomically and durably (a crash never leaves half a record).
fn write_record(state_dir: &Path, record: &SessionRecord) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let path = record_path(state_dir, &record.session_id);
    let dir = path.parent().expect("a record lives in a directory");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    atomic_write(&path, &serde_json::to_vec(record).expect("a record serialises"))
}

/// A store's engine just mounted or resumed, with its live sync if that is on.
type MountedSync = (StoreSync, Option<Live>);

struct Mounted {
    sync: StoreSync,
    read_only: bool,
    /// The store's live sync, unless it is off (`--no-live`) or the server has no feed.
    live: Option<Live>,
    /// The folder with symlinks resolved, as the file tools report the paths they wrote.
    real_root: PathBuf,
}

/// The mounted stores of one session.
pub struct Memory {
    stores: Vec<Mounted>,
    interval: Duration,
    last_sync: Instant,
    /// Read-only folders are kept at 0444/0555 between syncs (bash's best-effort guard, and what
    /// lets a tool user read them).
    lock_read_only: bool,
    /// The tool user's uid and gid: read-write folders are handed to it after every sync.
    tool_owner: Option<(u32, u32)>,
    record: PathBuf,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory").field("stores", &self.stores.len()).field("interval", &self.interval).finish()
    }
}

/// How to mount a session's stores.
#[derive(Debug, Clone)]
pub struct MemoryOptions {
    pub interval: Duration,
    pub deletions: DeletionMode,
    pub state_dir: PathBuf,
    pub sandbox: Sandbox,
    /// The tool user's uid and gid (`--tool-user`): its shell must read the folders and write
    /// the read-write ones, which the worker's sync engine creates as its own.
    pub tool_owner: Option<(u32, u32)>,
    /// Follow each store's change feed and push local edits after a short quiet period,
    /// between tool calls ([`Memory::next_live`]); the interval sync stays the safety net.
    pub live: bool,
}

impl Memory {
    /// Downloads every store (each must land), resuming the folders a crashed worker left for
    /// this very session. On failure, whatever was mounted is removed again.
    pub async fn mount(
        client: &Client,
        session_id: &str,
        mounts: &[StoreMount],
        opts: &MemoryOptions,
    ) -> Result<Self, WorkerError> {
        let previous = read_record(&opts.state_dir, session_id);
        let record = SessionRecord { session_id: session_id.to_owned(), stores: mounts.to_vec() };
        if let Err(e) = write_record(&opts.state_dir, &record) {
            tracing::warn!(state_dir = %opts.state_dir.display(), "cannot record the session's memory folders (a crash will leave them unrecoverable): {e}");
        }
        let mut memory = Self {
            stores: Vec::with_capacity(mounts.len()),
            interval: opts.interval,
            last_sync: Instant::now(),
            lock_read_only: opts.sandbox == Sandbox::Permissions || opts.tool_owner.is_some(),
            tool_owner: opts.tool_owner,
            record: record_path(&opts.state_dir, session_id),
        };
        // Stores download a few at a time (the reference goes one by one); every one must land.
        // Boxed and collected: a stream over the borrowing closure is not provably `Send` for
        // every lifetime, which the spawned worker needs.
        let downloads: Vec<BoxFuture<'_, Result<MountedSync, WorkerError>>> = mounts
            .iter()
            .map(|m| {
                let mut cfg = StoreConfig::new(m.store_id.clone(), &m.root);
                cfg.read_only = m.read_only;
                cfg.deletions = opts.deletions;
                // Flushed once the first tool call is answered ([`Memory::first_call_done`]),
                // not while other stores still download or the call is being answered.
                cfg.hold_first_journal = Some(FIRST_JOURNAL_HOLD);
                let ours = previous.as_ref().is_some_and(|r| r.stores.contains(m));
                async move {
                    if ours && std::fs::symlink_metadata(&m.root).is_ok() {
                        let mut sync = resume(client, cfg, m).await?;
                        // The feed starts after the resuming sync: its opening asks for one more.
                        let live = opts.live.then(|| sync.live());
                        Ok((sync, live))
                    } else {
                        // Subscribed before the download, so nothing committed meanwhile is missed.
                        let mut live =
                            if opts.live { Some(Live::subscribe(client, m.store_id.clone()).await) } else { None };
                        let mut sync =
                            StoreSync::mount_retrying(client.clone(), cfg).await.map_err(WorkerError::from)?;
                        if let Some(live) = &mut live {
                            sync.attach_live(live);
                        }
                        Ok((sync, live))
                    }
                }
                .boxed()
            })
            .collect();
        let started = Instant::now();
        let mut failure = None;
        let mounted: Vec<_> = stream::iter(downloads).buffered(MOUNT_CONCURRENCY).collect().await;
        for (m, mounted) in mounts.iter().zip(mounted) {
            match mounted {
                Ok((sync, live)) => {
                    let real_root = std::fs::canonicalize(sync.root()).unwrap_or_else(|_| sync.root().to_path_buf());
                    memory.stores.push(Mounted { sync, read_only: m.read_only, live, real_root })
                }
                // The first failure in resource order is the one reported.
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failure {
            memory.dispose().await;
            return Err(e);
        }
        for s in &memory.stores {
            tracing::info!(memory_store_id = %s.sync.store_id(), root = %s.sync.root().display(), memories = s.sync.baseline_len(), read_only = s.read_only, "memory store mounted");
        }
        tracing::info!(
            session_id,
            stores = memory.stores.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "memory ready"
        );
        memory.lock(true);
        memory.last_sync = Instant::now();
        Ok(memory)
    }

    /// The session's first tool call was answered: the downloads' first journals, held since
    /// the mount, may flush and commit now (later calls: nothing).
    pub fn first_call_done(&self) {
        for s in &self.stores {
            s.sync.start_first_journal();
        }
    }

    /// The folders, and which of them are read-only.
    pub fn roots(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let all = self.stores.iter().map(|s| s.sync.root().to_path_buf()).collect();
        let ro = self.stores.iter().filter(|s| s.read_only).map(|s| s.sync.root().to_path_buf()).collect();
        (all, ro)
    }

    /// Waits for the live work of any store: a remote change to pull, a local edit whose quiet
    /// period ended, a full sync a reopened feed asked for. Cancel-safe; never resolves without
    /// live sync. Run what it returns with [`run_live`](Self::run_live).
    pub async fn next_live(&mut self) -> (usize, LiveWork) {
        let waits: Vec<_> = self
            .stores
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.live.as_mut().filter(|l| l.is_running())?)))
            .map(|(i, live)| Box::pin(async move { (i, live.next().await) }))
            .collect();
        if waits.is_empty() {
            return std::future::pending().await;
        }
        futures::future::select_all(waits).await.0
    }

    /// A tool call wrote `path` in full: if it lies in a live store, that file is due for upload
    /// now rather than after the watcher's quiet period.
    pub fn wrote(&mut self, path: &Path) {
        for s in self.stores.iter_mut().filter(|s| !s.read_only) {
            let (Ok(rel), Some(live)) = (path.strip_prefix(&s.real_root), s.live.as_mut()) else { continue };
            if let Some(rel) = rel.to_str().and_then(|r| RelPath::parse(r).ok()) {
                live.written(rel);
            }
            return;
        }
    }

    /// Runs one store's live work (between tool calls, so no call sees a half-done pull).
    pub async fn run_live(&mut self, (index, work): (usize, LiveWork)) {
        let Some(store) = self.stores.get_mut(index) else { return };
        let guarded = self.lock_read_only && store.read_only;
        let root = store.sync.root().to_path_buf();
        if guarded {
            let _ = sandbox::unlock_read_only(&root);
        }
        store.sync.run_live(work).await;
        if guarded && let Err(e) = sandbox::lock_read_only(&root) {
            tracing::warn!(root = %root.display(), "cannot change the modes of a read-only memory folder: {e}");
        }
        if let (false, Some((uid, gid))) = (store.read_only, self.tool_owner)
            && let Err(e) = sandbox::give_to(&root, uid, gid)
        {
            tracing::warn!(root = %root.display(), "cannot hand a memory folder to the tool user: {e}");
        }
    }

    /// Syncs when at least the interval passed since the last download or sync.
    /// Otherwise writes the journals that pulls of the change feed's bytes left behind for
    /// longer than they may lag.
    pub async fn sync_if_due(&mut self) {
        if self.last_sync.elapsed() >= self.interval {
            self.sync_all().await;
            return;
        }
        let now = tokio::time::Instant::now();
        for store in &mut self.stores {
            if store.sync.journal_due().is_some_and(|due| due <= now) {
                store.sync.write_due_journal().await;
            }
        }
    }

    async fn sync_all(&mut self) {
        self.lock(false);
        // A few stores at a time: concurrent enough to hide round trips, while the transient
        // memory of a listing or a walk is held for only a few stores at once.
        stream::iter(self.stores.iter_mut())
            .for_each_concurrent(SYNC_CONCURRENCY, |s| async move {
                if let Err(e) = s.sync.sync(false).await {
                    tracing::warn!(memory_store_id = %s.sync.store_id(), "memory sync failed memory_store_id={}: {e}", s.sync.store_id());
                }
            })
            .await;
        self.lock(true);
        self.last_sync = Instant::now();
    }

    /// Ends live sync: the teardown's syncs are the last word.
    fn stop_live(&mut self) {
        for s in &mut self.stores {
            s.live = None;
        }
    }

    /// Removes every folder this worker created (and the session's record).
    pub async fn dispose(mut self) {
        self.stop_live();
        self.lock(false);
        for s in self.stores.drain(..) {
            s.sync.dispose().await;
        }
        let _ = std::fs::remove_file(&self.record);
    }

    /// Applies or lifts the file-mode guard of read-only folders (permissions sandbox or tool
    /// user only); once applied, hands the read-write folders to the tool user, if there is one.
    fn lock(&self, locked: bool) {
        if let (true, Some((uid, gid))) = (locked, self.tool_owner) {
            for s in self.stores.iter().filter(|s| !s.read_only) {
                if let Err(e) = sandbox::give_to(s.sync.root(), uid, gid) {
                    tracing::warn!(root = %s.sync.root().display(), "cannot hand a memory folder to the tool user: {e}");
                }
            }
        }
        if !self.lock_read_only {
            return;
        }
        for s in self.stores.iter().filter(|s| s.read_only) {
            let root = s.sync.root();
            let outcome = if locked { sandbox::lock_read_only(root) } else { sandbox::unlock_read_only(root) };
            if let Err(e) = outcome {
                tracing::warn!(root = %root.display(), "cannot change the modes of a read-only memory folder: {e}");
            }
        }
    }
}

impl Memory {
    /// The item's teardown: each store's final sync (if `steps` ask for it), flush and dispose
    /// one after the other, [`TEARDOWN_CONCURRENCY`] stores at a time, so each store's final
    /// walk and listing are released with it before later stores take theirs (they used to be
    /// held for every store until the last flush). The bounds are the spec's, as deadlines over
    /// all stores ([`teardown_pipelined`]): final syncs within 30 s, flushes within 30 s after.
    pub async fn teardown(mut self, steps: TeardownSteps) {
        self.stop_live();
        self.lock(false);
        let record = self.record.clone();
        let stores: Vec<StoreTeardown> =
            self.stores.drain(..).map(|s| StoreTeardown { sync: s.sync, read_only: s.read_only }).collect();
        let kept = teardown_pipelined(stores, steps, TEARDOWN_CONCURRENCY).await;
        if steps.dispose {
            let _ = std::fs::remove_file(&record);
        }
        drop(kept);
    }
}

/// One store's part of the item's teardown: the engine's own steps, except that a read-only
/// store pushes nothing.
struct StoreTeardown {
    sync: StoreSync,
    read_only: bool,
}

impl Teardown for StoreTeardown {
    async fn final_sync(&mut self) {
        if let Err(e) = self.sync.final_sync_retrying().await {
            tracing::warn!(memory_store_id = %self.sync.store_id(), "memory sync failed memory_store_id={}: {e}", self.sync.store_id());
        }
    }

    async fn flush(&mut self) {
        if self.read_only {
            return;
        }
        if let Err(e) = self.sync.flush_retrying().await {
            tracing::warn!(memory_store_id = %self.sync.store_id(), "memory flush failed memory_store_id={}: {e}", self.sync.store_id());
        }
    }

    async fn dispose(self) {
        self.sync.dispose().await;
    }

    fn memory_store_id(&self) -> Option<&MemoryStoreId> {
        Some(self.sync.store_id())
    }
}

/// Takes back a folder this worker's predecessor mounted for the same session, and syncs it at
/// once so edits made before the crash reach the server before any tool runs.
async fn resume(client: &Client, cfg: StoreConfig, m: &StoreMount) -> Result<StoreSync, WorkerError> {
    let root = cfg.root.clone();
    // A folder locked by the permissions guard must be writable for the engine again.
    if m.read_only {
        let _ = sandbox::unlock_read_only(&root);
    }
    match StoreSync::resume(client.clone(), cfg).await {
        Ok(mut sync) => {
            tracing::info!(memory_store_id = %m.store_id, root = %root.display(), "resuming the memory store folder a previous worker left for this session");
            if let Err(e) = sync.sync(false).await {
                tracing::warn!(memory_store_id = %m.store_id, "memory sync failed memory_store_id={}: {e}", m.store_id);
            }
            Ok(sync)
        }
        Err(e) => {
            tracing::warn!(memory_store_id = %m.store_id, "{e}");
            Err(MountError::AlreadyExists { path: root, store: m.store_id.clone() }.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The plan of a session given as the JSON the API answers.
    fn plan_of(session: &serde_json::Value, workdir: &Path) -> Result<Vec<StoreMount>, WorkerError> {
        plan(&serde_json::from_value(session.clone()).unwrap(), workdir, Path::new("/mnt"))
    }

    #[test]
    fn mount_paths_follow_the_rules() {
        let session = json!({"resources": [
            {"type": "memory_store", "memory_store_id": "memstore_a", "mount_path": "/mnt/memory//notes/./x", "access": "read_write"},
            {"type": "file", "file_id": "file_1"},
            {"type": "memory_store", "memory_store_id": "memstore_b", "name": "team", "access": "read_only"},
            {"type": "memory_store", "memory_store_id": "memstore_c", "mount_path": ""},
        ]});
        let plan = plan_of(&session, Path::new("/work")).unwrap();
        assert_eq!(plan.len(), 3);
        assert_eq!(plan[0].root, PathBuf::from("/mnt/memory/notes/x"));
        assert!(!plan[0].read_only);
        assert_eq!(plan[1].root, PathBuf::from("/work/memory/team"));
        assert!(plan[1].read_only);
        assert_eq!(plan[2].root, PathBuf::from("/work/memory/memstore_c"));
    }

    #[test]
    fn unclean_mount_paths_fail_the_item() {
        for bad in ["relative/x", "/mnt/memory/../etc"] {
            let session =
                json!({"resources": [{"type": "memory_store", "memory_store_id": "memstore_a", "mount_path": bad}]});
            let err = plan_of(&session, Path::new("/w")).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("memory store mount_path is not a clean absolute path: '{bad}' (memory_store_id=memstore_a)")
            );
        }
    }

    #[test]
    fn overlapping_mount_paths_fail_the_item() {
        for (a, b) in
            [("/mnt/memory/x", "/mnt/memory/x/"), ("/mnt/memory/x", "/mnt/memory/x/y"), ("/mnt/m/x/y", "/mnt/m/x")]
        {
            let session = json!({"resources": [
                {"type": "memory_store", "memory_store_id": "memstore_a", "mount_path": a},
                {"type": "memory_store", "memory_store_id": "memstore_b", "mount_path": b},
            ]});
            let err = plan_of(&session, Path::new("/w")).unwrap_err().to_string();
            assert!(err.contains("memstore_a and memstore_b overlap"), "{err}");
        }
        let session = json!({"resources": [
            {"type": "memory_store", "memory_store_id": "memstore_a", "mount_path": "/mnt/memory/x"},
            {"type": "memory_store", "memory_store_id": "memstore_b", "mount_path": "/mnt/memory/xy"},
        ]});
        assert_eq!(plan_of(&session, Path::new("/w")).unwrap().len(), 2, "a shared name prefix is no overlap");
    }

    #[test]
    fn mount_paths_outside_the_mount_root_fail_the_item() {
        let dir = crate::tools::testing::canonical_tempdir();
        let root = dir.1.join("mnt");
        std::fs::create_dir(&root).unwrap();
        let outside = dir.1.join("elsewhere");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let r = root.display();
        let plan_at = |mount_path: &str| {
            let session = json!({"resources": [
                {"type": "memory_store", "memory_store_id": "memstore_a", "mount_path": mount_path},
            ]});
            plan(&serde_json::from_value(session).unwrap(), Path::new("/w"), &root)
        };
        for good in [format!("{r}/notes"), format!("{r}/a/b/c"), format!("{r}//x/./y")] {
            assert!(plan_at(&good).is_ok(), "{good}");
        }
        for bad in [
            "/etc".to_owned(),
            "/root/.ssh".to_owned(),
            r.to_string(),
            format!("{r}/"),
            format!("{r}x/notes"),
            format!("{r}/link"),
            format!("{r}/link/notes"),
        ] {
            let err = plan_at(&bad).unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "memory store memstore_a asks for mount_path '{bad}', which is not under this worker's memory mount \
                     root {r}; the item is failed rather than write outside it (start the worker with the server's \
                     --memory-mount-root)"
                )
            );
        }
        // `..` is refused as unclean before the root is even looked at.
        assert!(matches!(plan_at(&format!("{r}/../etc")), Err(WorkerError::BadMountPath { .. })));
        // The worker's own fallback under the workdir stays allowed.
        let session = json!({"resources": [{"type": "memory_store", "memory_store_id": "memstore_a", "name": "n"}]});
        let plan = plan(&serde_json::from_value(session).unwrap(), Path::new("/w"), &root).unwrap();
        assert_eq!(plan[0].root, PathBuf::from("/w/memory/n"));
    }

    #[test]
    fn records_round_trip_and_name_their_session() {
        let dir = tempfile::tempdir().unwrap();
        let record = SessionRecord {
            session_id: "sesn_1".into(),
            stores: vec![StoreMount {
                store_id: "memstore_a".parse().unwrap(),
                root: "/mnt/memory/a".into(),
                read_only: true,
            }],
        };
        write_record(dir.path(), &record).unwrap();
        let back = read_record(dir.path(), "sesn_1").unwrap();
        assert_eq!(back.stores, record.stores);
        assert!(read_record(dir.path(), "sesn_2").is_none());
    }
}
