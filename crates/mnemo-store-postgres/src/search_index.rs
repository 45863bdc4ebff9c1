//! This replica's search index, following the database's log of changed memories
//! ([`mnemo_store::search`]).
//!
//! A write to `memories` appends a row to `memory_search_log` naming the memory, the
//! transaction (`xid8`) and the version it wrote (none for a deletion); [`prune`] removes the
//! rows a newer one supersedes. Each replica keeps its own [`mnemo_search`] index
//! (in a folder of its own, or in memory) and a **cursor**, a point in the log ordered by
//! (`xid`, `memory_seq`): every row before it is in the index. A batch reads the rows from the
//! cursor on in one snapshot and takes them in; the cursor then moves past the rows of
//! transactions that had ended before that snapshot began (their `xid` below its `xmin`: no
//! row of theirs can still appear), never past a transaction that might still commit. Rows past
//! the cursor that were already taken in are remembered (memory and `xid`), so a batch does not
//! take them in again while a long transaction elsewhere holds `xmin` back.
//!
//! A search reads the rows past the cursor first (all but those already taken in), on their
//! current content (they are the memories the index may not hold as they are), and then the
//! index's ranking: a memory is found from the moment its write is acknowledged, on every
//! replica.
//!
//! A replica's own writes leave their content with its indexer ([`Written`]), so a batch reads
//! back from the database only what other replicas wrote (or what waited too long).

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mnemo_search::{IndexedMemory, SearchIndex};
use mnemo_store::search::{INDEX_BATCH, INDEX_SWEEP, IndexPacer, next_sweep};
use mnemo_store::{Signal, StoreError};
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use crate::engine::{Engine, all, col, exec, failure, one, opt};

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
    written: Written,
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
    /// Rows at or past the cursor already taken in: (`memory_seq`, `xid`).
    taken: HashSet<(i64, i64)>,
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

/// A memory as a batch reads it from its rows in the log: the transactions they name and,
/// while it lives, what the index holds.
struct Change {
    seq: i64,
    xids: Vec<i64>,
    live: Option<Live>,
}

/// A live memory as the index takes it in.
struct Live {
    store: i64,
    path: String,
    version: i64,
    /// Always `Some` once the batch is read.
    content: Option<Arc<str>>,
}

/// How long a version this replica wrote waits for the indexer with its content: past it (a
/// transaction still open, one rolled back, a version rewritten before it was taken in), the
/// content is dropped and read back from the database if still needed.
const WRITTEN_FOR: Duration = Duration::from_secs(60);

/// At most this much content waits (a long burst of writes that never pauses for the indexer
/// reads the rest back).
const WRITTEN_BYTES: usize = 16 << 20;

/// The content of the memory versions this replica wrote, by the version's `seq`, until its
/// indexer takes them in: the database then sends a batch only the memories' paths, not the
/// 4 KB it was just sent (reading content back took 4–9 % of the write path's rate: a probe
/// reading batches without content measured 0.93 / 0.97 of no index, against 0.89 / 0.88).
/// A version's content never changes while it is a memory's current one (the current version
/// cannot be redacted or purged), and a batch takes held content in only when its digest is
/// the one the database gives the memory (else it reads the database's), so what is held for
/// a version that never committed, or for another database's, does no harm.
#[derive(Debug, Default)]
pub(crate) struct Written {
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    /// Content and its digest (which a batch checks against the database's).
    content: HashMap<i64, (Arc<str>, String)>,
    /// Versions in the order written, with when (the oldest leave first).
    order: VecDeque<(i64, Instant)>,
    bytes: usize,
}

impl Held {
    fn remove(&mut self, version: i64) -> Option<Arc<str>> {
        let (content, _) = self.content.remove(&version)?;
        self.bytes -= content.len();
        Some(content)
    }

    /// Drops what waited too long, and the oldest while over the byte budget.
    fn trim(&mut self, now: Instant) {
        while let Some(&(version, at)) = self.order.front() {
            if self.content.is_empty() {
                self.order.clear();
                break;
            }
            if now.duration_since(at) < WRITTEN_FOR && self.bytes <= WRITTEN_BYTES {
                break;
            }
            self.order.pop_front();
            let _ = self.remove(version);
        }
    }
}

impl Written {
    /// Version `version`, just written by this replica, holds `content` of digest `digest`.
    pub(crate) fn hold(&self, version: i64, content: &str, digest: &str) {
        let now = Instant::now();
        let mut held = self.held.lock().expect("written content lock poisoned");
        if let Some((old, _)) = held.content.insert(version, (Arc::from(content), digest.to_owned())) {
            held.bytes -= old.len();
        }
        held.bytes += content.len();
        held.order.push_back((version, now));
        held.trim(now);
    }

    /// Takes out the content held for these versions whose digest is the one given (what the
    /// database says the version holds: it may not be, for another database's version of the
    /// same number after `mnemo db copy --replace`).
    fn take(&self, digests: &HashMap<i64, String>) -> HashMap<i64, Arc<str>> {
        let mut held = self.held.lock().expect("written content lock poisoned");
        held.trim(Instant::now());
        let mut taken = HashMap::new();
        for (version, digest) in digests {
            if held.content.get(version).is_some_and(|(_, held)| held == digest)
                && let Some(content) = held.remove(*version)
            {
                taken.insert(*version, content);
            }
        }
        taken
    }
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
            written: Written::default(),
            writer: WriterThread::start()?,
            progress: Mutex::new(progress),
            turn: tokio::sync::Mutex::new(()),
        })
    }

    /// The index, for searches.
    pub(crate) fn index(&self) -> &SearchIndex {
        &self.index
    }

    /// Where this replica's writes leave their content for its indexer.
    pub(crate) fn written(&self) -> &Written {
        &self.written
    }

    /// Every row before the cursor is in the index, and so are the rows past it named here (by
    /// `memory_seq` and `xid`, in two lists): taken in while a transaction elsewhere holds the
    /// cursor back. Read it before the index's searcher: the index is then at least this far
    /// along.
    pub(crate) fn position(&self) -> (Cursor, Vec<i64>, Vec<i64>) {
        let p = self.progress.lock().expect("search progress lock poisoned");
        let (seqs, xids) = p.taken.iter().copied().unzip();
        (p.cursor, seqs, xids)
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
        let (xmin, generation, changes, first_unread, fresh_from) = crate::read!(engine, |tx| {
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
                "SELECT l.memory_seq, (l.xid::text)::int8, m.store_seq, m.path, m.version_seq, m.content_sha256 \
                 FROM memory_search_log l LEFT JOIN memories m ON m.seq = l.memory_seq \
                 WHERE (l.xid, l.memory_seq) >= ($1::text::xid8, $2) ORDER BY l.xid, l.memory_seq LIMIT $3",
                &[&from.0.to_string(), &from.1, &(INDEX_BATCH as i64)],
            )
            .await?;
            let full = rows.len() == INDEX_BATCH;
            let first_unread = match rows.last() {
                Some(r) if full => Some((col(r, 1)?, col::<i64>(r, 0)? + 1)),
                _ => None,
            };
            let (mut changes, mut digests) = (Vec::<Change>::with_capacity(rows.len()), HashMap::new());
            {
                // Rows past the cursor already taken in (read again while a transaction
                // elsewhere holds the cursor back) are left out; a memory of several rows is
                // taken in once (each row joins it as it is now).
                let p = self.progress.lock().expect("search progress lock poisoned");
                let mut at: HashMap<i64, usize> = HashMap::new();
                for r in &rows {
                    let (seq, xid): (i64, i64) = (col(r, 0)?, col(r, 1)?);
                    if !fresh && p.taken.contains(&(seq, xid)) {
                        continue;
                    }
                    if let Some(&i) = at.get(&seq) {
                        changes[i].xids.push(xid);
                        continue;
                    }
                    at.insert(seq, changes.len());
                    let live = match col::<Option<i64>>(r, 2)? {
                        Some(store) => {
                            let version: i64 = col(r, 4)?;
                            digests.insert(version, col::<String>(r, 5)?);
                            Some(Live { store, path: col(r, 3)?, version, content: None })
                        }
                        None => None,
                    };
                    changes.push(Change { seq, xids: vec![xid], live });
                }
            }
            // What this replica wrote; the content of the rest (other replicas' writes) is read.
            let mut content = self.written.take(&digests);
            let missing: Vec<i64> = digests.keys().filter(|v| !content.contains_key(v)).copied().collect();
            if !missing.is_empty() {
                for r in all(&tx, "SELECT seq, content FROM memory_versions WHERE seq = ANY($1)", &[&missing]).await? {
                    let bytes: Vec<u8> = col(&r, 1)?;
                    content.insert(col(&r, 0)?, Arc::from(String::from_utf8_lossy(&bytes)));
                }
            }
            for live in changes.iter_mut().filter_map(|c| c.live.as_mut()) {
                live.content = Some(
                    content
                        .remove(&live.version)
                        .ok_or_else(|| failure(format!("memory version {} has no content to index", live.version)))?,
                );
            }
            Ok((xmin, generation, changes, first_unread, (!fresh).then_some(cursor)))
        })?;
        // `fresh_from`: the cursor this batch started from, `None` when it starts over.
        let (fresh, cursor) = match fresh_from {
            Some(cursor) => (false, cursor),
            None => (true, (0, 0)),
        };
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
                            let live = c.live.as_ref()?;
                            Some(IndexedMemory {
                                seq: c.seq as u64,
                                store: live.store as u64,
                                path: &live.path,
                                content: live.content.as_deref()?,
                            })
                        })
                        .collect();
                    if !removed.is_empty() {
                        index.write(&removed, &memories, &payload)?;
                    }
                    Ok::<_, mnemo_search::IndexError>(
                        changes
                            .into_iter()
                            .flat_map(|c| c.xids.into_iter().map(move |xid| (c.seq, xid)))
                            .collect::<Vec<_>>(),
                    )
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
            p.taken.retain(|&(seq, xid)| (xid, seq) >= next);
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

/// How long a deleted memory's row stays in the search log, at least ([`prune`]).
pub(crate) const LOG_KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// How often a replica marks the log and prunes it.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// Log rows looked at per pruning transaction (each short: the log's writers never wait long).
const PRUNE_BATCH: i64 = 1000;

/// Prunes the search log (migrations 0018 and 0019): notes a mark (the first transaction not
/// yet started, and when; at most one per [`PRUNE_EVERY`]), then walks the whole log and
/// removes every row a newer one supersedes — its memory holds another version now, or is gone
/// and the row names a version (the deletion's own row says more) — and the rows of deleted
/// memories whose transaction is below the newest mark older than `keep`. The walk is whole
/// because a row current when one pass saw it is superseded by any later write. In
/// transactions of [`PRUNE_BATCH`] rows, one replica at a time (the others skip); how many rows
/// went.
///
/// Removing a superseded row never hides a change from a replica: the row superseding it
/// belongs to a transaction that changed the same memory and committed later (each write locks
/// the memory's row), so a replica not yet past it takes the memory in again as it is then.
pub(crate) async fn prune(engine: &Engine, keep: Duration) -> Result<u64, StoreError> {
    let mut client = engine.client().await?;
    let lock = "hashtext('mnemo search log ' || current_setting('search_path'))";
    let held: bool = col(
        &client
            .query_one(&format!("SELECT pg_try_advisory_lock({lock})"), &[])
            .await
            .map_err(crate::engine::backend)?,
        0,
    )?;
    if !held {
        return Ok(0);
    }
    let pruned = prune_held(&mut client, keep).await;
    client.execute(&format!("SELECT pg_advisory_unlock({lock})"), &[]).await.map_err(crate::engine::backend)?;
    pruned
}

async fn prune_held(client: &mut deadpool_postgres::Object, keep: Duration) -> Result<u64, StoreError> {
    let (every, keep) = (PRUNE_EVERY.as_secs_f64(), keep.as_secs_f64());
    // Below it a deleted memory's rows go (none yet: 0).
    let old_enough: i64 = {
        let tx = crate::engine::begin_write(client).await?;
        let out = async {
            exec(
                &tx,
                "INSERT INTO memory_search_log_marks (at, xid) \
                 SELECT now(), pg_snapshot_xmax(pg_current_snapshot()) WHERE NOT EXISTS \
                 (SELECT 1 FROM memory_search_log_marks WHERE at > now() - make_interval(secs => $1))",
                &[&every],
            )
            .await?;
            let to = opt(
                &tx,
                "SELECT (xid::text)::int8 FROM memory_search_log_marks \
                 WHERE at < now() - make_interval(secs => $1) ORDER BY at DESC LIMIT 1",
                &[&keep],
            )
            .await?;
            // The marks older than that one will never be needed again.
            exec(
                &tx,
                "DELETE FROM memory_search_log_marks WHERE at < \
                 (SELECT max(at) FROM memory_search_log_marks WHERE at < now() - make_interval(secs => $1))",
                &[&keep],
            )
            .await?;
            Ok(to.map(|r| col::<i64>(&r, 0)).transpose()?.unwrap_or(0))
        }
        .await;
        crate::engine::finish(tx, out).await?
    };
    let (mut after, mut pruned) = ((0_i64, -1_i64), 0_u64);
    loop {
        let tx = crate::engine::begin_write(client).await?;
        let out = async {
            let row = one(
                &tx,
                "WITH looked AS (SELECT l.memory_seq, l.xid, l.version_seq FROM memory_search_log l \
                   WHERE (l.xid, l.memory_seq) > ($1::text::xid8, $2) ORDER BY l.xid, l.memory_seq LIMIT $3), \
                 gone AS (DELETE FROM memory_search_log l USING looked k LEFT JOIN memories m ON m.seq = k.memory_seq \
                   WHERE l.xid = k.xid AND l.memory_seq = k.memory_seq \
                   AND l.version_seq IS NOT DISTINCT FROM k.version_seq AND CASE WHEN m.seq IS NOT NULL THEN m.version_seq IS DISTINCT FROM k.version_seq \
                     ELSE k.version_seq IS NOT NULL OR k.xid < $4::text::xid8 END RETURNING 1), \
                 last AS (SELECT (xid::text)::int8 AS xid, memory_seq FROM looked ORDER BY xid DESC, memory_seq DESC LIMIT 1) \
                 SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM looked), \
                   (SELECT xid FROM last), (SELECT memory_seq FROM last)",
                &[&after.0.to_string(), &after.1, &PRUNE_BATCH, &old_enough.to_string()],
            )
            .await?;
            let (gone, looked): (i64, i64) = (col(&row, 0)?, col(&row, 1)?);
            let last: Option<(i64, i64)> = match (col::<Option<i64>>(&row, 2)?, col::<Option<i64>>(&row, 3)?) {
                (Some(xid), Some(seq)) if looked == PRUNE_BATCH => Some((xid, seq)),
                _ => None,
            };
            Ok((gone.unsigned_abs(), last))
        }
        .await;
        let (gone, last) = crate::engine::finish(tx, out).await?;
        pruned += gone;
        match last {
            Some(last) => after = last,
            None => break,
        }
    }
    if pruned > 0 {
        metrics::counter!("mnemo_search_log_pruned_total").increment(pruned);
    }
    Ok(pruned)
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
    let mut next_prune = tokio::time::Instant::now() + PRUNE_EVERY;
    loop {
        if tokio::time::Instant::now() >= next_prune {
            next_prune += PRUNE_EVERY;
            match prune(&engine, LOG_KEEP).await {
                Err(_) if engine.is_closed() => return,
                Err(e) => tracing::warn!(error = %e, "pruning the search log failed; it tries again in an hour"),
                Ok(pruned) => tracing::debug!(pruned, "search log pruned"),
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn digests(of: &[(i64, &str)]) -> HashMap<i64, String> {
        of.iter().map(|(v, d)| (*v, (*d).to_owned())).collect()
    }

    #[test]
    fn written_content_is_held_until_taken_in_and_within_its_budget() {
        let written = Written::default();
        written.hold(1, "one", "d1");
        written.hold(2, "two", "d2");
        // Taken only with the digest the database gives, and only once.
        assert!(written.take(&digests(&[(1, "other")])).is_empty());
        let taken = written.take(&digests(&[(1, "d1"), (7, "d7")]));
        assert_eq!(taken.len(), 1);
        assert_eq!(&*taken[&1], "one");
        assert!(written.take(&digests(&[(1, "d1")])).is_empty());
        assert_eq!(written.held.lock().unwrap().bytes, 3);

        // Over the byte budget the oldest leave first.
        let big = "x".repeat(WRITTEN_BYTES / 2);
        written.hold(3, &big, "d3");
        written.hold(4, &big, "d4");
        assert_eq!(written.held.lock().unwrap().bytes, WRITTEN_BYTES);
        let taken = written.take(&digests(&[(2, "d2"), (3, "d3"), (4, "d4")]));
        let mut versions: Vec<i64> = taken.keys().copied().collect();
        versions.sort();
        assert_eq!(versions, [3, 4]);
        assert_eq!(written.held.lock().unwrap().bytes, 0);
    }

    #[test]
    fn written_content_leaves_once_it_waited_too_long() {
        let written = Written::default();
        written.hold(1, "one", "d1");
        let later = Instant::now() + WRITTEN_FOR;
        let mut held = written.held.lock().unwrap();
        held.trim(later);
        assert!(held.content.is_empty());
        assert!(held.order.is_empty());
        assert_eq!(held.bytes, 0);
    }
}
