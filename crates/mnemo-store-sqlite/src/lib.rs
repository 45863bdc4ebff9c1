//! The embedded SQLite backend of [`mnemo_store::Store`].
//!
//! One database file in write-ahead-logging mode. Writes run on one thread and are group
//! committed (see `engine`); reads run on a small pool of read-only connections. The schema
//! lives in `migrations/` and is applied on open. [`backup()`] and [`check()`] are `mnemo db
//! backup` and `mnemo db check`: they open the file themselves, beside any server using it.

mod agents;
mod audit;
mod backup;
mod check;
mod console;
mod copy;
mod credentials;
mod dreams;
mod embeddings;
mod engine;
mod environments;
mod events;
mod memories;
mod people;
mod rate_limits;
mod retention;
mod schema;
mod search_index;
mod sessions;
mod sso;
mod stores;
mod versions;
mod webhooks;
mod work;
mod workspaces;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use mnemo_api::{
    Actor, Environment, EnvironmentId, Memory, MemoryId, MemoryListItem, MemoryStore, MemoryStoreId, MemoryVersion,
    MemoryVersionId, View,
};
use std::collections::HashMap;

use mnemo_api::{Agent, AgentId, Session, SessionId, Work};
use mnemo_api::{WebhookDelivery, WorkspaceId};
use mnemo_store::ClaimedDelivery;
use mnemo_store::{
    Cursor, Limits, ListMemories, ListMemoryStores, ListMemoryVersions, Listing, MemoryExport, MemoryFeedEntry,
    MemoryStoreUsage, MemoryWriteOp, Result, Signal, Store,
};
use mnemo_store::{ListEvents, ListSessions, SessionEvent};
use tokio::sync::broadcast;

pub use crate::backup::{BackupError, BackupOptions, BackupReport, backup};
pub use crate::check::{Check, CheckError, CheckReport, Counts, Findings, Outcome, check};
use crate::engine::{Engine, Lite, backend, failure};
use mnemo_store::ops::{self, SessionRowSql, run_ready};

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: a commit survives power loss (the default).
    #[default]
    Full,
    /// `synchronous=NORMAL`: a commit survives a process crash but possibly not power loss.
    Normal,
}

/// Where and how to open the database.
#[derive(Debug, Clone)]
pub struct SqliteSettings {
    pub path: PathBuf,
    pub durability: Durability,
    pub limits: Limits,
    /// What SQLite may hold in this process, in bytes (page caches and statements of every
    /// connection; one limit per process): past it, connections reuse cache pages.
    pub memory_limit: i64,
    /// How much of the database file each read connection maps into memory, in bytes (`0`:
    /// none, every page is copied into the connection's own cache). See [`DEFAULT_READER_MAP`].
    pub reader_map: i64,
}

/// The default of [`SqliteSettings::memory_limit`]: 64 MiB.
pub const DEFAULT_MEMORY_LIMIT: i64 = 64 << 20;
/// The bounds of `?memory_mib=` on an `sqlite://` URL.
const MEMORY_MIB: std::ops::RangeInclusive<i64> = 4..=65_536;

/// The default of [`SqliteSettings::reader_map`]: 256 MiB.
///
/// **Why readers map the file.** Without a mapping, each read connection copies every page it
/// reads into its own cache (16 MB, all of them under [`DEFAULT_MEMORY_LIMIT`]): a cold server's
/// first downloads of eight stores at once filled eight caches with copies of pages the kernel
/// already held, and later reads evicted each other's under the shared limit. Mapped, readers
/// share the kernel's one copy: half the time and CPU of a cold server's first download (`docs/BENCHMARKS.md`).
///
/// **What it trades.** SQLite maps read-only, so no stray write can reach the file through the
/// mapping; but a page the disk cannot return (a failing disk), or a file truncated behind
/// SQLite's back, is a `SIGBUS` that ends the server instead of an error for one request. Both
/// already mean the database is damaged; `mmap_mib=0` on the URL turns the mapping off. Mapped
/// pages are the kernel's page cache: they count in the process's resident memory (`RssFile`, as
/// many times as connections map them) but not in its anonymous memory, and the kernel reclaims
/// them under pressure. The writer does not map the file.
pub const DEFAULT_READER_MAP: i64 = 256 << 20;
/// The bounds of `?mmap_mib=` (SQLite caps a mapping at 2 GiB less 64 KiB on Linux).
const MMAP_MIB: std::ops::RangeInclusive<i64> = 0..=2_047;

impl SqliteSettings {
    /// Parses `sqlite://PATH`, `sqlite:PATH` or `sqlite:///ABS/PATH`, optionally followed by
    /// `?synchronous=full|normal`, `&memory_mib=N` (SQLite's memory bound, 4–65,536 MiB) and
    /// `&mmap_mib=N` (each reader's mapping of the file, 0–2,047 MiB; 0 turns it off).
    pub fn from_url(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .ok_or_else(|| format!("`{url}` is not an sqlite:// URL"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() {
            return Err("the sqlite:// URL names no file (use sqlite://PATH)".into());
        }
        let mut durability = Durability::Full;
        let mut memory_limit = DEFAULT_MEMORY_LIMIT;
        let mut reader_map = DEFAULT_READER_MAP;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("memory_mib", v)) => memory_limit = mib("memory_mib", v, MEMORY_MIB, "")?,
                Some(("mmap_mib", v)) => reader_map = mib("mmap_mib", v, MMAP_MIB, " (0 maps nothing)")?,
                Some(("synchronous", v)) if v.eq_ignore_ascii_case("full") => durability = Durability::Full,
                Some(("synchronous", v)) if v.eq_ignore_ascii_case("normal") => {
                    durability = Durability::Normal;
                }
                _ => {
                    return Err(format!(
                        "unknown sqlite:// option `{pair}` (known: synchronous=full|normal, memory_mib=N, mmap_mib=N)"
                    ));
                }
            }
        }
        Ok(Self { path: PathBuf::from(path), durability, limits: Limits::default(), memory_limit, reader_map })
    }
}

/// An option's whole number of MiB within `range`, in bytes.
fn mib(option: &str, v: &str, range: std::ops::RangeInclusive<i64>, note: &str) -> Result<i64, String> {
    match v.parse::<i64>() {
        Ok(n) if range.contains(&n) => Ok(n << 20),
        _ => Err(format!(
            "sqlite:// option {option} must be a whole number of MiB from {} to {}{note}, got `{v}`",
            range.start(),
            range.end()
        )),
    }
}

/// A [`Store`] in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    engine: Arc<Engine>,
    limits: Limits,
    /// Memory changes, sent once their write committed (this process makes every change).
    memory_signals: broadcast::Sender<Signal>,
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database.
    pub fn open(settings: &SqliteSettings) -> Result<Self> {
        if let Some(parent) = settings.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| failure(format!("create {}: {e}", parent.display())))?;
        }
        let engine = Engine::start(settings)?;
        Ok(Self { engine, limits: settings.limits, memory_signals: broadcast::channel(MEMORY_SIGNALS).0 })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.engine.path()
    }

    /// Finishes queued writes and closes the database (blocking; [`Store::close`] is the
    /// async form).
    pub fn close_blocking(&self) {
        self.engine.shutdown();
    }
}

/// Memory signals buffered for slow subscribers (one that falls behind re-checks everything).
const MEMORY_SIGNALS: usize = 4096;

impl SqliteStore {
    /// Tells subscribers that a version at `seq` committed in `store` (called after the write
    /// returned, so after its commit).
    fn memory_changed(&self, store: &MemoryStoreId, seq: i64) {
        let _ = self.memory_signals.send(Signal::Memory { store: store.clone(), seq });
        self.poke_indexer();
    }

    /// Tells the search indexer that memories wait for it.
    fn poke_indexer(&self) {
        if let Some(index) = self.engine.index.lock().expect("index lock poisoned").as_ref() {
            index.poke();
        }
    }
}

pub(crate) fn now_micros() -> i64 {
    Utc::now().timestamp_micros()
}

/// RFC 3339 text in UTC with microseconds, for the API's string-typed timestamps.
pub(crate) use mnemo_api::rfc3339_micros as rfc3339;
pub(crate) use mnemo_store::row::{actor_columns, actor_from_columns, parse_id, rfc3339_opt, ts, ts_opt};

impl SqliteStore {
    /// Runs `op` on a reader's connection, in one transaction (one snapshot).
    async fn read<T: Send + 'static>(
        &self,
        op: impl AsyncFnOnce(&Lite<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.engine.read(move |c| run_ready(op(&Lite::new(c)))).await
    }

    /// Runs `op` on the writer thread in its own savepoint of the next committed batch, then
    /// delivers the signals it sent.
    async fn write<T: Send + 'static>(
        &self,
        op: impl AsyncFnOnce(&Lite<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (out, signals) = self
            .engine
            .write(move |c| {
                let sql = Lite::new(c);
                let out = run_ready(op(&sql))?;
                Ok((out, sql.into_signals()))
            })
            .await?;
        for signal in signals {
            // This process made the change: only memory feeds wait on a signal.
            if let Signal::Memory { store, seq } = signal {
                self.memory_changed(&store, seq);
            }
        }
        Ok(out)
    }
}

mnemo_store::operations!(SqliteStore);

#[async_trait]
impl Store for SqliteStore {
    fn memory_signals(&self) -> broadcast::Receiver<Signal> {
        self.memory_signals.subscribe()
    }

    async fn close(&self) {
        let engine = Arc::clone(&self.engine);
        // Joining the writer thread blocks; keep it off the async workers.
        let _ = tokio::task::spawn_blocking(move || engine.shutdown()).await;
    }

    async fn list_environments(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Environment>> {
        let ws = ws.clone();
        self.engine.read(move |c| environments::list(c, &ws, include_archived, limit, after.as_ref())).await
    }

    async fn get_agent(&self, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| agents::get(c, &ws, &id, version)).await
    }

    async fn list_agents(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Agent>> {
        let ws = ws.clone();
        self.engine.read(move |c| agents::list(c, &ws, include_archived, limit, after.as_ref())).await
    }

    async fn get_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| sessions::get_with_seq(c, &ws, &id).map(|(s, _)| s)).await
    }

    async fn list_sessions(&self, ws: &WorkspaceId, query: ListSessions) -> Result<Listing<Session>> {
        let ws = ws.clone();
        self.engine.read(move |c| sessions::list(c, &ws, &query)).await
    }

    async fn list_turn_sessions(
        &self,
        statuses: Vec<String>,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<(WorkspaceId, SessionId)>> {
        self.engine.read(move |c| sessions::list_turn_sessions(c, &statuses, limit, after.as_ref())).await
    }

    async fn session_workspace(&self, id: &SessionId) -> Result<Option<WorkspaceId>> {
        let id = id.clone();
        self.engine.read(move |c| sessions::workspace_of(c, &id)).await
    }

    async fn list_events(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        query: ListEvents,
    ) -> Result<Listing<SessionEvent>> {
        let (ws, session) = (ws.clone(), session.clone());
        self.engine.read(move |c| events::list(c, &ws, &session, &query)).await
    }

    async fn events_after(&self, ws: &WorkspaceId, session: &SessionId, seq: i64) -> Result<Vec<SessionEvent>> {
        let (ws, session) = (ws.clone(), session.clone());
        self.engine.read(move |c| events::after(c, &ws, &session, seq)).await
    }

    async fn list_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Work>> {
        let (ws, environment) = (ws.clone(), environment.clone());
        self.engine.read(move |c| work::list(c, &ws, &environment, limit, after.as_ref())).await
    }

    async fn get_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| stores::get(c, &ws, &id)).await
    }

    async fn list_memory_stores(&self, ws: &WorkspaceId, query: ListMemoryStores) -> Result<Listing<MemoryStore>> {
        let ws = ws.clone();
        self.engine.read(move |c| stores::list(c, &ws, &query)).await
    }

    async fn memory_store_usage(
        &self,
        ws: &WorkspaceId,
        stores: &[MemoryStoreId],
    ) -> Result<HashMap<MemoryStoreId, MemoryStoreUsage>> {
        let (ws, ids) = (ws.clone(), stores.to_vec());
        self.engine.read(move |c| stores::usage(c, &ws, &ids)).await
    }

    async fn delete_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<()> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::stores::delete_store(&Lite::new(c), &ws, &id))).await?;
        // Feeds of the store re-check, find it gone and end.
        let _ = self.memory_signals.send(Signal::Resync);
        // Its memories wait to leave the index: the indexer takes them out now, not at a sweep.
        self.poke_indexer();
        Ok(())
    }

    /// One job on the writer thread: the writes commit together (one flush), each in its own
    /// savepoint, so a refused one is rolled back alone.
    async fn write_memories(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        writes: Vec<MemoryWriteOp>,
        actor: Actor,
    ) -> Result<Vec<Result<Memory>>> {
        let limit = self.limits.max_memories_per_store;
        let jobs: Vec<_> = writes
            .into_iter()
            .map(|write| {
                let (ws, owned, actor) = (ws.clone(), store.clone(), actor.clone());
                move |c: &rusqlite::Connection| {
                    run_ready(ops::memories::write_memory(&Lite::new(c), &ws, &owned, write, &actor, limit))
                }
            })
            .collect();
        let outcomes = self.engine.write_each(jobs).await?;
        if let Some(seq) = outcomes.iter().filter_map(|o| o.as_ref().ok()?.1).max() {
            self.memory_changed(store, seq);
        }
        Ok(outcomes.into_iter().map(|o| o.map(|(memory, _)| memory)).collect())
    }

    async fn get_memory(&self, ws: &WorkspaceId, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory> {
        let (ws, store, id) = (ws.clone(), store.clone(), id.clone());
        self.engine.read(move |c| memories::get(c, &ws, &store, &id)).await
    }

    async fn memory_change_seq(&self, ws: &WorkspaceId, store: &MemoryStoreId) -> Result<i64> {
        let (ws, store) = (ws.clone(), store.clone());
        self.engine
            .read(move |c| {
                let (_, seq) = stores::get_with_seq(c, &ws, &store)?;
                c.prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM memory_versions WHERE store_seq = ?1")
                    .and_then(|mut s| s.query_row([seq], |r| r.get(0)))
                    .map_err(backend)
            })
            .await
    }

    async fn list_memories(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        query: ListMemories,
    ) -> Result<Listing<MemoryListItem>> {
        let (ws, store) = (ws.clone(), store.clone());
        self.engine.read(move |c| memories::list(c, &ws, &store, &query)).await
    }

    async fn search_memories(
        &self,
        ws: &WorkspaceId,
        request: mnemo_store::search::SearchMemories,
    ) -> Result<Listing<mnemo_api::MemorySearchResult>> {
        let ws = ws.clone();
        let Some(index) = self.engine.index.lock().expect("index lock poisoned").as_ref().map(|i| i.index()) else {
            return Err(failure("the store is shut down"));
        };
        self.engine.read(move |c| memories::search(c, &index, &ws, &request)).await
    }

    async fn catch_up_search_index(&self) -> Result<u64> {
        let Some(catch_up) = self.engine.index.lock().expect("index lock poisoned").as_ref().map(|i| i.catch_up())
        else {
            return Err(failure("the store is shut down"));
        };
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || catch_up(&engine)).await.map_err(backend)?
    }

    async fn export_memories(&self, ws: &WorkspaceId, store: &MemoryStoreId, chunk: u32) -> Result<MemoryExport> {
        // Two chunks in flight at most: the reader's pace holds the read (and its snapshot).
        let (out, parts) = tokio::sync::mpsc::channel(2);
        let (began, begun) = tokio::sync::oneshot::channel();
        let (engine, ws, id) = (Arc::clone(&self.engine), ws.clone(), store.clone());
        tokio::spawn(async move {
            let tell = out.clone();
            if let Err(e) = engine.read_paced(move |c| memories::export(c, &ws, &id, chunk, began, &tell)).await {
                let _ = out.send(Err(e)).await;
            }
        });
        started_export(begun, parts).await
    }

    async fn memory_changes_after(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        after: i64,
        limit: u32,
        inline: bool,
    ) -> Result<Vec<MemoryFeedEntry>> {
        let (ws, store) = (ws.clone(), store.clone());
        self.engine.read(move |c| versions::changes_after(c, &ws, &store, after, limit, inline)).await
    }

    async fn get_memory_version(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryVersionId,
        view: View,
    ) -> Result<MemoryVersion> {
        let (ws, store, id) = (ws.clone(), store.clone(), id.clone());
        self.engine.read(move |c| versions::get(c, &ws, &store, &id, view)).await
    }

    async fn list_memory_versions(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        query: ListMemoryVersions,
    ) -> Result<Listing<MemoryVersion>> {
        let (ws, store) = (ws.clone(), store.clone());
        self.engine.read(move |c| versions::list(c, &ws, &store, &query)).await
    }

    async fn claim_webhook_deliveries(&self, limit: u32, lease: Duration) -> Result<Vec<ClaimedDelivery>> {
        // Senders look every second or so; most looks find nothing due, and a read answers that
        // without taking the writer's turn (a delivery committed meanwhile waits for the next look).
        if !self.engine.read(|c| run_ready(ops::webhooks::any_due(&Lite::new(c)))).await? {
            return Ok(Vec::new());
        }
        self.engine.write(move |c| run_ready(ops::webhooks::claim(&Lite::new(c), limit, lease))).await
    }
}

/// The export once its read began (its snapshot's position), or why it never did: the read
/// failed (an unknown store, a closed database) before telling its position.
async fn started_export(
    begun: tokio::sync::oneshot::Receiver<i64>,
    mut parts: tokio::sync::mpsc::Receiver<Result<mnemo_store::ExportPart>>,
) -> Result<MemoryExport> {
    match begun.await {
        Ok(seq) => Ok(MemoryExport { seq, parts }),
        Err(_) => match parts.recv().await {
            Some(Err(e)) => Err(e),
            _ => Err(failure("the export ended before it began")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sqlite_url_names_its_durability_memory_bound_and_mapping() {
        let plain = SqliteSettings::from_url("sqlite:///var/lib/mnemo/db.sqlite").unwrap();
        assert_eq!(plain.path, PathBuf::from("/var/lib/mnemo/db.sqlite"));
        assert_eq!((plain.durability, plain.memory_limit), (Durability::Full, DEFAULT_MEMORY_LIMIT));
        let tuned = SqliteSettings::from_url("sqlite://db.sqlite?synchronous=normal&memory_mib=16").unwrap();
        assert_eq!((tuned.durability, tuned.memory_limit), (Durability::Normal, 16 << 20));
        assert_eq!((plain.reader_map, tuned.reader_map), (DEFAULT_READER_MAP, DEFAULT_READER_MAP));
        assert_eq!(SqliteSettings::from_url("sqlite://db.sqlite?mmap_mib=0").unwrap().reader_map, 0);
        assert_eq!(SqliteSettings::from_url("sqlite://db.sqlite?mmap_mib=2047").unwrap().reader_map, 2047 << 20);
        for bad in ["mmap_mib=-1", "mmap_mib=2048", "mmap_mib=1.5", "mmap_mib=", "mmap_mib=lots"] {
            let e = SqliteSettings::from_url(&format!("sqlite://db.sqlite?{bad}")).unwrap_err();
            assert!(e.contains("mmap_mib must be a whole number of MiB from 0 to 2047 (0 maps nothing)"), "{bad}: {e}");
        }
        for bad in ["memory_mib=3", "memory_mib=65537", "memory_mib=-1", "memory_mib=1.5", "memory_mib="] {
            let e = SqliteSettings::from_url(&format!("sqlite://db.sqlite?{bad}")).unwrap_err();
            assert!(e.contains("memory_mib must be a whole number of MiB from 4 to 65536"), "{bad}: {e}");
        }
        let e = SqliteSettings::from_url("sqlite://db.sqlite?cache=big").unwrap_err();
        assert!(e.contains("unknown sqlite:// option `cache=big`") && e.contains("mmap_mib=N"), "{e}");
    }
}
