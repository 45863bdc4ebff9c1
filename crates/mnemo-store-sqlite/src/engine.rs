//! Connections: one writer thread with group commit, and a pool of readers.
//!
//! SQLite allows one writer at a time, so every write runs on a single dedicated thread. The
//! thread drains whatever writes are queued, runs each inside its own savepoint of one
//! transaction, commits once, and only then answers the callers: an acknowledged write is
//! committed, and concurrent writers share the cost of one `fsync`. Because writes are
//! serialised, a read-check-write inside a job (a precondition, a path-overlap check) can never
//! interleave with another writer's.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use mnemo_store::StoreError;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use crate::Durability;

/// The most writes committed together.
const MAX_BATCH: usize = 256;
/// Idle read connections kept open.
const MAX_IDLE_READERS: usize = 16;

type Completion = Box<dyn FnOnce(Option<&str>) + Send>;
type Job = Box<dyn FnOnce(&Connection) -> Completion + Send>;

/// A database failure, keeping its cause: a busy or locked database (another process holds
/// it) is worth retrying, anything else is not.
pub(crate) fn backend(e: impl Into<mnemo_store::BoxError>) -> StoreError {
    let e = e.into();
    let transient = e
        .downcast_ref::<rusqlite::Error>()
        .and_then(rusqlite::Error::sqlite_error_code)
        .is_some_and(|code| matches!(code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked));
    if transient { StoreError::Retryable(e) } else { StoreError::Backend(e) }
}

/// A failure described in words (the writer thread stopped, …).
pub(crate) fn failure(message: impl Into<String>) -> StoreError {
    StoreError::Backend(message.into().into())
}

#[derive(Debug)]
pub(crate) struct Engine {
    path: PathBuf,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    readers: Mutex<Vec<Connection>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn open(path: &Path, write: bool, durability: Durability) -> Result<Connection, StoreError> {
    let flags = if write {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
    } else {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| StoreError::Backend(Box::new(std::io::Error::other(format!("open {}: {e}", path.display())))))?;
    conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(backend)?;
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.execute_batch(&format!(
        "PRAGMA foreign_keys = ON; PRAGMA synchronous = {sync}; PRAGMA temp_store = MEMORY; \
         PRAGMA cache_size = -16000;"
    ))
    .map_err(backend)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

impl Engine {
    pub(crate) fn start(path: &Path, durability: Durability) -> Result<Arc<Self>, StoreError> {
        let conn = open(path, true, durability)?;
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
        Ok(Arc::new(Self {
            path: path.to_owned(),
            jobs: Mutex::new(Some(tx)),
            readers: Mutex::new(Vec::new()),
            writer: Mutex::new(Some(writer)),
        }))
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
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let outcome = in_savepoint(conn, f);
            Box::new(move |commit_error: Option<&str>| {
                let reply = match commit_error {
                    Some(e) => Err(failure(format!("commit: {e}"))),
                    None => outcome,
                };
                let _ = done.send(reply);
            })
        });
        {
            let jobs = self.jobs.lock().expect("job queue lock poisoned");
            let sender = jobs.as_ref().ok_or_else(|| failure("the store is shut down"))?;
            sender.send(job).map_err(|_| failure("the writer thread has stopped"))?;
            metrics::gauge!("mnemo_write_queue_depth").increment(1.0);
        }
        result.await.map_err(|_| failure("the writer thread dropped a write"))?
    }

    /// Runs `f` on a pooled read connection on the blocking thread pool.
    pub(crate) async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        if self.jobs.lock().expect("job queue lock poisoned").is_none() {
            return Err(failure("the store is shut down"));
        }
        let this = Arc::clone(self);
        tokio::task::spawn_blocking(move || {
            let conn = match this.readers.lock().expect("reader pool lock poisoned").pop() {
                Some(c) => c,
                None => open(&this.path, false, Durability::Normal)?,
            };
            // Reads run in one transaction so a multi-statement read sees one snapshot.
            conn.execute_batch("BEGIN").map_err(backend)?;
            let out = f(&conn);
            let ended = conn.execute_batch("COMMIT").map_err(backend);
            let mut pool = this.readers.lock().expect("reader pool lock poisoned");
            if ended.is_ok() && pool.len() < MAX_IDLE_READERS {
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
        self.jobs.lock().expect("job queue lock poisoned").take();
        self.readers.lock().expect("reader pool lock poisoned").clear();
        if let Some(handle) = self.writer.lock().expect("writer lock poisoned").take() {
            let _ = handle.join();
        }
        self.readers.lock().expect("reader pool lock poisoned").clear();
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
    conn.execute_batch(end).map_err(backend)?;
    out
}

fn writer_loop(conn: &Connection, jobs: &mpsc::Receiver<Job>) {
    let mut completions: Vec<Completion> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = jobs.recv() {
        if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
            let msg = e.to_string();
            first(conn)(Some(&msg));
            metrics::gauge!("mnemo_write_queue_depth").decrement(1.0);
            continue;
        }
        completions.push(first(conn));
        while completions.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => completions.push(job(conn)),
                Err(_) => break,
            }
        }
        let commit_started = std::time::Instant::now();
        let committed = conn.execute_batch("COMMIT");
        metrics::histogram!("mnemo_write_commit_seconds").record(commit_started.elapsed().as_secs_f64());
        metrics::histogram!("mnemo_write_batch_size").record(completions.len() as f64);
        metrics::gauge!("mnemo_write_queue_depth").decrement(completions.len() as f64);
        if committed.is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        let error = committed.err().map(|e| e.to_string());
        for done in completions.drain(..) {
            done(error.as_deref());
        }
    }
    let _ = conn.execute_batch("PRAGMA optimize");
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
