//! Embeddings for semantic memory search: the OpenAI-compatible `POST {base_url}/embeddings`
//! (Ollama, vLLM, llama.cpp's server, hosted APIs), named by the models file's `[embeddings]`
//! table.
//!
//! An [`Embedder`] turns texts into vectors, each scaled to unit length here (so a dot product
//! is the cosine similarity, whatever the provider returns). Errors are [`ModelError`]s, cleaned
//! of the key like every provider call's.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::ModelError;
use crate::config::ProviderSettings;

/// The `[embeddings]` table: which provider and model embed memories.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsSettings {
    /// A `[providers.NAME]` of kind `"openai"`.
    pub provider: String,
    /// The provider's embedding model name (`nomic-embed-text`, `text-embedding-3-small`…).
    pub model: String,
    /// Texts per request.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Characters of a memory embedded (its path, a line break, then its content, cut here).
    #[serde(default = "default_max_input_chars")]
    pub max_input_chars: usize,
}

fn default_batch_size() -> usize {
    32
}

fn default_max_input_chars() -> usize {
    8_000
}

/// The most texts one request carries.
pub const MAX_BATCH_SIZE: usize = 512;

/// A client of one provider's embeddings endpoint.
#[derive(Debug, Clone)]
pub struct Embedder {
    settings: ProviderSettings,
    model: String,
    batch_size: usize,
    max_input_chars: usize,
    http: reqwest::Client,
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Datum>,
}

#[derive(Deserialize)]
struct Datum {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl Embedder {
    pub fn new(settings: ProviderSettings, embeddings: &EmbeddingsSettings) -> Self {
        let http = crate::http_client(&settings);
        Embedder {
            settings,
            model: embeddings.model.clone(),
            batch_size: embeddings.batch_size,
            max_input_chars: embeddings.max_input_chars,
            http,
        }
    }

    /// The provider's model name: a vector is comparable only with vectors of the same model.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Texts per request ([`Self::embed`] takes at most this many).
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The text embedded for a memory: its path, a line break, its content, cut to
    /// `max_input_chars` characters.
    pub fn memory_text(&self, path: &str, content: &str) -> String {
        let mut text = String::with_capacity(path.len() + 1 + content.len().min(self.max_input_chars * 4));
        text.push_str(path);
        text.push('\n');
        text.extend(content.chars().take(self.max_input_chars.saturating_sub(path.chars().count() + 1)));
        text
    }

    /// One unit vector per text, in order. An empty answer, a missing or repeated index, vectors
    /// of different lengths, or a zero or non-finite vector is a [`ModelError::Stream`] (a
    /// provider fault, retryable).
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let url = format!("{}/embeddings", self.settings.base_url);
        let mut req = self.http.post(url).json(&json!({"model": self.model, "input": texts}));
        let key = self.settings.api_key.as_ref().map(mnemo_api::Secret::expose);
        if let Some(key) = key {
            let mut value =
                reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| ModelError::InvalidKey)?;
            value.set_sensitive(true);
            req = req.header(reqwest::header::AUTHORIZATION, value);
        }
        tracing::debug!(model = %self.model, texts = texts.len(), "embeddings call");
        let deadline = self.settings.idle_timeout;
        let resp = tokio::time::timeout(deadline, req.send())
            .await
            .map_err(|_| ModelError::Timeout)?
            .map_err(|e| crate::transport_error(e).redacted(key))?;
        if !resp.status().is_success() {
            return Err(crate::failed_answer(resp, key, "embeddings", crate::anthropic::status_error).await);
        }
        let body = tokio::time::timeout(deadline, resp.bytes())
            .await
            .map_err(|_| ModelError::Timeout)?
            .map_err(|e| crate::transport_error(e).redacted(key))?;
        vectors(&body, texts.len())
    }
}

/// The vectors of an embeddings answer for `n` texts, in the texts' order, scaled to unit length.
pub fn vectors(body: &[u8], n: usize) -> Result<Vec<Vec<f32>>, ModelError> {
    let bad = |why: String| ModelError::Stream(format!("embeddings answer: {why}"));
    let answer: Answer = serde_json::from_slice(body).map_err(|e| bad(format!("not the expected JSON ({e})")))?;
    if answer.data.len() != n {
        return Err(bad(format!("{} vectors for {n} texts", answer.data.len())));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (at, datum) in answer.data.into_iter().enumerate() {
        let index = datum.index.unwrap_or(at);
        let slot = out.get_mut(index).ok_or_else(|| bad(format!("index {index} for {n} texts")))?;
        if slot.is_some() {
            return Err(bad(format!("index {index} twice")));
        }
        *slot = Some(unit(datum.embedding).ok_or_else(|| bad(format!("vector {index} is empty, zero or not finite")))?);
    }
    let out: Vec<Vec<f32>> =
        out.into_iter().map(|v| v.expect("every index filled: n distinct indexes below n")).collect();
    if out.windows(2).any(|w| w[0].len() != w[1].len()) {
        return Err(bad("vectors of different lengths".into()));
    }
    Ok(out)
}

/// `v` scaled to length 1; `None` for an empty, zero or non-finite vector.
pub fn unit(mut v: Vec<f32>) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if v.is_empty() || !norm.is_finite() || norm == 0.0 {
        return None;
    }
    for x in &mut v {
        *x = (f64::from(*x) / norm) as f32;
    }
    Some(v)
}

/// How long a failing provider is left alone before the next try: doubling from 1 s to 256 s.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.min(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_in_index_order_and_scaled() {
        let body = br#"{"object":"list","data":[
            {"object":"embedding","index":1,"embedding":[0,2]},
            {"object":"embedding","index":0,"embedding":[3,4]}],"model":"m"}"#;
        let v = vectors(body, 2).unwrap();
        assert_eq!(v, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
    }

    #[test]
    fn answers_without_indexes_are_in_order() {
        let v = vectors(br#"{"data":[{"embedding":[1,0]},{"embedding":[0,5]}]}"#, 2).unwrap();
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    }

    #[test]
    fn a_bad_answer_is_a_provider_fault_naming_what_is_wrong() {
        let cases: &[(&[u8], usize, &str)] = &[
            (b"<html>", 1, "not the expected JSON"),
            (br#"{"data":[]}"#, 1, "0 vectors for 1 texts"),
            (br#"{"data":[{"index":3,"embedding":[1]}]}"#, 1, "index 3 for 1 texts"),
            (br#"{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]}"#, 2, "index 0 twice"),
            (br#"{"data":[{"embedding":[0,0]}]}"#, 1, "vector 0 is empty, zero or not finite"),
            (br#"{"data":[{"embedding":[]}]}"#, 1, "vector 0 is empty"),
            (br#"{"data":[{"embedding":[1,0]},{"embedding":[1]}]}"#, 2, "different lengths"),
        ];
        for (body, n, want) in cases {
            let e = vectors(body, *n).unwrap_err();
            assert!(matches!(e, ModelError::Stream(_)), "{e:?}");
            assert!(e.to_string().contains(want), "{:?}: {e}", String::from_utf8_lossy(body));
            assert!(e.is_retryable());
        }
    }

    #[test]
    fn backoff_doubles_to_about_four_minutes() {
        let secs: Vec<u64> = [0, 1, 2, 8, 9, 40].iter().map(|f| backoff(*f).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 256, 256, 256]);
        assert_eq!(backoff(u32::MAX), Duration::from_secs(256));
    }

    #[test]
    fn a_memory_text_is_its_path_then_its_content_cut() {
        let settings =
            EmbeddingsSettings { provider: "p".into(), model: "m".into(), batch_size: 4, max_input_chars: 12 };
        let provider = ProviderSettings {
            kind: crate::ProviderKind::OpenAi,
            base_url: "http://127.0.0.1:9".into(),
            api_key: None,
            connect_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
        };
        let e = Embedder::new(provider, &settings);
        assert_eq!(e.memory_text("/a.md", "héllo world"), "/a.md\nhéllo ");
        assert_eq!(e.memory_text("/a.md", "hi"), "/a.md\nhi");
    }
}
