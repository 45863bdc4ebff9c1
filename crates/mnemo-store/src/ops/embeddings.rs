//! Embeddings of live memories for semantic search ([`crate::rules::semantic`]), written once
//! over [`EmbeddingSql`].
//!
//! A memory's embedding is derived data: one row per memory, naming the version it was made
//! from and the model that made it. Only a row whose version is the memory's current one and
//! whose model is the server's counts; the backends' triggers drop a memory's row in the
//! transaction that changes its path or content, or deletes it (its store's deletion
//! included), so no vector of text a memory no longer holds outlives the write. The server's
//! embedder ([`pending`], [`put`]) computes rows after the write, off its transaction.

use std::collections::HashSet;

use mnemo_api::{Memory, MemoryId, WorkspaceId};

use super::Seq;
use crate::Result;
use crate::rules::search::SearchQuery;
use crate::rules::semantic::{best, similarity};
use crate::search::{Candidate, SearchScope};

/// A live memory the embedder has yet to embed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEmbedding {
    /// The memory's row number.
    pub memory: Seq,
    /// The row number of the version read (the embedding is stored only while it is current).
    pub version: Seq,
    pub path: String,
    pub content: String,
}

/// A live memory in a search's scope, with its embedding by the model if it has a current one.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingRow {
    pub memory: Seq,
    pub id: MemoryId,
    pub path: String,
    /// Little-endian `f32`s ([`crate::rules::semantic::encode`]); `None` when the memory has
    /// no current embedding by the model, or the provider refused its text.
    pub vector: Option<Vec<u8>>,
}

/// The SQL primitives of embeddings.
pub trait EmbeddingSql {
    /// Live memories with no row by `model` for their current version, row number after
    /// `after`, in row-number order; at most `limit`.
    async fn unembedded(&self, model: &str, after: Seq, limit: u32) -> Result<Vec<PendingEmbedding>>;
    /// Writes memory `memory`'s row (`vector` `None`: the provider refused the text), replacing
    /// any, if the memory's current version is still `version`; whether it was written.
    async fn put_embedding(&self, memory: Seq, version: Seq, model: &str, vector: Option<&[u8]>) -> Result<bool>;
    /// The row numbers of the stores `scope` names in workspace `ws`; a named store of another
    /// workspace, or none, is not found.
    async fn scope_stores(&self, ws: &WorkspaceId, scope: &SearchScope) -> Result<Vec<Seq>>;
    /// Every live memory of `stores`, with its current embedding by `model`.
    async fn embedding_rows(&self, stores: &[Seq], model: &str) -> Result<Vec<EmbeddingRow>>;
    /// Live memories by row number, with their content (unknown ones are left out).
    async fn memories_by_seq(&self, seqs: &[Seq]) -> Result<Vec<(Seq, Memory)>>;
}

/// A ranking by meaning: the query's vector and where to look.
#[derive(Debug, Clone)]
pub struct MeaningQuery {
    pub scope: SearchScope,
    pub query: SearchQuery,
    pub path_prefix: Option<String>,
    /// The model the vector is from; rows of other models are not compared.
    pub model: String,
    /// The query's meaning, unit length.
    pub vector: Vec<f32>,
    /// How many results to rank.
    pub depth: usize,
}

/// Memories ranked by meaning.
#[derive(Debug, Clone, Default)]
pub struct MeaningRanking {
    /// The closest memories that pass the query's narrowing terms, best first; `score` is the
    /// cosine similarity.
    pub ranked: Vec<Candidate>,
    /// Memories in scope (under the path prefix and path terms) without a current embedding.
    pub unembedded: HashSet<MemoryId>,
}

/// Ranks the live memories of `q.scope` by the similarity of their embedding to `q.vector`
/// (an exact scan), keeping the best `q.depth` that pass the query's narrowing terms.
pub async fn rank<T: EmbeddingSql>(tx: &T, ws: &WorkspaceId, q: &MeaningQuery) -> Result<MeaningRanking> {
    let stores = tx.scope_stores(ws, &q.scope).await?;
    let rows = if stores.is_empty() { Vec::new() } else { tx.embedding_rows(&stores, &q.model).await? };
    let mut out = MeaningRanking::default();
    let mut scored = Vec::with_capacity(rows.len());
    for row in rows {
        let within = q.path_prefix.as_deref().is_none_or(|p| row.path.starts_with(p));
        if !within || !q.query.narrows_path(&row.path) {
            continue;
        }
        match row.vector.as_deref().and_then(|v| similarity(&q.vector, v)) {
            Some(s) => scored.push((row.memory, s)),
            None => {
                out.unembedded.insert(row.id);
            }
        }
    }
    let has_exclusions = q.query.terms.iter().any(|t| t.excluded);
    // Without exclusions the best `depth` are the answer; with them, read on until `depth`
    // pass or the candidates run out.
    let total = scored.len();
    let wanted = if has_exclusions { total } else { q.depth.min(total) };
    let ranked = best(scored, wanted);
    for chunk in ranked.chunks(q.depth.max(1)) {
        let seqs: Vec<Seq> = chunk.iter().map(|(s, _)| *s).collect();
        let mut memories: std::collections::HashMap<Seq, Memory> =
            tx.memories_by_seq(&seqs).await?.into_iter().collect();
        for (seq, score) in chunk {
            let Some(memory) = memories.remove(seq) else { continue };
            if has_exclusions && !q.query.narrows(&memory.path, memory.content.as_deref().unwrap_or_default()) {
                continue;
            }
            out.ranked.push(Candidate { memory, score: f64::from(*score) });
            if out.ranked.len() == q.depth {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// Memories the embedder has yet to embed ([`EmbeddingSql::unembedded`]).
pub async fn pending<T: EmbeddingSql>(tx: &T, model: &str, after: Seq, limit: u32) -> Result<Vec<PendingEmbedding>> {
    tx.unembedded(model, after, limit).await
}

/// Stores embeddings the embedder made, each only if its memory still holds the version it was
/// made from; how many were stored.
pub async fn put<T: EmbeddingSql>(tx: &T, model: &str, made: &[(Seq, Seq, Option<Vec<u8>>)]) -> Result<usize> {
    let mut stored = 0;
    for (memory, version, vector) in made {
        if tx.put_embedding(*memory, *version, model, vector.as_deref()).await? {
            stored += 1;
        }
    }
    Ok(stored)
}
