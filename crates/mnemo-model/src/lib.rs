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
pub mod openai;
mod retry_after;
mod sse;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use config::{ConfigError, Limits, ModelConfig, ProviderKind, Resolved};

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

/// A failed model call. Messages never hold an API key.
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
    #[error("the model provider refused the request (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
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

impl ModelError {
    /// Whether calling again may succeed (everything but [`ModelError::Refused`]).
    pub fn is_retryable(&self) -> bool {
        !matches!(self, ModelError::Refused { .. })
    }

    /// How long the provider asked to wait before the next call, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after } => *retry_after,
            _ => None,
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

/// A short excerpt of an error body (the API's message, when it is JSON with one).
pub(crate) fn error_message(body: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let m = v
            .pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error").filter(|e| e.is_string()));
        if let Some(m) = m.and_then(|m| m.as_str()) {
            return m.to_string();
        }
    }
    let mut s: String = body.chars().take(500).collect();
    if s.trim().is_empty() {
        s = "(no message)".into();
    }
    s
}
