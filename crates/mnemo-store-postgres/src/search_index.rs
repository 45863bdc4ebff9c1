//! The search index, kept behind the writes ([`mnemo_store::search`]).
//!
//! A write queues its memory in `memory_search_waiting` (a trigger, in the write's own
//! transaction: a small row); [`keep`] takes waiting memories into `memory_search` (the
//! `tsvector` and the trigram GIN entries, the costly part) in batches behind the writes, one
//! replica at a time (a transaction-scoped advisory lock: the others skip, they do not queue).
//! A batch deletes only the queue rows whose tick it read, so a memory changed meanwhile stays
//! queued and is taken in again.

use std::sync::Arc;
use std::time::Duration;

use mnemo_store::search::{INDEX_BATCH, INDEX_GATHER, INDEX_SWEEP, IndexPacer};
use mnemo_store::{Signal, StoreError};
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use crate::engine::{Engine, Tx, all, col, exec, one};

/// Takes up to [`INDEX_BATCH`] waiting memories (any: every one is taken in before the
/// indexer rests) into the index and off
/// the queue; how many. `None` when another replica's indexer holds the turn.
async fn take_in(tx: &Tx<'_>) -> Result<Option<usize>, StoreError> {
    let held: bool = col(
        &one(
            tx,
            "SELECT pg_try_advisory_xact_lock(hashtext('mnemo search index ' || current_setting('search_path')))",
            &[],
        )
        .await?,
        0,
    )?;
    if !held {
        return Ok(None);
    }
    let rows = all(tx, "SELECT memory_seq, tick FROM memory_search_waiting LIMIT $1", &[&(INDEX_BATCH as i64)]).await?;
    if rows.is_empty() {
        return Ok(Some(0));
    }
    let seqs: Vec<i64> = rows.iter().map(|r| col(r, 0)).collect::<Result<_, _>>()?;
    let ticks: Vec<i64> = rows.iter().map(|r| col(r, 1)).collect::<Result<_, _>>()?;
    exec(
        tx,
        "DELETE FROM memory_search s WHERE s.memory_seq = ANY($1) \
         AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.seq = s.memory_seq)",
        &[&seqs],
    )
    .await?;
    exec(
        tx,
        "INSERT INTO memory_search (memory_seq, store_seq, path, body, words) \
         SELECT m.seq, m.store_seq, m.path, t.body, to_tsvector('simple', m.path || ' ' || t.body) \
         FROM memories m JOIN memory_versions v ON v.seq = m.version_seq, \
              LATERAL (SELECT memory_search_text(v.content) AS body) t \
         WHERE m.seq = ANY($1) \
         ON CONFLICT (memory_seq) DO UPDATE SET store_seq = EXCLUDED.store_seq, path = EXCLUDED.path, \
             body = EXCLUDED.body, words = EXCLUDED.words",
        &[&seqs],
    )
    .await?;
    exec(
        tx,
        "DELETE FROM memory_search_waiting w USING unnest($1::int8[], $2::int8[]) AS d(seq, tick) \
         WHERE w.memory_seq = d.seq AND w.tick = d.tick",
        &[&seqs, &ticks],
    )
    .await?;
    Ok(Some(rows.len()))
}

/// One batch in its own transaction (retried on a serialisation conflict).
async fn batch(engine: &Engine) -> Result<Option<usize>, StoreError> {
    let started = std::time::Instant::now();
    let taken = crate::write!(engine, |tx| take_in(&tx).await)?;
    if let Some(n) = taken.filter(|n| *n > 0) {
        metrics::counter!("mnemo_search_indexed_total").increment(n as u64);
        metrics::histogram!("mnemo_search_index_batch_seconds").record(started.elapsed().as_secs_f64());
    }
    Ok(taken)
}

/// Takes everything waiting into the index now (waiting for another replica's batch to end
/// rather than skipping); how many memories.
pub(crate) async fn catch_up(engine: &Engine) -> Result<u64, StoreError> {
    let mut total = 0u64;
    loop {
        match batch(engine).await? {
            None => tokio::time::sleep(INDEX_GATHER).await,
            Some(n) => {
                total += n as u64;
                if n < INDEX_BATCH {
                    return Ok(total);
                }
            }
        }
    }
}

/// The indexer task: woken by memory changes (of any replica: the signals are `NOTIFY`s) and
/// at least every [`INDEX_SWEEP`], it takes waiting memories in once the writes pause or the
/// oldest has waited too long ([`index_now`]), one batch at a time, pausing again for writes
/// that come in between. Ends when the store closes.
pub(crate) async fn keep(engine: Arc<Engine>, mut signals: broadcast::Receiver<Signal>) {
    let mut pacer = IndexPacer::default();
    loop {
        if !pacer.behind() {
            match next_write(&mut signals, INDEX_SWEEP).await {
                Some(true) => pacer.wrote(),
                Some(false) => {}
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
        let taken = batch(&engine).await;
        match &taken {
            Err(_) if engine.is_closed() => return,
            Err(e) => tracing::warn!(error = %e, "the search indexer failed a batch; it tries again later"),
            Ok(_) => {}
        }
        // Fewer than a batch, or another replica's indexer has the turn (it takes these in).
        pacer.batch_done(!matches!(taken, Ok(Some(n)) if n == INDEX_BATCH), started.elapsed());
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
