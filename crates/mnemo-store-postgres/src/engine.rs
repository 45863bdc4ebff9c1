//! Connections and transactions: a pool of clients, one transaction per store call.
//!
//! PostgreSQL has many writers, so the guarantees SQLite got from its single writer come from
//! row locks here: a write that judges a store's paths, its cap or its change counter first
//! locks the store's row (`FOR UPDATE`), a write to a session's log locks the session's row,
//! and a work claim skips rows another claim holds (`FOR UPDATE SKIP LOCKED`). Writers that
//! take several of these locks take them in one order — session, then its environment (shared),
//! then work items, then stores — and a deadlock or serialization failure the database still reports is retried a few times
//! by [`write!`](crate::write) before it reaches the caller as retryable.
//!
//! Time is the database's: [`now`] reads the database server's clock, so every replica judges
//! leases by one clock; it is read when asked (not at the transaction's start), so a writer
//! that waited for a lock stamps its rows after the writer it waited for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Object, Pool, PoolError};
use mnemo_api::Backoff;
use mnemo_store::StoreError;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::{IsolationLevel, Row};

/// A transaction on a pooled connection.
pub(crate) type Tx<'a> = deadpool_postgres::Transaction<'a>;
/// One statement parameter.
pub(crate) type Param<'a> = &'a (dyn ToSql + Sync);

/// Attempts of a transaction that keeps losing to deadlocks or serialization failures.
const MAX_ATTEMPTS: u32 = 5;
/// Pauses between those attempts: 3, 6, 9, 12 ms.
const CONFLICT_RETRY: Backoff = Backoff::linear(Duration::from_millis(3), Duration::MAX).with_retries(MAX_ATTEMPTS - 1);

/// The failure a database error is: a lost connection, a server shutting down or a timeout is
/// worth retrying later; a deadlock or serialization failure at once; anything else is not.
pub(crate) fn backend(e: tokio_postgres::Error) -> StoreError {
    let transient = match e.code() {
        Some(code) => {
            [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::QUERY_CANCELED,
                SqlState::TOO_MANY_CONNECTIONS,
            ]
            .contains(code)
                || code.code().starts_with("08")
        }
        // No SQLSTATE: the connection itself failed.
        None => true,
    };
    if e.code().is_some_and(conflict_code) {
        StoreError::Retryable(Box::new(e))
    } else if e.code() == Some(&SqlState::DISK_FULL) {
        StoreError::DiskFull(Box::new(e))
    } else if transient {
        StoreError::Unavailable(Box::new(e))
    } else {
        StoreError::Backend(Box::new(e))
    }
}

fn conflict_code(code: &SqlState) -> bool {
    *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
}

/// Whether `e` is a deadlock or serialization failure: the transaction was rolled back and
/// running it again is safe.
pub(crate) fn is_conflict(e: &StoreError) -> bool {
    match e {
        StoreError::Retryable(cause) => cause
            .downcast_ref::<tokio_postgres::Error>()
            .and_then(tokio_postgres::Error::code)
            .is_some_and(conflict_code),
        _ => false,
    }
}

/// A failure described in words (a malformed row, a shut-down store, …).
pub(crate) fn failure(message: impl Into<String>) -> StoreError {
    StoreError::Backend(message.into().into())
}

fn pool_error(e: PoolError) -> StoreError {
    match e {
        PoolError::Backend(e) => backend(e),
        PoolError::Closed => failure("the store is shut down"),
        // Waiting for a connection or creating one timed out: the database is unreachable or
        // every connection is busy.
        other => StoreError::Unavailable(Box::new(other)),
    }
}

/// The pool, and whether the store was closed.
#[derive(Debug)]
pub(crate) struct Engine {
    pool: Pool,
    closed: AtomicBool,
}

impl Engine {
    pub(crate) fn new(pool: Pool) -> Self {
        Self { pool, closed: AtomicBool::new(false) }
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<Object, StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(failure("the store is shut down"));
        }
        self.pool.get().await.map_err(pool_error)
    }

    /// Whether [`Self::close`] ran.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Refuses later calls and closes idle connections; busy ones close when returned.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pool.close();
    }

    /// Whether another attempt of a transaction that failed with `e` should run (after
    /// [`CONFLICT_RETRY`]'s pause, which grows with each attempt).
    pub(crate) async fn again(e: &StoreError, attempt: &mut u32) -> bool {
        if !is_conflict(e) {
            *attempt += 1;
            return false;
        }
        let Some(delay) = CONFLICT_RETRY.retry(*attempt) else { return false };
        *attempt += 1;
        tokio::time::sleep(delay).await;
        true
    }
}

/// Opens a read-only transaction seeing one snapshot.
pub(crate) async fn begin_read(client: &mut Object) -> Result<Tx<'_>, StoreError> {
    client
        .build_transaction()
        .read_only(true)
        .isolation_level(IsolationLevel::RepeatableRead)
        .start()
        .await
        .map_err(backend)
}

/// Opens a read-write transaction (read committed; the rows it judges are locked).
pub(crate) async fn begin_write(client: &mut Object) -> Result<Tx<'_>, StoreError> {
    client.transaction().await.map_err(backend)
}

/// Commits on success, rolls back on failure.
pub(crate) async fn finish<T>(tx: Tx<'_>, out: Result<T, StoreError>) -> Result<T, StoreError> {
    match out {
        Ok(v) => {
            tx.commit().await.map_err(backend)?;
            Ok(v)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// Runs a block in a read-write transaction that commits when the block returns `Ok`; a
/// deadlock or serialization failure runs the block again (so it must not move its inputs).
///
/// ```ignore
/// write!(self.engine, |tx| stores::create(&tx, &new).await)
/// ```
#[macro_export]
#[doc(hidden)]
macro_rules! write {
    ($engine:expr, |$tx:ident| $body:expr) => {{
        let mut attempt = 0_u32;
        loop {
            let mut client = $engine.client().await?;
            let $tx = $crate::engine::begin_write(&mut client).await?;
            let out = async { $body }.await;
            match $crate::engine::finish($tx, out).await {
                Err(e) if $crate::engine::Engine::again(&e, &mut attempt).await => continue,
                done => break done,
            }
        }
    }};
}

/// Runs a block in a read-only transaction on one snapshot.
#[macro_export]
#[doc(hidden)]
macro_rules! read {
    ($engine:expr, |$tx:ident| $body:expr) => {{
        let mut client = $engine.client().await?;
        let $tx = $crate::engine::begin_read(&mut client).await?;
        let out = async { $body }.await;
        $crate::engine::finish($tx, out).await
    }};
}

/// A transaction as the SQL primitives of [`mnemo_store::ops`]: each primitive holds the row
/// locks its name promises (`lock_*`: `FOR UPDATE`; `hold_*`: `FOR KEY SHARE`); a signal is a
/// `NOTIFY` on the database's channel, which PostgreSQL delivers when the transaction commits.
#[derive(Clone, Copy)]
pub(crate) struct Pg<'t, 'c> {
    tx: &'t Tx<'c>,
    channel: &'t str,
    /// Where a written version's content goes for this replica's search indexer.
    written: &'t crate::search_index::Written,
}

impl<'t, 'c> Pg<'t, 'c> {
    pub(crate) fn new(tx: &'t Tx<'c>, channel: &'t str, written: &'t crate::search_index::Written) -> Self {
        Self { tx, channel, written }
    }

    /// This replica's search indexer will want `content` (of digest `digest`), just written as
    /// version `version`.
    pub(crate) fn wrote(&self, version: i64, content: &str, digest: &str) {
        self.written.hold(version, content, digest);
    }
}

impl<'c> std::ops::Deref for Pg<'_, 'c> {
    type Target = Tx<'c>;
    fn deref(&self) -> &Tx<'c> {
        self.tx
    }
}

impl mnemo_store::ops::Clock for Pg<'_, '_> {
    async fn now(&self) -> Result<i64, StoreError> {
        now(self.tx).await
    }
}

impl mnemo_store::ops::SignalSql for Pg<'_, '_> {
    async fn signal(&self, signal: mnemo_store::Signal) -> Result<(), StoreError> {
        notify(self.tx, self.channel, &signal).await
    }
}

/// The database server's clock now, in microseconds since the epoch.
pub(crate) async fn now(tx: &Tx<'_>) -> Result<i64, StoreError> {
    let row = one(tx, "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8", &[]).await?;
    col(&row, 0)
}

/// The row `sql` finds, if any (more than one is an error).
pub(crate) async fn opt(tx: &Tx<'_>, sql: &str, params: &[Param<'_>]) -> Result<Option<Row>, StoreError> {
    let stmt = tx.prepare_cached(sql).await.map_err(backend)?;
    tx.query_opt(&stmt, params).await.map_err(backend)
}

/// The one row `sql` finds.
pub(crate) async fn one(tx: &Tx<'_>, sql: &str, params: &[Param<'_>]) -> Result<Row, StoreError> {
    let stmt = tx.prepare_cached(sql).await.map_err(backend)?;
    tx.query_one(&stmt, params).await.map_err(backend)
}

/// Every row `sql` finds.
pub(crate) async fn all(tx: &Tx<'_>, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError> {
    let stmt = tx.prepare_cached(sql).await.map_err(backend)?;
    tx.query(&stmt, params).await.map_err(backend)
}

/// Runs `sql`; returns how many rows it touched.
pub(crate) async fn exec(tx: &Tx<'_>, sql: &str, params: &[Param<'_>]) -> Result<u64, StoreError> {
    let stmt = tx.prepare_cached(sql).await.map_err(backend)?;
    tx.execute(&stmt, params).await.map_err(backend)
}

/// Column `idx` of `row`.
pub(crate) fn col<'a, T: FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T, StoreError> {
    row.try_get(idx).map_err(|e| failure(format!("column {idx}: {e}")))
}

/// A row as the shared decoders of [`mnemo_store::row`] read it.
pub(crate) struct Cols<'a>(pub(crate) &'a Row);

impl mnemo_store::row::Columns for Cols<'_> {
    fn text(&self, idx: usize) -> Result<String, StoreError> {
        col(self.0, idx)
    }
    fn opt_text(&self, idx: usize) -> Result<Option<String>, StoreError> {
        col(self.0, idx)
    }
    fn int(&self, idx: usize) -> Result<i64, StoreError> {
        col(self.0, idx)
    }
    fn opt_int(&self, idx: usize) -> Result<Option<i64>, StoreError> {
        col(self.0, idx)
    }
}

/// Column `idx` of `row` holding UTF-8 text as bytes (memory content, which may contain
/// U+0000 that a TEXT column refuses).
pub(crate) fn text_bytes(row: &Row, idx: usize) -> Result<Option<String>, StoreError> {
    col::<Option<Vec<u8>>>(row, idx)?
        .map(|bytes| {
            String::from_utf8(bytes).map_err(|_| failure(format!("column {idx} holds text that is not UTF-8")))
        })
        .transpose()
}

/// Tells every replica (this one included) what changed, when the transaction commits.
pub(crate) async fn notify(tx: &Tx<'_>, channel: &str, signal: &mnemo_store::Signal) -> Result<(), StoreError> {
    let payload = crate::listen::encode(signal);
    exec(tx, "SELECT pg_notify($1, $2)", &[&channel, &payload]).await.map(drop)
}
