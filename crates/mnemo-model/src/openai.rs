//! The OpenAI-compatible chat completions API (`POST {base_url}/chat/completions`, streaming),
//! which local servers (vLLM, Ollama, llama.cpp) speak too.
//!
//! Leniency for local servers: a tool call without an id gets a generated `call_…` id; a stream
//! without a usage chunk reports zero usage; a stream ending after a `finish_reason` but without
//! `[DONE]` still finishes. A tool call whose `arguments` are not valid JSON is **not** an error:
//! it becomes a `ToolUse` whose input is `{"invalid_arguments": RAW, "error": WHY}`, so the
//! tool fails with a clear result the model can read and correct, instead of ending the turn.

use std::collections::BTreeMap;

use futures::StreamExt;
use mnemo_api::Secret;
use rand::Rng;
use serde_json::{Value, json};

use crate::config::ProviderSettings;
use crate::sse::{self, SseMessage};
use crate::{Block, ModelError, ModelRequest, Provider, ReplyEvent, ReplyStream, ResultPart, Role, StopReason, Usage};

/// A provider for OpenAI-compatible chat completions.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    settings: ProviderSettings,
    http: reqwest::Client,
}

impl OpenAiProvider {
    pub fn new(settings: ProviderSettings) -> Self {
        let http = crate::http_client(&settings);
        OpenAiProvider { settings, http }
    }
}

/// The JSON body of a request (public for tests and fakes).
pub fn request_body(request: &ModelRequest) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for m in &request.messages {
        match m.role {
            Role::Assistant => {
                let text: Vec<&str> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                let calls: Vec<Value> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolUse { id, name, input } => Some(json!({
                            "id": id, "type": "function",
                            "function": {"name": name, "arguments": input.to_string()},
                        })),
                        _ => None,
                    })
                    .collect();
                let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text.join("\n\n")) }});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                messages.push(msg);
            }
            Role::User => {
                // Tool messages must follow the assistant's tool calls directly: results first.
                let mut parts = Vec::new();
                for b in &m.content {
                    match b {
                        Block::ToolResult { tool_use_id, content, is_error } => {
                            let mut text = String::new();
                            if *is_error {
                                text.push_str("[tool error] ");
                            }
                            for p in content {
                                match p {
                                    ResultPart::Text(t) => text.push_str(t),
                                    ResultPart::Image { media_type, data } => {
                                        text.push_str(&format!("[image {media_type}: attached below]"));
                                        parts.push(json!({"type": "image_url", "image_url": {"url": format!("data:{media_type};base64,{data}")}}));
                                    }
                                }
                            }
                            messages.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": text}));
                        }
                        Block::Text { text } => parts.push(json!({"type": "text", "text": text})),
                        Block::ToolUse { .. } => {}
                    }
                }
                let only_text = parts.iter().all(|p| p["type"] == "text");
                if parts.is_empty() {
                } else if only_text {
                    let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
                    messages.push(json!({"role": "user", "content": text.join("\n\n")}));
                } else {
                    messages.push(json!({"role": "user", "content": parts}));
                }
            }
        }
    }
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
            .collect();
    }
    body
}

/// A tool call being streamed.
#[derive(Default)]
struct Call {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// The state of one streamed reply.
#[derive(Default)]
pub(crate) struct Assembler {
    text: String,
    calls: BTreeMap<u64, Call>,
    finish: Option<StopReason>,
    usage: Usage,
    pub(crate) done: bool,
}

fn generated_id() -> String {
    let n: u64 = rand::rng().random();
    format!("call_{n:016x}")
}

/// A tool call's input from its `arguments` string (see the module docs for bad JSON).
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => {
            json!({"invalid_arguments": raw, "error": format!("the arguments are JSON but not an object ({})", kind(&other))})
        }
        Err(e) => json!({"invalid_arguments": raw, "error": format!("the arguments are not valid JSON: {e}")}),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Assembler {
    /// One SSE message → the events it completes.
    pub(crate) fn on_message(&mut self, m: &SseMessage, out: &mut Vec<ReplyEvent>) -> Result<(), ModelError> {
        let data = m.data.trim();
        if data == "[DONE]" {
            return self.finish(out);
        }
        let v: Value =
            serde_json::from_str(data).map_err(|e| ModelError::Stream(format!("a chunk is not JSON ({e})")))?;
        if let Some(err) = v.get("error") {
            let message = err.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_string();
            let error_type = err.get("type").and_then(Value::as_str).map(str::to_owned);
            let code = err.get("code").and_then(|c| c.as_u64().or_else(|| c.as_str().and_then(|s| s.parse().ok())));
            return Err(match code {
                Some(429) => ModelError::RateLimited { retry_after: None },
                Some(c @ 400..=499) => ModelError::Refused { status: c as u16, error_type, message },
                Some(c @ 500..=599) => ModelError::Server { status: c as u16 },
                _ => ModelError::Stream(format!("error in stream: {message}")),
            });
        }
        if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
            let cached = usage.pointer("/prompt_tokens_details/cached_tokens").and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage {
                input_tokens: n("prompt_tokens").saturating_sub(cached),
                output_tokens: n("completion_tokens"),
                cache_read_input_tokens: cached,
                cache_creation_input_tokens: 0,
            };
        }
        for choice in v.get("choices").and_then(Value::as_array).into_iter().flatten() {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                self.text.push_str(t);
            }
            for (pos, tc) in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
                self.flush_text(out);
                let id = tc.get("id").and_then(Value::as_str).filter(|s| !s.is_empty());
                let index = match tc.get("index").and_then(Value::as_u64) {
                    Some(i) => i,
                    // No index (some local servers): a known id continues its call, a new id
                    // starts one, no id continues the latest.
                    None => match id {
                        Some(id) => match self.calls.iter().find(|(_, c)| c.id.as_deref() == Some(id)) {
                            Some((i, _)) => *i,
                            None => self.calls.keys().next_back().map_or(pos as u64, |i| i + 1),
                        },
                        None => self.calls.keys().next_back().copied().unwrap_or(pos as u64),
                    },
                };
                let call = self.calls.entry(index).or_default();
                if let Some(id) = id {
                    call.id = Some(id.to_string());
                }
                if let Some(f) = tc.get("function") {
                    if let Some(name) = f.get("name").and_then(Value::as_str) {
                        call.name.push_str(name);
                    }
                    match f.get("arguments") {
                        Some(Value::String(a)) => call.arguments.push_str(a),
                        // Some servers send the arguments as an object.
                        Some(o @ Value::Object(_)) => call.arguments.push_str(&o.to_string()),
                        _ => {}
                    }
                }
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(match r {
                    "stop" => StopReason::EndTurn,
                    "tool_calls" | "function_call" => StopReason::ToolUse,
                    "length" => StopReason::MaxTokens,
                    "content_filter" => StopReason::Refusal,
                    other => StopReason::Other(other.to_string()),
                });
            }
        }
        Ok(())
    }

    /// The text so far is a complete block once a tool call starts (or the reply ends).
    fn flush_text(&mut self, out: &mut Vec<ReplyEvent>) {
        if !self.text.is_empty() {
            out.push(ReplyEvent::Block(Block::Text { text: std::mem::take(&mut self.text) }));
        }
    }

    /// `[DONE]` (or the end of a body after a finish reason): the remaining blocks and `Finished`.
    pub(crate) fn finish(&mut self, out: &mut Vec<ReplyEvent>) -> Result<(), ModelError> {
        let Some(mut stop_reason) = self.finish.take() else {
            return Err(ModelError::Stream("the stream ended without a finish_reason".into()));
        };
        self.flush_text(out);
        let calls = std::mem::take(&mut self.calls);
        if !calls.is_empty() && stop_reason == StopReason::EndTurn {
            // Some local servers say "stop" after tool calls.
            stop_reason = StopReason::ToolUse;
        }
        for (_, c) in calls {
            if c.name.is_empty() {
                return Err(ModelError::Stream("a tool call without a function name".into()));
            }
            let input = parse_arguments(&c.arguments);
            out.push(ReplyEvent::Block(Block::ToolUse { id: c.id.unwrap_or_else(generated_id), name: c.name, input }));
        }
        out.push(ReplyEvent::Finished { stop_reason, usage: self.usage });
        self.done = true;
        Ok(())
    }
}

fn events(messages: futures::stream::BoxStream<'static, Result<SseMessage, ModelError>>) -> ReplyStream {
    type St = (
        futures::stream::BoxStream<'static, Result<SseMessage, ModelError>>,
        Assembler,
        std::collections::VecDeque<Result<ReplyEvent, ModelError>>,
        bool,
    );
    let st: St = (messages, Assembler::default(), Default::default(), false);
    futures::stream::unfold(st, |(mut messages, mut asm, mut ready, mut ended)| async move {
        loop {
            if let Some(e) = ready.pop_front() {
                return Some((e, (messages, asm, ready, ended)));
            }
            if ended || asm.done {
                return None;
            }
            let mut out = Vec::new();
            let r = match messages.next().await {
                None => {
                    ended = true;
                    asm.finish(&mut out)
                }
                Some(Err(e)) => {
                    ended = true;
                    Err(e)
                }
                Some(Ok(m)) => asm.on_message(&m, &mut out),
            };
            ready.extend(out.into_iter().map(Ok));
            if let Err(e) = r {
                ended = true;
                ready.push_back(Err(e));
            }
        }
    })
    .boxed()
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    async fn stream(&self, request: ModelRequest) -> Result<ReplyStream, ModelError> {
        let req = self
            .http
            .post(format!("{}/chat/completions", self.settings.base_url))
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&request_body(&request));
        let key_header = (reqwest::header::AUTHORIZATION, "Bearer ");
        let resp =
            crate::call(&self.settings, "openai", &request, req, key_header, crate::anthropic::status_error).await?;
        let events = events(sse::messages(resp, self.settings.idle_timeout));
        Ok(crate::redacted_stream(events, self.settings.api_key.clone().map(Secret::into_exposed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, ToolDefinition};

    fn run(chunks: &[Value], done: bool) -> (Vec<ReplyEvent>, Result<(), ModelError>) {
        let mut asm = Assembler::default();
        let mut out = Vec::new();
        for c in chunks {
            if let Err(e) = asm.on_message(&SseMessage { event: None, data: c.to_string() }, &mut out) {
                return (out, Err(e));
            }
        }
        let r = if done {
            asm.on_message(&SseMessage { event: None, data: "[DONE]".into() }, &mut out)
        } else {
            asm.finish(&mut out)
        };
        (out, r)
    }

    #[test]
    fn text_tool_calls_from_fragments_and_usage() {
        let chunks = [
            json!({"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}),
            json!({"choices":[{"index":0,"delta":{"content":"look."}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read","arguments":"{\"pa"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"/m\"}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"name":"glob","arguments":"{\"pattern\":"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"*\"}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
            json!({"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":100}}}),
        ];
        let (events, r) = run(&chunks, true);
        r.unwrap();
        assert_eq!(events[0], ReplyEvent::Block(Block::Text { text: "Let me look.".into() }));
        assert_eq!(
            events[1],
            ReplyEvent::Block(Block::ToolUse { id: "call_a".into(), name: "read".into(), input: json!({"path":"/m"}) })
        );
        let ReplyEvent::Block(Block::ToolUse { id, name, input }) = &events[2] else { panic!("{events:?}") };
        assert!(id.starts_with("call_"), "a generated id: {id}");
        assert_eq!((name.as_str(), input), ("glob", &json!({"pattern":"*"})));
        assert_eq!(
            events[3],
            ReplyEvent::Finished {
                stop_reason: StopReason::ToolUse,
                usage: Usage {
                    input_tokens: 20,
                    output_tokens: 7,
                    cache_read_input_tokens: 100,
                    cache_creation_input_tokens: 0
                }
            }
        );
    }

    #[test]
    fn finish_reasons_missing_usage_and_missing_done() {
        for (reason, want) in [
            ("stop", StopReason::EndTurn),
            ("length", StopReason::MaxTokens),
            ("weird", StopReason::Other("weird".into())),
        ] {
            let chunks = [json!({"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":reason}]})];
            let (events, r) = run(&chunks, false);
            r.unwrap();
            assert_eq!(events.last().unwrap(), &ReplyEvent::Finished { stop_reason: want, usage: Usage::default() });
        }
        let (_, r) = run(&[json!({"choices":[{"index":0,"delta":{"content":"x"}}]})], false);
        assert!(matches!(r, Err(ModelError::Stream(_))), "{r:?}");
        let (_, r) = run(&[json!({"error":{"message":"boom","code":503}})], false);
        assert_eq!(r, Err(ModelError::Server { status: 503 }));
    }

    #[test]
    fn tool_calls_without_index_are_told_apart_by_id() {
        let chunks = [
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"id":"a","function":{"name":"read","arguments":"{\"path\":"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"\"/x\"}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","function":{"name":"glob","arguments":"{}"}}]}}]}),
            json!({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
        ];
        let (events, r) = run(&chunks, true);
        r.unwrap();
        assert_eq!(
            events[0],
            ReplyEvent::Block(Block::ToolUse { id: "a".into(), name: "read".into(), input: json!({"path":"/x"}) })
        );
        assert_eq!(
            events[1],
            ReplyEvent::Block(Block::ToolUse { id: "b".into(), name: "glob".into(), input: json!({}) })
        );
        assert!(
            matches!(events[2], ReplyEvent::Finished { stop_reason: StopReason::ToolUse, .. }),
            "stop after tool calls is tool use"
        );
    }

    #[test]
    fn bad_arguments_become_a_recorded_input() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), json!({"a":1}));
        let v = parse_arguments("{\"a\":");
        assert_eq!(v["invalid_arguments"], json!("{\"a\":"));
        assert!(v["error"].as_str().unwrap().contains("not valid JSON"));
        assert!(parse_arguments("[1]")["error"].as_str().unwrap().contains("not an object"));
    }

    #[test]
    fn body_maps_roles_tools_and_results() {
        let req = ModelRequest {
            model: "qwen".into(),
            system: "sys".into(),
            messages: vec![
                Message { role: Role::User, content: vec![Block::Text { text: "hi".into() }] },
                Message {
                    role: Role::Assistant,
                    content: vec![
                        Block::Text { text: "ok".into() },
                        Block::ToolUse { id: "c1".into(), name: "read".into(), input: json!({"path":"/a"}) },
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![Block::ToolResult {
                        tool_use_id: "c1".into(),
                        content: vec![ResultPart::Text("data".into())],
                        is_error: true,
                    }],
                },
            ],
            tools: vec![ToolDefinition {
                name: "read".into(),
                description: "reads".into(),
                input_schema: json!({"type":"object"}),
            }],
            max_tokens: 64,
        };
        let b = request_body(&req);
        assert_eq!(b["stream_options"], json!({"include_usage": true}));
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m[0], json!({"role":"system","content":"sys"}));
        assert_eq!(m[1], json!({"role":"user","content":"hi"}));
        assert_eq!(m[2]["tool_calls"][0]["function"], json!({"name":"read","arguments":"{\"path\":\"/a\"}"}));
        assert_eq!(m[3], json!({"role":"tool","tool_call_id":"c1","content":"[tool error] data"}));
        assert_eq!(m.len(), 4);
        assert_eq!(
            b["tools"][0],
            json!({"type":"function","function":{"name":"read","description":"reads","parameters":{"type":"object"}}})
        );
    }
}
