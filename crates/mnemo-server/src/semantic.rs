//! Semantic search's server side (`[embeddings]` in the models file): the embedder that keeps
//! every live memory's embedding current, after each write and off its transaction
//! ([`embed_memories`]), and the query's embedding ([`Semantic::embed_query`]).
//!
//! What is stored and when a vector counts is [`mnemo_store::ops::embeddings`]'s; how a search
//! ranks and fuses is [`mnemo_store::rules::semantic`]'s. A memory written a moment ago, or one
//! the provider cannot embed, is found by full text meanwhile.

use std::sync::{Arc, Weak};
use std::time::Duration;

use mnemo_model::embeddings::backoff;
use mnemo_model::{Embedder, ModelError};
use mnemo_store::ops::embeddings::PendingEmbedding;
use mnemo_store::rules::semantic::encode;
use mnemo_store::search::QueryEmbedder;
use mnemo_store::{Signal, Store, StoreError};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

/// The longest a search waits for its query's embedding before answering by full text.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the embedder lets a burst of writes gather before a pass.
const GATHER: Duration = Duration::from_millis(200);
/// A pass at least this often, changes or not (a change signal lost, a refusal retried later).
const RESWEEP: Duration = Duration::from_secs(600);
/// The wait after a failed database read or write.
const STORE_RETRY: Duration = Duration::from_secs(5);

/// The embeddings provider a server searches by meaning with.
#[derive(Debug)]
pub struct Semantic {
    embedder: Embedder,
}

impl Semantic {
    pub fn new(embedder: Embedder) -> Arc<Self> {
        Arc::new(Self { embedder })
    }
}

#[async_trait::async_trait]
impl QueryEmbedder for Semantic {
    fn model(&self) -> &str {
        self.embedder.model()
    }

    /// The query's meaning as a unit vector, within [`QUERY_TIMEOUT`]; the error is the
    /// provider's, cleaned of its key.
    async fn embed_query(&self, meaning: &str) -> Result<Vec<f32>, String> {
        let vectors = tokio::time::timeout(QUERY_TIMEOUT, self.embedder.embed(&[meaning.to_owned()]))
            .await
            .map_err(|_| ModelError::Timeout)
            .and_then(|r| r)
            .map_err(|e| e.to_string())?;
        vectors.into_iter().next().ok_or_else(|| "no vector for the query".to_owned())
    }
}

/// Why a pass stopped.
#[derive(Debug, thiserror::Error)]
enum PassError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Provider(#[from] ModelError),
}

/// Embeds one batch: every text in one request; when the provider refuses the request (a
/// `4xx`: one text it cannot take), each text alone, so one bad memory costs only itself (its
/// refusal is stored and it is not tried again until it changes). A retryable failure stops
/// the pass.
async fn embed_batch(embedder: &Embedder, batch: &[PendingEmbedding]) -> Result<Vec<Option<Vec<u8>>>, ModelError> {
    let texts: Vec<String> = batch.iter().map(|p| embedder.memory_text(&p.path, &p.content)).collect();
    match embedder.embed(&texts).await {
        Ok(vectors) => return Ok(vectors.iter().map(|v| Some(encode(v))).collect()),
        Err(e) if e.is_retryable() => return Err(e),
        Err(_) if texts.len() == 1 => {}
        Err(e) => tracing::debug!(error = %e, texts = texts.len(), "embeddings batch refused: embedding one by one"),
    }
    let mut out = Vec::with_capacity(texts.len());
    for (text, pending) in texts.into_iter().zip(batch) {
        match embedder.embed(std::slice::from_ref(&text)).await {
            Ok(v) => out.push(v.first().map(|v| encode(v))),
            Err(e) if e.is_retryable() => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, memory = pending.memory, "the embeddings provider refused a memory: it is found by full text only");
                metrics::counter!("mnemo_embeddings_refused_total").increment(1);
                out.push(None);
            }
        }
    }
    Ok(out)
}

/// One pass over every memory without a current embedding, in batches; how many were stored.
async fn pass(store: &dyn Store, semantic: &Semantic) -> Result<usize, PassError> {
    let embedder = &semantic.embedder;
    let batch_size = u32::try_from(embedder.batch_size()).unwrap_or(u32::MAX);
    let (mut after, mut stored) = (0, 0);
    loop {
        let batch = store.pending_embeddings(embedder.model(), after, batch_size).await?;
        let Some(last) = batch.last() else { return Ok(stored) };
        after = last.memory;
        let vectors = embed_batch(embedder, &batch).await?;
        let made = batch.iter().zip(vectors).map(|(p, v)| (p.memory, p.version, v)).collect();
        let n = store.put_embeddings(embedder.model(), made).await?;
        metrics::counter!("mnemo_embeddings_computed_total").increment(n as u64);
        stored += n;
    }
}

/// Keeps every live memory's embedding current until the store is dropped: a pass at start,
/// after each burst of memory writes (any replica's), and every ten minutes. While the
/// provider fails, passes are retried after 1 s, 2 s, 4 s … up to about four minutes.
pub async fn embed_memories(store: Weak<dyn Store>, semantic: Arc<Semantic>) {
    let Some(mut signals) = store.upgrade().map(|s| s.memory_signals()) else { return };
    let mut failures = 0u32;
    loop {
        let Some(live) = store.upgrade() else { return };
        let done = pass(&*live, &semantic).await;
        drop(live);
        match done {
            Ok(n) => {
                failures = 0;
                if n > 0 {
                    tracing::debug!(memories = n, "embedded memories");
                }
            }
            Err(PassError::Provider(e)) => {
                let wait = backoff(failures);
                failures = failures.saturating_add(1);
                metrics::counter!("mnemo_embeddings_failures_total").increment(1);
                tracing::warn!(error = %e, retry_in = ?wait, "the embeddings provider failed: new memories are found by full text until it answers");
                tokio::time::sleep(wait).await;
                continue;
            }
            Err(PassError::Store(e)) => {
                tracing::warn!(error = %e, "could not keep memory embeddings current");
                tokio::time::sleep(STORE_RETRY).await;
                continue;
            }
        }
        let woke = tokio::time::timeout(RESWEEP, async {
            loop {
                match signals.recv().await {
                    Ok(Signal::Memory { .. } | Signal::Resync) | Err(RecvError::Lagged(_)) => return true,
                    Ok(_) => {}
                    Err(RecvError::Closed) => return false,
                }
            }
        })
        .await;
        if woke == Ok(false) {
            return;
        }
        tokio::time::sleep(GATHER).await;
        while !matches!(signals.try_recv(), Err(TryRecvError::Empty | TryRecvError::Closed)) {}
    }
}
