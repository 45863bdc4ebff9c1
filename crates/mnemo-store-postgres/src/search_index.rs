//! This replica's search index, following the database's log of changed memories
//! ([`mnemo_store::search`]).
//!
//! A write to `memories` upserts its memory's row in `memory_search_log`, naming the
//! transaction (`xid8`) that last changed it. Each replica keeps its own [`mnemo_search`] index
//! (in a folder of its own, or in memory) and a **cursor**, a point in the log ordered by
//! (`xid`, `memory_seq`): every row before it is in the index. A batch reads the rows from the
//! cursor on in one snapshot and takes them in; the cursor then moves past the rows of
//! transactions that had ended before that snapshot began (their `xid` below its `xmin`: no
//! row of theirs can still appear), never past a transaction that might still commit. Rows past
//! the cursor that were already taken in are remembered with their `xid`, so a batch does not
//! take them in again while a long transaction elsewhere holds `xmin` back.
//!
//! A search reads the rows past the cursor first, on their current content (they are the
//! memories the index may not hold as they are), and then the index's ranking: a memory is
//! found from the moment its write is acknowledged, on every replica.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo_search::{IndexedMemory, SearchIndex};
use mnemo_store::search::{INDEX_BATCH, INDEX_SWEEP, IndexPacer, next_sweep};
use mnemo_store::{Signal, StoreError};
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use crate::engine::{Engine, all, col, failure, one};

/// An index failure as the store's (its message names the index).
fn broken(e: impl std::fmt::Display) -> StoreError {
    failure(e.to_string())
}

/// A point in the log: (`xid`, `memory_seq`); every row before it is in the index.
pub(crate) type Cursor = (i64, i64);

/// This replica's index and how far along the log it is.
#[derive(Debug)]
pub(crate) struct Replica {
    index: Arc<SearchIndex>,
    writer: WriterThread,
    progress: Mutex<Progress>,
    /// One batch at a time (the indexer's, or a catch-up's).
    turn: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Progress {
    /// The database generation the index holds, once a batch has checked it (`None` before:
    /// searches then read the whole log as waiting).
    generation: Option<String>,
    cursor: Cursor,
    /// Rows at or past the cursor already taken in, with the `xid` they were taken in at.
    taken: HashMap<i64, i64>,
    /// What the index's last commit said (generation, cursor), until a batch checks it.
    saved: Option<(String, Cursor)>,
}

/// What a batch did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Taken {
    /// Memories taken in (rows already taken in are not counted).
    pub(crate) indexed: usize,
    /// Where the next batch reads from, when this one read a full batch.
    pub(crate) more: Option<Cursor>,
}

/// A row of the log as a batch reads it: the memory and, while it lives, what the index holds.
struct Change {
    seq: i64,
    xid: i64,
    live: Option<(i64, String, String)>,
}

impl Replica {
    /// The index in `dir` (kept across restarts), or in memory (built again at each start).
    pub(crate) fn open(dir: Option<&Path>) -> Result<Self, StoreError> {
        let index = match dir {
            Some(dir) => SearchIndex::open(dir).map_err(broken)?,
            None => SearchIndex::in_memory(),
        };
        let mut progress = Progress::default();
        if let Some(payload) = index.payload().map_err(broken)?
            && let [generation, xid, seq] = payload.split(' ').collect::<Vec<_>>()[..]
            && let (Ok(xid), Ok(seq)) = (xid.parse(), seq.parse())
        {
            progress.saved = Some((generation.to_owned(), (xid, seq)));
        }
        Ok(Self {
            index: Arc::new(index),
            writer: WriterThread::start()?,
            progress: Mutex::new(progress),
            turn: tokio::sync::Mutex::new(()),
        })
    }

    /// The index, for searches.
    pub(crate) fn index(&self) -> &SearchIndex {
        &self.index
    }

    /// Every row before this is in the index (read it before the index's searcher: the index
    /// is then at least this far along).
    pub(crate) fn cursor(&self) -> Cursor {
        self.progress.lock().expect("search progress lock poisoned").cursor
    }

    /// Takes up to [`INDEX_BATCH`] changed memories into the index, reading the log from the
    /// cursor (or from `resume`, where the previous full batch stopped).
    async fn take_in(&self, engine: &Engine, resume: Option<Cursor>) -> Result<Taken, StoreError> {
        let _turn = self.turn.lock().await;
        let started = std::time::Instant::now();
        let (known, cursor, saved) = {
            let p = self.progress.lock().expect("search progress lock poisoned");
            (p.generation.clone(), p.cursor, p.saved.clone())
        };
        let (xmin, generation, read, fresh_from) = crate::read!(engine, |tx| {
            let head = one(
                &tx,
                "SELECT (pg_snapshot_xmin(pg_current_snapshot())::text)::int8, \
                 (pg_snapshot_xmax(pg_current_snapshot())::text)::int8, (SELECT generation FROM search_index)",
                &[],
            )
            .await?;
            let (xmin, xmax, generation): (i64, i64, String) = (col(&head, 0)?, col(&head, 1)?, col(&head, 2)?);
            // Where the index is, for this database: as far as it got, as its last commit
            // says, or nowhere (another database's index, or one further along than this
            // database has ever been — restored into another cluster — is emptied and built
            // again).
            let (cursor, fresh) = match (&known, &saved) {
                (Some(g), _) if *g == generation => (cursor, false),
                (None, Some((g, saved))) if *g == generation && saved.0 <= xmax => (*saved, false),
                _ => ((0, 0), true),
            };
            let from = resume.filter(|_| !fresh).unwrap_or(cursor).max(cursor);
            let rows = all(
                &tx,
                "SELECT l.memory_seq, (l.xid::text)::int8, m.store_seq, m.path, v.content FROM memory_search_log l \
                 LEFT JOIN memories m ON m.seq = l.memory_seq LEFT JOIN memory_versions v ON v.seq = m.version_seq \
                 WHERE (l.xid, l.memory_seq) >= ($1::text::xid8, $2) ORDER BY l.xid, l.memory_seq LIMIT $3",
                &[&from.0.to_string(), &from.1, &(INDEX_BATCH as i64)],
            )
            .await?;
            let changes = rows
                .iter()
                .map(|r| {
                    let live = match col::<Option<i64>>(r, 2)? {
                        Some(store) => {
                            let content: Vec<u8> = col(r, 4)?;
                            Some((store, col(r, 3)?, String::from_utf8_lossy(&content).into_owned()))
                        }
                        None => None,
                    };
                    Ok(Change { seq: col(r, 0)?, xid: col(r, 1)?, live })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok((xmin, generation, changes, (!fresh).then_some(cursor)))
        })?;
        // `fresh_from`: the cursor this batch started from, `None` when it starts over.
        let (fresh, cursor) = match fresh_from {
            Some(cursor) => (false, cursor),
            None => (true, (0, 0)),
        };
        let full = read.len() == INDEX_BATCH;
        let first_unread = read.last().filter(|_| full).map(|c| (c.xid, c.seq + 1));
        let mut changes = read;
        if !fresh {
            let p = self.progress.lock().expect("search progress lock poisoned");
            changes.retain(|c| p.taken.get(&c.seq) != Some(&c.xid));
        }
        // Past every row of a transaction that had ended before this snapshot, and never past a
        // row not read.
        let next = (xmin, 0).min(first_unread.unwrap_or((i64::MAX, 0))).max(cursor);
        let indexed = changes.len();
        // The index is written only when something changed: the cursor of its last commit is
        // for a restart, which then reads a little more of the log again.
        let mut written = Vec::new();
        if fresh || !changes.is_empty() {
            let payload = format!("{generation} {} {}", next.0, next.1);
            let index = Arc::clone(&self.index);
            written = self
                .writer
                .run(move || {
                    if fresh {
                        index.clear(&payload)?;
                    }
                    let removed: Vec<u64> = changes.iter().map(|c| c.seq as u64).collect();
                    let memories: Vec<IndexedMemory<'_>> = changes
                        .iter()
                        .filter_map(|c| {
                            let (store, path, content) = c.live.as_ref()?;
                            Some(IndexedMemory { seq: c.seq as u64, store: *store as u64, path, content })
                        })
                        .collect();
                    if !removed.is_empty() {
                        index.write(&removed, &memories, &payload)?;
                    }
                    Ok::<_, mnemo_search::IndexError>(changes.into_iter().map(|c| (c.seq, c.xid)).collect::<Vec<_>>())
                })
                .await?
                .map_err(broken)?;
        }
        {
            let mut p = self.progress.lock().expect("search progress lock poisoned");
            if fresh {
                p.taken.clear();
            }
            p.generation = Some(generation);
            p.saved = None;
            p.cursor = next;
            p.taken.extend(written);
            p.taken.retain(|seq, xid| (*xid, *seq) >= next);
        }
        if indexed > 0 {
            metrics::counter!("mnemo_search_indexed_total").increment(indexed as u64);
            metrics::histogram!("mnemo_search_index_batch_seconds").record(started.elapsed().as_secs_f64());
        }
        Ok(Taken { indexed, more: first_unread })
    }

    /// Takes everything changed into the index now; how many memories.
    pub(crate) async fn catch_up(&self, engine: &Engine) -> Result<u64, StoreError> {
        let (mut total, mut resume) = (0u64, None);
        loop {
            let taken = self.take_in(engine, resume).await?;
            total += taken.indexed as u64;
            resume = taken.more;
            if resume.is_none() {
                return Ok(total);
            }
        }
    }

    /// Stops the index's merges.
    pub(crate) fn close(&self) {
        self.index.close();
    }
}

/// A batch's work on the index, for the writer thread.
type Job = Box<dyn FnOnce() + Send>;

/// The thread that writes this replica's index, behind the writes
/// ([`mnemo_search::stand_back`]): tokio's blocking threads would take a core from the
/// database's writes (measured: the write path at 0.82 of no index with them, 1.00 with no
/// indexer running). Ends when the replica is dropped.
#[derive(Debug)]
struct WriterThread {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl WriterThread {
    fn start() -> Result<Self, StoreError> {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("mnemo-search-index".into())
            .spawn(move || {
                mnemo_search::stand_back();
                while let Ok(job) = queue.recv() {
                    job();
                }
            })
            .map_err(|e| failure(format!("could not start the search index's writer thread: {e}")))?;
        Ok(Self { jobs })
    }

    /// Runs `job` on the thread; its result.
    async fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> Result<T, StoreError> {
        let (done, result) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = done.send(job());
            }))
            .map_err(|_| failure("the search index's writer thread has stopped"))?;
        result.await.map_err(|_| failure("the search index's writer thread stopped during a batch"))
    }
}

/// The indexer task: woken by memory changes (of any replica: the signals are `NOTIFY`s) and
/// at least every [`INDEX_SWEEP`] after one (once a minute when idle: [`next_sweep`]), it takes
/// changed memories in once the writes pause or the oldest has waited too long
/// ([`index_now`]), one batch at a time, pausing again for writes that come in between. Ends
/// when the store closes.
///
/// [`index_now`]: mnemo_store::search::index_now
pub(crate) async fn keep(engine: Arc<Engine>, replica: Arc<Replica>, mut signals: broadcast::Receiver<Signal>) {
    let mut pacer = IndexPacer::default();
    // The first batch at once (what changed while this replica was away), then sweeps.
    let mut sweep = Duration::ZERO;
    let mut resume = None;
    loop {
        if !pacer.behind() {
            match next_write(&mut signals, sweep).await {
                Some(wrote) => {
                    sweep = next_sweep(sweep.max(INDEX_SWEEP), wrote);
                    if wrote {
                        pacer.wrote();
                    }
                }
                None => return,
            }
            pacer.start();
        }
        while let Some(wait) = pacer.wait() {
            match next_write(&mut signals, wait).await {
                Some(true) => pacer.wrote(),
                Some(false) => {}
                None => return,
            }
        }
        let started = std::time::Instant::now();
        let taken = replica.take_in(&engine, resume).await;
        match &taken {
            Err(_) if engine.is_closed() => return,
            Err(e) => tracing::warn!(error = %e, "the search indexer failed a batch; it tries again later"),
            Ok(_) => {}
        }
        resume = taken.ok().and_then(|t| t.more);
        pacer.batch_done(resume.is_none(), started.elapsed());
        loop {
            match signals.try_recv() {
                Ok(Signal::Memory { .. }) | Err(TryRecvError::Lagged(_)) => pacer.wrote(),
                Ok(_) => {}
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Closed) => return,
            }
        }
    }
}

/// Waits up to `wait` for a memory change: `Some(true)` if one came (or some were missed),
/// `Some(false)` if none did, `None` once the signals end.
async fn next_write(signals: &mut broadcast::Receiver<Signal>, wait: Duration) -> Option<bool> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(until, signals.recv()).await {
            Err(_) => return Some(false),
            Ok(Ok(Signal::Memory { .. } | Signal::Resync) | Err(RecvError::Lagged(_))) => return Some(true),
            Ok(Ok(_)) => {}
            Ok(Err(RecvError::Closed)) => return None,
        }
    }
}
