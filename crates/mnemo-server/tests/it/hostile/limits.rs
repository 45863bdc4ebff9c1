//! Every limit the server enforces or the contract states, at the limit (accepted) and one past
//! it (refused with the status and error type the contract names, in the error envelope — never
//! a `5xx`, never a connection closed without an answer), and the server serving normally
//! afterwards. Table-driven; the suite runs per backend (`MNEMO_TEST_DATABASE=postgres`).
//!
//! Sizes that count characters are tested with multi-byte characters too, so that a limit on
//! characters is not taken for one on bytes (and the other way round).

use std::time::Duration;

use mnemo_api::limits::{
    MAX_CONTENT_BYTES, MAX_HEADER_BYTES, MAX_HEADERS, MAX_METADATA_KEY_CHARS, MAX_METADATA_PAIRS,
    MAX_METADATA_VALUE_CHARS, MAX_PAGE_LIMIT, MAX_PATH_BYTES, MAX_PATH_SEGMENTS, MAX_STORE_DESCRIPTION_CHARS,
    MAX_STORE_NAME_CHARS, MAX_URI_BYTES,
};
use mnemo_api::{
    MAX_AGENT_MCP_SERVERS, MAX_AGENT_SYSTEM_CHARS, MAX_AGENT_TOOLS, MAX_MEMORY_INSTRUCTIONS_CHARS,
    MAX_SESSION_MEMORY_STORES, MAX_WEBHOOK_DESCRIPTION_CHARS, MAX_WEBHOOK_URL_CHARS,
};
use reqwest::Method;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::KEY;
use crate::openapi::{Fixture, fixture};

/// One limit: a request at it, which must be accepted, and one just past it, which must be
/// refused with `status` and `error.type` = `kind`.
struct Edge {
    what: String,
    method: Method,
    at: (String, Option<Value>),
    past: (String, Option<Value>),
    status: u16,
    kind: &'static str,
}

fn edge(what: impl Into<String>, method: Method, path: &str, at: Value, past: Value) -> Edge {
    Edge {
        what: what.into(),
        method,
        at: (path.to_owned(), Some(at)),
        past: (path.to_owned(), Some(past)),
        status: 400,
        kind: "invalid_request_error",
    }
}

fn get(what: impl Into<String>, at: String, past: String) -> Edge {
    Edge {
        what: what.into(),
        method: Method::GET,
        at: (at, None),
        past: (past, None),
        status: 400,
        kind: "invalid_request_error",
    }
}

impl Edge {
    fn too_large(mut self) -> Self {
        (self.status, self.kind) = (413, "request_too_large");
        self
    }
}

/// `n` metadata pairs, each key and value of the given length in characters of `c`.
fn metadata(n: usize, key_chars: usize, value_chars: usize, c: char) -> Value {
    let map: Map<String, Value> = (0..n)
        .map(|i| {
            let prefix = format!("{i:02}");
            let key: String = prefix.chars().chain(std::iter::repeat_n(c, key_chars - prefix.len())).collect();
            (key, Value::String(c.to_string().repeat(value_chars)))
        })
        .collect();
    Value::Object(map)
}

fn rep(c: char, n: usize) -> String {
    c.to_string().repeat(n)
}

fn message(text: &str) -> Value {
    json!({"type": "user.message", "content": [{"type": "text", "text": text}]})
}

/// Every field limit of the contract.
fn field_edges(f: &Fixture, stores: &[String], meta_store: &str) -> Vec<Edge> {
    let store = &f.ids["store"];
    let memory = &f.ids["memory"];
    let memories = format!("/v1/memory_stores/{store}/memories");
    let one_memory = format!("{memories}/{memory}");
    let agent = &f.ids["agent"];
    let env = &f.ids["environment"];
    let p = Method::POST;
    let name = MAX_STORE_NAME_CHARS;
    let desc = MAX_STORE_DESCRIPTION_CHARS;
    let (pairs, key, value) = (MAX_METADATA_PAIRS, MAX_METADATA_KEY_CHARS, MAX_METADATA_VALUE_CHARS);
    let content = MAX_CONTENT_BYTES;
    let mut edges = vec![
        // Memory content: bytes of UTF-8, whatever the characters.
        edge(
            "memory content, ASCII",
            p.clone(),
            &memories,
            json!({"path": "/limits/c1.md", "content": rep('x', content)}),
            json!({"path": "/limits/c2.md", "content": rep('x', content + 1)}),
        )
        .too_large(),
        edge(
            "memory content, 2-byte characters (fewer characters than bytes)",
            p.clone(),
            &memories,
            json!({"path": "/limits/c3.md", "content": rep('é', content / 2)}),
            json!({"path": "/limits/c4.md", "content": rep('é', content / 2 + 1)}),
        )
        .too_large(),
        edge(
            "memory content, 4-byte characters",
            p.clone(),
            &memories,
            json!({"path": "/limits/c5.md", "content": rep('😀', content / 4)}),
            json!({"path": "/limits/c6.md", "content": format!("x{}", rep('😀', content / 4))}),
        )
        .too_large(),
        edge(
            "memory update content",
            p.clone(),
            &one_memory,
            json!({"content": rep('é', content / 2)}),
            json!({"content": format!("{}x", rep('é', content / 2))}),
        )
        .too_large(),
        // Memory paths: bytes and segments.
        edge(
            "memory path bytes, ASCII",
            p.clone(),
            &memories,
            json!({"path": format!("/{}", rep('p', MAX_PATH_BYTES - 1)), "content": ""}),
            json!({"path": format!("/{}", rep('q', MAX_PATH_BYTES)), "content": ""}),
        ),
        edge(
            "memory path bytes, 2-byte characters",
            p.clone(),
            &memories,
            json!({"path": format!("/{}r", rep('é', (MAX_PATH_BYTES - 2) / 2)), "content": ""}),
            json!({"path": format!("/{}", rep('é', MAX_PATH_BYTES / 2)), "content": ""}),
        ),
        edge(
            "memory path segments",
            p.clone(),
            &memories,
            json!({"path": "/s".repeat(MAX_PATH_SEGMENTS), "content": ""}),
            json!({"path": "/t".repeat(MAX_PATH_SEGMENTS + 1), "content": ""}),
        ),
        edge(
            "memory rename path bytes",
            p.clone(),
            &one_memory,
            json!({"path": format!("/{}", rep('u', MAX_PATH_BYTES - 1))}),
            json!({"path": format!("/{}", rep('v', MAX_PATH_BYTES))}),
        ),
        get(
            "memory list path_prefix bytes",
            format!("{memories}?path_prefix=/{}/", rep('w', MAX_PATH_BYTES - 1)),
            format!("{memories}?path_prefix=/{}/", rep('w', MAX_PATH_BYTES)),
        ),
        // Memory stores.
        edge(
            "store name characters",
            p.clone(),
            "/v1/memory_stores",
            json!({"name": rep('é', name)}),
            json!({"name": rep('é', name + 1)}),
        ),
        edge(
            "store description characters",
            p.clone(),
            "/v1/memory_stores",
            json!({"name": "d", "description": rep('é', desc)}),
            json!({"name": "d", "description": rep('é', desc + 1)}),
        ),
        edge(
            "store metadata pairs",
            p.clone(),
            "/v1/memory_stores",
            json!({"name": "m", "metadata": metadata(pairs, 4, 1, 'k')}),
            json!({"name": "m", "metadata": metadata(pairs + 1, 4, 1, 'k')}),
        ),
        edge(
            "store metadata key characters",
            p.clone(),
            "/v1/memory_stores",
            json!({"name": "m", "metadata": metadata(1, key, 1, 'é')}),
            json!({"name": "m", "metadata": metadata(1, key + 1, 1, 'é')}),
        ),
        edge(
            "store metadata value characters",
            p.clone(),
            "/v1/memory_stores",
            json!({"name": "m", "metadata": metadata(1, 4, value, 'é')}),
            json!({"name": "m", "metadata": metadata(1, 4, value + 1, 'é')}),
        ),
        edge(
            "store update name characters",
            p.clone(),
            &format!("/v1/memory_stores/{store}"),
            json!({"name": rep('n', name)}),
            json!({"name": rep('n', name + 1)}),
        ),
        edge(
            "store update description characters",
            p.clone(),
            &format!("/v1/memory_stores/{store}"),
            json!({"description": rep('d', desc)}),
            json!({"description": rep('d', desc + 1)}),
        ),
        // The patch is judged on its result: the store holds one pair already.
        edge(
            "store update metadata pairs (the patched result)",
            p.clone(),
            &format!("/v1/memory_stores/{meta_store}"),
            json!({"metadata": metadata(pairs - 1, 4, 1, 'a')}),
            json!({"metadata": metadata(pairs, 4, 1, 'b')}),
        ),
        // Environments.
        edge(
            "environment name characters",
            p.clone(),
            "/v1/environments",
            json!({"name": rep('é', name)}),
            json!({"name": rep('é', name + 1)}),
        ),
        edge(
            "environment description characters",
            p.clone(),
            "/v1/environments",
            json!({"name": "e", "description": rep('d', desc)}),
            json!({"name": "e", "description": rep('d', desc + 1)}),
        ),
        edge(
            "environment metadata pairs",
            p.clone(),
            "/v1/environments",
            json!({"name": "e", "metadata": metadata(pairs, 4, 1, 'k')}),
            json!({"name": "e", "metadata": metadata(pairs + 1, 4, 1, 'k')}),
        ),
        edge(
            "environment update metadata value characters",
            p.clone(),
            &format!("/v1/environments/{env}"),
            json!({"metadata": metadata(1, 4, value, 'v')}),
            json!({"metadata": metadata(1, 4, value + 1, 'v')}),
        ),
    ];
    // Agents.
    let agent_body = |extra: Value| {
        let mut body = json!({"name": "a", "model": "claude-opus-4-6", "tools": [{"type": "agent_toolset_20260401"}]});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let custom_tools = |n: usize| -> Value {
        (0..n)
            .map(|i| json!({"type": "custom", "name": format!("tool_{i}"), "description": "d", "input_schema": {"type": "object"}}))
            .collect()
    };
    let mcp = |n: usize| -> Value {
        (0..n).map(|i| json!({"type": "url", "name": format!("mcp-{i}"), "url": format!("https://mcp{i}.example.com/mcp")})).collect()
    };
    let mcp_toolsets = |n: usize| -> Value {
        (0..n).map(|i| json!({"type": "mcp_toolset", "mcp_server_name": format!("mcp-{i}")})).collect()
    };
    edges.extend([
        edge("agent name characters", p.clone(), "/v1/agents",
            agent_body(json!({"name": rep('é', name)})), agent_body(json!({"name": rep('é', name + 1)}))),
        edge("agent metadata pairs", p.clone(), "/v1/agents",
            agent_body(json!({"metadata": metadata(pairs, 4, 1, 'k')})),
            agent_body(json!({"metadata": metadata(pairs + 1, 4, 1, 'k')}))),
        edge("agent system prompt characters", p.clone(), "/v1/agents",
            agent_body(json!({"system": rep('é', MAX_AGENT_SYSTEM_CHARS)})),
            agent_body(json!({"system": rep('é', MAX_AGENT_SYSTEM_CHARS + 1)}))),
        edge("agent tools", p.clone(), "/v1/agents",
            agent_body(json!({"tools": custom_tools(MAX_AGENT_TOOLS)})),
            agent_body(json!({"tools": custom_tools(MAX_AGENT_TOOLS + 1)}))),
        edge("agent MCP servers", p.clone(), "/v1/agents",
            agent_body(json!({"mcp_servers": mcp(MAX_AGENT_MCP_SERVERS), "tools": mcp_toolsets(MAX_AGENT_MCP_SERVERS)})),
            agent_body(json!({"mcp_servers": mcp(MAX_AGENT_MCP_SERVERS + 1), "tools": mcp_toolsets(MAX_AGENT_MCP_SERVERS + 1)}))),
        edge("agent update system prompt characters", p.clone(), &format!("/v1/agents/{agent}"),
            json!({"version": 1, "system": rep('s', MAX_AGENT_SYSTEM_CHARS)}),
            json!({"version": 2, "system": rep('s', MAX_AGENT_SYSTEM_CHARS + 1)})),
    ]);
    // Sessions.
    let session = |extra: Value| {
        let mut body = json!({"agent": agent, "environment_id": env});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let attach = |n: usize, instructions: usize| -> Value {
        stores[..n]
            .iter()
            .map(|id| json!({"type": "memory_store", "memory_store_id": id, "instructions": rep('é', instructions)}))
            .collect()
    };
    let initial = |n: usize| -> Value { (0..n).map(|i| message(&format!("m{i}"))).collect() };
    edges.extend([
        edge(
            "session memory stores",
            p.clone(),
            "/v1/sessions",
            session(json!({"resources": attach(MAX_SESSION_MEMORY_STORES, 1)})),
            session(json!({"resources": attach(MAX_SESSION_MEMORY_STORES + 1, 1)})),
        ),
        edge(
            "session memory instructions characters",
            p.clone(),
            "/v1/sessions",
            session(json!({"resources": attach(1, MAX_MEMORY_INSTRUCTIONS_CHARS)})),
            session(json!({"resources": attach(1, MAX_MEMORY_INSTRUCTIONS_CHARS + 1)})),
        ),
        edge(
            "session initial events",
            p.clone(),
            "/v1/sessions",
            session(json!({"initial_events": initial(50)})),
            session(json!({"initial_events": initial(51)})),
        ),
        edge(
            "session metadata pairs",
            p.clone(),
            "/v1/sessions",
            session(json!({"metadata": metadata(pairs, 4, 1, 'k')})),
            session(json!({"metadata": metadata(pairs + 1, 4, 1, 'k')})),
        ),
        edge(
            "session update metadata key characters",
            p.clone(),
            &format!("/v1/sessions/{}", f.ids["session"]),
            json!({"metadata": metadata(1, key, 1, 'k')}),
            json!({"metadata": metadata(1, key + 1, 1, 'k')}),
        ),
    ]);
    // Webhook endpoints.
    let url = |n: usize| format!("https://hooks.example.com/{}", rep('u', n - "https://hooks.example.com/".len()));
    edges.extend([
        edge(
            "webhook url characters",
            p.clone(),
            "/v1/webhook_endpoints",
            json!({"url": url(MAX_WEBHOOK_URL_CHARS)}),
            json!({"url": url(MAX_WEBHOOK_URL_CHARS + 1)}),
        ),
        edge(
            "webhook description characters",
            p,
            "/v1/webhook_endpoints",
            json!({"url": url(30), "description": rep('é', MAX_WEBHOOK_DESCRIPTION_CHARS)}),
            json!({"url": url(30), "description": rep('é', MAX_WEBHOOK_DESCRIPTION_CHARS + 1)}),
        ),
    ]);
    // Page sizes of every list: 1 to 100.
    let lists = [
        "/v1/memory_stores".to_owned(),
        memories,
        format!("/v1/memory_stores/{store}/memory_versions"),
        "/v1/environments".to_owned(),
        "/v1/agents".to_owned(),
        "/v1/sessions".to_owned(),
        "/v1/webhook_endpoints".to_owned(),
        format!("/v1/environments/{env}/work"),
    ];
    for list in lists {
        edges.push(get(
            format!("{list} limit, top"),
            format!("{list}?limit={MAX_PAGE_LIMIT}"),
            format!("{list}?limit={}", MAX_PAGE_LIMIT + 1),
        ));
        edges.push(get(format!("{list} limit, bottom"), format!("{list}?limit=1"), format!("{list}?limit=0")));
    }
    // The events list: 1 and up; more than 1,000 is capped (below).
    let events = format!("/v1/sessions/{}/events", f.ids["session"]);
    edges.push(get("events limit, bottom", format!("{events}?limit=1"), format!("{events}?limit=0")));
    edges
}

/// Whether `body` is the error envelope with `kind`.
fn is_envelope(body: &Value, kind: &str) -> bool {
    body["type"] == "error"
        && body["error"]["type"] == kind
        && body["error"]["message"].as_str().is_some_and(|m| !m.is_empty())
        && body["request_id"].as_str().is_some_and(|id| id.starts_with("req_"))
}

async fn call(f: &Fixture, method: &Method, (path, body): &(String, Option<Value>)) -> (u16, Value) {
    f.w.s.call(method.clone(), path, KEY, body.clone()).await
}

async fn still_serves(f: &Fixture) {
    let (status, body) = f.w.s.call(Method::GET, "/v1/memory_stores?limit=1", KEY, None).await;
    assert_eq!(status, 200, "the server stopped serving: {body}");
}

#[tokio::test]
async fn every_field_limit_accepts_its_edge_and_refuses_one_past_it() {
    let f = fixture().await;
    let mut stores = Vec::new();
    for i in 0..=MAX_SESSION_MEMORY_STORES {
        stores.push(f.w.s.new_store(&format!("limits-{i}")).await.id.to_string());
    }
    let (status, meta) =
        f.w.s
            .call(Method::POST, "/v1/memory_stores", KEY, Some(json!({"name": "meta", "metadata": {"zz": "1"}})))
            .await;
    assert_eq!(status, 200, "{meta}");
    let edges = field_edges(&f, &stores, meta["id"].as_str().unwrap());
    let mut failures = Vec::new();
    for e in &edges {
        let (status, body) = call(&f, &e.method, &e.at).await;
        if status != 200 {
            failures.push(format!("{}: at the limit answered {status}: {}", e.what, trim(&body)));
        }
        let (status, body) = call(&f, &e.method, &e.past).await;
        if status != e.status || !is_envelope(&body, e.kind) {
            failures.push(format!(
                "{}: past the limit answered {status} (want {} {}): {}",
                e.what,
                e.status,
                e.kind,
                trim(&body)
            ));
        }
    }
    still_serves(&f).await;
    assert!(failures.is_empty(), "{} of {} limits:\n{}", failures.len(), edges.len(), failures.join("\n"));
}

fn trim(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 300 { format!("{}…", &s[..300]) } else { s }
}

#[tokio::test]
async fn list_pages_past_their_cap_are_capped() {
    let f = fixture().await;
    let store = &f.ids["store"];
    for (path, cap) in [
        (format!("/v1/sessions/{}/events?limit=1001", f.ids["session"]), 1000),
        (format!("/v1/memory_stores/{store}/memories?view=full&limit={MAX_PAGE_LIMIT}"), 20),
    ] {
        let (status, body) = f.w.s.call(Method::GET, &path, KEY, None).await;
        assert_eq!(status, 200, "{path}: {}", trim(&body));
        assert!(body["data"].as_array().unwrap().len() <= cap, "{path}");
    }
}

/// A body of exactly `len` bytes: `json` padded with trailing spaces (JSON whitespace).
fn padded(json: &Value, len: usize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(json).unwrap();
    assert!(bytes.len() <= len, "the body is {} bytes already", bytes.len());
    bytes.resize(len, b' ');
    bytes
}

/// The request body limit (1 MiB) on every kind of write that takes one: exactly 1 MiB is read,
/// one byte more is `413 request_too_large` — announced by `content-length` or sent chunked —
/// and so is a body eight times larger, which the server refuses without reading it.
#[tokio::test]
async fn request_bodies_at_the_size_limit_are_read_and_one_byte_more_is_413() {
    let f = fixture().await;
    let max = mnemo_server::MAX_BODY_BYTES;
    let store = &f.ids["store"];
    let many: Vec<Value> = (0..2000).map(|i| message(&format!("batch {i}"))).collect();
    let bodies = [
        ("/v1/memory_stores".to_owned(), json!({"name": "body"})),
        (
            format!("/v1/memory_stores/{store}/memories"),
            json!({"path": "/body/TAG.md", "content": rep('é', MAX_CONTENT_BYTES / 2)}),
        ),
        (format!("/v1/memory_stores/{store}"), json!({"description": "body"})),
        ("/v1/environments".to_owned(), json!({"name": "body"})),
        ("/v1/agents".to_owned(), json!({"name": "body", "model": "claude-opus-4-6"})),
        (format!("/v1/sessions/{}/events", f.ids["session"]), json!({"events": many})),
        // One event's text as large as the body allows (there is no other limit on it).
        (format!("/v1/sessions/{}/events", f.ids["session"]), json!({"events": [message(&rep('t', max - 200))]})),
    ];
    let mut failures = Vec::new();
    for (path, json) in &bodies {
        for chunked in [false, true] {
            // Far past it too (8 MiB), on the first route: refused before it is read, and answered.
            let far = (path == &bodies[0].0).then_some((8 * max, 413));
            for (len, want) in [(max, 200), (max + 1, 413)].into_iter().chain(far) {
                // A memory path of its own per request (`TAG`).
                let json: Value =
                    serde_json::from_str(&json.to_string().replace("TAG", &format!("{chunked}-{len}"))).unwrap();
                let bytes = padded(&json, len);
                let req = f.w.s.raw(Method::POST, path).bearer_auth(KEY).header("content-type", "application/json");
                let req = if chunked {
                    let chunks =
                        bytes.chunks(64 * 1024).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>();
                    req.body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
                } else {
                    req.body(bytes)
                };
                match req.send().await {
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        let body: Value = resp.json().await.unwrap_or(Value::Null);
                        let ok = status == want && (want == 200 || is_envelope(&body, "request_too_large"));
                        if !ok {
                            failures.push(format!("{path} ({len} bytes, chunked {chunked}): {status} {}", trim(&body)));
                        }
                    }
                    Err(e) => failures.push(format!("{path} ({len} bytes, chunked {chunked}): no answer: {e:?}")),
                }
            }
        }
    }
    still_serves(&f).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A request written by hand on its own connection (`connection: close`), for heads reqwest
/// would change: its status and body, or the I/O error that ended it.
async fn raw_request(base: &str, target: &str, headers: &[(String, String)]) -> std::io::Result<(u16, Value)> {
    let addr = base.strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let mut head = format!("GET {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer))
        .await
        .map_err(|_| std::io::Error::other("no answer within 30 s"))??;
    let text = String::from_utf8_lossy(&answer);
    let status = text
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not HTTP: {text:.200}")))?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, serde_json::from_str(body).unwrap_or(Value::String(body.to_owned()))))
}

/// Bytes a header counts for against [`MAX_HEADER_BYTES`]: its name and its value.
fn header_bytes(headers: &[(String, String)], addr: &str) -> usize {
    // `host` and `connection` are written by `raw_request`.
    "host".len()
        + addr.len()
        + "connection".len()
        + "close".len()
        + headers.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>()
}

/// Pads `headers` with an `x-pad` header so that the request's headers count exactly `total`.
fn pad_to(mut headers: Vec<(String, String)>, total: usize, addr: &str) -> Vec<(String, String)> {
    let used = header_bytes(&headers, addr) + "x-pad".len();
    headers.push(("x-pad".to_owned(), rep('h', total - used)));
    headers
}

fn auth() -> (String, String) {
    ("authorization".to_owned(), format!("Bearer {KEY}"))
}

/// Header limits: the head's total size (one huge header, a huge `anthropic-beta`, a huge
/// `authorization`), the number of headers, and the request target's length (path and query).
/// At each limit the request is served; one past it is refused with the envelope (`431`, `414`);
/// far past it (beyond what the HTTP layer buffers) it is still answered.
#[tokio::test]
async fn request_heads_at_their_limits_are_served_and_past_them_refused_with_an_answer() {
    let f = fixture().await;
    let base = &f.w.s.base;
    let addr = base.strip_prefix("http://").unwrap();
    let list = "/v1/memory_stores?limit=1";
    let betas = |n: usize| -> String {
        // `managed-agents-2026-04-01,` repeated, then cut to `n` bytes at a comma.
        let one = "managed-agents-2026-04-01,";
        let mut s = one.repeat(n / one.len() + 1);
        s.truncate(n);
        s
    };
    struct Head {
        what: &'static str,
        target: String,
        headers: Vec<(String, String)>,
        status: u16,
    }
    let total = |headers: Vec<(String, String)>, n| pad_to(headers, n, addr);
    // Each makes the head count exactly `n` bytes.
    let rest = header_bytes(&[], addr);
    let huge_auth = |n: usize| {
        vec![("authorization".to_owned(), format!("Bearer {}", rep('k', n - rest - "authorization".len() - 7)))]
    };
    let beta = |n: usize| {
        vec![auth(), ("anthropic-beta".to_owned(), betas(n - "anthropic-beta".len() - header_bytes(&[auth()], addr)))]
    };
    let many = |n: usize| -> Vec<(String, String)> {
        // `host`, `connection` and `authorization` count too.
        let mut h = vec![auth()];
        h.extend((0..n - 3).map(|i| (format!("x-h{i}"), "1".to_owned())));
        h
    };
    let target = |n: usize| {
        let base = "/v1/memory_stores?limit=1&x=";
        format!("{base}{}", rep('q', n - base.len()))
    };
    let heads = vec![
        Head {
            what: "one huge header, at the limit",
            target: list.into(),
            headers: total(vec![auth()], MAX_HEADER_BYTES),
            status: 200,
        },
        Head {
            what: "one huge header, one byte past",
            target: list.into(),
            headers: total(vec![auth()], MAX_HEADER_BYTES + 1),
            status: 431,
        },
        Head {
            what: "a huge anthropic-beta, at the limit",
            target: list.into(),
            headers: beta(MAX_HEADER_BYTES),
            status: 200,
        },
        Head {
            what: "a huge anthropic-beta, one byte past",
            target: list.into(),
            headers: beta(MAX_HEADER_BYTES + 1),
            status: 431,
        },
        // An unknown key of the largest size is refused as a key, not as a head.
        Head {
            what: "a huge authorization, at the limit",
            target: list.into(),
            headers: huge_auth(MAX_HEADER_BYTES),
            status: 401,
        },
        Head {
            what: "a huge authorization, one byte past",
            target: list.into(),
            headers: huge_auth(MAX_HEADER_BYTES + 1),
            status: 431,
        },
        Head { what: "many headers, at the limit", target: list.into(), headers: many(MAX_HEADERS), status: 200 },
        Head { what: "many headers, one past", target: list.into(), headers: many(MAX_HEADERS + 1), status: 431 },
        Head {
            what: "a long request target, at the limit",
            target: target(MAX_URI_BYTES),
            headers: vec![auth()],
            status: 200,
        },
        Head {
            what: "a long request target, one byte past",
            target: target(MAX_URI_BYTES + 1),
            headers: vec![auth()],
            status: 414,
        },
        Head {
            what: "a long request target on an unknown route",
            target: format!("/{}", rep('r', MAX_URI_BYTES)),
            headers: vec![auth()],
            status: 414,
        },
    ];
    let mut failures = Vec::new();
    for h in &heads {
        match raw_request(base, &h.target, &h.headers).await {
            Ok((status, body)) => {
                let kind = match status {
                    401 => "authentication_error",
                    _ => "invalid_request_error",
                };
                if status != h.status || (status != 200 && !is_envelope(&body, kind)) {
                    failures.push(format!("{}: {status} (want {}): {}", h.what, h.status, trim(&body)));
                }
            }
            Err(e) => failures.push(format!("{}: no answer: {e}", h.what)),
        }
    }
    // Far past the limits, beyond what the HTTP layer buffers (a request head of 400 KiB, more
    // than 200 headers, a target over 64 KiB): it answers by itself, without the envelope.
    let far = [
        ("a 1 MiB header", list.to_owned(), total(vec![auth()], 1 << 20), 431),
        ("2,000 headers", list.to_owned(), many(2000), 431),
        ("a 100 KiB request target", target(100 * 1024), vec![auth()], 414),
    ];
    for (what, target, headers, want) in far {
        match raw_request(base, &target, &headers).await {
            Ok((status, _)) if status == want => {}
            Ok((status, body)) => failures.push(format!("{what}: {status} (want {want}): {}", trim(&body))),
            Err(e) => failures.push(format!("{what}: no answer: {e}")),
        }
    }
    still_serves(&f).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
