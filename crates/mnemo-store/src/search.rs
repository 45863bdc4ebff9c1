//! What both backends share about searching memories ([`Store::search_memories`]):
//! the request, and [`SearchScan`], which turns a backend's ranked candidates into a page.
//!
//! A backend's index (`mnemo-search`'s word index: SQLite's beside its file, PostgreSQL's one
//! per replica) finds candidates that hold every searched term ([`SearchQuery::index_plan`]),
//! best first (BM25); [`SearchQuery::matches`] then judges each, so both backends answer the
//! same set, and the snippet is made here, once.
//!
//! **The index is kept off the write's transaction.** Taking a memory into an index costs more
//! than the rest of its write, so a write only queues its memory (a row in the backend's
//! *waiting* table, in the write's transaction) and the backend's indexer takes waiting
//! memories into the index in batches behind it ([`INDEX_BATCH`], [`INDEX_GATHER`]). A search
//! reads the waiting memories first, judged by the rule on their current content, then the
//! index's ranking with them left out ([`CandidateSource`]); so a memory is found the moment its
//! write is acknowledged, and one deleted or changed is never found by what it no longer holds
//! (every index hit is judged on the memory's current content).
//!
//! [`by_meaning`] runs the semantic and hybrid modes ([`crate::rules::semantic`]) over any
//! [`Store`]: a ranking by meaning and, where the mode needs it, the full-text ranking,
//! fused by reciprocal rank.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use mnemo_api::{Memory, MemoryId, MemorySearchResult, MemoryStoreId, WorkspaceId};

use crate::ops::embeddings::MeaningQuery;
use crate::rules::search::SearchQuery;
use crate::rules::semantic::{MAX_RANKED, SearchMode, depth, fuse};
use crate::{Cursor, Listing, Result, Store, StoreError};

/// Where a search looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchScope {
    /// One store of the workspace (an unknown one is not found).
    Store(MemoryStoreId),
    /// Every store of the workspace, or only those listed (a sessions token's attached stores;
    /// ids of other workspaces or of deleted stores are skipped).
    Workspace(Option<Vec<MemoryStoreId>>),
}

/// A search request, parsed.
#[derive(Debug, Clone)]
pub struct SearchMemories {
    pub scope: SearchScope,
    pub query: SearchQuery,
    /// Only memories whose path starts with this (the `path_prefix` parameter).
    pub path_prefix: Option<String>,
    pub limit: u32,
    pub after: Option<Cursor>,
}

/// One candidate a backend found: a memory with its content, and the engine's relevance
/// (higher is better).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub memory: Memory,
    pub score: f64,
}

/// Where a [`CandidateBatch`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateSource {
    /// The scope's memories waiting for the indexer (written a moment ago, or changed), in
    /// row-number order, with their current content. Read first: the index does not hold them
    /// yet, or holds what they held before.
    Waiting,
    /// The index's ranking (best first, ties by row number), the waiting memories left out.
    Indexed,
}

/// One batch of candidates a [`SearchScan`] wants: from `source`, in its order, skipping
/// `offset`, at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CandidateBatch {
    pub source: CandidateSource,
    pub offset: u64,
    pub limit: u64,
}

/// The most waiting memories the indexer takes into the index in one transaction (one commit
/// of the index: fewer, larger commits leave the index fewer segments to merge; at 512 a memory
/// costs the indexer 0.15 ms of CPU, at 128 0.33 ms, measured on 4 KB memories).
pub const INDEX_BATCH: usize = 512;
/// How long writes must pause before the indexer takes waiting memories in ([`index_now`]):
/// a burst of writes runs at the speed it would without an index, and is indexed right after.
pub const INDEX_GATHER: Duration = Duration::from_millis(20);
/// How long memories may wait while writes never pause: past it the indexer takes them in
/// whatever the writes do, so a search never reads more than about this long's writes from
/// the waiting table.
pub const INDEX_MAX_LAG: Duration = Duration::from_secs(1);
/// The indexer looks for waiting memories at least this often, told of a change or not (a
/// change made by another replica, a batch that failed).
pub const INDEX_SWEEP: Duration = Duration::from_secs(5);
/// The longest an indexer that found nothing sleeps between sweeps ([`next_sweep`]).
pub const INDEX_SWEEP_IDLE: Duration = Duration::from_secs(60);

/// The sweep after one that waited `current`: back to [`INDEX_SWEEP`] once a write came or
/// something was taken in, else twice as long, up to [`INDEX_SWEEP_IDLE`] (an idle server wakes
/// once a minute, not every five seconds).
pub fn next_sweep(current: Duration, active: bool) -> Duration {
    if active { INDEX_SWEEP } else { current.saturating_mul(2).clamp(INDEX_SWEEP, INDEX_SWEEP_IDLE) }
}

/// Whether the indexer takes its next batch now, writes having paused for `quiet` and memories
/// having waited for `behind`; else it waits for the first of the two to come
/// ([`index_wait`]).
pub fn index_now(quiet: Duration, behind: Duration) -> bool {
    quiet >= INDEX_GATHER || behind >= INDEX_MAX_LAG
}

/// How long the indexer waits before asking [`index_now`] again (unless a write comes first).
pub fn index_wait(quiet: Duration, behind: Duration) -> Duration {
    INDEX_GATHER.saturating_sub(quiet).min(INDEX_MAX_LAG.saturating_sub(behind))
}

/// A backend indexer's clock of [`index_now`]: when writes last came, and since when memories
/// have waited. The backend's loop only waits and runs batches as this says.
#[derive(Debug, Clone)]
pub struct IndexPacer {
    last_write: Instant,
    behind_since: Option<Instant>,
    /// While writes go on, no batch before this ([`INDEX_DUTY`]).
    rest_until: Option<Instant>,
}

impl Default for IndexPacer {
    fn default() -> Self {
        Self { last_write: Instant::now(), behind_since: None, rest_until: None }
    }
}

/// While writes never pause (the indexer is past [`INDEX_MAX_LAG`]), it rests this many times
/// as long as each batch took before the next: it takes at most a quarter of what it could
/// from the writes, and still takes memories in several times faster than one writer thread
/// queues them. Once writes pause it runs at full speed.
pub const INDEX_DUTY: u32 = 3;

impl IndexPacer {
    /// A write committed (or some may have: the signals were lost).
    pub fn wrote(&mut self) {
        self.last_write = Instant::now();
    }

    /// Whether memories may still wait: a catch-up started and not finished. If not, the
    /// indexer sleeps until a write or [`INDEX_SWEEP`], then calls [`Self::start`].
    pub fn behind(&self) -> bool {
        self.behind_since.is_some()
    }

    /// Starts a catch-up (a write woke the indexer, or its sweep came).
    pub fn start(&mut self) {
        self.behind_since.get_or_insert_with(Instant::now);
    }

    /// `None`: take the next batch now; else wait up to this long for a write (then ask again).
    pub fn wait(&self) -> Option<Duration> {
        let (quiet, behind) = (self.last_write.elapsed(), self.behind_since.map_or(Duration::ZERO, |s| s.elapsed()));
        if quiet >= INDEX_GATHER {
            return None;
        }
        let resting = self.rest_until.map_or(Duration::ZERO, |t| t.saturating_duration_since(Instant::now()));
        if index_now(quiet, behind) && resting.is_zero() {
            return None;
        }
        // A pause in the writes ends the rest too.
        Some(
            index_wait(quiet, behind)
                .max(resting)
                .min(INDEX_GATHER.saturating_sub(quiet))
                .max(Duration::from_millis(1)),
        )
    }

    /// A batch ended after `took`; `caught_up` when nothing more waits (it took less than a full
    /// batch), or when it failed (the sweep tries again).
    pub fn batch_done(&mut self, caught_up: bool, took: Duration) {
        self.rest_until = Some(Instant::now() + took * INDEX_DUTY);
        if caught_up {
            self.behind_since = None;
        }
    }
}

/// Candidates of the first batch, at least: most candidates match, so one batch usually fills
/// a page.
const MIN_BATCH: u64 = 50;
/// The most candidates of one batch. Each batch after the first is twice the one before (up
/// to this), so a query whose candidates mostly fail the rule (a phrase, an exclusion) costs a
/// few re-ranked reads, not one per 50 candidates.
const MAX_BATCH: u64 = 10_000;

/// A page of search results built from ranked candidates. A backend asks
/// [`Self::next_batch`], reads it (all batches in one read transaction), and hands the rows to
/// [`Self::feed`] until no batch is wanted.
#[derive(Debug)]
pub struct SearchScan<'q> {
    request: &'q SearchMemories,
    /// Matches of earlier pages, to pass over.
    skip: u64,
    /// Matches seen so far (earlier pages' included).
    matched: u64,
    source: CandidateSource,
    /// The next row of `source`.
    offset: u64,
    /// How many of `items` came from [`CandidateSource::Waiting`] (they come first).
    waiting_items: usize,
    /// Batches read so far.
    batches: u32,
    items: Vec<MemorySearchResult>,
    more: bool,
    done: bool,
}

impl<'q> SearchScan<'q> {
    /// A scan for `request`; a cursor of another listing is refused.
    pub fn new(request: &'q SearchMemories) -> Result<Self> {
        let skip = match request.after {
            None => 0,
            Some(Cursor::Offset(n)) => n,
            Some(_) => return Err(StoreError::InvalidCursor),
        };
        Ok(Self {
            request,
            skip,
            matched: 0,
            source: CandidateSource::Waiting,
            offset: 0,
            waiting_items: 0,
            batches: 0,
            items: Vec::with_capacity(request.limit as usize),
            more: false,
            done: false,
        })
    }

    /// Starts the page again from nothing, for a backend whose ranking changed between batches
    /// (a cheap first ranking that turned out to hold too few matches, given up for an exact
    /// one): the batches read so far are forgotten.
    pub fn restart(&mut self) {
        self.matched = 0;
        self.source = CandidateSource::Waiting;
        self.offset = 0;
        self.waiting_items = 0;
        self.batches = 0;
        self.items.clear();
        self.more = false;
        self.done = false;
    }

    /// The next batch to read, if the page is not full yet.
    pub fn next_batch(&self) -> Option<CandidateBatch> {
        if self.done {
            return None;
        }
        let wanted = (self.skip + u64::from(self.request.limit) + 1).saturating_sub(self.matched);
        let grown = MIN_BATCH.saturating_mul(1 << self.batches.min(20)).min(MAX_BATCH);
        Some(CandidateBatch { source: self.source, offset: self.offset, limit: wanted.max(grown) })
    }

    /// Takes the rows `batch` asked for, in the backend's order.
    pub fn feed(&mut self, batch: &CandidateBatch, candidates: Vec<Candidate>) {
        let read = candidates.len() as u64;
        self.feed_read(batch, read, candidates);
    }

    /// Takes an index's ranked `hits` (row number, score) for `batch`, each read back as it is
    /// now (`found`, by row number). An index may name memories deleted since: the source is
    /// exhausted only when the index gave fewer hits than asked, not when fewer were found.
    pub fn feed_hits(&mut self, batch: &CandidateBatch, hits: &[(i64, f64)], mut found: HashMap<i64, Candidate>) {
        let ranked = hits
            .iter()
            .filter_map(|(seq, score)| {
                let mut candidate = found.remove(seq)?;
                candidate.score = *score;
                Some(candidate)
            })
            .collect();
        self.feed_read(batch, hits.len() as u64, ranked);
    }

    fn feed_read(&mut self, batch: &CandidateBatch, read: u64, candidates: Vec<Candidate>) {
        let got = read;
        self.offset = batch.offset + got;
        self.batches += 1;
        let exhausted = got < batch.limit;
        let page_end = self.skip + u64::from(self.request.limit);
        for Candidate { memory, score } in candidates {
            let content = memory.content.as_deref().unwrap_or_default();
            let within = self.request.path_prefix.as_deref().is_none_or(|p| memory.path.starts_with(p));
            if !within || !self.request.query.matches(&memory.path, content) {
                continue;
            }
            self.matched += 1;
            if self.matched <= self.skip {
                continue;
            }
            if self.matched > page_end {
                self.more = true;
                self.done = true;
                return;
            }
            let snippet = self.request.query.snippet(content);
            self.items.push(result(memory, snippet, score));
            if batch.source == CandidateSource::Waiting {
                self.waiting_items += 1;
            }
        }
        match (exhausted, batch.source) {
            (false, _) => {}
            (true, CandidateSource::Waiting) => {
                self.source = CandidateSource::Indexed;
                self.offset = 0;
            }
            (true, CandidateSource::Indexed) => self.done = true,
        }
    }

    /// The page, and the cursor of the next one if more results follow. Waiting memories lead
    /// the page (the index has no score for them yet) with the best score of the page's others.
    pub fn finish(mut self) -> Listing<MemorySearchResult> {
        let best = self.items[self.waiting_items..].iter().map(|r| r.score).fold(0.0, f64::max);
        for item in &mut self.items[..self.waiting_items] {
            item.score = best;
        }
        let next = self.more.then(|| Cursor::Offset(self.skip + u64::from(self.request.limit)));
        Listing { items: self.items, next }
    }
}

/// What embeds a search's query for ranking by meaning: the server's embeddings provider.
#[async_trait::async_trait]
pub trait QueryEmbedder: Send + Sync {
    /// The provider's model name (stored vectors of another model are not compared).
    fn model(&self) -> &str;
    /// The query's meaning as a unit vector; the error says why not, and never holds a secret.
    async fn embed_query(&self, meaning: &str) -> std::result::Result<Vec<f32>, String>;
}

/// A search's page, how it was ranked, and why not as asked.
#[derive(Debug, Clone)]
pub struct Searched {
    pub listing: Listing<MemorySearchResult>,
    /// The mode asked for, or [`SearchMode::Text`] when the provider could not embed the query.
    pub mode: SearchMode,
    /// Why the results are not ranked as asked ([`crate::rules::semantic::fallback_notice`]).
    pub notice: Option<String>,
}

/// Runs a search in `mode`, the one way every caller does (the API's routes, the console): by
/// full text, or by meaning with `embedder` ([`by_meaning`]). Without an embedder a search by
/// meaning is [`StoreError::Invalid`] saying why; when the embedder fails, the answer is the
/// full-text ranking with a notice.
pub async fn run(
    store: &dyn Store,
    embedder: Option<&dyn QueryEmbedder>,
    ws: &WorkspaceId,
    request: SearchMemories,
    mode: SearchMode,
) -> Result<Searched> {
    if mode == SearchMode::Text {
        let listing = store.search_memories(ws, request).await?;
        return Ok(Searched { listing, mode, notice: None });
    }
    let Some(embedder) = embedder else {
        return Err(StoreError::Invalid(crate::rules::semantic::no_provider(mode)));
    };
    match embedder.embed_query(&request.query.meaning()).await {
        Ok(vector) => {
            let meaning = ByMeaning { mode, model: embedder.model().to_owned(), vector };
            Ok(Searched { listing: by_meaning(store, ws, request, meaning).await?, mode, notice: None })
        }
        Err(why) => {
            tracing::warn!(error = %why, "a search by meaning fell back to full text");
            let listing = store.search_memories(ws, request).await?;
            Ok(Searched {
                listing,
                mode: SearchMode::Text,
                notice: Some(crate::rules::semantic::fallback_notice(mode, &why)),
            })
        }
    }
}

/// A search's ranking by meaning: how to rank, and the query's vector by the server's model.
#[derive(Debug, Clone)]
pub struct ByMeaning {
    /// [`SearchMode::Semantic`] or [`SearchMode::Hybrid`].
    pub mode: SearchMode,
    pub model: String,
    /// The query's [`SearchQuery::meaning`], embedded (unit length).
    pub vector: Vec<f32>,
}

/// A page of a semantic or hybrid search: the ranking by meaning, and the full-text ranking
/// (of every match for `hybrid`; for `semantic`, of the memories not embedded yet, so they
/// are found meanwhile), fused by reciprocal rank; `score` is the fused score. Pages end at
/// [`MAX_RANKED`] results.
pub async fn by_meaning(
    store: &dyn Store,
    ws: &WorkspaceId,
    request: SearchMemories,
    meaning: ByMeaning,
) -> Result<Listing<MemorySearchResult>> {
    let skip = match request.after {
        None => 0,
        Some(Cursor::Offset(n)) => n,
        Some(_) => return Err(StoreError::InvalidCursor),
    };
    let page_end = skip.saturating_add(u64::from(request.limit)).min(MAX_RANKED);
    let depth = depth(page_end);
    let ranking = store
        .rank_by_meaning(
            ws,
            MeaningQuery {
                scope: request.scope.clone(),
                query: request.query.clone(),
                path_prefix: request.path_prefix.clone(),
                model: meaning.model,
                vector: meaning.vector,
                depth: depth as usize,
            },
        )
        .await?;
    let text = if meaning.mode == SearchMode::Hybrid || !ranking.unembedded.is_empty() {
        let text = SearchMemories { limit: depth as u32, after: None, ..request.clone() };
        let mut items = store.search_memories(ws, text).await?.items;
        if meaning.mode == SearchMode::Semantic {
            items.retain(|r| ranking.unembedded.contains(&r.memory_id));
        }
        items
    } else {
        Vec::new()
    };
    let by_meaning: Vec<MemoryId> = ranking.ranked.iter().map(|c| c.memory.id.clone()).collect();
    let by_text: Vec<MemoryId> = text.iter().map(|r| r.memory_id.clone()).collect();
    let fused = fuse(&[by_meaning, by_text]);
    let more = fused.len() as u64 > page_end && page_end < MAX_RANKED;
    let page: Vec<(MemoryId, f64)> = fused
        .into_iter()
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .take(page_end.saturating_sub(skip) as usize)
        .collect();
    let wanted: HashSet<&MemoryId> = page.iter().map(|(id, _)| id).collect();
    let mut found: HashMap<MemoryId, MemorySearchResult> =
        text.into_iter().filter(|r| wanted.contains(&r.memory_id)).map(|r| (r.memory_id.clone(), r)).collect();
    for c in ranking.ranked {
        if wanted.contains(&c.memory.id) && !found.contains_key(&c.memory.id) {
            let snippet = request.query.snippet(c.memory.content.as_deref().unwrap_or_default());
            found.insert(c.memory.id.clone(), result(c.memory, snippet, 0.0));
        }
    }
    let items = page
        .into_iter()
        .filter_map(|(id, score)| found.remove(&id).map(|r| MemorySearchResult { score, ..r }))
        .collect();
    Ok(Listing { items, next: more.then_some(Cursor::Offset(page_end)) })
}

fn result(memory: Memory, snippet: String, score: f64) -> MemorySearchResult {
    MemorySearchResult {
        memory_id: memory.id,
        memory_store_id: memory.memory_store_id,
        path: memory.path,
        content_sha256: memory.content_sha256,
        content_size_bytes: memory.content_size_bytes,
        memory_version_id: memory.memory_version_id,
        updated_at: memory.updated_at,
        snippet,
        score,
    }
}

#[cfg(test)]
mod tests {
    use mnemo_api::{MemoryId, MemoryVersionId};

    use super::*;

    #[test]
    fn idle_sweeps_grow_apart_and_activity_brings_them_back() {
        let s = Duration::from_secs;
        let table = [
            (INDEX_SWEEP, false, s(10)),
            (s(10), false, s(20)),
            (s(40), false, INDEX_SWEEP_IDLE),
            (INDEX_SWEEP_IDLE, false, INDEX_SWEEP_IDLE),
            (INDEX_SWEEP_IDLE, true, INDEX_SWEEP),
            (s(10), true, INDEX_SWEEP),
            (Duration::ZERO, false, INDEX_SWEEP),
        ];
        for (current, active, next) in table {
            assert_eq!(next_sweep(current, active), next, "{current:?} {active}");
        }
    }
    use crate::rules::search::parse;

    fn candidate(path: &str, content: &str, score: f64) -> Candidate {
        Candidate {
            memory: Memory {
                id: MemoryId::generate(),
                memory_store_id: MemoryStoreId::generate(),
                path: path.into(),
                content: Some(content.into()),
                content_sha256: String::new(),
                content_size_bytes: content.len() as u64,
                memory_version_id: MemoryVersionId::generate(),
                created_at: chrono::DateTime::default(),
                updated_at: chrono::DateTime::default(),
            },
            score,
        }
    }

    fn run(request: &SearchMemories, rows: &[Candidate]) -> Listing<MemorySearchResult> {
        run_with_waiting(request, &[], rows)
    }

    /// A backend holding `waiting` memories not indexed yet and `indexed` ranked ones.
    fn run_with_waiting(
        request: &SearchMemories,
        waiting: &[Candidate],
        indexed: &[Candidate],
    ) -> Listing<MemorySearchResult> {
        let mut scan = SearchScan::new(request).unwrap();
        while let Some(batch) = scan.next_batch() {
            let rows = match batch.source {
                CandidateSource::Waiting => waiting,
                CandidateSource::Indexed => indexed,
            };
            let from = (batch.offset as usize).min(rows.len());
            let to = (from + batch.limit as usize).min(rows.len());
            scan.feed(&batch, rows[from..to].to_vec());
        }
        scan.finish()
    }

    #[test]
    fn the_indexer_waits_for_a_pause_in_the_writes_but_never_past_its_lag() {
        let ms = Duration::from_millis;
        // (writes quiet for, memories waiting for) → index now, else how long to wait
        let table = [
            (ms(0), ms(0), None, ms(20)),
            (ms(5), ms(5), None, ms(15)),
            (ms(20), ms(20), Some(()), ms(0)),
            (ms(300), ms(300), Some(()), ms(0)),
            (ms(1), ms(990), None, ms(10)),
            (ms(1), ms(1000), Some(()), ms(0)),
            (ms(0), ms(5000), Some(()), ms(0)),
        ];
        for (quiet, behind, now, wait) in table {
            assert_eq!(index_now(quiet, behind), now.is_some(), "{quiet:?} {behind:?}");
            assert_eq!(index_wait(quiet, behind), wait, "{quiet:?} {behind:?}");
        }
    }

    #[test]
    fn the_pacer_is_behind_from_a_start_until_a_batch_catches_up() {
        let mut pacer = IndexPacer::default();
        assert!(!pacer.behind());
        pacer.start();
        assert!(pacer.behind());
        pacer.batch_done(false, Duration::ZERO);
        assert!(pacer.behind(), "a full batch: more may wait");
        pacer.start();
        pacer.batch_done(true, Duration::ZERO);
        assert!(!pacer.behind());
        // Long after the last write, with nothing behind: index now (the sweep's pass).
        let idle = IndexPacer { last_write: Instant::now() - INDEX_GATHER * 2, behind_since: None, rest_until: None };
        assert_eq!(idle.wait(), None);
        // Behind for longer than the lag while writes never pause: index now anyway…
        let hour = Duration::from_secs(3600);
        let late = IndexPacer {
            last_write: Instant::now() + hour,
            behind_since: Some(Instant::now() - INDEX_MAX_LAG),
            rest_until: None,
        };
        assert_eq!(late.wait(), None);
        // …but after a batch, rest three times as long as it took while the writes go on.
        let resting = IndexPacer { rest_until: Some(Instant::now() + hour), ..late };
        assert!(resting.wait().is_some_and(|w| w > Duration::ZERO));
        // A pause in the writes ends the rest.
        let paused = IndexPacer { last_write: Instant::now() - INDEX_GATHER * 2, ..resting };
        assert_eq!(paused.wait(), None);
    }

    #[test]
    fn waiting_memories_lead_every_page_and_are_paged_with_the_rest() {
        let waiting: Vec<Candidate> =
            (0..3).map(|i| candidate(&format!("/new{i}"), if i == 1 { "other" } else { "alpha" }, 0.0)).collect();
        let indexed: Vec<Candidate> =
            (0..5).map(|i| candidate(&format!("/old{i}"), "alpha", f64::from(10 - i))).collect();
        let mut request = SearchMemories {
            scope: SearchScope::Workspace(None),
            query: parse("alpha").unwrap(),
            path_prefix: None,
            limit: 4,
            after: None,
        };
        let first = run_with_waiting(&request, &waiting, &indexed);
        let paths: Vec<&str> = first.items.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["/new0", "/new2", "/old0", "/old1"]);
        let scores: Vec<f64> = first.items.iter().map(|r| r.score).collect();
        assert_eq!(scores, [10.0, 10.0, 10.0, 9.0], "waiting ones carry the page's best score");
        request.after = first.next;
        let second = run_with_waiting(&request, &waiting, &indexed);
        let paths: Vec<&str> = second.items.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["/old2", "/old3", "/old4"]);
        assert!(second.next.is_none());
    }

    #[test]
    fn a_restarted_scan_forgets_the_ranking_it_gave_up() {
        // A loose ranking whose candidates rarely match, then the exact one.
        let loose: Vec<Candidate> =
            (0..400).map(|i| candidate(&format!("/l{i:03}"), "staging and db apart", f64::from(1000 - i))).collect();
        let exact: Vec<Candidate> =
            (0..5).map(|i| candidate(&format!("/e{i}"), "the staging db", f64::from(10 - i))).collect();
        let request = SearchMemories {
            scope: SearchScope::Workspace(None),
            query: parse("\"staging db\"").unwrap(),
            path_prefix: None,
            limit: 3,
            after: None,
        };
        let mut scan = SearchScan::new(&request).unwrap();
        let mut rows = &loose;
        let mut restarted = false;
        while let Some(batch) = scan.next_batch() {
            if batch.source == CandidateSource::Indexed && batch.offset >= 150 && !restarted {
                restarted = true;
                rows = &exact;
                scan.restart();
                continue;
            }
            let source: &[Candidate] = if batch.source == CandidateSource::Waiting { &[] } else { rows };
            let from = (batch.offset as usize).min(source.len());
            let to = (from + batch.limit as usize).min(source.len());
            scan.feed(&batch, source[from..to].to_vec());
        }
        let page = scan.finish();
        assert!(restarted);
        let paths: Vec<&str> = page.items.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["/e0", "/e1", "/e2"]);
        assert_eq!(page.next, Some(Cursor::Offset(3)));
    }

    #[test]
    fn pages_through_matches_only_and_keeps_the_backend_order() {
        // 120 candidates; every third does not really match (the index's false positives).
        let rows: Vec<Candidate> = (0..120)
            .map(|i| {
                let text = if i % 3 == 2 { "stagingly unrelated" } else { "the staging db" };
                candidate(&format!("/m{i:03}"), text, f64::from(1000 - i))
            })
            .collect();
        let mut request = SearchMemories {
            scope: SearchScope::Workspace(None),
            query: parse("\"staging db\"").unwrap(),
            path_prefix: None,
            limit: 30,
            after: None,
        };
        let mut seen = Vec::new();
        loop {
            let page = run(&request, &rows);
            assert!(page.items.windows(2).all(|w| w[0].score > w[1].score));
            seen.extend(page.items.into_iter().map(|r| r.path));
            match page.next {
                Some(next) => request.after = Some(next),
                None => break,
            }
        }
        let want: Vec<String> = (0..120).filter(|i| i % 3 != 2).map(|i| format!("/m{i:03}")).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn path_prefix_narrows_and_snippets_are_marked() {
        let rows = vec![candidate("/a/x", "alpha beta", 2.0), candidate("/b/x", "alpha", 1.0)];
        let request = SearchMemories {
            scope: SearchScope::Workspace(None),
            query: parse("alpha").unwrap(),
            path_prefix: Some("/b/".into()),
            limit: 10,
            after: None,
        };
        let page = run(&request, &rows);
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.items[0].path, "/b/x");
        assert_eq!(page.items[0].snippet, "«alpha»");
        assert!(page.next.is_none());
    }

    #[test]
    fn refuses_another_listings_cursor() {
        let request = SearchMemories {
            scope: SearchScope::Workspace(None),
            query: parse("a").unwrap(),
            path_prefix: None,
            limit: 10,
            after: Some(Cursor::AfterPath("/a".into())),
        };
        assert!(matches!(SearchScan::new(&request), Err(StoreError::InvalidCursor)));
    }
}
