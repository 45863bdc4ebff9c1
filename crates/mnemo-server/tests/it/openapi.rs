//! `GET /v1/openapi.json` tells the truth: every operation it lists is routed and refuses a
//! request without credentials unless it says the operation is public; every path it lists
//! answers `405` to the methods it does not list there; and every operation accepts exactly the
//! credential kinds it names, refusing the others with `403`.
//!
//! (The API's routes are built from the same annotations as the document, `routes::api`, so a
//! route cannot be served undocumented; the console under `/console` is a web UI, not API.)

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{KEY, TestServer};
use crate::work::world;

/// One documented operation.
#[derive(Debug)]
pub(crate) struct Op {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) id: String,
    /// The credential schemes it accepts (empty: public).
    pub(crate) accepts: Vec<String>,
}

pub(crate) fn operations(doc: &Value) -> Vec<Op> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let accepts = op["security"]
                .as_array()
                .expect("every operation states its credentials")
                .iter()
                .flat_map(|alt| alt.as_object().expect("a security requirement").keys().cloned())
                .collect();
            ops.push(Op {
                method: method.to_uppercase().parse().expect("an HTTP method"),
                path: path.clone(),
                id: op["operationId"].as_str().expect("an operation id").to_owned(),
                accepts,
            });
        }
    }
    ops
}

/// `path` with each `{name}` replaced by `value(name)`.
pub(crate) fn fill(path: &str, value: impl Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        let end = rest[start..].find('}').expect("a closed parameter") + start;
        out.push_str(&rest[..start]);
        out.push_str(&value(&rest[start + 1..end]));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

pub(crate) fn placeholder(name: &str) -> String {
    let prefix = match name {
        "store" => "memstore_",
        "memory" => "mem_",
        "version" => "memver_",
        "environment" => "env_",
        "key" => "envkey_",
        "work" => "work_",
        "agent" => "agent_",
        "session" => "sesn_",
        "endpoint" => "whep_",
        "workspace_id" => "wrkspc_",
        "api_key_id" => "apikey_",
        "rate_limit_id" => "ratelimit_",
        "user_id" => "user_",
        "invite_id" => "invite_",
        "dream" => "drm_",
        other => panic!("a path parameter this test does not know: {other}"),
    };
    format!("{prefix}0000000000000000000000")
}

async fn document(s: &TestServer) -> Value {
    let resp = s.raw(Method::GET, "/v1/openapi.json").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    resp.json().await.unwrap()
}

#[tokio::test]
async fn the_document_is_served_without_credentials_and_describes_the_router() {
    let s = TestServer::start().await;
    let doc = document(&s).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc, serde_json::to_value(mnemo_server::openapi::document()).unwrap());
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    for op in operations(&doc) {
        for scheme in &op.accepts {
            assert!(schemes.contains_key(scheme), "{} names an undeclared scheme {scheme}", op.id);
        }
        let answers = doc["paths"][&op.path][op.method.as_str().to_lowercase()]["responses"].as_object().unwrap();
        assert!(answers.contains_key("default"), "{} documents no error answer", op.id);
    }
    assert!(operations(&doc).len() >= 49);
}

#[tokio::test]
async fn every_documented_operation_is_routed_and_only_its_methods() {
    let s = TestServer::start().await;
    let doc = document(&s).await;
    let ops = operations(&doc);
    for op in &ops {
        let url = fill(&op.path, placeholder);
        let resp = s.raw(op.method.clone(), &url).json(&json!({})).send().await.unwrap();
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if op.accepts.is_empty() {
            assert_eq!(status, 200, "{} {url} is public: {body}", op.method);
        } else {
            assert_eq!(status, 401, "{} {url} without credentials: {body}", op.method);
            assert_eq!(body["error"]["type"], "authentication_error");
        }
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        let url = fill(path, placeholder);
        for method in [Method::GET, Method::POST, Method::DELETE, Method::PUT, Method::PATCH] {
            if item.get(method.as_str().to_lowercase()).is_some() {
                continue;
            }
            let resp = s.raw(method.clone(), &url).bearer_auth(KEY).send().await.unwrap();
            assert_eq!(resp.status(), 405, "{method} {url} is not documented, so it is not allowed");
        }
    }
}

/// Calls that change what the other calls of this test need; each gets a world of its own.
fn destructive(op: &Op) -> bool {
    ["delete", "archive", "revoke_key", "stop", "redact"].iter().any(|d| op.id.ends_with(&format!(".{d}")))
}

/// A world in which every path parameter names something real: an environment with a key and a
/// session on it (two stores, one read-only) whose work item is leased with a sessions token,
/// a memory in the read-write store and its version, an agent.
pub(crate) struct Fixture {
    pub(crate) w: crate::work::World,
    pub(crate) ids: std::collections::HashMap<&'static str, String>,
    token: String,
}

pub(crate) async fn fixture() -> Fixture {
    let w = world(300).await;
    let (session, work, token) = w.leased().await;
    let (status, memory) =
        w.s.call(
            Method::POST,
            &format!("/v1/memory_stores/{}/memories", w.rw_store),
            KEY,
            Some(json!({"path": "/a.md", "content": "a"})),
        )
        .await;
    assert_eq!(status, 200, "{memory}");
    let (_, keys) = w.s.call(Method::GET, &format!("/v1/environments/{}/keys", w.env), KEY, None).await;
    let (status, endpoint) =
        w.s.call(Method::POST, "/v1/webhook_endpoints", KEY, Some(json!({"url": "https://hooks.example.com/hook"})))
            .await;
    assert_eq!(status, 200, "{endpoint}");
    w.s.store().ensure_admin_key(mnemo_server::hash_credential(ADMIN), "openapi").await.unwrap();
    let (status, workspace) =
        w.s.call(Method::POST, "/v1/organizations/workspaces", ADMIN, Some(json!({"name": "Team"}))).await;
    assert_eq!(status, 200, "{workspace}");
    let workspace = workspace["id"].as_str().unwrap().to_owned();
    let (status, api_key) = w
        .s
        .call(Method::POST, "/v1/organizations/api_keys", ADMIN, Some(json!({"name": "k", "workspace_id": workspace})))
        .await;
    assert_eq!(status, 200, "{api_key}");
    // A person (invited, then joined) and a pending invite.
    let store = w.s.store();
    let person = mnemo_api::NewInvite { email: "person@example.com".into(), role: mnemo_api::OrgRole::Developer };
    store.create_invite(person, [7; 32], 3600).await.unwrap();
    let joining = mnemo_store::ops::people::Joining { name: "P".into(), password_hash: "$argon2id$x".into() };
    let user = store.accept_invite([7; 32], joining).await.unwrap();
    let pending = mnemo_api::NewInvite { email: "pending@example.com".into(), role: mnemo_api::OrgRole::User };
    let invite = store.create_invite(pending, [8; 32], 3600).await.unwrap();
    // A dream, canceled (so every dream call, archive included, has something to act on).
    let ws = store.default_workspace().await.unwrap();
    let request = mnemo_api::DreamRequest {
        store: w.rw_store.parse().unwrap(),
        sessions: vec![session.parse().unwrap()],
        model: "dreamer".into(),
        instructions: None,
        update_existing: false,
    };
    let dream = store.create_dream(&ws, request, None, 100).await.unwrap();
    store.cancel_dream(&ws, &dream.id).await.unwrap();
    let ids = [
        ("dream", dream.id.to_string()),
        ("store", w.rw_store.clone()),
        ("memory", memory["id"].as_str().unwrap().to_owned()),
        ("version", memory["memory_version_id"].as_str().unwrap().to_owned()),
        ("environment", w.env.clone()),
        ("key", keys["data"][0]["id"].as_str().unwrap().to_owned()),
        ("work", work),
        ("agent", w.agent.clone()),
        ("session", session),
        ("endpoint", endpoint["id"].as_str().unwrap().to_owned()),
        ("workspace_id", workspace),
        ("api_key_id", api_key["id"].as_str().unwrap().to_owned()),
        ("rate_limit_id", "ratelimit_api".to_owned()),
        ("user_id", user.id.to_string()),
        ("invite_id", invite.id.to_string()),
    ]
    .into_iter()
    .collect();
    Fixture { w, ids, token }
}

/// The fixture's admin key.
pub(crate) const ADMIN: &str = "sk-mnemo-admin-openapi-0123456789abcdefghijklmnopqrstuvwxyz";

const KINDS: [&str; 6] =
    ["api_key", "api_key_bearer", "environment_key", "sessions_token", "admin_key", "admin_key_bearer"];

impl Fixture {
    async fn call(&self, op: &Op, kind: &str) -> (u16, String) {
        let url = fill(&op.path, |name| self.ids[name].clone());
        // Streams answer their headers at once; a short query keeps long polls short.
        let url = match op.id.as_str() {
            "work.poll" => format!("{url}?block_ms=1"),
            "memory_changes.changes" => format!("{url}?format=json&wait_ms=0"),
            _ => url,
        };
        let req = self.w.s.raw(op.method.clone(), &url).json(&json!({}));
        let req = match kind {
            "api_key" => req.header("x-api-key", KEY),
            "api_key_bearer" => req.bearer_auth(KEY),
            "environment_key" => req.bearer_auth(&self.w.env_key),
            "sessions_token" => req.bearer_auth(&self.token),
            "admin_key" => req.header("x-api-key", ADMIN),
            "admin_key_bearer" => req.bearer_auth(ADMIN),
            other => panic!("unknown credential kind {other}"),
        };
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let sse = resp.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        // An open stream is an accepted call; do not wait for it to end.
        let body = if sse { String::new() } else { resp.text().await.unwrap() };
        (status, body)
    }
}

#[tokio::test]
async fn every_operation_accepts_exactly_the_credentials_it_documents() {
    let doc = serde_json::to_value(mnemo_server::openapi::document()).unwrap();
    let ops: Vec<Op> = operations(&doc).into_iter().filter(|op| !op.accepts.is_empty()).collect();
    let shared = fixture().await;
    for op in &ops {
        let (refused, accepted): (Vec<&str>, Vec<&str>) =
            KINDS.iter().partition(|kind| !op.accepts.iter().any(|a| a == *kind));
        let own = if destructive(op) { Some(fixture().await) } else { None };
        let f = own.as_ref().unwrap_or(&shared);
        // Refusals first: they change nothing.
        for kind in &refused {
            let (status, body) = f.call(op, kind).await;
            assert_eq!(status, 403, "{} with {kind} must be refused: {body}", op.id);
        }
        for (i, kind) in accepted.iter().enumerate() {
            // After a destructive call succeeded, the next credential gets a fresh world.
            let fresh = if destructive(op) && i > 0 { Some(fixture().await) } else { None };
            let f = fresh.as_ref().unwrap_or(f);
            let (status, body) = f.call(op, kind).await;
            assert!(!matches!(status, 401 | 403), "{} with {kind} must be accepted, got {status}: {body}", op.id);
        }
    }
}
