//! The isolation matrix (issue 32): for EVERY operation of `GET /v1/openapi.json`, what a
//! credential of workspace B gets when it names workspace A's resources. Each operation has a row
//! saying how isolation is checked; an operation without one fails the test, so a new route
//! cannot ship without its answer here.
//!
//! - [`Row::Ids`]: the path names A's resources. B gets exactly the answer (status and message,
//!   ids aside) it gets for ids nobody ever used, and that answer is a refusal.
//! - [`Row::Listing`]: B's listing names none of A's ids.
//! - [`Row::References`]: the body names A's resources; answered as for unknown ids.
//! - [`Row::Creates`]: what B makes is in B: A's listing (`.1`) never shows it.
//! - [`Row::AdminOnly`]: the Admin API; B's API key is refused like any API key (admin keys are
//!   organization-wide by design).
//! - [`Row::Public`]: no credential, nothing of a workspace.

use std::collections::HashMap;
use std::time::Duration;

use mnemo_server::hash_credential;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::KEY;
use crate::hostile::seed;
use crate::openapi::{Fixture, Op, fill, fixture, operations, placeholder};

const KEY_B: &str = "sk-test-key-of-workspace-b-for-the-matrix";

enum Row {
    Ids,
    Listing,
    References,
    Creates(&'static str),
    AdminOnly,
    Public,
}

/// The row of every operation. A new operation gets one here, or the test fails naming it.
fn row(op: &str) -> Option<Row> {
    use Row::*;
    Some(match op {
        "service.healthz" | "service.openapi" => Public,
        "agents.list" | "environments.list" | "memory_stores.list" | "sessions.list" | "webhook_endpoints.list" => {
            Listing
        }
        "agents.create" => Creates("/v1/agents"),
        "environments.create" => Creates("/v1/environments"),
        "memory_stores.create" => Creates("/v1/memory_stores"),
        "webhook_endpoints.create" => Creates("/v1/webhook_endpoints"),
        "sessions.create" | "dreams.create" => References,
        "dreams.list" => Listing,
        "dreams.retrieve" | "dreams.cancel" | "dreams.archive" => Ids,
        "agents.retrieve" | "agents.update" | "agents.archive" => Ids,
        "environments.retrieve" | "environments.update" | "environments.delete" | "environments.archive" => Ids,
        "environments.list_keys" | "environments.create_key" | "environments.revoke_key" => Ids,
        "work.list" | "work.healthcheck" | "work.poll" | "work.stats" | "work.retrieve" | "work.update" => Ids,
        "work.ack" | "work.heartbeat" | "work.stop" => Ids,
        "memory_stores.retrieve" | "memory_stores.update" | "memory_stores.delete" | "memory_stores.archive" => Ids,
        "memory_changes.changes" | "memories.stream" | "memories.batch" | "memories.search" => Ids,
        "memories.search_all" => Listing,
        "memory_stores.version_retention.retrieve" | "memory_stores.version_retention.update" => Ids,
        "memories.list" | "memories.create" | "memories.retrieve" | "memories.update" | "memories.delete" => Ids,
        "memory_versions.list" | "memory_versions.retrieve" | "memory_versions.redact" => Ids,
        "sessions.retrieve" | "sessions.update" | "sessions.delete" | "sessions.archive" => Ids,
        "events.list" | "events.send" | "events.stream" => Ids,
        "webhook_endpoints.retrieve" | "webhook_endpoints.update" | "webhook_endpoints.delete" => Ids,
        "webhook_endpoints.deliveries" | "webhook_endpoints.rotate_secret" | "webhook_endpoints.secret" => Ids,
        o if o.starts_with("organization.") => AdminOnly,
        _ => return None,
    })
}

/// Workspace B: an API key, and an environment with a key (for the operations only a worker's
/// credential reaches).
struct B {
    env_key: String,
}

async fn workspace_b(f: &Fixture) -> B {
    let s = &f.w.s;
    let ws = s.store().create_workspace("B").await.unwrap();
    s.store().ensure_api_key_in(&ws, hash_credential(KEY_B), "b").await.unwrap();
    let body = json!({"name": "b's hosts", "config": {"type": "self_hosted"}});
    let (status, env) = s.call(Method::POST, "/v1/environments", KEY_B, Some(body)).await;
    assert_eq!(status, 200, "{env}");
    let env = env["id"].as_str().unwrap().to_owned();
    let (status, key) = s.call(Method::POST, &format!("/v1/environments/{env}/keys"), KEY_B, None).await;
    assert_eq!(status, 200, "{key}");
    B { env_key: key["key"].as_str().unwrap().to_owned() }
}

/// B's credential for `op`: its API key where the operation takes one, else its environment key.
fn credential<'a>(op: &Op, b: &'a B) -> &'a str {
    if op.accepts.iter().any(|a| a == "api_key_bearer") { KEY_B } else { &b.env_key }
}

/// The status and the error message of a call, ids replaced by `<id>`; streams end at once.
async fn answer(f: &Fixture, op: &Op, url: &str, key: &str, body: Option<&Value>, ids: &[&str]) -> (u16, String) {
    let mut req = f.w.s.raw(op.method.clone(), url).bearer_auth(key).timeout(Duration::from_secs(10));
    if let Some(body) = body {
        req = req.json(body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let sse = resp.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let text = if sse { String::new() } else { resp.text().await.unwrap_or_default() };
    let message = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or(text);
    let neutral = ids.iter().fold(message, |m, id| m.replace(id, "<id>"));
    (status, neutral)
}

/// A query that keeps waiting calls short.
fn short(op: &Op, url: String) -> String {
    match op.id.as_str() {
        "work.poll" => format!("{url}?block_ms=1"),
        "memory_changes.changes" => format!("{url}?format=json&wait_ms=0"),
        "memories.search" | "memories.search_all" => format!("{url}?q=a"),
        "work.heartbeat" => format!("{url}?expected_last_heartbeat=NO_HEARTBEAT"),
        _ => url,
    }
}

#[tokio::test]
async fn every_operation_answers_another_workspace_as_it_answers_unknown_ids() {
    let doc = serde_json::to_value(mnemo_server::openapi::document()).unwrap();
    let ops = operations(&doc);
    let missing: Vec<&str> = ops.iter().filter(|op| row(&op.id).is_none()).map(|op| op.id.as_str()).collect();
    assert!(missing.is_empty(), "operations without a row in the isolation matrix: {missing:?}");

    let f = fixture().await;
    let b = workspace_b(&f).await;
    let a_ids: Vec<&str> = f.ids.values().map(String::as_str).collect();
    let unknown: HashMap<&str, String> = f.ids.keys().map(|k| (*k, placeholder(k))).collect();
    let unknown_ids: Vec<&str> = unknown.values().map(String::as_str).collect();
    let all_ids: Vec<&str> = a_ids.iter().chain(&unknown_ids).copied().collect();
    let mut checked = 0;
    for op in &ops {
        let key = credential(op, &b);
        match row(&op.id).unwrap() {
            Row::Ids => {
                // Destructive calls run last on a fixture of their own would be tidier; here
                // every call is refused, so A's world is never changed (checked at the end).
                let body = op_body(op, &f);
                let theirs = short(op, fill(&op.path, |name| f.ids[name].clone()));
                let never = short(op, fill(&op.path, |name| unknown[name].clone()));
                let got = answer(&f, op, &theirs, key, body.as_ref(), &all_ids).await;
                let expected = answer(&f, op, &never, key, body.as_ref(), &all_ids).await;
                assert_eq!(got, expected, "{}: B on A's ids vs unknown ids", op.id);
                // A batch answers 200 with a result per write: each must be the refusal.
                let refused = match op.id.as_str() {
                    "memories.batch" => got.0 == 200 && !got.1.contains("\"status\":200"),
                    _ => matches!(got.0, 403 | 404),
                };
                assert!(refused, "{}: B on A's ids must be refused: {got:?}", op.id);
            }
            Row::Listing => {
                let (status, body) = f.w.s.call(op.method.clone(), &short(op, op.path.clone()), key, None).await;
                assert_eq!(status, 200, "{}: {body}", op.id);
                let text = body.to_string();
                for id in &a_ids {
                    assert!(!text.contains(id), "{}: B's listing names A's {id}: {text}", op.id);
                }
            }
            Row::References => {
                let body = op_body(op, &f).expect("a body");
                // Each of A's ids by the unknown id of its own kind (two maps' value orders differ).
                let never = f.ids.iter().fold(body.to_string(), |t, (name, a)| t.replace(a.as_str(), &unknown[*name]));
                let never: Value = serde_json::from_str(&never).unwrap();
                let got = answer(&f, op, &op.path, key, Some(&body), &all_ids).await;
                let expected = answer(&f, op, &op.path, key, Some(&never), &all_ids).await;
                assert_eq!(got, expected, "{}: A's resources in B's body vs unknown ids", op.id);
                assert!(matches!(got.0, 400 | 404), "{}: must be refused: {got:?}", op.id);
            }
            Row::Creates(list) => {
                let body = op_body(op, &f).expect("a body");
                let (status, made) = f.w.s.call(op.method.clone(), &op.path, key, Some(body)).await;
                assert_eq!(status, 200, "{}: {made}", op.id);
                let made = made["id"].as_str().unwrap();
                let (_, listed) = f.w.s.call(Method::GET, &format!("{list}?limit=100"), KEY, None).await;
                assert!(!listed.to_string().contains(made), "{}: A lists B's {made}", op.id);
            }
            Row::AdminOnly => {
                let url = fill(&op.path, |name| f.ids[name].clone());
                let (status, body) = f.w.s.call(op.method.clone(), &url, KEY_B, Some(json!({}))).await;
                let expected = if op.id == "organization.retrieve" { 200 } else { 403 };
                assert_eq!(status, expected, "{}: {body}", op.id);
            }
            Row::Public => continue,
        }
        checked += 1;
    }
    assert!(checked >= 60, "only {checked} operations checked");
    // Nothing B did reached A: A's store, session and environment are all still there.
    for path in [
        format!("/v1/memory_stores/{}", f.ids["store"]),
        format!("/v1/sessions/{}", f.ids["session"]),
        format!("/v1/environments/{}", f.ids["environment"]),
        format!("/v1/agents/{}", f.ids["agent"]),
        format!("/v1/webhook_endpoints/{}", f.ids["endpoint"]),
    ] {
        let (status, body) = f.w.s.call(Method::GET, &path, KEY, None).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body["archived_at"].is_null(), "{path} was archived by B: {body}");
    }
}

/// The body `op` is sent with: its hostile-suite seed where it takes one.
fn op_body(op: &Op, f: &Fixture) -> Option<Value> {
    let doc = serde_json::to_value(mnemo_server::openapi::document()).unwrap();
    let takes = doc["paths"][&op.path][op.method.as_str().to_lowercase()].get("requestBody").is_some();
    takes.then(|| seed(&op.id, f))
}
