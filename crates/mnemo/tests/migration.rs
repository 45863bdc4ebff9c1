//! A database made by the mnemo before workspaces (committed fixtures, made with
//! `scripts/make-migration-fixture` from commit 4ef1044) migrates at the first start of this one:
//! everything moves into the Default workspace and goes on working unchanged — the old API key,
//! the environment key, stores, memories and their versions, sessions and their events, webhook
//! endpoints — and the Admin API sees it there.

mod common;

use std::path::Path;

use reqwest::Method;
use serde_json::{Value, json};

use common::Server;

/// The fixtures' credentials and ids (what the script printed when it made them).
const API_KEY: &str = "sk-migration-fixture-0123456789abcdef0123456789";
const ADMIN_KEY: &str = "sk-mnemo-admin-migration-0123456789abcdef0123";

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

async fn call(base: &str, method: Method, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut req = client.request(method, format!("{base}{path}")).bearer_auth(key);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn ok(base: &str, method: Method, path: &str, key: &str, body: Option<Value>) -> Value {
    let (status, body) = call(base, method, path, key, body).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// What the old database holds, read through the new server; then new writes.
async fn serves_what_it_held(base: &str) {
    // The old key still works, in the Default workspace, which holds everything.
    let stores = ok(base, Method::GET, "/v1/memory_stores?include_archived=true", API_KEY, None).await;
    let names: Vec<&str> = stores["data"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 2, "{stores}");
    assert!(names.contains(&"Team notes") && names.contains(&"Old project"), "{names:?}");
    let notes = stores["data"].as_array().unwrap().iter().find(|s| s["name"] == "Team notes").unwrap();
    let store = notes["id"].as_str().unwrap();
    let memories = ok(base, Method::GET, &format!("/v1/memory_stores/{store}/memories?view=full"), API_KEY, None).await;
    let mut paths: Vec<&str> =
        memories["data"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
    paths.sort_unstable();
    assert_eq!(paths, ["/decisions/2026-11.md", "/people/ana.md"], "{memories}");
    let ana = memories["data"].as_array().unwrap().iter().find(|m| m["path"] == "/people/ana.md").unwrap();
    assert_eq!(ana["content"], "Ana leads sync and the worker.\n");
    let versions = ok(base, Method::GET, &format!("/v1/memory_stores/{store}/memory_versions"), API_KEY, None).await;
    assert_eq!(versions["data"].as_array().unwrap().len(), 5, "create, update, create, delete, create: {versions}");

    let sessions = ok(base, Method::GET, "/v1/sessions", API_KEY, None).await;
    let session = sessions["data"][0]["id"].as_str().unwrap();
    let events = ok(base, Method::GET, &format!("/v1/sessions/{session}/events"), API_KEY, None).await;
    assert!(events.to_string().contains("hello"), "{events}");
    let env = sessions["data"][0]["environment_id"].as_str().unwrap();
    let endpoints = ok(base, Method::GET, "/v1/webhook_endpoints", API_KEY, None).await;
    assert_eq!(endpoints["data"][0]["url"], "https://hooks.example.com/mnemo", "{endpoints}");

    // New writes land beside the old rows.
    let made = ok(
        base,
        Method::POST,
        &format!("/v1/memory_stores/{store}/memories"),
        API_KEY,
        Some(json!({
            "path": "/after-migration.md", "content": "written by the new mnemo"
        })),
    )
    .await;
    assert_eq!(made["path"], "/after-migration.md");

    // The Admin API: one Default workspace holding it all, the old key active in it.
    let all = ok(base, Method::GET, "/v1/organizations/workspaces?include_default=true", ADMIN_KEY, None).await;
    let workspaces = all["data"].as_array().unwrap();
    assert_eq!(workspaces.len(), 1, "{all}");
    assert_eq!(workspaces[0]["name"], "Default");
    let default = workspaces[0]["id"].as_str().unwrap();
    let keys = ok(base, Method::GET, "/v1/organizations/api_keys", ADMIN_KEY, None).await;
    assert_eq!(keys["data"].as_array().unwrap().len(), 1, "{keys}");
    // (As hosted, a key of the Default workspace names no workspace.)
    assert_eq!((keys["data"][0]["status"].as_str(), &keys["data"][0]["workspace_id"]), (Some("active"), &Value::Null));
    assert_eq!(keys["data"][0]["created_by"], Value::Null, "a key from before has no maker");
    // Answers name the Default workspace.
    let resp =
        reqwest::Client::new().get(format!("{base}/v1/environments/{env}")).bearer_auth(API_KEY).send().await.unwrap();
    assert_eq!(resp.headers()["anthropic-workspace-id"], default);
}

/// The environment key of the old database still polls its queue.
async fn the_worker_key_still_polls(base: &str, env_key: &str, env: &str) {
    let (status, body) =
        call(base, Method::GET, &format!("/v1/environments/{env}/work/poll?block_ms=1"), env_key, None).await;
    assert!(matches!(status, 200 | 204), "{status}: {body}");
}

fn environment_and_key(ids: &Value) -> (&str, &str) {
    (ids["environment"].as_str().unwrap(), ids["environment_key"].as_str().unwrap())
}

fn ids() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("pre-tenancy.json")).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqlite_database_from_before_workspaces_moves_into_the_default_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.sqlite");
    std::fs::copy(fixture("pre-tenancy.sqlite"), &db).unwrap();
    let server = Server::start(&db, &["--admin-key", ADMIN_KEY]);
    serves_what_it_held(&server.base).await;
    let ids = ids();
    let (env, key) = environment_and_key(&ids);
    the_worker_key_still_polls(&server.base, key, env).await;
    drop(server);
    // A second start finds it migrated and changes nothing.
    let again = Server::start(&db, &["--admin-key", ADMIN_KEY]);
    let stores = ok(&again.base, Method::GET, "/v1/memory_stores", API_KEY, None).await;
    assert_eq!(stores["data"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_from_before_workspaces_moves_into_the_default_workspace() {
    let schema = mnemo_store_tests::Postgres::fresh_schema().await;
    let dump = std::fs::read_to_string(fixture("pre-tenancy-postgres.sql")).unwrap().replace("@SCHEMA@", &schema);
    let base = mnemo_store_tests::Postgres::url();
    let restore = std::process::Command::new("psql")
        .args([base.as_str(), "-v", "ON_ERROR_STOP=1", "-q", "-c", &format!("DROP SCHEMA {schema} CASCADE")])
        .output()
        .unwrap();
    assert!(restore.status.success(), "{}", String::from_utf8_lossy(&restore.stderr));
    let mut psql = std::process::Command::new("psql")
        .args([base.as_str(), "-v", "ON_ERROR_STOP=1", "-q"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    psql.stdin.take().unwrap().write_all(dump.as_bytes()).unwrap();
    let out = psql.wait_with_output().unwrap();
    assert!(out.status.success(), "restore: {}", String::from_utf8_lossy(&out.stderr));
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-csearch_path%3D{schema}");
    let server = Server::on(&url, &["--admin-key", ADMIN_KEY]);
    serves_what_it_held(&server.base).await;
    let ids =
        serde_json::from_str::<Value>(&std::fs::read_to_string(fixture("pre-tenancy-postgres.json")).unwrap()).unwrap();
    let (env, key) = environment_and_key(&ids);
    the_worker_key_still_polls(&server.base, key, env).await;
}
