//! `FakeEmbeddings`: an HTTP fake of the OpenAI-compatible embeddings endpoint, for tests (the
//! `testing` feature).
//!
//! It answers `POST /v1/embeddings` on 127.0.0.1:0 with deterministic vectors that carry some
//! meaning: each word (letters and digits, lower-cased) adds 1 to one of [`DIMENSIONS`]
//! coordinates — the words of one [`CONCEPTS`] group share a coordinate (`postgres` and
//! `database` point the same way), any other word lands on a coordinate picked by its hash. A
//! text containing `unembeddable` is refused with `400` (a provider that cannot embed one
//! input); [`FakeEmbeddings::set_down`] makes every request fail with `503`.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::config::{ProviderKind, ProviderSettings};

/// The length of every vector.
pub const DIMENSIONS: usize = 64;

/// Words that mean one thing, each group one coordinate (its index).
pub const CONCEPTS: &[&[&str]] = &[
    &["database", "databases", "db", "postgres", "postgresql", "sqlite", "mysql", "sql"],
    &["editor", "vim", "neovim", "emacs", "vscode", "ide"],
    &["lunch", "dinner", "food", "pizza", "restaurant", "meal"],
    &["deploy", "deployment", "release", "rollout", "ship"],
    &["cat", "cats", "kitten", "pet", "dog", "dogs"],
];

#[derive(Default)]
struct Inner {
    down: AtomicBool,
    requests: AtomicUsize,
    texts: AtomicUsize,
}

/// The fake; it stops when dropped.
pub struct FakeEmbeddings {
    url: String,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for FakeEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeEmbeddings").field("url", &self.url).finish_non_exhaustive()
    }
}

impl Drop for FakeEmbeddings {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The fake's vector for `text` (not yet of unit length).
pub fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIMENSIONS];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let word = word.to_lowercase();
        let at = CONCEPTS.iter().position(|group| group.contains(&word.as_str())).unwrap_or_else(|| {
            let mut h = DefaultHasher::new();
            word.hash(&mut h);
            CONCEPTS.len() + (h.finish() as usize) % (DIMENSIONS - CONCEPTS.len())
        });
        v[at] += 1.0;
    }
    if v.iter().all(|x| *x == 0.0) {
        v[DIMENSIONS - 1] = 1.0;
    }
    v
}

async fn embed(State(inner): State<Arc<Inner>>, body: axum::Json<Value>) -> Response {
    inner.requests.fetch_add(1, Ordering::SeqCst);
    if inner.down.load(Ordering::SeqCst) {
        let error = json!({"error": {"type": "overloaded", "message": "the fake is down"}});
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(error)).into_response();
    }
    let texts: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().map(|i| i.as_str().unwrap_or_default().to_owned()).collect(),
        _ => return (StatusCode::BAD_REQUEST, "input: a string or a list of strings").into_response(),
    };
    if body["model"].as_str().is_none_or(str::is_empty) {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": {"message": "model is required"}})))
            .into_response();
    }
    if texts.iter().any(|t| t.contains("unembeddable")) {
        let error = json!({"error": {"type": "invalid_request_error", "message": "this input cannot be embedded"}});
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    }
    inner.texts.fetch_add(texts.len(), Ordering::SeqCst);
    // Out of order on purpose: clients must read `index`.
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector(t)}))
        .collect();
    axum::Json(json!({"object": "list", "data": data, "model": body["model"]})).into_response()
}

impl FakeEmbeddings {
    /// Starts the fake on 127.0.0.1:0.
    pub async fn start() -> Self {
        let inner = Arc::new(Inner::default());
        let app =
            axum::Router::new().route("/v1/embeddings", axum::routing::post(embed)).with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let url = format!("http://{}/v1", listener.local_addr().expect("a bound listener has an address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeEmbeddings { url, inner, task }
    }

    /// The `base_url` of a provider calling this fake (`http://127.0.0.1:PORT/v1`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// While down, every request is answered `503`.
    pub fn set_down(&self, down: bool) {
        self.inner.down.store(down, Ordering::SeqCst);
    }

    /// Requests answered or refused so far.
    pub fn requests(&self) -> usize {
        self.inner.requests.load(Ordering::SeqCst)
    }

    /// Texts embedded so far.
    pub fn texts(&self) -> usize {
        self.inner.texts.load(Ordering::SeqCst)
    }

    /// Settings of an `openai` provider calling this fake, without a key.
    pub fn settings(&self) -> ProviderSettings {
        ProviderSettings {
            kind: ProviderKind::OpenAi,
            base_url: self.url.clone(),
            api_key: None,
            connect_timeout: std::time::Duration::from_secs(5),
            idle_timeout: std::time::Duration::from_secs(30),
        }
    }

    /// A models file naming this fake as the embeddings provider (`model = "fake-embed"`).
    pub fn config_toml(&self) -> String {
        format!(
            "[providers.embed]\nkind = \"openai\"\nbase_url = \"{}\"\n\n[embeddings]\nprovider = \"embed\"\nmodel = \"fake-embed\"\nbatch_size = 8\n",
            self.url
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embeddings::{Embedder, EmbeddingsSettings, unit};

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[tokio::test]
    async fn the_embedder_reads_the_fake_and_synonyms_point_the_same_way() {
        let fake = FakeEmbeddings::start().await;
        let settings = EmbeddingsSettings {
            provider: "embed".into(),
            model: "fake-embed".into(),
            batch_size: 8,
            max_input_chars: 8000,
        };
        let e = Embedder::new(fake.settings(), &settings);
        let texts = ["the database".to_owned(), "postgres the".to_owned(), "pizza".to_owned()];
        let v = e.embed(&texts).await.unwrap();
        assert_eq!(v.len(), 3);
        assert!((cosine(&v[0], &v[1]) - 1.0).abs() < 1e-6, "synonyms and the same other word");
        assert!(cosine(&v[0], &v[2]).abs() < 1e-6);
        assert_eq!(v[0], unit(vector("the database")).unwrap());
        assert_eq!(fake.texts(), 3);

        let refused = e.embed(&["an unembeddable text".to_owned()]).await.unwrap_err();
        assert!(!refused.is_retryable(), "{refused}");
        fake.set_down(true);
        let down = e.embed(&texts).await.unwrap_err();
        assert!(down.is_retryable(), "{down}");
        drop(fake);
        let gone = e.embed(&texts).await.unwrap_err();
        assert!(gone.is_retryable(), "{gone}");
    }
}
