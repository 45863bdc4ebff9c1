//! Connections: one writer thread with group commit, and a pool of readers.
//!
//! SQLite allows one writer at a time, so every write runs on a single dedicated thread. The
//! thread drains whatever writes are queued, runs each inside its own savepoint of one
//! transaction, commits once, and only then answers the callers: an acknowledged write is
//! committed, and concurrent writers share the cost of one `fsync`. Because writes are
//! serialised, a read-check-write inside a job (a precondition, a path-overlap check) can never
//! interleave with another writer's.
//!
//! **Checkpoints wait for the writes to pause.** SQLite copies its write-ahead log into the
//! database file (a checkpoint) inside the commit that takes the log past 1,000 pages, so one
//! write in every few hundred waited for 4 MB to be copied and flushed, and a burst that
//! crossed the mark paid for everyone's writes before it. The writer's log hook now only notes
//! the log's length; the writer thread checkpoints once no write has come for
//! [`CHECKPOINT_QUIET`], or at once past [`CHECKPOINT_NOW_PAGES`] (writes that never pause).

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use mnemo_store::{Signal, StoreError};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use crate::Durability;

/// The most writes committed together.
const MAX_BATCH: usize = 256;
/// Read connections: at most this many reads run at once (the rest wait for one to finish,
/// without holding a thread), and every connection stays open for the next read. Without the
/// bound, a burst of reads (a thousand change feeds woken at once) opened a connection per
/// blocking thread, each parsing the schema, and closed all but 16 again.
const MAX_READERS: usize = 16;
// What SQLite may hold in this process (`SqliteSettings::memory_limit`: every connection's page
// cache and statements, one limit for the whole process) is set as its soft heap limit: past it,
// a connection reuses its cache pages instead of growing them. Each connection's own cache is
// 16 MB (`cache_size`), so without it a busy server's writer and 16 readers could hold over
// 250 MB as the database grows.

/// How long a connection waits for a lock another process holds.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A log this long (pages) is checkpointed once the writes pause: SQLite's own threshold.
const CHECKPOINT_PAGES: i32 = 1000;
/// How long the writer waits without a write before it checkpoints.
const CHECKPOINT_QUIET: Duration = Duration::from_millis(250);
/// A log this long is checkpointed in the commit that made it so, pause or not (64 MB of 4 KB
/// pages), so writes that never pause cannot grow it without bound.
const CHECKPOINT_NOW_PAGES: i32 = 16 * CHECKPOINT_PAGES;

thread_local! {
    /// Pages in the write-ahead log after the writer's last commit, noted by its log hook (which
    /// runs on the writer thread, in the commit).
    static WAL_PAGES: Cell<i32> = const { Cell::new(0) };
}

/// The writer's log hook (it replaces SQLite's automatic checkpoints): notes the log's length,
/// and checkpoints at once only past [`CHECKPOINT_NOW_PAGES`]. A checkpoint that cannot finish
/// (a reader holds an older snapshot) is no error of the commit: it is tried again later.
fn noted_log(wal: &rusqlite::hooks::Wal, pages: std::ffi::c_int) -> rusqlite::Result<()> {
    WAL_PAGES.set(pages);
    if pages >= CHECKPOINT_NOW_PAGES {
        if let Err(e) = wal.checkpoint() {
            tracing::debug!(error = %e, pages, "the write-ahead log could not be checkpointed at once");
        }
        WAL_PAGES.set(0);
    }
    Ok(())
}

/// Copies the log into the database file once writes paused, and empties the log when no
/// reader still reads from it (`TRUNCATE`, without waiting: with a reader, it copies what it
/// can, as `PASSIVE`); its time is the `mnemo_wal_checkpoint_seconds` metric.
///
/// **Why empty it.** A log that is only reset is written again from its start, over blocks the
/// kernel may have dropped from its page cache by then; a log frame (4,120 bytes) never fills
/// whole 4 KB blocks, so each such write first read the block from disk, on the writer thread,
/// in the commit (`perf`: a third of the writer's time in a burst of 50 memory writes, after a
/// minute at rest). An emptied log is appended to, and appending reads nothing.
fn checkpoint(conn: &Connection) {
    let started = std::time::Instant::now();
    // No wait for readers: with one reading, this copies what it can, as `PASSIVE` would.
    let _ = conn.busy_timeout(Duration::ZERO);
    let done =
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)));
    let _ = conn.busy_timeout(BUSY_TIMEOUT);
    metrics::histogram!("mnemo_wal_checkpoint_seconds").record(started.elapsed().as_secs_f64());
    match done {
        Ok((log, copied)) => tracing::debug!(log, copied, "checkpointed the write-ahead log"),
        Err(e) => tracing::debug!(error = %e, "the write-ahead log could not be checkpointed"),
    }
    // Tried: the next commit's hook says how long the log is then.
    WAL_PAGES.set(0);
}

type Completion = Box<dyn FnOnce(Option<&CommitFailure>) + Send>;
/// A queued write: runs in its savepoint and hands back how to answer its caller once the batch
/// is committed (or not), and whether it failed on a full disk.
type Job = Box<dyn FnOnce(&Connection) -> (Completion, bool) + Send>;

/// A database failure, keeping its cause: a busy or locked database (another process holds
/// it) is worth retrying, a full disk is [`StoreError::DiskFull`], anything else is not.
pub(crate) fn backend(e: impl Into<mnemo_store::BoxError>) -> StoreError {
    let e = e.into();
    let code = e.downcast_ref::<rusqlite::Error>().and_then(rusqlite::Error::sqlite_error_code);
    match code {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => StoreError::Retryable(e),
        Some(rusqlite::ErrorCode::DiskFull) => StoreError::DiskFull(e),
        _ => StoreError::Backend(e),
    }
}

/// Why a batch did not commit, told to every write in it.
#[derive(Debug)]
pub(crate) struct CommitFailure {
    message: String,
    disk_full: bool,
}

impl CommitFailure {
    fn of(what: &str, e: &rusqlite::Error) -> Self {
        let disk_full = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull);
        Self { message: format!("{what}: {e}"), disk_full }
    }

    fn error(&self) -> StoreError {
        let cause: mnemo_store::BoxError = self.message.clone().into();
        if self.disk_full { StoreError::DiskFull(cause) } else { StoreError::Backend(cause) }
    }
}

/// A failure described in words (the writer thread stopped, …).
pub(crate) fn failure(message: impl Into<String>) -> StoreError {
    StoreError::Backend(message.into().into())
}

#[derive(Debug)]
pub(crate) struct Engine {
    path: PathBuf,
    /// Each read connection's mapping of the file, in bytes.
    reader_map: i64,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    readers: Mutex<Vec<Connection>>,
    /// One permit per read connection ([`MAX_READERS`]).
    read_slots: Arc<tokio::sync::Semaphore>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The search index's keeper (its own directory and thread), stopped before the writer.
    pub(crate) index: Mutex<Option<crate::search_index::Indexer>>,
}

/// Opens a connection: the writer (`write`, with `durability`), or a reader mapping `map` bytes
/// of the file (`PRAGMA mmap_size`).
fn open(path: &Path, write: bool, durability: Durability, map: i64) -> Result<Connection, StoreError> {
    let flags = if write {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
    } else {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| StoreError::Backend(Box::new(std::io::Error::other(format!("open {}: {e}", path.display())))))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(backend)?;
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = {sync}; PRAGMA temp_store = MEMORY; \
         PRAGMA cache_size = -16000; PRAGMA mmap_size = {map};"
    ))
    .map_err(backend)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

impl Engine {
    pub(crate) fn start(settings: &crate::SqliteSettings) -> Result<Arc<Self>, StoreError> {
        let crate::SqliteSettings { path, durability, memory_limit, reader_map, .. } = settings;
        let (durability, memory_limit, reader_map) = (*durability, *memory_limit, *reader_map);
        let conn = open(path, true, durability, 0)?;
        let _limit: i64 =
            conn.query_row(&format!("PRAGMA soft_heap_limit = {memory_limit}"), [], |r| r.get(0)).map_err(backend)?;
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(backend)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(failure(format!("{} cannot use write-ahead logging (journal mode is {mode})", path.display())));
        }
        crate::schema::migrate(&conn)?;
        let (tx, rx) = mpsc::channel::<Job>();
        let writer = std::thread::Builder::new()
            .name("mnemo-sqlite-writer".into())
            .spawn(move || writer_loop(&conn, &rx))
            .map_err(backend)?;
        let engine = Arc::new(Self {
            path: path.to_owned(),
            reader_map,
            jobs: Mutex::new(Some(tx)),
            readers: Mutex::new(Vec::new()),
            read_slots: Arc::new(tokio::sync::Semaphore::new(MAX_READERS)),
            writer: Mutex::new(Some(writer)),
            index: Mutex::new(None),
        });
        crate::search_index::start(&engine)?;
        Ok(engine)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the writer thread inside the next committed batch.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.enqueue(f)?.await.map_err(|_| failure("the writer thread dropped a write"))?
    }

    /// [`Self::write`] for a thread outside the async runtime (the search indexer).
    pub(crate) fn write_blocking<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.enqueue(f)?.blocking_recv().map_err(|_| failure("the writer thread dropped a write"))?
    }

    /// Queues `f` for the writer thread; the receiver gets its outcome once committed.
    fn enqueue<T, F>(&self, f: F) -> Result<oneshot::Receiver<Result<T, StoreError>>, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let outcome = in_savepoint(conn, f);
            let disk_full = matches!(outcome, Err(StoreError::DiskFull(_)));
            let completion: Completion = Box::new(move |failed: Option<&CommitFailure>| {
                let reply = match (failed, outcome) {
                    // A write refused on its own keeps its own error (more telling).
                    (Some(_), Err(e)) => Err(e),
                    (Some(failed), Ok(_)) => Err(failed.error()),
                    (None, outcome) => outcome,
                };
                let _ = done.send(reply);
            });
            (completion, disk_full)
        });
        {
            let jobs = self.jobs.lock().expect("job queue lock poisoned");
            let sender = jobs.as_ref().ok_or_else(|| failure("the store is shut down"))?;
            sender.send(job).map_err(|_| failure("the writer thread has stopped"))?;
            metrics::gauge!("mnemo_write_queue_depth").increment(1.0);
        }
        Ok(result)
    }

    /// Runs every one of `fs` in order on the writer thread, each in its own savepoint inside
    /// one committed batch: a refused one is rolled back alone and the next one still runs.
    /// Each gets its own result once the batch committed. If the batch does not commit, or one
    /// of them ended the whole transaction (as a full disk does), the call fails and none of
    /// them applied.
    pub(crate) async fn write_each<T, F>(&self, fs: Vec<F>) -> Result<Vec<Result<T, StoreError>>, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.write(move |conn| {
            let mut outcomes = Vec::with_capacity(fs.len());
            for f in fs {
                let outcome = in_savepoint(conn, f);
                if conn.is_autocommit() {
                    // The transaction is gone with the writes before this one: fail them all.
                    return Err(outcome.err().unwrap_or_else(|| failure("the batch was rolled back")));
                }
                outcomes.push(outcome);
            }
            Ok(outcomes)
        })
        .await
    }

    /// Runs `f` on a pooled read connection on the blocking thread pool, once one of the
    /// [`MAX_READERS`] is free.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let slot = Arc::clone(&self.read_slots).acquire_owned().await.map_err(backend)?;
        self.read_on(Some(slot), f).await
    }

    /// [`Engine::read`] for a read that goes at its consumer's pace (an export streaming to a
    /// client): it takes no reader's slot, so slow consumers never hold up other reads.
    pub(crate) async fn read_paced<T, F>(self: &Arc<Self>, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.read_on(None, f).await
    }

    async fn read_on<T, F>(
        self: &Arc<Self>,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
        f: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        if self.jobs.lock().expect("job queue lock poisoned").is_none() {
            return Err(failure("the store is shut down"));
        }
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let conn = match this.readers.lock().expect("reader pool lock poisoned").pop() {
                Some(c) => c,
                None => open(&this.path, false, Durability::Normal, this.reader_map)?,
            };
            // Reads run in one transaction so a multi-statement read sees one snapshot.
            conn.execute_batch("BEGIN").map_err(backend)?;
            let out = f(&conn);
            let ended = conn.execute_batch("COMMIT").map_err(backend);
            let mut pool = this.readers.lock().expect("reader pool lock poisoned");
            if ended.is_ok() && pool.len() < MAX_READERS {
                pool.push(conn);
            }
            drop(pool);
            ended?;
            out
        })
        .await
        .map_err(backend)?
    }

    /// Stops accepting writes, lets the writer finish what is queued, and waits for it.
    /// Idle readers close first, so the writer's connection is the last to close: it
    /// checkpoints the write-ahead log into the database file and removes it (a read-only
    /// connection cannot), leaving one self-contained file behind.
    pub(crate) fn shutdown(&self) {
        // The indexer writes through the writer: it stops first.
        let index = self.index.lock().expect("index lock poisoned").take();
        if let Some(index) = &index {
            index.stop();
        }
        self.jobs.lock().expect("job queue lock poisoned").take();
        self.readers.lock().expect("reader pool lock poisoned").clear();
        drop(index);
        let writer = self.writer.lock().expect("writer lock poisoned").take();
        let joined = writer.map(|handle| handle.join()).is_some();
        self.readers.lock().expect("reader pool lock poisoned").clear();
        if !joined {
            return;
        }
        // The writer's close checkpoints only as the last connection to the file. Should another
        // still have been open then (a read that ended after the pool was emptied, a tool that
        // opened the file), the log would stay beside the database: checkpoint it into the file
        // now (a no-op when the writer did), so what is left is the one self-contained file.
        let done = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .and_then(|c| c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0)));
        if let Err(e) = done {
            tracing::warn!(database = %self.path.display(), error = %e, "cannot checkpoint the write-ahead log at close");
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn in_savepoint<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
    conn.execute_batch("SAVEPOINT job").map_err(backend)?;
    let out = f(conn);
    let end = if out.is_ok() { "RELEASE job" } else { "ROLLBACK TO job; RELEASE job" };
    match (out, conn.execute_batch(end)) {
        (out, Ok(())) => out,
        // The failure already rolled the whole transaction back (the savepoint with it): the
        // write's own error says why; the writer loop sees the ended transaction.
        (Err(e), Err(_)) if conn.is_autocommit() => Err(e),
        (_, Err(e)) => Err(backend(e)),
    }
}

fn writer_loop(conn: &Connection, jobs: &mpsc::Receiver<Job>) {
    let mut completions: Vec<Completion> = Vec::with_capacity(MAX_BATCH);
    conn.wal_hook(Some(noted_log));
    loop {
        let next = if WAL_PAGES.get() >= CHECKPOINT_PAGES {
            jobs.recv_timeout(CHECKPOINT_QUIET)
        } else {
            jobs.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
        };
        let first = match next {
            Ok(job) => job,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                checkpoint(conn);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
            let failed = CommitFailure::of("begin", &e);
            first(conn).0(Some(&failed));
            metrics::gauge!("mnemo_write_queue_depth").decrement(1.0);
            continue;
        }
        let mut next = Some(first);
        let mut rolled_back = None;
        while let Some(job) = next.take() {
            let (completion, disk_full) = job(conn);
            completions.push(completion);
            // Some failures (a full disk, an I/O error, no memory) make SQLite roll back the
            // whole transaction, not just the statement: the writes before this one in the batch
            // are gone with it, and the next job would run outside any transaction. End the
            // batch here and tell every write in it.
            if conn.is_autocommit() {
                let message = "the batch was rolled back by a failed write".to_owned();
                rolled_back = Some(CommitFailure { message, disk_full });
                break;
            }
            if completions.len() < MAX_BATCH {
                next = jobs.try_recv().ok();
            }
        }
        metrics::gauge!("mnemo_write_queue_depth").decrement(completions.len() as f64);
        if let Some(failed) = rolled_back {
            for done in completions.drain(..) {
                done(Some(&failed));
            }
            continue;
        }
        let commit_started = std::time::Instant::now();
        let committed = conn.execute_batch("COMMIT");
        metrics::histogram!("mnemo_write_commit_seconds").record(commit_started.elapsed().as_secs_f64());
        metrics::histogram!("mnemo_write_batch_size").record(completions.len() as f64);
        let failed = committed.err().map(|e| {
            let _ = conn.execute_batch("ROLLBACK");
            CommitFailure::of("commit", &e)
        });
        if let Some(failed) = &failed {
            tracing::warn!(disk_full = failed.disk_full, "a batch of writes failed to commit: {}", failed.message);
        }
        for done in completions.drain(..) {
            done(failed.as_ref());
        }
    }
    let _ = conn.execute_batch("PRAGMA optimize");
}

/// The writer's (or a reader's) connection as the SQL primitives of [`mnemo_store::ops`]:
/// every primitive runs at once on the calling thread, so an operation over them runs to its end
/// with [`mnemo_store::ops::run_ready`]. It holds the signals a write sends once it commits.
pub(crate) struct Lite<'c> {
    conn: &'c Connection,
    signals: RefCell<Vec<Signal>>,
}

impl<'c> Lite<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Self {
        Self { conn, signals: RefCell::new(Vec::new()) }
    }

    /// The signals the transaction sent, to deliver once it committed.
    pub(crate) fn into_signals(self) -> Vec<Signal> {
        self.signals.into_inner()
    }
}

impl std::ops::Deref for Lite<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl mnemo_store::ops::SignalSql for Lite<'_> {
    async fn signal(&self, signal: Signal) -> Result<(), StoreError> {
        self.signals.borrow_mut().push(signal);
        Ok(())
    }
}

impl mnemo_store::ops::Clock for Lite<'_> {
    async fn now(&self) -> Result<i64, StoreError> {
        Ok(crate::now_micros())
    }
}

/// A row as the shared decoders of [`mnemo_store::row`] read it.
pub(crate) struct Cols<'a, 'r>(pub(crate) &'a rusqlite::Row<'r>);

impl mnemo_store::row::Columns for Cols<'_, '_> {
    fn text(&self, idx: usize) -> Result<String, StoreError> {
        self.0.get(idx).map_err(backend)
    }
    fn opt_text(&self, idx: usize) -> Result<Option<String>, StoreError> {
        self.0.get(idx).map_err(backend)
    }
    fn int(&self, idx: usize) -> Result<i64, StoreError> {
        self.0.get(idx).map_err(backend)
    }
    fn opt_int(&self, idx: usize) -> Result<Option<i64>, StoreError> {
        self.0.get(idx).map_err(backend)
    }
}

/// The row `sql` finds with `params`, read by `read`; `None` when there is none.
pub(crate) fn query_one<T>(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    read: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>, StoreError> {
    use rusqlite::OptionalExtension;
    c.prepare_cached(sql).and_then(|mut s| s.query_row(params, read).optional()).map_err(backend)
}

/// Every row `sql` finds with `params`, each read by `read`, in the order the query gives: the
/// statement cached, and a failure at any step (prepare, bind, step, read) one backend error.
pub(crate) fn query_all<T>(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    read: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    c.prepare_cached(sql)
        .and_then(|mut s| s.query_map(params, read)?.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(path: &Path) -> crate::SqliteSettings {
        crate::SqliteSettings::from_url(&format!("sqlite://{}?synchronous=normal", path.display())).unwrap()
    }

    /// Whether this process maps `path` (Linux's `/proc/self/maps`).
    fn mapped(path: &Path) -> bool {
        let path = path.canonicalize().unwrap();
        std::fs::read_to_string("/proc/self/maps").unwrap().lines().any(|l| l.ends_with(path.to_str().unwrap()))
    }

    /// Readers read through one mapping of the file (the kernel's copy of its pages, not one per
    /// connection); the writer never maps it, and `reader_map: 0` maps nothing.
    #[tokio::test]
    async fn readers_map_the_file_and_the_writer_does_not() {
        for reader_map in [crate::DEFAULT_READER_MAP, 0] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("db.sqlite");
            // A table already in the file: pages the engine writes sit in its log until a
            // checkpoint, and a read takes those from the log, mapped or not.
            Connection::open(&path).unwrap().execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (42);").unwrap();
            let engine = Engine::start(&crate::SqliteSettings { reader_map, ..normal(&path) }).unwrap();
            engine
                .write(|c| c.execute_batch("CREATE TABLE u(x); INSERT INTO u VALUES (43)").map_err(backend))
                .await
                .unwrap();
            assert!(!mapped(&path), "the writer maps nothing");
            let (x, size): (i64, i64) = engine
                .read(|c| {
                    let x = c
                        .query_row("SELECT (SELECT x FROM t) + (SELECT x FROM u)", [], |r| r.get(0))
                        .map_err(backend)?;
                    Ok((x, c.query_row("PRAGMA mmap_size", [], |r| r.get(0)).map_err(backend)?))
                })
                .await
                .unwrap();
            assert_eq!((x, size), (85, reader_map));
            assert_eq!(mapped(&path), reader_map > 0, "reader_map {reader_map}");
            engine.shutdown();
        }
    }

    #[tokio::test]
    async fn sqlite_memory_in_the_process_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::start(&normal(&dir.path().join("db.sqlite"))).unwrap();
        let limit: i64 =
            engine.read(|c| c.query_row("PRAGMA soft_heap_limit", [], |r| r.get(0)).map_err(backend)).await.unwrap();
        assert_eq!(limit, crate::DEFAULT_MEMORY_LIMIT, "every connection of the process sees the one limit");
    }

    /// A burst of reads shares the [`MAX_READERS`] connections instead of opening one each; a
    /// read paced by its consumer takes none of them, so slow consumers hold up no other read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_reads_shares_the_read_connections_and_paced_reads_hold_none() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::start(&normal(&dir.path().join("db.sqlite"))).unwrap();
        let (busy, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut burst = tokio::task::JoinSet::new();
        for _ in 0..4 * MAX_READERS {
            let (engine, busy, peak) = (Arc::clone(&engine), Arc::clone(&busy), Arc::clone(&peak));
            burst.spawn(async move {
                engine
                    .read(move |c| {
                        peak.fetch_max(busy.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        busy.fetch_sub(1, Ordering::SeqCst);
                        c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)).map_err(backend)
                    })
                    .await
            });
        }
        while let Some(read) = burst.join_next().await {
            assert_eq!(read.unwrap().unwrap(), 1);
        }
        let peak = peak.load(Ordering::SeqCst);
        assert!(peak <= MAX_READERS, "{peak} reads at once");
        assert!(engine.readers.lock().unwrap().len() <= MAX_READERS);

        // Every slot's worth of paced reads, stalled by their consumer: a read still runs.
        let (release, stalled) = std::sync::mpsc::channel::<()>();
        let stalled = Arc::new(Mutex::new(stalled));
        let mut paced = tokio::task::JoinSet::new();
        for _ in 0..MAX_READERS {
            let (engine, stalled) = (Arc::clone(&engine), Arc::clone(&stalled));
            paced.spawn(async move {
                engine
                    .read_paced(move |_| {
                        stalled.lock().unwrap().recv().ok();
                        Ok(())
                    })
                    .await
            });
        }
        let read = engine.read(|c| c.query_row("SELECT 2", [], |r| r.get::<_, i64>(0)).map_err(backend));
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), read).await;
        assert_eq!(read.expect("a read runs beside stalled paced reads").unwrap(), 2);
        for _ in 0..MAX_READERS {
            release.send(()).unwrap();
        }
        while let Some(done) = paced.join_next().await {
            done.unwrap().unwrap();
        }
    }

    /// Closing leaves one self-contained file even when another connection to it was still
    /// open as the writer closed (which then could not checkpoint the log as the last one).
    #[tokio::test]
    async fn closing_checkpoints_the_log_even_with_another_connection_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let engine = Engine::start(&normal(&path)).unwrap();
        engine
            .write(|c| {
                c.execute_batch("CREATE TABLE t (x TEXT NOT NULL)").map_err(backend)?;
                for i in 0..200 {
                    c.execute("INSERT INTO t VALUES (?1)", [format!("{i:0>500}")]).map_err(backend)?;
                }
                Ok(())
            })
            .await
            .unwrap();
        let other = Connection::open(&path).unwrap();
        other.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)).unwrap();
        engine.shutdown();
        let (pages, page_size): (u64, u64) = other
            .query_row("SELECT page_count, page_size FROM pragma_page_count(), pragma_page_size()", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert!(pages > 20, "{pages} pages");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), pages * page_size, "the file holds every page");
        drop(other);
    }

    /// A commit that takes the log past 1,000 pages is answered without copying the log into the
    /// database file (SQLite's automatic checkpoint would have, in that commit); the writer
    /// checkpoints once writes pause.
    #[tokio::test]
    async fn the_log_is_checkpointed_once_writes_pause_not_in_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let engine = Engine::start(&normal(&path)).unwrap();
        let size = || std::fs::metadata(&path).unwrap().len();
        let before = size();
        // 6 MB: 1,500 pages of 4 KB, past the 1,000 that start a checkpoint.
        engine
            .write(|c| {
                c.execute_batch("CREATE TABLE t (x BLOB NOT NULL)").map_err(backend)?;
                for _ in 0..1500 {
                    c.execute("INSERT INTO t VALUES (zeroblob(4000))", []).map_err(backend)?;
                }
                Ok(())
            })
            .await
            .unwrap();
        assert!(size() < before + 1_000_000, "the commit copied the log: {} bytes", size());
        let waited = std::time::Instant::now();
        let log = path.with_extension("sqlite-wal");
        while size() < 6_000_000 || std::fs::metadata(&log).unwrap().len() > 0 {
            assert!(waited.elapsed() < std::time::Duration::from_secs(10), "no checkpoint after a pause");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // The log was emptied with it: the next writes append to it rather than overwrite it.
        // Writes go on after it, and a short log waits for no checkpoint.
        engine.write(|c| c.execute("INSERT INTO t VALUES (x'00')", []).map_err(backend)).await.unwrap();
        engine.shutdown();
    }

    /// A reader in the middle of a read keeps the log from being emptied, but never holds up
    /// the writer: the checkpoint on a pause does not wait for it.
    #[tokio::test]
    async fn a_checkpoint_waits_for_no_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let engine = Engine::start(&normal(&path)).unwrap();
        engine.write(|c| c.execute_batch("CREATE TABLE t (x BLOB NOT NULL)").map_err(backend)).await.unwrap();
        let reader = Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN; SELECT count(*) FROM t;").unwrap();
        engine
            .write(|c| {
                for _ in 0..1500 {
                    c.execute("INSERT INTO t VALUES (zeroblob(4000))", []).map_err(backend)?;
                }
                Ok(())
            })
            .await
            .unwrap();
        // The writer checkpoints after 250 ms without writes; the next write is not held up.
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        let started = std::time::Instant::now();
        engine.write(|c| c.execute("INSERT INTO t VALUES (x'00')", []).map_err(backend)).await.unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        let log = path.with_extension("sqlite-wal");
        assert!(std::fs::metadata(&log).unwrap().len() > 0, "the reader still reads from the log");
        reader.execute_batch("COMMIT").unwrap();
        engine.shutdown();
    }

    fn count(conn: &Connection, x: &str) -> Result<i64, StoreError> {
        conn.query_row("SELECT count(*) FROM t WHERE x = ?1", [x], |r| r.get(0)).map_err(backend)
    }

    /// A write whose failure made SQLite roll back the whole transaction (as a full disk, an I/O
    /// error or running out of memory do) fails every write of its batch, and the writes queued
    /// behind it run in a transaction of their own: what a write is told matches what the
    /// database holds. Before, the later writes of the batch ran outside any transaction — each
    /// committed on its own — and were then reported failed with the batch's failed `COMMIT`.
    #[tokio::test]
    async fn a_write_that_rolls_the_batch_back_fails_the_batch_and_later_writes_tell_the_truth() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::start(&normal(&dir.path().join("db.sqlite"))).unwrap();
        engine.write(|c| c.execute_batch("CREATE TABLE t (x TEXT NOT NULL)").map_err(backend)).await.unwrap();

        // Hold the writer inside a batch until every write below is queued, so they share it.
        let (release, held) = std::sync::mpsc::channel::<()>();
        let gate = engine.write(move |_| {
            held.recv().ok();
            Ok(())
        });
        let insert = |x: &'static str| {
            engine.write(move |c| c.execute("INSERT INTO t VALUES (?1)", [x]).map(drop).map_err(backend))
        };
        let before = insert("before");
        // What SQLite does on SQLITE_FULL: the transaction is gone, not just the statement.
        let rollback = engine.write(|c| {
            c.execute_batch("ROLLBACK").map_err(backend)?;
            Err::<(), _>(failure("the disk is full (simulated)"))
        });
        let after = [insert("after-1"), insert("after-2")];
        let [after_1, after_2] = after;
        let (gate, before, rollback, after_1, after_2, ()) =
            tokio::join!(gate, before, rollback, after_1, after_2, async {
                release.send(()).unwrap();
            });

        let held =
            engine.read(|c| Ok((count(c, "before")?, count(c, "after-1")?, count(c, "after-2")?))).await.unwrap();
        assert!(gate.is_err() && before.is_err(), "the writes rolled back with the batch are told so");
        assert_eq!(held.0, 0, "and are not in the database");
        assert!(rollback.is_err());
        for (outcome, rows, what) in [(after_1, held.1, "after-1"), (after_2, held.2, "after-2")] {
            assert_eq!(outcome.is_ok(), rows == 1, "{what}: answered {outcome:?}, {rows} rows in the database");
        }
        engine.write(|c| c.execute("INSERT INTO t VALUES ('later')", []).map(drop).map_err(backend)).await.unwrap();
        assert_eq!(engine.read(|c| count(c, "later")).await.unwrap(), 1, "the writer goes on");
    }

    /// `write_each`: a refused write is rolled back alone and the next one still applies, each
    /// with its own result; a write that ends the whole transaction fails the call, and none of
    /// the batch is in the database.
    #[tokio::test]
    async fn write_each_rolls_back_a_refused_write_alone_and_a_lost_transaction_whole() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::start(&normal(&dir.path().join("db.sqlite"))).unwrap();
        engine.write(|c| c.execute_batch("CREATE TABLE t (x TEXT NOT NULL)").map_err(backend)).await.unwrap();
        type Write = Box<dyn FnOnce(&Connection) -> Result<(), StoreError> + Send>;
        let insert = |x: &'static str| -> Write {
            Box::new(move |c| c.execute("INSERT INTO t VALUES (?1)", [x]).map(drop).map_err(backend))
        };
        let refused: Write = Box::new(|c| {
            c.execute("INSERT INTO t VALUES ('refused')", []).map_err(backend)?;
            Err(failure("refused after writing"))
        });
        let outcomes = engine.write_each(vec![insert("one"), refused, insert("two")]).await.unwrap();
        assert_eq!(outcomes.iter().map(Result::is_ok).collect::<Vec<_>>(), [true, false, true]);
        let rows = engine.read(|c| Ok((count(c, "one")?, count(c, "refused")?, count(c, "two")?))).await.unwrap();
        assert_eq!(rows, (1, 0, 1), "the refused write left nothing; the ones around it applied");

        let lost: Write = Box::new(|c| {
            c.execute_batch("ROLLBACK").map_err(backend)?;
            Err(failure("the disk is full (simulated)"))
        });
        let whole = engine.write_each(vec![insert("three"), lost, insert("four")]).await;
        assert!(whole.is_err(), "the transaction is gone: the call fails");
        let rows = engine.read(|c| Ok((count(c, "three")?, count(c, "four")?))).await.unwrap();
        assert_eq!(rows, (0, 0), "none of that batch is in the database");
        engine.write(|c| c.execute("INSERT INTO t VALUES ('later')", []).map(drop).map_err(backend)).await.unwrap();
        assert_eq!(engine.read(|c| count(c, "later")).await.unwrap(), 1, "the writer goes on");
    }
}
