//! The word index of memory search, kept by each backend beside its tables.
//!
//! The index holds every live memory's path and content as the words of
//! [`mnemo_store::rules::search::index`] (tantivy, one directory), and answers a query's
//! [`IndexPlan`] with the best-ranked memories (BM25, a path hit weighing twice a content hit)
//! **without reading every match**: tantivy skips blocks of postings that cannot reach the top
//! of the page. The query language promises substrings; each piece of a term is looked up among
//! the index's own words (a scan of every word the index holds, kept per segment in
//! memory) and the term becomes those words. The rule judges what comes back.
//!
//! The index is derived data: a backend writes it behind its writes (its queue of waiting
//! memories), names in each commit's payload how far it got, and builds it again when it is
//! missing, foreign or of another layout. It never decides what matches (it may find more than
//! the rule, never fewer) and never touches a database.

mod query;
mod vocabulary;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use mnemo_store::rules::search::index::{IndexPlan, index_words};
use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::index::SegmentId;
use tantivy::schema::{FAST, Field, INDEXED, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::vocabulary::Vocabulary;

/// The layout of the index (its schema and words); an index of another layout is built again.
const LAYOUT: &str = "mnemo-search-2";

/// The name of [`Words`] among the index's tokenizers.
const WORDS: &str = "mnemo-words";

/// The writer's memory budget (tantivy's floor is 15 MB).
const WRITER_BUDGET: usize = 24_000_000;

/// The nice value of a thread that writes an index ([`stand_back`]).
const WRITER_NICE: i32 = 19;

/// Puts the calling thread behind the writes: on a busy machine the backend's writer and the
/// requests come first, and the index takes what is left (Linux: a thread's own nice value;
/// the threads it starts, such as the index writer's merge threads, inherit it). A backend
/// writes its index from such a thread only.
pub fn stand_back() {
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), WRITER_NICE) {
        tracing::debug!(error = %e, "the search index writer keeps its priority");
    }
}

/// Why the index could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("the search index at {path}: {source}")]
    Open { path: PathBuf, source: tantivy::TantivyError },
    #[error("the search index: {0}")]
    Index(#[from] tantivy::TantivyError),
}

/// A memory as the index takes it in.
#[derive(Debug, Clone, Copy)]
pub struct IndexedMemory<'a> {
    /// The memory's row number in its backend (`memories.seq`).
    pub seq: u64,
    /// Its store's row number.
    pub store: u64,
    pub path: &'a str,
    pub content: &'a str,
}

/// Where a search looks: stores and paths, exactly.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The stores' row numbers.
    pub stores: &'a [u64],
    /// The path starts with one of these (when any).
    pub paths: &'a [String],
    /// The path starts with none of these.
    pub excluded_paths: &'a [String],
    /// The path starts with this.
    pub path_prefix: Option<&'a str>,
}

/// A ranked memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub seq: u64,
    pub score: f32,
}

#[derive(Debug, Clone, Copy)]
struct Fields {
    seq: Field,
    store: Field,
    /// The path as one term, for `path:` and `path_prefix`.
    path_raw: Field,
    path: Field,
    content: Field,
}

impl Fields {
    fn schema() -> (Schema, Self) {
        let mut schema = Schema::builder();
        let words = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(WORDS)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let fields = Self {
            seq: schema.add_u64_field("seq", INDEXED | FAST),
            store: schema.add_u64_field("store", INDEXED),
            path_raw: schema.add_text_field("path_raw", STRING),
            path: schema.add_text_field("path", words.clone()),
            content: schema.add_text_field("content", words),
        };
        (schema.build(), fields)
    }
}

/// The index: a reader for searches, a writer for the backend's indexer, and every segment's
/// vocabulary.
pub struct SearchIndex {
    index: Index,
    reader: IndexReader,
    /// Made on the first write, on the writing thread (its merge threads inherit the thread's
    /// priority: a backend's indexer runs below the requests).
    writer: Mutex<Option<IndexWriter>>,
    fields: Fields,
    vocabularies: Mutex<HashMap<SegmentId, Arc<Vocabulary>>>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex").field("index", &self.index).finish_non_exhaustive()
    }
}

impl SearchIndex {
    /// Opens the index in `dir`, creating it (or replacing one of another layout, or one that
    /// cannot be read: it is derived data) when needed; a new index has no
    /// [`payload`](Self::payload).
    pub fn open(dir: &Path) -> Result<Self, IndexError> {
        let open = |e: tantivy::TantivyError| IndexError::Open { path: dir.to_owned(), source: e };
        std::fs::create_dir_all(dir).map_err(|e| open(e.into()))?;
        let (schema, fields) = Fields::schema();
        let existing = MmapDirectory::open(dir).map_err(|e| open(e.into()))?;
        let current = Index::exists(&existing).map_err(|e| open(e.into()))?
            && match Index::open(existing) {
                Ok(index) => index.schema() == schema && Self::layout_of(&index).as_deref() == Some(LAYOUT),
                Err(e) => {
                    tracing::warn!(index = %dir.display(), error = %e, "the search index cannot be read; building it again");
                    false
                }
            };
        if !current {
            for entry in std::fs::read_dir(dir).map_err(|e| open(e.into()))? {
                let entry = entry.map_err(|e| open(e.into()))?;
                let removed = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(entry.path())
                } else {
                    std::fs::remove_file(entry.path())
                };
                removed.map_err(|e| open(e.into()))?;
            }
            Index::create(MmapDirectory::open(dir).map_err(|e| open(e.into()))?, schema, Default::default())
                .map_err(open)?;
        }
        let index = Index::open(MmapDirectory::open(dir).map_err(|e| open(e.into()))?).map_err(open)?;
        Self::with(index, fields)
    }

    /// An index in memory (tests, tools).
    pub fn in_memory() -> Self {
        let (schema, fields) = Fields::schema();
        Self::with(Index::create_in_ram(schema), fields).expect("an index in memory opens")
    }

    fn with(index: Index, fields: Fields) -> Result<Self, IndexError> {
        index.tokenizers().register(WORDS, Words::default());
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        let this = Self { index, reader, writer: Mutex::new(None), fields, vocabularies: Mutex::default() };
        this.learn_vocabularies();
        Ok(this)
    }

    /// The layout word of the last commit's payload.
    fn layout_of(index: &Index) -> Option<String> {
        let payload = index.load_metas().ok()?.payload?;
        Some(payload.split_once(' ').map_or(payload.as_str(), |(layout, _)| layout).to_owned())
    }

    /// What the backend said of its last commit ([`write`](Self::write)); `None` for an index
    /// never written.
    pub fn payload(&self) -> Result<Option<String>, IndexError> {
        let payload = self.index.load_metas()?.payload;
        Ok(payload.and_then(|p| p.strip_prefix(LAYOUT).and_then(|rest| rest.strip_prefix(' ')).map(str::to_owned)))
    }

    fn writer(&self) -> Result<MutexGuard<'_, Option<IndexWriter>>, IndexError> {
        let mut writer = self.writer.lock().expect("index writer lock poisoned");
        if writer.is_none() {
            *writer = Some(self.index.writer_with_num_threads(1, WRITER_BUDGET)?);
        }
        Ok(writer)
    }

    /// Takes `removed` out of the index and `memories` in (replacing what it held of them), and
    /// commits with `payload`; searches see the commit when this returns.
    pub fn write(&self, removed: &[u64], memories: &[IndexedMemory<'_>], payload: &str) -> Result<(), IndexError> {
        let mut guard = self.writer()?;
        let writer = guard.as_mut().expect("made above");
        for seq in removed.iter().copied().chain(memories.iter().map(|m| m.seq)) {
            writer.delete_term(Term::from_field_u64(self.fields.seq, seq));
        }
        for memory in memories {
            writer.add_document(self.document(memory))?;
        }
        self.commit(writer, payload)
    }

    /// Empties the index, committing `payload`.
    pub fn clear(&self, payload: &str) -> Result<(), IndexError> {
        let mut guard = self.writer()?;
        let writer = guard.as_mut().expect("made above");
        writer.delete_all_documents()?;
        self.commit(writer, payload)
    }

    fn commit(&self, writer: &mut IndexWriter, payload: &str) -> Result<(), IndexError> {
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload(&format!("{LAYOUT} {payload}"));
        prepared.commit()?;
        self.reader.reload()?;
        self.learn_vocabularies();
        Ok(())
    }

    /// Stops the writer's merge threads (after their merges), so the directory can be closed.
    pub fn close(&self) {
        if let Some(writer) = self.writer.lock().expect("index writer lock poisoned").take()
            && let Err(e) = writer.wait_merging_threads()
        {
            tracing::warn!(error = %e, "the search index's merges did not end cleanly");
        }
    }

    fn document(&self, memory: &IndexedMemory<'_>) -> TantivyDocument {
        let f = &self.fields;
        let mut doc = TantivyDocument::new();
        doc.add_u64(f.seq, memory.seq);
        doc.add_u64(f.store, memory.store);
        doc.add_text(f.path_raw, memory.path);
        doc.add_text(f.path, memory.path);
        doc.add_text(f.content, memory.content);
        doc
    }

    /// Builds the vocabulary of every segment the reader sees that has none yet, and forgets
    /// those of segments gone (merged away).
    fn learn_vocabularies(&self) {
        let searcher = self.reader.searcher();
        let mut known = self.vocabularies.lock().expect("vocabulary lock poisoned");
        let live: Vec<SegmentId> = searcher.segment_readers().iter().map(|s| s.segment_id()).collect();
        known.retain(|id, _| live.contains(id));
        for segment in searcher.segment_readers() {
            if known.contains_key(&segment.segment_id()) {
                continue;
            }
            match Vocabulary::of(segment, self.fields.path, self.fields.content) {
                Ok(v) => {
                    known.insert(segment.segment_id(), Arc::new(v));
                }
                Err(e) => tracing::warn!(error = %e, "a search index segment's words could not be read"),
            }
        }
    }

    /// A search for `plan` in `scope`, over the index as it is now (later commits are not
    /// seen by it, so its pages agree); `None` when the index cannot narrow the search (no
    /// term it can look up: each is too broad, like `a`, or has no word character), and the
    /// backend must scan.
    pub fn prepare(&self, plan: &IndexPlan, scope: &Scope<'_>) -> Option<PreparedSearch> {
        let searcher = self.reader.searcher();
        let vocabularies: Vec<Arc<Vocabulary>> = {
            let known = self.vocabularies.lock().expect("vocabulary lock poisoned");
            searcher.segment_readers().iter().filter_map(|s| known.get(&s.segment_id()).cloned()).collect()
        };
        let built = query::build(&self.fields, &searcher, &vocabularies, plan, scope)?;
        Some(PreparedSearch { searcher, strict: built.strict, loose: built.loose })
    }

    /// The best-ranked memories for `plan` in `scope`, from the `offset`th on, at most `limit`
    /// (one page of [`prepare`](Self::prepare)).
    pub fn search(
        &self,
        plan: &IndexPlan,
        scope: &Scope<'_>,
        offset: usize,
        limit: usize,
    ) -> Result<Option<Vec<Hit>>, IndexError> {
        self.prepare(plan, scope).map(|prepared| prepared.hits(offset, limit)).transpose()
    }

    /// How many memories the index holds (deleted ones not counted).
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether it holds the memory `seq` (tests, checks).
    pub fn holds(&self, seq: u64) -> Result<bool, IndexError> {
        let term = tantivy::query::TermQuery::new(Term::from_field_u64(self.fields.seq, seq), IndexRecordOption::Basic);
        Ok(self.reader.searcher().search(&term, &tantivy::collector::Count)? > 0)
    }
}

/// How many candidates a loose ranking (a phrase of common words ranked by its words alone)
/// may offer before a backend gives it up for the exact one ([`PreparedSearch::tighten`]).
pub const LOOSE_CANDIDATES: u64 = 150;

/// A search ready to read pages of ([`SearchIndex::prepare`]).
pub struct PreparedSearch {
    searcher: tantivy::Searcher,
    strict: Box<dyn tantivy::query::Query>,
    /// While `Some`, pages come from this ranking (see [`LOOSE_CANDIDATES`]).
    loose: Option<Box<dyn tantivy::query::Query>>,
}

impl std::fmt::Debug for PreparedSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedSearch")
            .field("strict", &self.strict)
            .field("loose", &self.loose)
            .finish_non_exhaustive()
    }
}

impl PreparedSearch {
    /// The memories ranked `offset` to `offset + limit`, best first.
    pub fn hits(&self, offset: usize, limit: usize) -> Result<Vec<Hit>, IndexError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let query = self.loose.as_ref().unwrap_or(&self.strict);
        let top = self.searcher.search(query, &TopDocs::with_limit(limit).and_offset(offset).order_by_score())?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, address) in top {
            let seqs = self.searcher.segment_reader(address.segment_ord).fast_fields().u64("seq")?;
            if let Some(seq) = seqs.first(address.doc_id) {
                hits.push(Hit { seq, score });
            }
        }
        Ok(hits)
    }

    /// A backend's next batch of hits, ranked `offset` to `offset + limit`, as (memory `seq`,
    /// score) in its own integer and float: `None` when a loose ranking has offered
    /// [`LOOSE_CANDIDATES`] without filling the page and is given up ([`Self::tighten`]), so the
    /// backend starts its page again.
    pub fn batch(&mut self, offset: u64, limit: u64) -> Result<Option<Vec<(i64, f64)>>, IndexError> {
        if offset >= LOOSE_CANDIDATES && self.tighten() {
            return Ok(None);
        }
        let hits =
            self.hits(usize::try_from(offset).unwrap_or(usize::MAX), usize::try_from(limit).unwrap_or(usize::MAX))?;
        Ok(Some(hits.iter().filter_map(|h| Some((i64::try_from(h.seq).ok()?, f64::from(h.score)))).collect()))
    }

    /// Gives up the loose ranking for the exact one; whether there was one to give up (the
    /// backend then starts its page again, from the exact ranking's start). A backend calls it
    /// once its next batch would start at [`LOOSE_CANDIDATES`] or later.
    pub fn tighten(&mut self) -> bool {
        self.loose.take().is_some()
    }
}

/// The index's words of a text ([`index_words`]) as tantivy's tokenizer, run by the writer's
/// indexing thread on the text itself (a pre-tokenized text would cross to that thread as JSON:
/// a sixth of the indexing time, measured).
#[derive(Debug, Clone, Default)]
struct Words {
    tokens: Vec<Token>,
}

impl Tokenizer for Words {
    type TokenStream<'a> = WordStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream<'a> {
        self.tokens.clear();
        self.tokens.extend(index_words(text).into_iter().map(|w| Token {
            offset_from: w.from,
            offset_to: w.to,
            position: w.position as usize,
            text: w.text,
            position_length: 1,
        }));
        WordStream { tokens: &mut self.tokens, next: 0 }
    }
}

/// The words of one text, in order.
struct WordStream<'a> {
    tokens: &'a mut [Token],
    /// The token after the current one.
    next: usize,
}

impl TokenStream for WordStream<'_> {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

#[cfg(test)]
mod tests;
