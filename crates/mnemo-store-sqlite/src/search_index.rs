//! The search index, kept behind the writes ([`mnemo_store::search`]).
//!
//! A write queues its memory in `memory_search_waiting` (a trigger, in the write's own
//! transaction: a small row). The index itself is an FTS5 trigram table in its own file beside
//! the database ([`file`]), so taking memories in — tokenising ~4 KB into trigrams costs more
//! than the rest of a write — never holds the database's one write lock: the indexer thread
//! reads the waiting memories from the database, writes the index file in its own transaction,
//! and only then removes what it took from the queue (a short write). A crash in between
//! leaves them queued: they are taken in again, which changes nothing.
//!
//! The index file is derived data: it names the database generation it was built from (a
//! random id the database holds) and how far it got; a missing, foreign or newer file (the
//! database replaced, or restored from a backup) is rebuilt by queueing every memory again.
//! Readers attach it as `ix`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use mnemo_store::StoreError;
use mnemo_store::rules::search::index_text;
use mnemo_store::search::{INDEX_BATCH, INDEX_SWEEP, IndexPacer, next_sweep};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::engine::{Engine, backend, failure};

/// The indexer thread's nice value: well below the writer's and the requests' share of a busy
/// machine, still far above nothing.
const INDEXER_NICE: i32 = 19;

/// The index file of the database at `db`: `db` with `.search` after its name.
pub(crate) fn file(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".search");
    PathBuf::from(name)
}

const SCHEMA: &str = "
    CREATE VIRTUAL TABLE IF NOT EXISTS memory_search USING fts5 (
        path, content, content = '', contentless_delete = 1, tokenize = 'trigram'
    );
    CREATE TABLE IF NOT EXISTS index_state (
        generation TEXT    NOT NULL,
        through    INTEGER NOT NULL
    );";

/// The indexer: its connection (to the index file, the database attached as `data`) and the
/// thread that takes waiting memories in after writes.
#[derive(Debug)]
pub(crate) struct Indexer {
    conn: Arc<Mutex<Connection>>,
    poke: SyncSender<()>,
    stopping: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Opens (creating or rebuilding) the index file of `engine`'s database and starts its
/// indexer; a store's reads attach the file from then on.
pub(crate) fn start(engine: &Arc<Engine>) -> Result<(), StoreError> {
    let db = engine.path();
    let path = file(db);
    let conn = Connection::open_with_flags(
        &path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| failure(format!("open the search index {}: {e}", path.display())))?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(backend)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(backend)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(failure(format!("{} cannot use write-ahead logging (journal mode is {mode})", path.display())));
    }
    // The index's commit must be on disk before the queue forgets what it took in.
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -8000;")
        .map_err(backend)?;
    conn.execute_batch(SCHEMA).map_err(backend)?;
    conn.execute("ATTACH DATABASE ?1 AS data", [db.to_string_lossy()]).map_err(backend)?;
    if !current(&conn)? {
        rebuild(&conn, engine)?;
    }
    let conn = Arc::new(Mutex::new(conn));
    let (poke, woken) = mpsc::sync_channel(1);
    let stopping = Arc::new(AtomicBool::new(false));
    let thread = {
        let (conn, stopping, engine) = (Arc::clone(&conn), Arc::clone(&stopping), Arc::downgrade(engine));
        std::thread::Builder::new()
            .name("mnemo-sqlite-indexer".into())
            .spawn(move || keep(&conn, &engine, &woken, &stopping))
            .map_err(backend)?
    };
    let indexer = Indexer { conn, poke, stopping, thread: Mutex::new(Some(thread)) };
    // A first pass at once: what a rebuild or an earlier run left waiting.
    indexer.poke();
    *engine.index.lock().expect("index lock poisoned") = Some(indexer);
    Ok(())
}

/// Whether the index file was built from this database as it is: the same generation, and not
/// further along than the database's queue has ever been.
fn current(conn: &Connection) -> Result<bool, StoreError> {
    let generation: String =
        conn.query_row("SELECT generation FROM data.search_index", [], |r| r.get(0)).map_err(backend)?;
    let queued: i64 = conn
        .query_row("SELECT seq FROM data.sqlite_sequence WHERE name = 'memory_search_waiting'", [], |r| r.get(0))
        .optional()
        .map_err(backend)?
        .unwrap_or(0);
    let state: Option<(String, i64)> = conn
        .query_row("SELECT generation, through FROM index_state", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(backend)?;
    Ok(state.is_some_and(|(g, through)| g == generation && through <= queued))
}

/// Queues every memory again, then empties the index (in that order: a crash in between
/// leaves a file that still does not match, so the next open rebuilds again). Runs before the
/// store is handed out, so nothing else writes yet; the database is written from here, not
/// through the writer thread (the caller may be on an async worker, which must not block on
/// another thread).
fn rebuild(conn: &Connection, engine: &Engine) -> Result<(), StoreError> {
    tracing::info!(index = %file(engine.path()).display(), "building the search index from every memory");
    conn.execute_batch(
        "BEGIN IMMEDIATE;
         INSERT OR REPLACE INTO data.memory_search_waiting (memory_seq) SELECT seq FROM data.memories ORDER BY seq;
         COMMIT;",
    )
    .map_err(backend)?;
    conn.execute_batch(
        "BEGIN;
         DROP TABLE memory_search;
         DELETE FROM index_state;
         INSERT INTO index_state (generation, through) SELECT generation, 0 FROM data.search_index;
         COMMIT;",
    )
    .map_err(backend)?;
    conn.execute_batch(SCHEMA).map_err(backend)
}

impl Indexer {
    /// Tells the indexer memories are waiting (cheap: at most one wake-up is queued).
    pub(crate) fn poke(&self) {
        match self.poke.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }

    /// The connection, for [`catch_up`].
    pub(crate) fn conn(&self) -> Arc<Mutex<Connection>> {
        Arc::clone(&self.conn)
    }

    /// Stops the thread (after its batch) and waits for it.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.poke();
        if let Some(thread) = self.thread.lock().expect("indexer thread lock poisoned").take() {
            // The thread itself may drop the last store (it holds the engine for a batch).
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

/// The indexer thread: woken by writes (and at least every [`INDEX_SWEEP`] after one, once a
/// minute when idle: [`next_sweep`]), it takes waiting
/// memories in once the writes pause or the oldest has waited too long ([`index_now`]), one
/// batch at a time, pausing again for writes that come in between.
fn keep(conn: &Mutex<Connection>, engine: &Weak<Engine>, woken: &mpsc::Receiver<()>, stopping: &AtomicBool) {
    // Behind the writes in CPU too: when the machine is busy, the writer and the requests
    // come first (Linux: a thread's own nice value).
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), INDEXER_NICE) {
        tracing::debug!(error = %e, "the search indexer keeps its priority");
    }
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
        let taken = take_in(&conn, &engine);
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

/// Takes everything waiting into the index now: how many memories.
pub(crate) fn catch_up(conn: &Mutex<Connection>, engine: &Engine) -> Result<u64, StoreError> {
    let conn = conn.lock().expect("index connection lock poisoned");
    let mut total = 0u64;
    loop {
        let n = take_in(&conn, engine)?;
        total += n as u64;
        if n < INDEX_BATCH {
            return Ok(total);
        }
    }
}

/// Takes up to [`INDEX_BATCH`] waiting memories (the oldest queued) into the index, then off
/// the queue; how many.
fn take_in(conn: &Connection, engine: &Engine) -> Result<usize, StoreError> {
    let started = std::time::Instant::now();
    // Deferred: the index file is written; the database is only read (one snapshot).
    conn.execute_batch("BEGIN").map_err(backend)?;
    let taken = (|| {
        let (count, upto): (usize, Option<i64>) = conn
            .query_row(
                "SELECT count(*), max(tick) FROM \
                 (SELECT tick FROM data.memory_search_waiting ORDER BY tick LIMIT ?1)",
                [INDEX_BATCH as i64],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(backend)?;
        let Some(upto) = upto else { return Ok((0, 0)) };
        conn.execute(
            "DELETE FROM memory_search WHERE rowid IN \
             (SELECT memory_seq FROM data.memory_search_waiting WHERE tick <= ?1)",
            [upto],
        )
        .map_err(backend)?;
        // The text as the rule reads it (whitespace runs as one space), so a phrase is one
        // substring of the index (`index_filter`).
        let mut read = conn
            .prepare_cached(
                "SELECT m.seq, m.path, v.content FROM data.memory_search_waiting w \
                 JOIN data.memories m ON m.seq = w.memory_seq JOIN data.memory_versions v ON v.seq = m.version_seq \
                 WHERE w.tick <= ?1",
            )
            .map_err(backend)?;
        let mut insert = conn
            .prepare_cached("INSERT INTO memory_search (rowid, path, content) VALUES (?1, ?2, ?3)")
            .map_err(backend)?;
        let mut rows = read.query([upto]).map_err(backend)?;
        while let Some(row) = rows.next().map_err(backend)? {
            let (seq, path): (i64, String) = (row.get(0).map_err(backend)?, row.get(1).map_err(backend)?);
            let content = match row.get_ref(2).map_err(backend)? {
                rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => String::from_utf8_lossy(t),
                _ => "".into(),
            };
            insert.execute(params![seq, index_text(&path), index_text(&content)]).map_err(backend)?;
        }
        conn.execute("UPDATE index_state SET through = ?1", [upto]).map_err(backend)?;
        Ok((count, upto))
    })();
    let (count, upto) = match taken {
        Ok(t) => t,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    };
    conn.execute_batch("COMMIT").map_err(backend)?;
    if count > 0 {
        engine.write_blocking(move |c| {
            c.execute("DELETE FROM memory_search_waiting WHERE tick <= ?1", params![upto]).map_err(backend)?;
            Ok(())
        })?;
        metrics::counter!("mnemo_search_indexed_total").increment(count as u64);
        metrics::histogram!("mnemo_search_index_batch_seconds").record(started.elapsed().as_secs_f64());
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use mnemo_api::{Actor, MemoryPath};
    use mnemo_store::Operations;
    use mnemo_store::Store;
    use mnemo_store::rules::search::parse;
    use mnemo_store::search::{SearchMemories, SearchScope};

    use super::*;
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
        assert!(!file(&db).with_extension("search-wal").exists(), "the index file is checkpointed at close");
        let backup = dir.path().join("backup.sqlite");
        std::fs::copy(&db, &backup).unwrap();

        // Gone: every memory waits again, is found meanwhile, and is taken in.
        std::fs::remove_file(file(&db)).unwrap();
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
