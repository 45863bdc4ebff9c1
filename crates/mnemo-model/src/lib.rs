//! Model providers for mnemo's server-side agent loop.
//!
//! One [`Provider`] trait, two implementations over HTTP: the Anthropic Messages API
//! ([`anthropic::AnthropicProvider`], `kind = "anthropic"`) and the OpenAI-compatible chat
//! completions API ([`openai::OpenAiProvider`], `kind = "openai"`, which covers vLLM, Ollama and
//! llama.cpp). Both stream: a call yields each *completed* content block as soon as it is complete,
//! then [`ReplyEvent::Finished`] with the stop reason and the usage. Dropping the stream cancels the
//! call (the HTTP connection is closed).
//!
//! [`config::ModelConfig`] parses the providers file (`mnemo serve --models FILE`) and maps an
//! agent's `model` id to a provider and a provider model name.
//!
//! With the `testing` feature, `testing::FakeModelServer` is an HTTP fake speaking both formats
//! from a script of replies, for other crates' tests.

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod anthropic;
pub mod config;
pub mod embeddings;
#[cfg(any(test, feature = "testing"))]
pub mod fake_embeddings;
pub mod openai;
pub mod redact;
mod retry_after;
mod sse;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use config::{ConfigError, Dreams, Limits, ModelConfig, ProviderKind, Resolved};
pub use embeddings::{Embedder, EmbeddingsSettings};

/// Who said a turn of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// One content block of a conversation turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text { text: String },
    ToolUse { id: String, name: String, input: serde_json::Value },
    ToolResult { tool_use_id: String, content: Vec<ResultPart>, is_error: bool },
}

/// One part of a tool result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResultPart {
    Text(String),
    /// An image, `data` in base64.
    Image {
        media_type: String,
        data: String,
    },
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
}

/// A tool the model may call; `input_schema` is a JSON schema of its input object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The provider's model name (after mapping).
    pub model: String,
    /// The agent's system prompt and the memory prompt, already joined. Empty: no system prompt.
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDefinition>,
    pub max_tokens: u32,
}

/// Tokens of one model call. `input_tokens` counts the input tokens neither read from nor written
/// to the prompt cache (as the Anthropic API reports them; the OpenAI provider subtracts
/// `cached_tokens` from `prompt_tokens` to match).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cache_read_input_tokens += o.cache_read_input_tokens;
        self.cache_creation_input_tokens += o.cache_creation_input_tokens;
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    Refusal,
    /// Any other reason, as the provider named it (e.g. `pause_turn`).
    Other(String),
}

/// What a model call streams, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyEvent {
    /// A *completed* `Text` or `ToolUse` block, as soon as it is complete.
    Block(Block),
    /// The last event of a successful call.
    Finished { stop_reason: StopReason, usage: Usage },
}

/// A failed model call. Texts that came from the provider (`message`, `Transport`, `Stream`)
/// went through [`redact::clean`] with the provider's key before the error left its provider:
/// no run of the key, no control character, at most [`redact::MAX_TEXT_BYTES`]. They are for
/// the operator's logs; what a session's log may show is [`ModelError::summary`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// HTTP 429 (or a `rate_limit_error` in the stream); retryable after `retry_after` if given.
    #[error("the model provider is rate limiting (retry after {retry_after:?})")]
    RateLimited { retry_after: Option<Duration> },
    /// HTTP 529 or an `overloaded_error`; retryable.
    #[error("the model provider is overloaded")]
    Overloaded,
    /// HTTP 5xx (or an `api_error` in the stream); retryable.
    #[error("the model provider failed (HTTP {status})")]
    Server { status: u16 },
    /// Any other 4xx: the request is wrong (bad key, unknown model, too long...); not retryable.
    /// `error_type` is the provider's (`authentication_error`…) when it named a plain one.
    #[error("the model provider refused the request (HTTP {status}{}): {message}", type_suffix(.error_type))]
    Refused { status: u16, error_type: Option<String>, message: String },
    /// A 3xx answer: redirects are not followed (they would carry the key to another address);
    /// not retryable.
    #[error(
        "the model provider answered with a redirect (HTTP {status}), which is not followed: set the provider's base_url to the address that serves the API"
    )]
    Redirected { status: u16 },
    /// The configured key cannot travel in a header (the call was not made); not retryable.
    #[error("the model provider's API key is not a valid header value: check the key in the models file")]
    InvalidKey,
    /// The connection failed (refused, reset, TLS...); retryable.
    #[error("could not reach the model provider: {0}")]
    Transport(String),
    /// A malformed stream, or one cut before its end; retryable.
    #[error("bad stream from the model provider: {0}")]
    Stream(String),
    /// No byte for the idle timeout (or no connection within the connect timeout); retryable.
    #[error("the model provider timed out")]
    Timeout,
}

fn type_suffix(error_type: &Option<String>) -> String {
    error_type.as_deref().map(|t| format!(", {t}")).unwrap_or_default()
}

impl ModelError {
    /// Whether calling again may succeed (everything but [`ModelError::Refused`],
    /// [`ModelError::Redirected`] and [`ModelError::InvalidKey`]).
    pub fn is_retryable(&self) -> bool {
        !matches!(self, ModelError::Refused { .. } | ModelError::Redirected { .. } | ModelError::InvalidKey)
    }

    /// How long the provider asked to wait before the next call, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status of the provider's answer, when it gave one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::RateLimited { .. } => Some(429),
            ModelError::Server { status } | ModelError::Refused { status, .. } | ModelError::Redirected { status } => {
                Some(*status)
            }
            _ => None,
        }
    }

    /// What failed, without a word of the provider's prose: the HTTP status and the error type
    /// (the provider's, when it named a plain one). This is what a `session.error` carries — its
    /// readers include the sandbox, which must never see what a provider may echo.
    pub fn summary(&self) -> String {
        match self {
            ModelError::RateLimited { .. } => "rate limited (HTTP 429)".to_owned(),
            ModelError::Overloaded => "overloaded".to_owned(),
            ModelError::Server { status } => format!("provider error (HTTP {status})"),
            ModelError::Refused { status, error_type, .. } => {
                format!("request refused (HTTP {status}{})", type_suffix(error_type))
            }
            ModelError::Redirected { status } => format!("redirect not followed (HTTP {status})"),
            ModelError::InvalidKey => "the configured API key is not a valid header value".to_owned(),
            ModelError::Transport(_) => "connection failed".to_owned(),
            ModelError::Stream(_) => "broken stream".to_owned(),
            ModelError::Timeout => "timed out".to_owned(),
        }
    }

    /// This error with every provider text passed through [`redact::clean`] (the key cut out,
    /// flattened, capped) and a provider error type kept only if plain ([`redact::error_type`]).
    pub fn redacted(self, key: Option<&str>) -> Self {
        match self {
            ModelError::Refused { status, error_type, message } => ModelError::Refused {
                status,
                error_type: error_type.and_then(|t| redact::error_type(&t, key)),
                message: redact::clean(&message, key),
            },
            ModelError::Transport(m) => ModelError::Transport(redact::clean(&m, key)),
            ModelError::Stream(m) => ModelError::Stream(redact::clean(&m, key)),
            other => other,
        }
    }
}

/// The stream of one model call.
pub type ReplyStream = futures::stream::BoxStream<'static, Result<ReplyEvent, ModelError>>;

/// A model provider.
#[async_trait::async_trait]
pub trait Provider: Send + Sync + 'static {
    /// Starts one model call. Dropping the stream cancels the call (that is how user.interrupt works).
    async fn stream(&self, request: ModelRequest) -> Result<ReplyStream, ModelError>;
}

/// The HTTP client of a provider: the settings' timeouts, and **no redirect followed** — a 3xx
/// comes back as an answer ([`ModelError::Redirected`]), so the key is never sent anywhere but
/// the configured `base_url`.
pub(crate) fn http_client(settings: &config::ProviderSettings) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .read_timeout(settings.idle_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client with rustls, timeouts and no redirects builds (only a TLS backend that cannot start fails)")
}

/// Makes a provider's call and waits (at most the idle timeout) for its answer's head. The key
/// goes in `key_header` after `key_prefix`, marked sensitive; a failed answer becomes
/// [`failed_answer`]'s error (`map` reads its status and body); no error carries the key.
pub(crate) async fn call(
    settings: &config::ProviderSettings,
    provider: &'static str,
    request: &ModelRequest,
    mut req: reqwest::RequestBuilder,
    (key_header, key_prefix): (reqwest::header::HeaderName, &str),
    map: fn(u16, Option<Duration>, &str) -> ModelError,
) -> Result<reqwest::Response, ModelError> {
    let key = settings.api_key.as_ref().map(mnemo_api::Secret::expose);
    if let Some(key) = key {
        let mut value = reqwest::header::HeaderValue::from_str(&format!("{key_prefix}{key}"))
            .map_err(|_| ModelError::InvalidKey)?;
        value.set_sensitive(true);
        req = req.header(key_header, value);
    }
    tracing::debug!(model = %request.model, messages = request.messages.len(), tools = request.tools.len(), "{provider} call");
    let resp = tokio::time::timeout(settings.idle_timeout, req.send())
        .await
        .map_err(|_| ModelError::Timeout)?
        .map_err(|e| transport_error(e).redacted(key))?;
    if !resp.status().is_success() {
        return Err(failed_answer(resp, key, provider, map).await);
    }
    Ok(resp)
}

/// What a provider does with a non-success answer: a redirect is refused (its body is not
/// read), any other status is mapped by `map` from the first 64 KiB of the body. The error is
/// logged once here, cleaned of the key.
pub(crate) async fn failed_answer(
    resp: reqwest::Response,
    key: Option<&str>,
    provider: &'static str,
    map: fn(u16, Option<Duration>, &str) -> ModelError,
) -> ModelError {
    let status = resp.status().as_u16();
    let e = if resp.status().is_redirection() {
        ModelError::Redirected { status }
    } else {
        let retry_after = retry_after::parse(resp.headers());
        let text = read_error_body(resp).await;
        map(status, retry_after, &text).redacted(key)
    };
    tracing::warn!(status, provider, error = %e, "a model call failed");
    e
}

/// At most 64 KiB of an error body.
async fn read_error_body(mut resp: reqwest::Response) -> String {
    let mut buf = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        buf.extend_from_slice(&chunk);
        if buf.len() > 64 * 1024 {
            break;
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// A reply stream whose errors are cleaned of `key` ([`ModelError::redacted`]).
pub(crate) fn redacted_stream(stream: ReplyStream, key: Option<String>) -> ReplyStream {
    use futures::StreamExt;
    stream.map(move |item| item.map_err(|e| e.redacted(key.as_deref()))).boxed()
}

/// Maps a `reqwest` failure; never includes the URL's query or headers (keys live in headers).
pub(crate) fn transport_error(e: reqwest::Error) -> ModelError {
    if e.is_timeout() {
        return ModelError::Timeout;
    }
    let connect = e.is_connect();
    let e = e.without_url();
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    if connect { ModelError::Transport(message) } else { ModelError::Stream(message) }
}

/// The API's message and error type in an error body (`{"error":{"type":..,"message":..}}`,
/// or `message` / `error` at the top), else the body itself. Not yet cleaned: the caller's
/// [`ModelError::redacted`] does that.
pub(crate) fn error_message(body: &str) -> (Option<String>, String) {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let kind = v
            .pointer("/error/type")
            .or_else(|| v.pointer("/error/code").filter(|c| c.is_string()))
            .and_then(|t| t.as_str())
            .map(str::to_owned);
        let m = v
            .pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error").filter(|e| e.is_string()));
        if let Some(m) = m.and_then(|m| m.as_str()) {
            return (kind, m.to_string());
        }
        if kind.is_some() {
            return (kind, "(no message)".into());
        }
    }
    let s = if body.trim().is_empty() { "(no message)".to_owned() } else { body.to_owned() };
    (None, s)
}
