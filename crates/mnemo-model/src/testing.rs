//! `FakeModelServer`: an HTTP fake of both model APIs, for tests (the `testing` feature).
//!
//! It listens on 127.0.0.1:0 and answers `POST /v1/messages` (Anthropic SSE) and
//! `POST /v1/chat/completions` (OpenAI SSE) from a script of [`FakeReply`]s, one per request,
//! in order. It records every request ([`FakeModelServer::requests`]) and counts the responses
//! whose stream the client dropped before the end ([`FakeModelServer::cancelled`]).
//!
//! **Prefix caching, honestly, for the Anthropic format.** The prompt is cut into blocks in the
//! API's cache order (each tool, each system block, each content block of each message), each
//! block serialized as JSON without its `cache_control`. A block carrying `cache_control` is a
//! breakpoint: the prefix up to it is written to the cache. A later request reads the longest
//! cached prefix that ends at one of its breakpoints or at one of the 20 block boundaries before
//! each (the API's lookback). Reported usage: the prefix read is `cache_read_input_tokens`, the
//! rest up to the last breakpoint `cache_creation_input_tokens`, the remainder `input_tokens`;
//! tokens are bytes of that JSON / 4 (rounded up). No minimum cacheable length, no expiry, one
//! cache per model name. The OpenAI format reports `cached_tokens: 0`.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::config::{ProviderKind, ProviderSettings};

/// One tool call of a scripted reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FakeToolCall {
    pub name: String,
    pub input: Value,
    /// Default: `toolu_fake_N` / `call_fake_N`.
    #[serde(default)]
    pub id: Option<String>,
}

/// An HTTP error answer instead of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FakeError {
    pub status: u16,
    #[serde(default)]
    pub retry_after: Option<String>,
    /// The error's message; `{key}` is replaced by the key the request carried (`x-api-key`, or
    /// the `Authorization: Bearer` token), as a gateway that echoes it would.
    #[serde(default)]
    pub message: String,
}

/// A redirect answer instead of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FakeRedirect {
    /// 301, 302, 303, 307 or 308.
    pub status: u16,
    /// The `location` header.
    pub location: String,
}

/// One scripted reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FakeReply {
    pub text: Option<String>,
    pub tool_calls: Vec<FakeToolCall>,
    /// Default: `tool_use` with tool calls, else `end_turn` (OpenAI: `tool_calls` / `stop`).
    pub stop_reason: Option<String>,
    /// The pause before each SSE frame after the first.
    pub chunk_delay_ms: u64,
    /// End the body after this many SSE frames (a cut stream).
    pub cut_after_frames: Option<usize>,
    /// Answer with this HTTP error instead.
    pub error: Option<FakeError>,
    /// Answer with this redirect instead.
    pub redirect: Option<FakeRedirect>,
    /// After `message_start` (OpenAI: the first chunk), an error in the stream of this type
    /// (`overloaded_error`, `api_error`, ...), and nothing more.
    pub stream_error: Option<String>,
    /// The message of that error (default `injected by the fake`); `{key}` as in [`FakeError`].
    pub stream_error_message: Option<String>,
    /// Anthropic format: an event of this type after `message_start`, which no client knows
    /// (`{key}` as in [`FakeError`]).
    pub unknown_event: Option<String>,
}

impl FakeReply {
    pub fn text(text: impl Into<String>) -> Self {
        FakeReply { text: Some(text.into()), ..Default::default() }
    }
    pub fn tool(name: impl Into<String>, input: Value) -> Self {
        FakeReply { tool_calls: vec![FakeToolCall { name: name.into(), input, id: None }], ..Default::default() }
    }
    pub fn tools(calls: Vec<(String, Value)>) -> Self {
        let tool_calls = calls.into_iter().map(|(name, input)| FakeToolCall { name, input, id: None }).collect();
        FakeReply { tool_calls, ..Default::default() }
    }
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }
    pub fn with_stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }
    pub fn slow(mut self, delay: Duration) -> Self {
        self.chunk_delay_ms = delay.as_millis() as u64;
        self
    }
    pub fn cut_after(mut self, frames: usize) -> Self {
        self.cut_after_frames = Some(frames);
        self
    }
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        FakeReply {
            error: Some(FakeError { status, retry_after: None, message: message.into() }),
            ..Default::default()
        }
    }
    pub fn rate_limited(retry_after: &str) -> Self {
        FakeReply {
            error: Some(FakeError {
                status: 429,
                retry_after: Some(retry_after.into()),
                message: "rate limited".into(),
            }),
            ..Default::default()
        }
    }
    pub fn overloaded() -> Self {
        Self::status(529, "Overloaded")
    }
    pub fn server_error() -> Self {
        Self::status(500, "Internal server error")
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::status(400, message)
    }
    /// A 200 stream that fails after its first frame with an error event of `kind`.
    pub fn stream_error(kind: impl Into<String>) -> Self {
        FakeReply { stream_error: Some(kind.into()), ..Self::text("never sent") }
    }
    /// The message of a [`FakeReply::stream_error`] (`{key}`: the key the request carried).
    pub fn with_stream_error_message(mut self, message: impl Into<String>) -> Self {
        self.stream_error_message = Some(message.into());
        self
    }
    /// Sends an event of type `name` no client knows after `message_start` (Anthropic format).
    pub fn with_unknown_event(mut self, name: impl Into<String>) -> Self {
        self.unknown_event = Some(name.into());
        self
    }
    /// A redirect to `location` (an empty body).
    pub fn redirect(status: u16, location: impl Into<String>) -> Self {
        FakeReply { redirect: Some(FakeRedirect { status, location: location.into() }), ..Default::default() }
    }
}

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub path: String,
    /// Lowercase names.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Inner {
    script: Mutex<VecDeque<FakeReply>>,
    requests: Mutex<Vec<RecordedRequest>>,
    cache: Mutex<HashSet<u64>>,
    cancelled: Mutex<usize>,
    notify: Notify,
}

/// The fake server; it stops when dropped.
#[derive(Debug)]
pub struct FakeModelServer {
    url: String,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").finish_non_exhaustive()
    }
}

impl Drop for FakeModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeModelServer {
    /// Starts the fake on 127.0.0.1:0 with a script.
    pub async fn start(script: Vec<FakeReply>) -> Self {
        let inner = Arc::new(Inner::default());
        inner.script.lock().unwrap().extend(script);
        let app = axum::Router::new()
            .route("/v1/messages", axum::routing::post(handle))
            .route("/v1/chat/completions", axum::routing::post(handle))
            .route("/chat/completions", axum::routing::post(handle))
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModelServer { url, inner, task }
    }

    /// `http://127.0.0.1:PORT` (the Anthropic `base_url`; OpenAI's is this + `/v1`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Appends replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = FakeReply>) {
        self.inner.script.lock().unwrap().extend(replies);
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// How many streams the client dropped before their end.
    pub fn cancelled(&self) -> usize {
        *self.inner.cancelled.lock().unwrap()
    }

    /// Waits until at least `n` streams were dropped by the client.
    pub async fn wait_cancelled(&self, n: usize) {
        loop {
            let notified = self.inner.notify.notified();
            if self.cancelled() >= n {
                return;
            }
            notified.await;
        }
    }

    /// Settings for a provider of `kind` calling this fake (key `fake-key`, short timeouts).
    pub fn settings(&self, kind: ProviderKind) -> ProviderSettings {
        let base_url = match kind {
            ProviderKind::Anthropic => self.url.clone(),
            ProviderKind::OpenAi => format!("{}/v1", self.url),
        };
        ProviderSettings {
            kind,
            base_url,
            api_key: Some("fake-key".into()),
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
        }
    }

    /// A models file with providers `fake` (Anthropic) and `fake-openai` pointing at this
    /// fake, and `default = "fake"`.
    pub fn config_toml(&self) -> String {
        format!(
            "[providers.fake]\nkind = \"anthropic\"\nbase_url = \"{0}\"\napi_key = \"fake-key\"\n\
             [providers.fake-openai]\nkind = \"openai\"\nbase_url = \"{0}/v1\"\n\
             [models]\ndefault = \"fake\"\n",
            self.url
        )
    }
}

fn tokens(bytes: usize) -> u64 {
    bytes.div_ceil(4) as u64
}

/// The prompt blocks of an Anthropic request, in cache order: (JSON without cache_control, is a breakpoint).
fn prompt_blocks(body: &Value) -> Vec<(String, bool)> {
    fn strip(v: &Value) -> (String, bool) {
        let mut v = v.clone();
        let bp = v.as_object_mut().and_then(|o| o.remove("cache_control")).is_some();
        (v.to_string(), bp)
    }
    let mut out = Vec::new();
    for t in body["tools"].as_array().into_iter().flatten() {
        out.push(strip(t));
    }
    match &body["system"] {
        Value::String(s) => out.push((json!(s).to_string(), false)),
        Value::Array(a) => out.extend(a.iter().map(strip)),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("");
        match &m["content"] {
            Value::String(s) => out.push((format!("{role}:{}", json!(s)), false)),
            Value::Array(a) => out.extend(a.iter().map(|b| {
                let (s, bp) = strip(b);
                (format!("{role}:{s}"), bp)
            })),
            _ => {}
        }
    }
    out
}

/// (input, cache_read, cache_creation) tokens of a request, updating the cache.
fn cache_usage(cache: &Mutex<HashSet<u64>>, body: &Value) -> (u64, u64, u64) {
    let blocks = prompt_blocks(body);
    // hashes[k], bytes[k]: of the prefix of the first k blocks.
    let mut hasher = DefaultHasher::new();
    body["model"].as_str().unwrap_or("").hash(&mut hasher);
    let mut hashes = vec![hasher.finish()];
    let mut bytes = vec![0usize];
    for (s, _) in &blocks {
        s.hash(&mut hasher);
        hashes.push(hasher.finish());
        bytes.push(bytes.last().unwrap() + s.len());
    }
    let breakpoints: Vec<usize> = blocks.iter().enumerate().filter(|(_, (_, bp))| *bp).map(|(i, _)| i + 1).collect();
    let mut cache = cache.lock().unwrap();
    let mut read = 0;
    for &bp in &breakpoints {
        let lowest = bp.saturating_sub(20).max(1);
        if let Some(k) = (lowest..=bp).rev().find(|k| cache.contains(&hashes[*k])) {
            read = read.max(k);
        }
    }
    let last = breakpoints.last().copied().unwrap_or(0);
    for &bp in &breakpoints {
        cache.insert(hashes[bp]);
    }
    let total = *bytes.last().unwrap();
    let read_bytes = bytes[read];
    let creation_bytes = bytes[last.max(read)] - read_bytes;
    let input_bytes = total - bytes[last.max(read)];
    (tokens(input_bytes), tokens(read_bytes), tokens(creation_bytes))
}

/// Splits a string into pieces of at most `n` characters (at least one piece).
fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

fn anthropic_frames(reply: &FakeReply, n: usize, usage: (u64, u64, u64)) -> Vec<String> {
    let frame = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let out_tokens = tokens(
        reply.text.as_deref().map_or(0, str::len)
            + reply.tool_calls.iter().map(|c| c.input.to_string().len()).sum::<usize>(),
    )
    .max(1);
    let mut f = vec![frame(
        "message_start",
        json!({"type":"message_start","message":{"id":format!("msg_fake_{n}"),"type":"message","role":"assistant","model":"fake","content":[],
            "stop_reason":null,"stop_sequence":null,
            "usage":{"input_tokens":usage.0,"output_tokens":1,"cache_read_input_tokens":usage.1,"cache_creation_input_tokens":usage.2}}}),
    )];
    let mut index = 0;
    if let Some(text) = &reply.text {
        f.push(frame(
            "content_block_start",
            json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}),
        ));
        f.push(frame("ping", json!({"type":"ping"})));
        for p in pieces(text, 8) {
            f.push(frame(
                "content_block_delta",
                json!({"type":"content_block_delta","index":index,"delta":{"type":"text_delta","text":p}}),
            ));
        }
        f.push(frame("content_block_stop", json!({"type":"content_block_stop","index":index})));
        index += 1;
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        let id = c.id.clone().unwrap_or_else(|| format!("toolu_fake_{n}_{i}"));
        f.push(frame("content_block_start", json!({"type":"content_block_start","index":index,"content_block":{"type":"tool_use","id":id,"name":c.name,"input":{}}})));
        for p in pieces(&c.input.to_string(), 7) {
            f.push(frame("content_block_delta", json!({"type":"content_block_delta","index":index,"delta":{"type":"input_json_delta","partial_json":p}})));
        }
        f.push(frame("content_block_stop", json!({"type":"content_block_stop","index":index})));
        index += 1;
    }
    let stop = reply
        .stop_reason
        .clone()
        .unwrap_or_else(|| if reply.tool_calls.is_empty() { "end_turn".into() } else { "tool_use".into() });
    f.push(frame("message_delta", json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},"usage":{"output_tokens":out_tokens}})));
    f.push(frame("message_stop", json!({"type":"message_stop"})));
    f
}

fn openai_frames(reply: &FakeReply, n: usize, body: &Value) -> Vec<String> {
    let id = format!("chatcmpl-fake-{n}");
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id":id,"object":"chat.completion.chunk","model":"fake","choices":[{"index":0,"delta":delta,"finish_reason":finish}]})
        )
    };
    let mut f = vec![chunk(json!({"role":"assistant","content":""}), Value::Null)];
    if let Some(text) = &reply.text {
        for p in pieces(text, 8) {
            f.push(chunk(json!({"content":p}), Value::Null));
        }
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        let call_id = c.id.clone().unwrap_or_else(|| format!("call_fake_{n}_{i}"));
        for (j, p) in pieces(&c.input.to_string(), 7).into_iter().enumerate() {
            let tc = if j == 0 {
                json!({"index":i,"id":call_id,"type":"function","function":{"name":c.name,"arguments":p}})
            } else {
                json!({"index":i,"function":{"arguments":p}})
            };
            f.push(chunk(json!({"tool_calls":[tc]}), Value::Null));
        }
    }
    let stop = reply
        .stop_reason
        .clone()
        .unwrap_or_else(|| if reply.tool_calls.is_empty() { "stop".into() } else { "tool_calls".into() });
    f.push(chunk(json!({}), json!(stop)));
    let prompt = tokens(body["messages"].to_string().len() + body["tools"].to_string().len());
    let completion = tokens(reply.text.as_deref().map_or(0, str::len)).max(1);
    f.push(format!(
        "data: {}\n\n",
        json!({"id":id,"object":"chat.completion.chunk","model":"fake","choices":[],
               "usage":{"prompt_tokens":prompt,"completion_tokens":completion,"total_tokens":prompt+completion,"prompt_tokens_details":{"cached_tokens":0}}})
    ));
    f.push("data: [DONE]\n\n".into());
    f
}

/// Counts a drop before the last frame as a cancellation.
struct DropGuard {
    inner: Arc<Inner>,
    complete: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.complete {
            *self.inner.cancelled.lock().unwrap() += 1;
            self.inner.notify.notify_waiters();
        }
    }
}

async fn handle(State(inner): State<Arc<Inner>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("{{\"error\":{{\"message\":\"not JSON: {e}\"}}}}"))
                .into_response();
        }
    };
    let anthropic = uri.path() == "/v1/messages";
    let n = {
        let mut requests = inner.requests.lock().unwrap();
        requests.push(RecordedRequest {
            path: uri.path().to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
                .collect(),
            body: body.clone(),
        });
        requests.len()
    };
    let Some(reply) = inner.script.lock().unwrap().pop_front() else {
        return error_response(
            anthropic,
            &FakeError { status: 400, retry_after: None, message: "FakeModelServer: the script is empty".into() },
        );
    };
    // The key the request carried, for `{key}` in messages (an echoing gateway).
    let key = headers
        .get("x-api-key")
        .or_else(|| headers.get("authorization"))
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).to_owned())
        .unwrap_or_default();
    if let Some(r) = &reply.redirect {
        return Response::builder().status(r.status).header("location", &r.location).body(Body::empty()).unwrap();
    }
    if let Some(e) = &reply.error {
        let e = FakeError { message: e.message.replace("{key}", &key), ..e.clone() };
        return error_response(anthropic, &e);
    }
    let frames = if anthropic {
        let usage = cache_usage(&inner.cache, &body);
        let mut frames = anthropic_frames(&reply, n, usage);
        if let Some(name) = &reply.unknown_event {
            let name = name.replace("{key}", &key);
            frames.insert(1, format!("event: {name}\ndata: {}\n\n", json!({"type": name})));
        }
        frames
    } else {
        openai_frames(&reply, n, &body)
    };
    let message = reply.stream_error_message.as_deref().unwrap_or("injected by the fake").replace("{key}", &key);
    let frames = match &reply.stream_error {
        Some(kind) if anthropic => vec![
            frames[0].clone(),
            format!("event: error\ndata: {}\n\n", json!({"type":"error","error":{"type":kind,"message":message}})),
        ],
        Some(kind) => {
            let code = match kind.as_str() {
                "invalid_request_error" => 400,
                "authentication_error" => 401,
                _ => 500,
            };
            vec![
                frames[0].clone(),
                format!("data: {}\n\n", json!({"error":{"message":message,"type":kind,"code":code}})),
            ]
        }
        None => frames,
    };
    let total = frames.len();
    let frames: Vec<String> = match reply.cut_after_frames {
        Some(k) => frames.into_iter().take(k).collect(),
        None => frames,
    };
    let cut = frames.len() < total;
    let delay = Duration::from_millis(reply.chunk_delay_ms);
    let guard = DropGuard { inner, complete: false };
    let stream =
        futures::stream::unfold((frames.into_iter().enumerate(), guard), move |(mut it, mut guard)| async move {
            let (i, frame) = it.next()?;
            if i > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if it.len() == 0 && !cut {
                guard.complete = true;
            }
            Some((Ok::<_, Infallible>(Bytes::from(frame)), (it, guard)))
        });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn error_response(anthropic: bool, e: &FakeError) -> Response {
    let kind = match e.status {
        429 => "rate_limit_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        401 => "authentication_error",
        404 => "not_found_error",
        _ => "invalid_request_error",
    };
    let body = if anthropic {
        json!({"type":"error","error":{"type":kind,"message":e.message}})
    } else {
        json!({"error":{"message":e.message,"type":kind,"code":null}})
    };
    let mut r = Response::builder().status(e.status).header("content-type", "application/json");
    if let Some(ra) = &e.retry_after {
        r = r.header("retry-after", ra);
    }
    r.body(Body::from(body.to_string())).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::AnthropicProvider;
    use crate::openai::OpenAiProvider;
    use crate::{
        Block, Message, ModelError, ModelRequest, Provider, ReplyEvent, ResultPart, Role, StopReason, ToolDefinition,
        Usage,
    };
    use futures::StreamExt;

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "claude-test".into(),
            system: "You are a careful agent. ".repeat(200),
            messages,
            tools: ["bash", "read", "write", "edit", "glob", "grep"]
                .iter()
                .map(|n| ToolDefinition {
                    name: (*n).into(),
                    description: format!("The {n} tool. ").repeat(20),
                    input_schema: json!({"type":"object","properties":{"path":{"type":"string"},"command":{"type":"string"}}}),
                })
                .collect(),
            max_tokens: 1024,
        }
    }

    fn user(text: &str) -> Message {
        Message { role: Role::User, content: vec![Block::Text { text: text.into() }] }
    }

    async fn collect(p: &dyn Provider, req: ModelRequest) -> Result<Vec<ReplyEvent>, ModelError> {
        let mut s = p.stream(req).await?;
        let mut out = Vec::new();
        while let Some(e) = s.next().await {
            out.push(e?);
        }
        Ok(out)
    }

    fn finished_usage(events: &[ReplyEvent]) -> Usage {
        match events.last() {
            Some(ReplyEvent::Finished { usage, .. }) => *usage,
            other => panic!("no Finished: {other:?}"),
        }
    }

    #[tokio::test]
    async fn anthropic_text_and_tools_over_http_with_headers() {
        let fake = FakeModelServer::start(vec![
            FakeReply::tools(vec![
                ("read".into(), json!({"path":"/mnt/memory/a.md"})),
                ("glob".into(), json!({"pattern":"**/*.md"})),
            ])
            .with_text("Reading ünïcode first."),
            FakeReply::text("Done."),
        ])
        .await;
        let p = AnthropicProvider::new(fake.settings(ProviderKind::Anthropic));
        let events = collect(&p, request(vec![user("hi")])).await.unwrap();
        assert_eq!(events[0], ReplyEvent::Block(Block::Text { text: "Reading ünïcode first.".into() }));
        let ReplyEvent::Block(Block::ToolUse { name, input, .. }) = &events[1] else { panic!("{events:?}") };
        assert_eq!((name.as_str(), input), ("read", &json!({"path":"/mnt/memory/a.md"})));
        let ReplyEvent::Block(Block::ToolUse { name, .. }) = &events[2] else { panic!("{events:?}") };
        assert_eq!(name, "glob");
        assert!(matches!(events[3], ReplyEvent::Finished { stop_reason: StopReason::ToolUse, .. }));
        let events = collect(&p, request(vec![user("hi")])).await.unwrap();
        assert!(matches!(events[1], ReplyEvent::Finished { stop_reason: StopReason::EndTurn, .. }));

        let r = &fake.requests()[0];
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some("fake-key"));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(r.body["stream"], json!(true));
        assert_eq!(r.body["system"][0]["cache_control"], json!({"type":"ephemeral"}));
        assert_eq!(r.body["tools"][5]["cache_control"], json!({"type":"ephemeral"}));
        assert_eq!(r.body["messages"][0]["content"][0]["cache_control"], json!({"type":"ephemeral"}));
    }

    #[tokio::test]
    async fn openai_text_and_tools_over_http() {
        let fake = FakeModelServer::start(vec![
            FakeReply::tools(vec![("bash".into(), json!({"command":"ls -la"})), ("read".into(), json!({"path":"/x"}))])
                .with_text("Looking."),
            FakeReply::status(401, "bad key"),
        ])
        .await;
        let p = OpenAiProvider::new(fake.settings(ProviderKind::OpenAi));
        let events = collect(&p, request(vec![user("hi")])).await.unwrap();
        assert_eq!(events[0], ReplyEvent::Block(Block::Text { text: "Looking.".into() }));
        assert_eq!(
            events[1],
            ReplyEvent::Block(Block::ToolUse {
                id: "call_fake_1_0".into(),
                name: "bash".into(),
                input: json!({"command":"ls -la"})
            })
        );
        assert!(matches!(&events[2], ReplyEvent::Block(Block::ToolUse { name, .. }) if name == "read"));
        let ReplyEvent::Finished { stop_reason, usage } = &events[3] else { panic!("{events:?}") };
        assert_eq!(*stop_reason, StopReason::ToolUse);
        assert!(usage.input_tokens > 0 && usage.output_tokens > 0);
        let r = &fake.requests()[0];
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.header("authorization"), Some("Bearer fake-key"));
        assert_eq!(r.body["messages"][0]["role"], json!("system"));
        assert_eq!(r.body["tools"][0]["type"], json!("function"));
        let e = collect(&p, request(vec![user("hi")])).await.unwrap_err();
        assert_eq!(
            e,
            ModelError::Refused {
                status: 401,
                error_type: Some("authentication_error".into()),
                message: "bad key".into()
            }
        );
    }

    #[tokio::test]
    async fn every_http_error_maps() {
        let fake = FakeModelServer::start(vec![
            FakeReply::rate_limited("7"),
            FakeReply::overloaded(),
            FakeReply::server_error(),
            FakeReply::status(503, "unavailable"),
            FakeReply::bad_request("messages: roles must alternate"),
            FakeReply::rate_limited("7"),
        ])
        .await;
        let mut settings = fake.settings(ProviderKind::Anthropic);
        settings.api_key = Some("sk-ant-very-secret".into());
        let p = AnthropicProvider::new(settings);
        let want = [
            ModelError::RateLimited { retry_after: Some(Duration::from_secs(7)) },
            ModelError::Overloaded,
            ModelError::Server { status: 500 },
            ModelError::Server { status: 503 },
            ModelError::Refused {
                status: 400,
                error_type: Some("invalid_request_error".into()),
                message: "messages: roles must alternate".into(),
            },
        ];
        for w in want {
            let e = collect(&p, request(vec![user("hi")])).await.unwrap_err();
            assert!(!e.to_string().contains("sk-ant-very-secret") && !format!("{e:?}").contains("sk-ant-very-secret"));
            assert_eq!(e.is_retryable(), !matches!(w, ModelError::Refused { .. }));
            assert_eq!(e, w);
        }
        let o = OpenAiProvider::new(fake.settings(ProviderKind::OpenAi));
        let e = collect(&o, request(vec![user("hi")])).await.unwrap_err();
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        // Nothing listening: a transport error, retryable, without the key.
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let mut settings = fake.settings(ProviderKind::Anthropic);
        settings.base_url = format!("http://{dead}");
        settings.api_key = Some("sk-ant-very-secret".into());
        let e = collect(&AnthropicProvider::new(settings), request(vec![user("hi")])).await.unwrap_err();
        assert!(matches!(e, ModelError::Transport(_)), "{e:?}");
        assert!(e.is_retryable() && !e.to_string().contains("sk-ant-very-secret"));
    }

    /// A long key, like a real one.
    const LONG_KEY: &str = "sk-ant-api03-Xq7vR2mK9pL4wT8nB3cF6hJ1dS5gZ0yAe4Uu-Wt2Nn_Pp8Qq";

    /// Whether `text` holds any run of [`LONG_KEY`] of `redact::MIN_RUN` characters.
    fn holds_key_run(text: &str) -> bool {
        let lower = text.to_ascii_lowercase();
        let key = LONG_KEY.to_ascii_lowercase();
        key.as_bytes().windows(crate::redact::MIN_RUN).any(|w| lower.contains(std::str::from_utf8(w).unwrap()))
    }

    /// A gateway that echoes the key it got — whole, as `Bearer …`, cut in two, in part —
    /// in error bodies and error events: no error (Display or Debug) holds a run of it.
    #[tokio::test]
    async fn a_provider_echoing_the_key_never_gets_it_into_an_error() {
        let split = format!("{} {}", &LONG_KEY[..24], &LONG_KEY[24..]);
        let echo = format!(
            "invalid x-api-key {{key}}; Authorization: Bearer {{key}}; first half {split}; part {}",
            &LONG_KEY[30..45]
        );
        let script = || {
            vec![
                FakeReply::status(401, &echo),
                FakeReply::status(400, format!("{{key}}\n{}", "padding ".repeat(500))),
                FakeReply::stream_error("invalid_request_error").with_stream_error_message(&echo),
                FakeReply::stream_error("unheard_of_error").with_stream_error_message(&echo),
            ]
        };
        let fake = FakeModelServer::start(script()).await;
        fake.push(script());
        for kind in [ProviderKind::Anthropic, ProviderKind::OpenAi] {
            let mut settings = fake.settings(kind);
            settings.api_key = Some(LONG_KEY.into());
            let p: Box<dyn Provider> = match kind {
                ProviderKind::Anthropic => Box::new(AnthropicProvider::new(settings)),
                ProviderKind::OpenAi => Box::new(OpenAiProvider::new(settings)),
            };
            for _ in 0..4 {
                let e = collect(&*p, request(vec![user("hi")])).await.unwrap_err();
                let shown = format!("{e} {e:?} {}", e.summary());
                assert!(!holds_key_run(&shown), "{kind:?}: {shown}");
                assert!(shown.len() < 2 * crate::redact::MAX_TEXT_BYTES + 400, "{kind:?}: capped: {shown}");
                assert!(!e.to_string().contains('\n'), "{kind:?}: one line: {e}");
            }
        }
        // The fake did echo the key (the test would see it otherwise).
        assert!(fake.requests().iter().all(|r| r.header("x-api-key").or(r.header("authorization")).is_some()));
        let e = crate::anthropic::status_error(401, None, &echo.replace("{key}", LONG_KEY));
        assert!(holds_key_run(&e.to_string()), "unredacted, the error holds the key");
    }

    /// A 3xx is an error naming its status, not retried, and the redirect's target never hears
    /// from the client (so never sees the key).
    #[tokio::test]
    async fn a_redirect_is_not_followed() {
        let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let other_url = format!("http://{}", other.local_addr().unwrap());
        let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = Arc::clone(&reached);
        let _other = tokio::spawn(async move {
            while let Ok((_conn, _)) = other.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        let fake = FakeModelServer::start(vec![
            FakeReply::redirect(307, format!("{other_url}/v1/messages")),
            FakeReply::redirect(302, format!("{other_url}/v1/messages")),
            FakeReply::redirect(308, format!("{other_url}/v1/chat/completions")),
            FakeReply::redirect(301, format!("{other_url}/v1/chat/completions")),
        ])
        .await;
        let mut settings = fake.settings(ProviderKind::Anthropic);
        settings.api_key = Some(LONG_KEY.into());
        let p = AnthropicProvider::new(settings);
        for status in [307, 302] {
            let e = collect(&p, request(vec![user("hi")])).await.unwrap_err();
            assert_eq!(e, ModelError::Redirected { status });
            assert!(!e.is_retryable());
            assert!(e.to_string().contains(&format!("redirect (HTTP {status})")), "{e}");
            assert_eq!(e.status(), Some(status));
        }
        let mut settings = fake.settings(ProviderKind::OpenAi);
        settings.api_key = Some(LONG_KEY.into());
        let o = OpenAiProvider::new(settings);
        for status in [308, 301] {
            assert_eq!(collect(&o, request(vec![user("hi")])).await.unwrap_err(), ModelError::Redirected { status });
        }
        assert_eq!(fake.requests().len(), 4);
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0, "the redirect's target was never reached");
    }

    #[tokio::test]
    async fn a_cut_stream_is_a_stream_error_after_the_complete_blocks() {
        // Frames: message_start, block start, ping, 2 deltas, block stop, (cut) message_delta, stop.
        let fake = FakeModelServer::start(vec![
            FakeReply::text("sixteen chars!!!").cut_after(6),
            FakeReply::text("a b c").cut_after(2),
        ])
        .await;
        let p = AnthropicProvider::new(fake.settings(ProviderKind::Anthropic));
        let mut s = p.stream(request(vec![user("hi")])).await.unwrap();
        assert_eq!(s.next().await, Some(Ok(ReplyEvent::Block(Block::Text { text: "sixteen chars!!!".into() }))));
        assert!(matches!(s.next().await, Some(Err(ModelError::Stream(_)))));
        assert_eq!(s.next().await, None);
        let o = OpenAiProvider::new(fake.settings(ProviderKind::OpenAi));
        let e = collect(&o, request(vec![user("hi")])).await.unwrap_err();
        assert!(matches!(e, ModelError::Stream(_)), "{e:?}");
    }

    #[tokio::test]
    async fn an_error_event_mid_stream_maps() {
        let fake = FakeModelServer::start(vec![
            FakeReply::stream_error("overloaded_error"),
            FakeReply::stream_error("api_error"),
            FakeReply::stream_error("server_error"),
        ])
        .await;
        let p = AnthropicProvider::new(fake.settings(ProviderKind::Anthropic));
        assert_eq!(collect(&p, request(vec![user("hi")])).await.unwrap_err(), ModelError::Overloaded);
        assert_eq!(collect(&p, request(vec![user("hi")])).await.unwrap_err(), ModelError::Server { status: 500 });
        let o = OpenAiProvider::new(fake.settings(ProviderKind::OpenAi));
        assert_eq!(collect(&o, request(vec![user("hi")])).await.unwrap_err(), ModelError::Server { status: 500 });
        let dbg = format!("{p:?} {o:?}");
        assert!(!dbg.contains("fake-key") && dbg.contains("[redacted]"), "{dbg}");
    }

    #[tokio::test]
    async fn a_stalled_stream_times_out() {
        let fake = FakeModelServer::start(vec![FakeReply::text("slow").slow(Duration::from_secs(30))]).await;
        let mut settings = fake.settings(ProviderKind::Anthropic);
        settings.idle_timeout = Duration::from_millis(300);
        let e = collect(&AnthropicProvider::new(settings), request(vec![user("hi")])).await.unwrap_err();
        assert_eq!(e, ModelError::Timeout);
        assert!(e.is_retryable());
    }

    #[tokio::test]
    async fn dropping_the_stream_closes_the_connection() {
        let fake = FakeModelServer::start(vec![
            FakeReply::text("a long answer that streams slowly").slow(Duration::from_millis(100)),
            FakeReply::tool("bash", json!({"command":"sleep 1"})).slow(Duration::from_millis(100)),
        ])
        .await;
        let p = AnthropicProvider::new(fake.settings(ProviderKind::Anthropic));
        let s = p.stream(request(vec![user("hi")])).await.unwrap();
        drop(s);
        tokio::time::timeout(Duration::from_secs(20), fake.wait_cancelled(1)).await.expect("the fake saw the drop");
        let o = OpenAiProvider::new(fake.settings(ProviderKind::OpenAi));
        let mut s = o.stream(request(vec![user("hi")])).await.unwrap();
        drop(s.next());
        drop(s);
        tokio::time::timeout(Duration::from_secs(20), fake.wait_cancelled(2)).await.expect("the fake saw the drop");
        assert_eq!(fake.cancelled(), 2);
    }

    #[tokio::test]
    async fn a_completed_stream_is_not_a_cancellation() {
        let fake = FakeModelServer::start(vec![FakeReply::text("ok")]).await;
        let p = AnthropicProvider::new(fake.settings(ProviderKind::Anthropic));
        collect(&p, request(vec![user("hi")])).await.unwrap();
        assert_eq!(fake.cancelled(), 0);
    }

    #[tokio::test]
    async fn the_fake_caches_only_marked_prefixes() {
        let fake = FakeModelServer::start(vec![
            FakeReply::text("a"),
            FakeReply::text("b"),
            FakeReply::text("c"),
            FakeReply::text("d"),
        ])
        .await;
        let http = reqwest::Client::new();
        let url = format!("{}/v1/messages", fake.url());
        let body = |marked: bool| {
            let mut sys = json!({"type":"text","text":"x".repeat(4000)});
            if marked {
                sys["cache_control"] = json!({"type":"ephemeral"});
            }
            json!({"model":"m","max_tokens":10,"stream":true,"system":[sys],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]})
        };
        let usage = |text: String| -> Value {
            let line =
                text.lines().find(|l| l.starts_with("data:") && l.contains("message_start")).unwrap().to_string();
            serde_json::from_str::<Value>(line.trim_start_matches("data: ")).unwrap()["message"]["usage"].clone()
        };
        for _ in 0..2 {
            let t = http.post(&url).json(&body(false)).send().await.unwrap().text().await.unwrap();
            assert_eq!(usage(t)["cache_read_input_tokens"], json!(0));
        }
        let t = http.post(&url).json(&body(true)).send().await.unwrap().text().await.unwrap();
        let u1 = usage(t);
        assert_eq!(u1["cache_read_input_tokens"], json!(0));
        assert!(u1["cache_creation_input_tokens"].as_u64().unwrap() >= 1000);
        let t = http.post(&url).json(&body(true)).send().await.unwrap().text().await.unwrap();
        let u2 = usage(t);
        assert_eq!(u2["cache_read_input_tokens"], u1["cache_creation_input_tokens"]);
        assert_eq!(u2["cache_creation_input_tokens"], json!(0));
    }

    /// The measurement in docs/AGENTS.md: a 20-call session whose conversation grows by a tool
    /// call and its result each call.
    #[tokio::test]
    async fn twenty_call_session_cached_share() {
        let mut script: Vec<FakeReply> = (0..19)
            .map(|i| {
                FakeReply::tool("read", json!({"path": format!("/mnt/memory/notes/{i}.md")}))
                    .with_text(format!("Step {i}."))
            })
            .collect();
        script.push(FakeReply::text("All done."));
        let fake = FakeModelServer::start(script).await;
        let p = AnthropicProvider::new(fake.settings(ProviderKind::Anthropic));
        let mut messages = vec![user("Summarise my notes.")];
        let mut total = Usage::default();
        let mut first = Usage::default();
        for call in 0..20 {
            let events = collect(&p, request(messages.clone())).await.unwrap();
            let u = finished_usage(&events);
            if call == 0 {
                first = u;
            }
            total += u;
            let blocks: Vec<Block> = events
                .iter()
                .filter_map(|e| if let ReplyEvent::Block(b) = e { Some(b.clone()) } else { None })
                .collect();
            let results: Vec<Block> = blocks
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, .. } => Some(Block::ToolResult {
                        tool_use_id: id.clone(),
                        content: vec![ResultPart::Text("A note about the project. ".repeat(12))],
                        is_error: false,
                    }),
                    _ => None,
                })
                .collect();
            messages.push(Message { role: Role::Assistant, content: blocks });
            if !results.is_empty() {
                messages.push(Message { role: Role::User, content: results });
            }
        }
        let prompt = total.input_tokens + total.cache_read_input_tokens + total.cache_creation_input_tokens;
        let share = total.cache_read_input_tokens as f64 / prompt as f64;
        println!(
            "20-call session: prompt tokens {prompt}, cache read {}, cache written {}, uncached {}; cached share {:.1}%",
            total.cache_read_input_tokens,
            total.cache_creation_input_tokens,
            total.input_tokens,
            share * 100.0
        );
        assert_eq!(first.cache_read_input_tokens, 0, "the first call has nothing cached");
        assert!(share > 0.8, "cached share {share}");
        // Each call after the first reads everything the previous call wrote.
        assert!(total.input_tokens < prompt / 50, "{total:?}");
    }
}
