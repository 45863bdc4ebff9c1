//! Hostile input never makes the server fail. For every documented operation that takes a
//! body, random bodies and mutations of a valid one (a field dropped, retyped, given a strange
//! value, a stranger field added, the JSON cut short, bytes that are not JSON), and for every
//! operation random query strings built from its documented parameters, answer below `500` —
//! never a `5xx`, never a panic — and the server answers normally afterwards.
//!
//! Property-based (`proptest`) with a fixed budget; `MNEMO_FUZZ_CASES=N` runs longer. A failure
//! prints the operation and the request that broke it (shrunk).

mod limits;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::common::KEY;
use crate::openapi::{ADMIN, Fixture, Op, fill, fixture, operations};

fn cases(default: u32) -> u32 {
    std::env::var("MNEMO_FUZZ_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(default)
}

/// A valid body for each operation that takes one (also the isolation matrix's).
pub(crate) fn seed(op: &str, f: &Fixture) -> Value {
    match op {
        "memory_stores.create" => json!({"name": "s", "description": "d", "metadata": {"k": "v"}}),
        "memory_stores.update" => json!({"name": "s2", "metadata": {"k": null}}),
        "memory_stores.version_retention.update" => json!({"retention": "30d"}),
        "dreams.create" => json!({"inputs": [{"type": "memory_store", "memory_store_id": f.ids["store"]},
            {"type": "sessions", "session_ids": [f.ids["session"]]}], "model": "dreamer", "instructions": "merge"}),
        "memories.create" => json!({"path": "/fuzz/x.md", "content": "x"}),
        "memories.update" => json!({"content": "y", "path": "/fuzz/y.md",
            "precondition": {"type": "content_sha256", "content_sha256": "0".repeat(64)}}),
        "environments.create" => json!({"name": "e", "config": {"type": "self_hosted"}}),
        "environments.update" => json!({"description": "d", "metadata": {"k": "v"}}),
        "work.stop" => json!({"force": false}),
        "work.update" => json!({"metadata": {"a": "b"}}),
        "agents.create" => {
            json!({"name": "a", "model": "claude-opus-4-6", "tools": [{"type": "agent_toolset_20260401"}]})
        }
        "agents.update" => json!({"version": 1, "description": "x"}),
        "sessions.create" => json!({"agent": f.ids["agent"], "environment_id": f.ids["environment"],
            "resources": [{"type": "memory_store", "memory_store_id": f.ids["store"], "access": "read_only"}]}),
        "sessions.update" => json!({"title": "t", "metadata": {"k": "v"}}),
        // Port 9 (discard) on this host: whatever a spoiled URL still reaches is refused.
        "webhook_endpoints.create" => {
            json!({"url": "https://hooks.example.com/hook", "event_types": ["session.idled"], "description": "d"})
        }
        "webhook_endpoints.update" => json!({"url": "https://hooks.example.com/other", "event_types": null}),
        "webhook_endpoints.rotate_secret" => json!({"keep_previous_seconds": 60}),
        "memories.batch" => json!({"writes": [{"type": "create", "path": "/fuzz/b.md", "content": "b"},
            {"type": "update", "memory_id": "mem_0", "content": "c",
             "precondition": {"type": "content_sha256", "content_sha256": "0".repeat(64)}}]}),
        "events.send" => json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}]}),
        "organization.workspaces.create" => json!({"name": "w", "tags": {"team": "a"}}),
        "organization.workspaces.update" => json!({"name": "w2", "tags": {"team": null}}),
        "organization.api_keys.create" => json!({"name": "k", "workspace_id": f.ids["workspace_id"]}),
        "organization.api_keys.update" => json!({"name": "k2", "status": "active"}),
        "organization.workspaces.rate_limits.update" => {
            json!({"limits": [{"type": "requests_per_minute", "value": 60}]})
        }
        "organization.invites.create" => json!({"email": "fuzz@example.com", "role": "developer"}),
        "organization.users.update" => json!({"role": "user"}),
        "organization.workspaces.members.add" => {
            json!({"user_id": f.ids["user_id"], "workspace_role": "workspace_developer"})
        }
        "organization.workspaces.members.update" => json!({"workspace_role": "workspace_user"}),
        other => panic!("no seed body for {other}: add one"),
    }
}

/// Strings a parser may choke on.
fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("/".to_owned()),
        Just("/../etc/passwd".to_owned()),
        Just("\u{0}\u{202e}\u{2028}\u{feff}".to_owned()),
        Just("x".repeat(200_000)),
        Just("e\u{301}".to_owned()),
        Just("memstore_".to_owned()),
        Just("-1".to_owned()),
        Just("99999999999999999999999".to_owned()),
        Just("NaN".to_owned()),
        Just("2026-13-45T25:61:61Z".to_owned()),
        "\\PC{0,40}",
        "/[a-z/.]{0,30}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(json!(0)),
        nasty_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// How a valid body is spoiled.
#[derive(Debug, Clone)]
enum Mutation {
    /// Drop the field at this index (of the fields, recursively flattened).
    Drop(usize),
    /// Replace the value at this index.
    Replace(usize, Value),
    /// Add a field to the top object.
    Add(String, Value),
    /// Send this instead of the body.
    Whole(Value),
    /// Send the body's text cut at this fraction (per mille).
    Truncate(u16),
    /// Send these bytes.
    Bytes(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Drop),
        (any::<usize>(), json_value()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        ("[a-z_]{1,12}", json_value()).prop_map(|(k, v)| Mutation::Add(k, v)),
        json_value().prop_map(Mutation::Whole),
        (0..1000u16).prop_map(Mutation::Truncate),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(Mutation::Bytes),
    ]
}

/// The bytes to send: `body` spoiled by `m`.
fn apply(body: &Value, m: &Mutation) -> Vec<u8> {
    let mut v = body.clone();
    match m {
        Mutation::Drop(i) | Mutation::Replace(i, _) => {
            // Walk the keys in order and edit the i-th (a path, not a pointer, to stay safe).
            let mut paths = Vec::new();
            collect_paths(&v, &mut Vec::new(), &mut paths);
            if let Some(path) = (!paths.is_empty()).then(|| paths[i % paths.len()].clone()) {
                let (last, parents) = path.split_last().expect("a non-empty path");
                let mut cursor = &mut v;
                for step in parents {
                    cursor = match cursor {
                        Value::Object(o) => o.get_mut(step).expect("a collected key"),
                        Value::Array(a) => &mut a[step.parse::<usize>().expect("an index")],
                        _ => unreachable!("a collected path goes through containers"),
                    };
                }
                match (cursor, m) {
                    (Value::Object(o), Mutation::Drop(_)) => {
                        o.remove(last);
                    }
                    (Value::Object(o), Mutation::Replace(_, new)) => {
                        o.insert(last.clone(), new.clone());
                    }
                    (Value::Array(a), Mutation::Drop(_)) => {
                        a.remove(last.parse::<usize>().expect("an index"));
                    }
                    (Value::Array(a), Mutation::Replace(_, new)) => {
                        a[last.parse::<usize>().expect("an index")] = new.clone();
                    }
                    _ => {}
                }
            }
            serde_json::to_vec(&v).unwrap()
        }
        Mutation::Add(k, new) => {
            if let Value::Object(o) = &mut v {
                o.insert(k.clone(), new.clone());
            }
            serde_json::to_vec(&v).unwrap()
        }
        Mutation::Whole(new) => serde_json::to_vec(new).unwrap(),
        Mutation::Truncate(per_mille) => {
            let text = serde_json::to_vec(&v).unwrap();
            let cut = text.len() * usize::from(*per_mille) / 1000;
            text[..cut].to_vec()
        }
        Mutation::Bytes(bytes) => bytes.clone(),
    }
}

fn collect_paths(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                prefix.push(k.clone());
                out.push(prefix.clone());
                collect_paths(child, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                prefix.push(i.to_string());
                out.push(prefix.clone());
                collect_paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

async fn send(f: &Fixture, op: &Op, query: &str, body: Option<Vec<u8>>) -> (u16, String) {
    let url = fill(&op.path, |name| f.ids[name].clone());
    let url = if query.is_empty() { url } else { format!("{url}?{query}") };
    // The Admin API is called with the fixture's admin key, everything else with its API key.
    let key = if op.accepts.iter().any(|a| a == "api_key_bearer") { KEY } else { ADMIN };
    let mut req = f.w.s.raw(op.method.clone(), &url).bearer_auth(key).header("content-type", "application/json");
    if let Some(body) = body {
        req = req.body(body);
    }
    let resp = req.send().await.expect("the server answers");
    let status = resp.status().as_u16();
    let sse = resp.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    (status, if sse { String::new() } else { resp.text().await.unwrap_or_default() })
}

async fn still_serves(f: &Fixture) {
    let (status, body) = f.w.s.call(Method::GET, "/v1/memory_stores?limit=1", KEY, None).await;
    assert_eq!(status, 200, "the server stopped serving: {body}");
}

/// Runs `cases` generated inputs through `check`, failing with the shrunk input.
fn run<S: Strategy>(cases: u32, strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S::Value: std::fmt::Debug,
{
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    if let Err(e) = runner.run(&strategy, check) {
        panic!("{e}");
    }
}

#[test]
fn spoiled_request_bodies_never_make_the_server_fail() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let f = rt.block_on(fixture());
    let doc = serde_json::to_value(mnemo_server::openapi::document()).unwrap();
    let ops: Vec<Op> = operations(&doc)
        .into_iter()
        .filter(|op| doc["paths"][&op.path][op.method.as_str().to_lowercase()].get("requestBody").is_some())
        .collect();
    assert!(ops.len() >= 13, "{} operations take a body", ops.len());
    let seeds: Vec<Value> = ops.iter().map(|op| seed(&op.id, &f)).collect();
    run(cases(600), (0..ops.len(), mutation()), |(i, m)| {
        let (op, body) = (&ops[i], apply(&seeds[i], &m));
        let (status, answer) = rt.block_on(send(&f, op, "", Some(body.clone())));
        prop_assert!(
            status < 500,
            "{} answered {status} to {:?}: {answer}",
            op.id,
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
        Ok(())
    });
    rt.block_on(still_serves(&f));
}

#[test]
fn random_query_strings_never_make_the_server_fail() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let f = rt.block_on(fixture());
    let doc = serde_json::to_value(mnemo_server::openapi::document()).unwrap();
    // Reads only: a random query on a write would only add rows; the parsers are the same.
    let ops: Vec<(Op, Vec<String>)> = operations(&doc)
        .into_iter()
        .filter(|op| op.method == Method::GET && !op.accepts.is_empty())
        .map(|op| {
            let params = doc["paths"][&op.path]["get"]["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .filter(|p| p["in"] == "query")
                        .filter_map(|p| p["name"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            (op, params)
        })
        .collect();
    let value = prop_oneof![
        nasty_string().prop_map(|s| s.chars().take(2000).collect::<String>()),
        any::<i64>().prop_map(|n| n.to_string()),
        Just("true".to_owned()),
        Just("0".to_owned()),
        Just("%ZZ".to_owned()),
    ];
    let query = (0..ops.len(), prop::collection::vec((any::<prop::sample::Index>(), value), 0..5));
    run(cases(400), query, |(i, pairs)| {
        let (op, names) = &ops[i];
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in &pairs {
            let name = if names.is_empty() { "limit" } else { &names[name.index(names.len())] };
            // `wait_ms` and `block_ms` would only make the case slow.
            let value = if matches!(name, "wait_ms" | "block_ms") { "1" } else { value.as_str() };
            query.append_pair(name, value);
        }
        let mut query = query.finish();
        if op.id == "memory_changes.changes" {
            query.push_str("&format=json&wait_ms=0");
        }
        let (status, answer) = rt.block_on(send(&f, op, &query, None));
        prop_assert!(status < 500, "{} answered {status} to ?{query}: {answer}", op.id);
        Ok(())
    });
    rt.block_on(still_serves(&f));
}

#[tokio::test]
async fn a_tampered_page_cursor_is_refused() {
    let f = fixture().await;
    for i in 0..3 {
        let (status, _) =
            f.w.s.call(Method::POST, "/v1/memory_stores", KEY, Some(json!({"name": format!("cursor-{i}")}))).await;
        assert_eq!(status, 200);
    }
    let (_, page) = f.w.s.call(Method::GET, "/v1/memory_stores?limit=1", KEY, None).await;
    let cursor = page["next_page"].as_str().expect("a next page").to_owned();
    let mut tampered = vec![format!("{cursor}A"), cursor[..cursor.len() - 1].to_owned()];
    for (i, c) in cursor.char_indices() {
        let other = if c == 'A' { 'B' } else { 'A' };
        tampered.push(format!("{}{other}{}", &cursor[..i], &cursor[i + c.len_utf8()..]));
    }
    for bad in tampered {
        let (status, body) = f.w.s.call(Method::GET, &format!("/v1/memory_stores?limit=1&page={bad}"), KEY, None).await;
        assert_eq!(status, 400, "page={bad} (from {cursor}): {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
    }
    let (status, _) = f.w.s.call(Method::GET, &format!("/v1/memory_stores?limit=1&page={cursor}"), KEY, None).await;
    assert_eq!(status, 200, "the untouched cursor still works");
}
