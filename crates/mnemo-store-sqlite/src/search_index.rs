//! The search index, kept behind the writes ([`mnemo_store::search`]).
//!
//! A write queues its memory in `memory_search_waiting` (a trigger, in the write's own
//! transaction: a small row). The index itself is [`mnemo_search`]'s word index, in its own
//! directory beside the database ([`dir`]), so taking memories in never holds the database's
//! one write lock: the indexer thread reads the waiting memories from the database (one read
//! snapshot), writes and commits them to the index, and only then removes what it took from
//! the queue (a short write). A crash in between leaves them queued: they are taken in again,
//! which changes nothing.
//!
//! The index is derived data: each commit names the database generation it was built from (a
//! random id the database holds) and how far along the queue it got; a missing, foreign or
//! newer index (the database replaced, or restored from a backup) is rebuilt by queueing every
//! memory again.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use mnemo_search::{IndexedMemory, SearchIndex};
use mnemo_store::StoreError;
use mnemo_store::search::{INDEX_BATCH, INDEX_SWEEP, IndexPacer, next_sweep};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::engine::{Engine, backend, failure};

/// The index of the database at `db`: the directory `db` with `.index` after its name.
pub(crate) fn dir(db: &Path) -> PathBuf {
    beside(db, ".index")
}

fn beside(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The indexer: the index, its connection to the database, and the thread that takes waiting
/// memories in after writes.
#[derive(Debug)]
pub(crate) struct Indexer {
    index: Arc<SearchIndex>,
    conn: Arc<Mutex<Connection>>,
    generation: Arc<str>,
    poke: SyncSender<()>,
    stopping: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// A batch of waiting memories.
struct Batch {
    /// Every one's row number: each is taken out of the index.
    waiting: Vec<u64>,
    /// The live ones' row number, store, path and content: each is put back in.
    live: Vec<(u64, u64, String, String)>,
    /// The queue's last tick among them.
    upto: i64,
}

/// What the indexer needs for a batch.
struct Keeper<'a> {
    index: &'a SearchIndex,
    conn: &'a Connection,
    generation: &'a str,
    engine: &'a Engine,
}

/// Opens (creating or rebuilding) the index of `engine`'s database and starts its indexer.
pub(crate) fn start(engine: &Arc<Engine>) -> Result<(), StoreError> {
    let db = engine.path();
    // The trigram index of earlier versions (an SQLite file): replaced by the word index.
    for old in [".search", ".search-wal", ".search-shm"] {
        let old = beside(db, old);
        if old.exists() {
            std::fs::remove_file(&old)
                .map_err(|e| failure(format!("remove the old search index {}: {e}", old.display())))?;
        }
    }
    let path = dir(db);
    let index = Arc::new(SearchIndex::open(&path).map_err(backend)?);
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| failure(format!("open {} for the search indexer: {e}", db.display())))?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(backend)?;
    let generation: String =
        conn.query_row("SELECT generation FROM search_index", [], |r| r.get(0)).map_err(backend)?;
    let keeper = Keeper { index: &index, conn: &conn, generation: &generation, engine };
    if !keeper.current()? {
        keeper.rebuild()?;
    }
    let (conn, generation) = (Arc::new(Mutex::new(conn)), Arc::<str>::from(generation));
    let (poke, woken) = mpsc::sync_channel(1);
    let stopping = Arc::new(AtomicBool::new(false));
    let thread = {
        let (index, conn, generation, stopping, engine) = (
            Arc::clone(&index),
            Arc::clone(&conn),
            Arc::clone(&generation),
            Arc::clone(&stopping),
            Arc::downgrade(engine),
        );
        std::thread::Builder::new()
            .name("mnemo-sqlite-indexer".into())
            .spawn(move || keep(&index, &conn, &generation, &engine, &woken, &stopping))
            .map_err(backend)?
    };
    let indexer = Indexer { index, conn, generation, poke, stopping, thread: Mutex::new(Some(thread)) };
    // A first pass at once: what a rebuild or an earlier run left waiting.
    indexer.poke();
    *engine.index.lock().expect("index lock poisoned") = Some(indexer);
    Ok(())
}

impl Keeper<'_> {
    /// Whether the index was built from this database as it is: the same generation, and not
    /// further along than the database's queue has ever been.
    fn current(&self) -> Result<bool, StoreError> {
        let queued: i64 = self
            .conn
            .query_row("SELECT seq FROM sqlite_sequence WHERE name = 'memory_search_waiting'", [], |r| r.get(0))
            .optional()
            .map_err(backend)?
            .unwrap_or(0);
        let Some(payload) = self.index.payload().map_err(backend)? else { return Ok(false) };
        let through = payload
            .split_once(' ')
            .filter(|(generation, _)| *generation == self.generation)
            .and_then(|(_, through)| through.parse::<i64>().ok());
        Ok(through.is_some_and(|through| through <= queued))
    }

    /// Queues every memory again, then empties the index (in that order: a crash in between
    /// leaves an index that still does not match, so the next open rebuilds again). Runs before
    /// the store is handed out, so nothing else writes yet; the database is written from here,
    /// not through the writer thread (the caller may be on an async worker, which must not
    /// block on another thread).
    fn rebuild(&self) -> Result<(), StoreError> {
        tracing::info!(index = %dir(self.engine.path()).display(), "building the search index from every memory");
        self.conn
            .execute_batch(
                "BEGIN IMMEDIATE;
                 INSERT OR REPLACE INTO memory_search_waiting (memory_seq) SELECT seq FROM memories ORDER BY seq;
                 COMMIT;",
            )
            .map_err(backend)?;
        self.index.clear(&format!("{} 0", self.generation)).map_err(backend)
    }

    /// Takes up to [`INDEX_BATCH`] waiting memories (the oldest queued) into the index, then
    /// off the queue; how many.
    fn take_in(&self) -> Result<usize, StoreError> {
        let started = std::time::Instant::now();
        // One read snapshot of the queue and the memories it names.
        self.conn.execute_batch("BEGIN").map_err(backend)?;
        let read = self.read_batch();
        let _ = self.conn.execute_batch("COMMIT");
        let Some(batch) = read? else { return Ok(0) };
        let memories: Vec<IndexedMemory<'_>> = batch
            .live
            .iter()
            .map(|(seq, store, path, content)| IndexedMemory { seq: *seq, store: *store, path, content })
            .collect();
        let upto = batch.upto;
        self.index.write(&batch.waiting, &memories, &format!("{} {upto}", self.generation)).map_err(backend)?;
        let count = batch.waiting.len();
        self.engine.write_blocking(move |c| {
            c.execute("DELETE FROM memory_search_waiting WHERE tick <= ?1", params![upto]).map_err(backend)?;
            Ok(())
        })?;
        metrics::counter!("mnemo_search_indexed_total").increment(count as u64);
        metrics::histogram!("mnemo_search_index_batch_seconds").record(started.elapsed().as_secs_f64());
        Ok(count)
    }

    /// The oldest waiting memories, if any.
    fn read_batch(&self) -> Result<Option<Batch>, StoreError> {
        let upto: Option<i64> = self
            .conn
            .query_row(
                "SELECT max(tick) FROM (SELECT tick FROM memory_search_waiting ORDER BY tick LIMIT ?1)",
                [INDEX_BATCH as i64],
                |r| r.get(0),
            )
            .map_err(backend)?;
        let Some(upto) = upto else { return Ok(None) };
        let mut read = self
            .conn
            .prepare_cached(
                "SELECT w.memory_seq, m.store_seq, m.path, v.content FROM memory_search_waiting w \
                 LEFT JOIN memories m ON m.seq = w.memory_seq LEFT JOIN memory_versions v ON v.seq = m.version_seq \
                 WHERE w.tick <= ?1",
            )
            .map_err(backend)?;
        let mut rows = read.query([upto]).map_err(backend)?;
        let (mut waiting, mut live) = (Vec::new(), Vec::new());
        while let Some(row) = rows.next().map_err(backend)? {
            let seq: i64 = row.get(0).map_err(backend)?;
            let seq = u64::try_from(seq).map_err(backend)?;
            waiting.push(seq);
            let Some(store) = row.get::<_, Option<i64>>(1).map_err(backend)? else { continue };
            let path: String = row.get(2).map_err(backend)?;
            let content = match row.get_ref(3).map_err(backend)? {
                rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                    String::from_utf8_lossy(t).into_owned()
                }
                _ => String::new(),
            };
            live.push((seq, u64::try_from(store).map_err(backend)?, path, content));
        }
        Ok(Some(Batch { waiting, live, upto }))
    }
}

impl Indexer {
    /// Tells the indexer memories are waiting (cheap: at most one wake-up is queued).
    pub(crate) fn poke(&self) {
        match self.poke.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }

    /// The index, for searches.
    pub(crate) fn index(&self) -> Arc<SearchIndex> {
        Arc::clone(&self.index)
    }

    /// What takes everything waiting into the index now (how many memories), to run away from
    /// the store's lock.
    pub(crate) fn catch_up(&self) -> impl FnOnce(&Engine) -> Result<u64, StoreError> + Send + 'static {
        let (index, conn, generation) = (Arc::clone(&self.index), Arc::clone(&self.conn), Arc::clone(&self.generation));
        move |engine| {
            let conn = conn.lock().expect("index connection lock poisoned");
            let keeper = Keeper { index: &index, conn: &conn, generation: &generation, engine };
            let mut total = 0u64;
            loop {
                let n = keeper.take_in()?;
                total += n as u64;
                if n < INDEX_BATCH {
                    return Ok(total);
                }
            }
        }
    }

    /// Stops the thread (after its batch) and waits for it, then the index's merges.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.poke();
        if let Some(thread) = self.thread.lock().expect("indexer thread lock poisoned").take() {
            // The thread itself may drop the last store (it holds the engine for a batch).
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
        self.index.close();
    }
}

/// The indexer thread: woken by writes (and at least every [`INDEX_SWEEP`] after one, once a
/// minute when idle: [`next_sweep`]), it takes waiting
/// memories in once the writes pause or the oldest has waited too long ([`index_now`]), one
/// batch at a time, pausing again for writes that come in between.
///
/// [`index_now`]: mnemo_store::search::index_now
fn keep(
    index: &SearchIndex,
    conn: &Mutex<Connection>,
    generation: &str,
    engine: &Weak<Engine>,
    woken: &mpsc::Receiver<()>,
    stopping: &AtomicBool,
) {
    mnemo_search::stand_back();
    let mut pacer = IndexPacer::default();
    let mut sweep = INDEX_SWEEP;
    // Whether a write woke it (`Some(true)`), the wait ran out (`Some(false)`), or the store
    // is gone (`None`).
    let wake = |pacer: &mut IndexPacer, wait| match woken.recv_timeout(wait) {
        Ok(()) => {
            pacer.wrote();
            Some(true)
        }
        Err(RecvTimeoutError::Timeout) => Some(false),
        Err(RecvTimeoutError::Disconnected) => None,
    };
    let woke = |pacer: &mut IndexPacer, wait| wake(pacer, wait).is_some();
    loop {
        if !pacer.behind() {
            let Some(wrote) = wake(&mut pacer, sweep) else { return };
            // Idle sweeps grow apart; a write brings them back.
            sweep = next_sweep(sweep, wrote);
            pacer.start();
        }
        while let Some(wait) = pacer.wait() {
            if stopping.load(Ordering::SeqCst) || !woke(&mut pacer, wait) {
                return;
            }
        }
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        let Some(engine) = engine.upgrade() else { return };
        let conn = conn.lock().expect("index connection lock poisoned");
        let started = std::time::Instant::now();
        let taken = Keeper { index, conn: &conn, generation, engine: &engine }.take_in();
        if let Err(e) = &taken {
            tracing::warn!(error = %e, "the search indexer failed a batch; it tries again later");
        }
        if !matches!(taken, Ok(0)) {
            sweep = next_sweep(sweep, true);
        }
        pacer.batch_done(taken.map_or(true, |n| n < INDEX_BATCH), started.elapsed());
        if woken.try_recv().is_ok() {
            pacer.wrote();
        }
    }
}

#[cfg(test)]
mod tests {
    use mnemo_api::{Actor, MemoryPath};
    use mnemo_store::Operations;
    use mnemo_store::Store;
    use mnemo_store::rules::search::parse;
    use mnemo_store::search::{SearchMemories, SearchScope};

    use crate::SqliteStore;
    use crate::check::tests::{fill, open};

    fn stores() -> mnemo_store::ListMemoryStores {
        mnemo_store::ListMemoryStores {
            include_archived: true,
            created_at_gte: None,
            created_at_lte: None,
            limit: 10,
            after: None,
        }
    }

    async fn found(s: &SqliteStore, q: &str) -> usize {
        let ws = s.default_workspace().await.unwrap();
        let request = SearchMemories {
            scope: SearchScope::Workspace(None),
            query: parse(q).unwrap(),
            path_prefix: None,
            limit: 1000,
            after: None,
        };
        s.search_memories(&ws, request).await.unwrap().items.len()
    }

    #[tokio::test]
    async fn a_missing_or_newer_index_file_is_built_again_from_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db.sqlite");
        let s = open(&db);
        fill(&s, 20).await;
        let live = found(&s, "notes").await;
        assert!(live >= 10, "{live}");
        s.catch_up_search_index().await.unwrap();
        assert_eq!(found(&s, "notes").await, live);
        s.close().await;
        let backup = dir.path().join("backup.sqlite");
        std::fs::copy(&db, &backup).unwrap();

        // Gone: every memory waits again, is found meanwhile, and is taken in.
        std::fs::remove_dir_all(super::dir(&db)).unwrap();
        let s = open(&db);
        assert_eq!(found(&s, "notes").await, live);
        s.catch_up_search_index().await.unwrap();
        assert_eq!(found(&s, "notes").await, live);
        // Reopened as it was: nothing to do.
        s.close().await;
        let s = open(&db);
        assert_eq!(s.catch_up_search_index().await.unwrap(), 0);

        // The database restored from before a write the index holds: rebuilt, so the index
        // never answers for a memory the database does not have.
        let ws = s.default_workspace().await.unwrap();
        let store = s.list_memory_stores(&ws, stores()).await.unwrap().items[0].id.clone();
        let late = MemoryPath::parse("/notes/late.md").unwrap();
        s.create_memory(&ws, &store, late, "written after the backup".into(), Actor::UserActor { user_id: "u".into() })
            .await
            .unwrap();
        s.catch_up_search_index().await.unwrap();
        assert_eq!(found(&s, "after the backup").await, 1);
        s.close().await;
        std::fs::copy(&backup, &db).unwrap();
        let s = open(&db);
        s.catch_up_search_index().await.unwrap();
        assert_eq!(found(&s, "after the backup").await, 0);
        assert_eq!(found(&s, "notes").await, live);
        s.close().await;
    }
}
