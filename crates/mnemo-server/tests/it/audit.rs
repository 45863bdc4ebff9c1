//! The audit log through the API: what an action records, who may read it, and that it never
//! holds a secret.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{Fixtures, KEY, TestServer};

const ADMIN: &str = "sk-mnemo-admin-test";

async fn server() -> TestServer {
    let s = TestServer::start().await;
    s.store().ensure_admin_key(mnemo_server::hash_credential(ADMIN), "test").await.unwrap();
    s
}

async fn log(s: &TestServer, query: &str) -> Value {
    let (status, body) = s.call(Method::GET, &format!("/v1/organizations/audit_events{query}"), ADMIN, None).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn actions_are_recorded_with_actor_resource_and_outcome_and_never_a_secret() {
    let s = server().await;
    let (env, secret) = s.new_environment_with_key().await;
    let store = s.new_store("doomed").await;
    let (status, _) = s.call(Method::DELETE, &format!("/v1/memory_stores/{}", store.id), KEY, None).await;
    assert_eq!(status, 200);
    let (status, _) = s.call(Method::DELETE, &format!("/v1/memory_stores/{}", store.id), KEY, None).await;
    assert_eq!(status, 404, "a second delete finds nothing");

    let body = log(&s, "").await;
    assert!(!body.to_string().contains(&secret), "the environment key's secret is not in the log: {body}");
    let entries = body["data"].as_array().unwrap();
    let summary: Vec<_> = entries
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["outcome"].as_str().unwrap(), e["resource"]["id"].clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("memory_store.delete", "failure", json!(store.id)),
            ("memory_store.delete", "success", json!(store.id)),
            ("environment_key.create", "success", entries[2]["resource"]["id"].clone()),
        ],
        "newest first: {body}"
    );
    let created = &entries[2];
    assert!(created["resource"]["id"].as_str().unwrap().starts_with("envkey_"), "{created}");
    assert_eq!(created["details"], json!({"environment_id": env}));
    assert_eq!(created["actor"]["type"], "api_key");
    assert_eq!(created["client_ip"], "127.0.0.1");
    assert!(created["workspace_id"].as_str().unwrap().starts_with("wrkspc_"), "{created}");
    assert_eq!(created["type"], "audit_event");
    assert_eq!(entries[0]["details"], json!({"status": 404}));

    let only = log(&s, "?action=environment_key.create&limit=5").await;
    assert_eq!(only["data"].as_array().unwrap().len(), 1, "{only}");
    let page = log(&s, "?limit=1").await;
    assert_eq!((page["has_more"].as_bool(), page["data"].as_array().unwrap().len()), (Some(true), 1));
    let next = log(&s, &format!("?limit=5&after_id={}", page["last_id"].as_str().unwrap())).await;
    assert_eq!(next["data"].as_array().unwrap().len(), 2, "{next}");
}

#[tokio::test]
async fn only_an_admin_key_reads_the_log_and_bad_filters_are_refused() {
    let s = server().await;
    let (status, body) = s.call(Method::GET, "/v1/organizations/audit_events", KEY, None).await;
    assert_eq!((status, body["error"]["type"].as_str()), (403, Some("permission_error")), "{body}");
    let (status, body) = s.call(Method::GET, "/v1/organizations/audit_events?actor_type=robot", ADMIN, None).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("actor_type"), "{body}");
    let (status, body) = s.call(Method::GET, "/v1/organizations/audit_events?limit=0", ADMIN, None).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) =
        s.call(Method::GET, "/v1/organizations/audit_events?after_id=audit_nope&before_id=audit_x", ADMIN, None).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.call(Method::GET, "/v1/organizations/audit_events?after_id=audit_nope", ADMIN, None).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = s.call(Method::GET, "/v1/memory_stores", ADMIN, None).await;
    assert_eq!(status, 403, "an admin key reaches no Managed Agents endpoint: {body}");
}
