//! The Anthropic Messages API (`POST {base_url}/v1/messages`, streaming).
//!
//! Prompt caching: the request carries up to three `cache_control` breakpoints — the last tool
//! definition, the system prompt, and the last content block of the last message — so the
//! tools and system prompt are cached once, and the growing conversation is cached
//! incrementally (each call reads the previous call's prefix and writes its own).

use std::collections::BTreeMap;

use futures::StreamExt;
use mnemo_api::Secret;
use serde_json::{Value, json};

use crate::config::ProviderSettings;
use crate::sse::{self, SseMessage};
use crate::{
    Block, Message, ModelError, ModelRequest, Provider, ReplyEvent, ReplyStream, ResultPart, Role, StopReason, Usage,
};

/// The `anthropic-version` header.
pub const API_VERSION: &str = "2023-06-01";

/// A provider for the Anthropic Messages API (or any compatible endpoint).
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    settings: ProviderSettings,
    http: reqwest::Client,
}

impl AnthropicProvider {
    pub fn new(settings: ProviderSettings) -> Self {
        let http = crate::http_client(&settings);
        AnthropicProvider { settings, http }
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The JSON body of a request (public for tests and fakes).
pub fn request_body(request: &ModelRequest) -> Value {
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    body.insert("stream".into(), json!(true));
    if !request.system.is_empty() {
        body.insert("system".into(), json!([{"type": "text", "text": request.system, "cache_control": ephemeral()}]));
    }
    let mut messages: Vec<Value> = request.messages.iter().map(message_json).collect();
    if let Some(last) = messages.last_mut().and_then(|m| m["content"].as_array_mut()).and_then(|c| c.last_mut()) {
        last["cache_control"] = ephemeral();
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        if let Some(last) = tools.last_mut() {
            last["cache_control"] = ephemeral();
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

fn message_json(m: &Message) -> Value {
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    // The API refuses empty text blocks.
    let content: Vec<Value> =
        m.content.iter().filter(|b| !matches!(b, Block::Text { text } if text.is_empty())).map(block_json).collect();
    json!({"role": role, "content": content})
}

fn block_json(b: &Block) -> Value {
    match b {
        Block::Text { text } => json!({"type": "text", "text": text}),
        Block::ToolUse { id, name, input } => json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        Block::ToolResult { tool_use_id, content, is_error } => {
            let parts: Vec<Value> = content
                .iter()
                .map(|p| match p {
                    ResultPart::Text(t) => json!({"type": "text", "text": t}),
                    ResultPart::Image { media_type, data } => {
                        json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
                    }
                })
                .collect();
            json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": parts, "is_error": is_error})
        }
    }
}

/// Maps a non-success response (status, `retry-after`, body) to an error.
pub(crate) fn status_error(status: u16, retry_after: Option<std::time::Duration>, body: &str) -> ModelError {
    match status {
        429 => ModelError::RateLimited { retry_after },
        529 => ModelError::Overloaded,
        500..=599 => ModelError::Server { status },
        _ => {
            let (error_type, message) = crate::error_message(body);
            ModelError::Refused { status, error_type, message }
        }
    }
}

/// Maps an `error` event of the stream (`{"type":"error","error":{"type":..,"message":..}}`).
fn stream_error(data: &Value) -> ModelError {
    let kind = data.pointer("/error/type").and_then(Value::as_str).unwrap_or("");
    let message = data.pointer("/error/message").and_then(Value::as_str).unwrap_or("(no message)").to_string();
    let refused = |status| ModelError::Refused { status, error_type: Some(kind.to_owned()), message: message.clone() };
    match kind {
        "overloaded_error" => ModelError::Overloaded,
        "rate_limit_error" => ModelError::RateLimited { retry_after: None },
        "api_error" => ModelError::Server { status: 500 },
        "invalid_request_error" => refused(400),
        "authentication_error" => refused(401),
        "permission_error" => refused(403),
        "not_found_error" => refused(404),
        "request_too_large" => refused(413),
        _ => ModelError::Stream(format!("error event {kind:?}: {message}")),
    }
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::Refusal,
        other => StopReason::Other(other.to_string()),
    }
}

/// A content block being streamed.
enum Open {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
    },
    /// A block kind this crate does not return (thinking, server tools...): its deltas are dropped.
    Other,
}

/// The state of one streamed reply: feed it the SSE messages, it yields events.
#[derive(Default)]
pub(crate) struct Assembler {
    /// The provider's key: an unknown event's name is logged only if it holds no run of it.
    key: Option<String>,
    open: BTreeMap<u64, Open>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    started: bool,
    pub(crate) finished: bool,
}

fn u(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

impl Assembler {
    /// One SSE message → zero or one event, or the error that ends the stream.
    pub(crate) fn on_message(&mut self, m: &SseMessage) -> Result<Option<ReplyEvent>, ModelError> {
        let data: Value =
            serde_json::from_str(&m.data).map_err(|e| ModelError::Stream(format!("an event is not JSON ({e})")))?;
        let kind = data.get("type").and_then(Value::as_str).or(m.event.as_deref()).unwrap_or("");
        let bad = |what: &str| ModelError::Stream(format!("{kind}: {what}"));
        match kind {
            "ping" => Ok(None),
            "error" => Err(stream_error(&data)),
            "message_start" => {
                self.started = true;
                if let Some(usage) = data.pointer("/message/usage") {
                    self.apply_usage(usage);
                }
                Ok(None)
            }
            "content_block_start" => {
                let index = u(&data, "index").ok_or_else(|| bad("no index"))?;
                let block = data.get("content_block").ok_or_else(|| bad("no content_block"))?;
                let open = match block.get("type").and_then(Value::as_str) {
                    Some("text") => Open::Text(block.get("text").and_then(Value::as_str).unwrap_or("").to_string()),
                    Some("tool_use") => Open::ToolUse {
                        id: block
                            .get("id")
                            .and_then(Value::as_str)
                            .ok_or_else(|| bad("tool_use without id"))?
                            .to_string(),
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .ok_or_else(|| bad("tool_use without name"))?
                            .to_string(),
                        start_input: block.get("input").cloned().unwrap_or_else(|| json!({})),
                        json: String::new(),
                    },
                    _ => Open::Other,
                };
                self.open.insert(index, open);
                Ok(None)
            }
            "content_block_delta" => {
                let index = u(&data, "index").ok_or_else(|| bad("no index"))?;
                let delta = data.get("delta").ok_or_else(|| bad("no delta"))?;
                let open = self.open.get_mut(&index).ok_or_else(|| bad("a delta for a block never started"))?;
                match (open, delta.get("type").and_then(Value::as_str)) {
                    (Open::Text(text), Some("text_delta")) => {
                        text.push_str(delta.get("text").and_then(Value::as_str).unwrap_or(""));
                    }
                    (Open::ToolUse { json, .. }, Some("input_json_delta")) => {
                        json.push_str(delta.get("partial_json").and_then(Value::as_str).unwrap_or(""));
                    }
                    // Citations, signatures, thinking: not carried by this crate's blocks.
                    _ => {}
                }
                Ok(None)
            }
            "content_block_stop" => {
                let index = u(&data, "index").ok_or_else(|| bad("no index"))?;
                match self.open.remove(&index).ok_or_else(|| bad("a stop for a block never started"))? {
                    Open::Text(text) => Ok(Some(ReplyEvent::Block(Block::Text { text }))),
                    Open::ToolUse { id, name, start_input, json } => {
                        let input = if json.trim().is_empty() {
                            start_input
                        } else {
                            serde_json::from_str(&json).map_err(|e| {
                                ModelError::Stream(format!("tool_use {name:?}: input is not JSON ({e})"))
                            })?
                        };
                        Ok(Some(ReplyEvent::Block(Block::ToolUse { id, name, input })))
                    }
                    Open::Other => Ok(None),
                }
            }
            "message_delta" => {
                if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(stop_reason(r));
                }
                if let Some(usage) = data.get("usage") {
                    self.apply_usage(usage);
                }
                Ok(None)
            }
            "message_stop" => {
                if !self.started {
                    return Err(bad("before message_start"));
                }
                self.finished = true;
                let stop_reason = self.stop_reason.take().unwrap_or(StopReason::EndTurn);
                Ok(Some(ReplyEvent::Finished { stop_reason, usage: self.usage }))
            }
            other => {
                // The name is the provider's text: logged only when it is a plain identifier.
                let event =
                    crate::redact::error_type(other, self.key.as_deref()).unwrap_or_else(|| "(not shown)".into());
                tracing::debug!(%event, "unknown model stream event skipped");
                Ok(None)
            }
        }
    }

    /// The usage objects are cumulative: a field present replaces the earlier value.
    fn apply_usage(&mut self, v: &Value) {
        if let Some(n) = u(v, "input_tokens") {
            self.usage.input_tokens = n;
        }
        if let Some(n) = u(v, "output_tokens") {
            self.usage.output_tokens = n;
        }
        if let Some(n) = u(v, "cache_read_input_tokens") {
            self.usage.cache_read_input_tokens = n;
        }
        if let Some(n) = u(v, "cache_creation_input_tokens") {
            self.usage.cache_creation_input_tokens = n;
        }
    }
}

/// Turns SSE messages into reply events; the end of the body before `message_stop` is a
/// [`ModelError::Stream`].
pub(crate) fn events(
    messages: futures::stream::BoxStream<'static, Result<SseMessage, ModelError>>,
    key: Option<String>,
) -> ReplyStream {
    let asm = Assembler { key, ..Assembler::default() };
    futures::stream::unfold((messages, asm, false), |(mut messages, mut asm, mut done)| async move {
        if done {
            return None;
        }
        loop {
            match messages.next().await {
                None => {
                    done = true;
                    let e = ModelError::Stream("the stream ended before message_stop".into());
                    return Some((Err(e), (messages, asm, done)));
                }
                Some(Err(e)) => return Some((Err(e), (messages, asm, true))),
                Some(Ok(m)) => match asm.on_message(&m) {
                    Err(e) => return Some((Err(e), (messages, asm, true))),
                    Ok(None) => continue,
                    Ok(Some(ev)) => {
                        done = asm.finished;
                        return Some((Ok(ev), (messages, asm, done)));
                    }
                },
            }
        }
    })
    .boxed()
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    async fn stream(&self, request: ModelRequest) -> Result<ReplyStream, ModelError> {
        let req = self
            .http
            .post(format!("{}/v1/messages", self.settings.base_url))
            .header("anthropic-version", API_VERSION)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&request_body(&request));
        let key_header = (reqwest::header::HeaderName::from_static("x-api-key"), "");
        let resp = crate::call(&self.settings, "anthropic", &request, req, key_header, status_error).await?;
        let events = events(
            sse::messages(resp, self.settings.idle_timeout),
            self.settings.api_key.clone().map(Secret::into_exposed),
        );
        Ok(crate::redacted_stream(events, self.settings.api_key.clone().map(Secret::into_exposed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolDefinition;
    use std::collections::VecDeque;

    fn run(wire: &str) -> Vec<Result<ReplyEvent, ModelError>> {
        let mut p = crate::sse::SseParser::default();
        let mut out = VecDeque::new();
        p.feed(wire.as_bytes(), &mut out);
        let mut asm = Assembler::default();
        let mut events = Vec::new();
        for m in out {
            match asm.on_message(&m) {
                Ok(Some(e)) => events.push(Ok(e)),
                Ok(None) => {}
                Err(e) => {
                    events.push(Err(e));
                    break;
                }
            }
        }
        events
    }

    #[allow(clippy::needless_pass_by_value)]
    fn ev(name: &str, data: Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    #[test]
    fn text_and_tool_use_with_json_deltas_and_usage() {
        let wire = [
            ev("message_start", json!({"type":"message_start","message":{"id":"m","usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":100,"cache_creation_input_tokens":5}}})),
            ev("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})),
            ev("ping", json!({"type":"ping"})),
            ev("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}})),
            ev("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}})),
            ev("content_block_stop", json!({"type":"content_block_stop","index":0})),
            ev("content_block_start", json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}})),
            ev("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}})),
            ev("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}})),
            ev("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"and\": \"ls\"}"}})),
            ev("content_block_stop", json!({"type":"content_block_stop","index":1})),
            ev("content_block_start", json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"noargs","input":{}}})),
            ev("content_block_stop", json!({"type":"content_block_stop","index":2})),
            ev("message_delta", json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}})),
            ev("message_stop", json!({"type":"message_stop"})),
        ]
        .concat();
        let events: Vec<_> = run(&wire).into_iter().map(Result::unwrap).collect();
        assert_eq!(
            events,
            vec![
                ReplyEvent::Block(Block::Text { text: "Hello".into() }),
                ReplyEvent::Block(Block::ToolUse {
                    id: "toolu_1".into(),
                    name: "bash".into(),
                    input: json!({"command":"ls"})
                }),
                ReplyEvent::Block(Block::ToolUse { id: "toolu_2".into(), name: "noargs".into(), input: json!({}) }),
                ReplyEvent::Finished {
                    stop_reason: StopReason::ToolUse,
                    usage: Usage {
                        input_tokens: 10,
                        output_tokens: 42,
                        cache_read_input_tokens: 100,
                        cache_creation_input_tokens: 5
                    },
                },
            ]
        );
    }

    /// A whole stream, fed through the SSE parser and the assembler in arbitrary chunks (split
    /// inside frames, inside UTF-8 characters, inside the tool input's JSON), gives the same events.
    #[test]
    fn any_chunking_of_a_stream_gives_the_same_events() {
        use proptest::prelude::*;
        let wire = [
            ev("message_start", json!({"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}})),
            ev("content_block_start", json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})),
            ev("content_block_delta", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"h\u{e9}\u{1f600}"}})),
            ev("content_block_stop", json!({"type":"content_block_stop","index":0})),
            ev("content_block_start", json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"write","input":{}}})),
            ev("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":\"/a\","}})),
            ev("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"content\":\"\u{fc}\"}"}})),
            ev("content_block_stop", json!({"type":"content_block_stop","index":1})),
            ev("message_delta", json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}})),
            ev("message_stop", json!({"type":"message_stop"})),
        ]
        .concat()
        .replace('\n', "\r\n");
        let whole = run(&wire);
        assert_eq!(whole.len(), 3, "{whole:?}");
        assert_eq!(
            whole[1],
            Ok(ReplyEvent::Block(Block::ToolUse {
                id: "t".into(),
                name: "write".into(),
                input: json!({"path":"/a","content":"\u{fc}"})
            }))
        );
        let bytes = wire.into_bytes();
        proptest!(|(mut cuts in proptest::collection::vec(0usize..=bytes.len(), 0..16))| {
            cuts.sort_unstable();
            let mut p = crate::sse::SseParser::default();
            let mut out = VecDeque::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([bytes.len()]) {
                p.feed(&bytes[at..c], &mut out);
                at = c;
            }
            let mut asm = Assembler::default();
            let got: Vec<_> = out.iter().filter_map(|m| asm.on_message(m).transpose()).collect();
            prop_assert_eq!(&got, &whole);
        });
    }

    #[test]
    fn error_events_map_to_errors() {
        let start = ev(
            "message_start",
            json!({"type":"message_start","message":{"usage":{"input_tokens":1,"output_tokens":0}}}),
        );
        let cases = [
            ("overloaded_error", ModelError::Overloaded),
            ("rate_limit_error", ModelError::RateLimited { retry_after: None }),
            ("api_error", ModelError::Server { status: 500 }),
            (
                "invalid_request_error",
                ModelError::Refused {
                    status: 400,
                    error_type: Some("invalid_request_error".into()),
                    message: "nope".into(),
                },
            ),
        ];
        for (kind, want) in cases {
            let wire = start.clone() + &ev("error", json!({"type":"error","error":{"type":kind,"message":"nope"}}));
            let got = run(&wire).pop().unwrap().unwrap_err();
            assert_eq!(got, want);
        }
        let bad_json = start
            + &ev(
                "content_block_start",
                json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}),
            )
            + &ev(
                "content_block_delta",
                json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}),
            )
            + &ev("content_block_stop", json!({"type":"content_block_stop","index":0}));
        assert!(matches!(run(&bad_json).pop().unwrap(), Err(ModelError::Stream(_))));
        assert!(matches!(run("event: x\ndata: not json\n\n").pop().unwrap(), Err(ModelError::Stream(_))));
    }

    #[test]
    fn http_statuses_map_to_errors() {
        use std::time::Duration;
        let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}"#;
        assert_eq!(
            status_error(429, Some(Duration::from_secs(3)), ""),
            ModelError::RateLimited { retry_after: Some(Duration::from_secs(3)) }
        );
        assert_eq!(status_error(529, None, ""), ModelError::Overloaded);
        assert_eq!(status_error(503, None, ""), ModelError::Server { status: 503 });
        assert_eq!(
            status_error(400, None, body),
            ModelError::Refused {
                status: 400,
                error_type: Some("invalid_request_error".into()),
                message: "max_tokens: too large".into()
            }
        );
        assert!(status_error(429, None, "").is_retryable());
        assert!(status_error(529, None, "").is_retryable());
        assert!(status_error(500, None, "").is_retryable());
        assert!(!status_error(401, None, "").is_retryable());
        assert_eq!(status_error(429, Some(Duration::from_secs(3)), "").retry_after(), Some(Duration::from_secs(3)));
    }

    #[test]
    fn body_marks_three_cache_breakpoints() {
        let req = ModelRequest {
            model: "claude-x".into(),
            system: "be brief".into(),
            messages: vec![
                Message { role: Role::User, content: vec![Block::Text { text: "hi".into() }] },
                Message {
                    role: Role::Assistant,
                    content: vec![Block::ToolUse { id: "t1".into(), name: "read".into(), input: json!({"path":"/a"}) }],
                },
                Message {
                    role: Role::User,
                    content: vec![Block::ToolResult {
                        tool_use_id: "t1".into(),
                        content: vec![
                            ResultPart::Text("x".into()),
                            ResultPart::Image { media_type: "image/png".into(), data: "AAAA".into() },
                        ],
                        is_error: false,
                    }],
                },
            ],
            tools: vec![
                ToolDefinition { name: "read".into(), description: "d".into(), input_schema: json!({"type":"object"}) },
                ToolDefinition {
                    name: "write".into(),
                    description: "d".into(),
                    input_schema: json!({"type":"object"}),
                },
            ],
            max_tokens: 100,
        };
        let b = request_body(&req);
        assert_eq!(b["stream"], json!(true));
        assert_eq!(b["system"][0]["cache_control"], json!({"type":"ephemeral"}));
        assert!(b["tools"][0].get("cache_control").is_none());
        assert_eq!(b["tools"][1]["cache_control"], json!({"type":"ephemeral"}));
        assert!(b["messages"][0]["content"][0].get("cache_control").is_none());
        assert_eq!(b["messages"][2]["content"][0]["cache_control"], json!({"type":"ephemeral"}));
        assert_eq!(b["messages"][2]["content"][0]["content"][1]["source"]["type"], json!("base64"));
        assert_eq!(b.to_string().matches("cache_control").count(), 3);
        assert_eq!(b["messages"][1]["content"].as_array().unwrap().len(), 1, "the empty text block is dropped");
    }
}
