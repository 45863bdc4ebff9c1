use reqwest::Method;

use crate::common::{KEY, TestServer};

#[tokio::test]
async fn bearer_and_x_api_key_are_accepted_and_anything_else_is_401() {
    let s = TestServer::start().await;
    let ok_bearer = s.raw(Method::GET, "/v1/memory_stores").bearer_auth(KEY).send().await.unwrap();
    assert_eq!(ok_bearer.status(), 200);
    let ok_header = s.raw(Method::GET, "/v1/memory_stores").header("x-api-key", KEY).send().await.unwrap();
    assert_eq!(ok_header.status(), 200);

    for req in [
        s.raw(Method::GET, "/v1/memory_stores"),
        s.raw(Method::GET, "/v1/memory_stores").bearer_auth("wrong"),
        s.raw(Method::GET, "/v1/memory_stores").header("x-api-key", "wrong"),
        s.raw(Method::GET, "/v1/memory_stores").header("authorization", format!("Basic {KEY}")),
    ] {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 401);
        assert!(resp.headers()["request-id"].to_str().unwrap().starts_with("req_"));
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["type"], "authentication_error");
        assert!(!body.to_string().contains("wrong"), "credentials are never echoed");
    }
}

#[tokio::test]
async fn both_memory_and_managed_agents_betas_are_refused() {
    let s = TestServer::start().await;
    let resp = s
        .raw(Method::GET, "/v1/memory_stores")
        .bearer_auth(KEY)
        .header("anthropic-beta", "managed-agents-2026-04-01,agent-memory-2026-07-22")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    for beta in ["agent-memory-2026-07-22", "managed-agents-2026-04-01", "something-else"] {
        let resp = s
            .raw(Method::GET, "/v1/memory_stores")
            .bearer_auth(KEY)
            .header("anthropic-beta", beta)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{beta}");
    }
}

#[tokio::test]
async fn health_unknown_routes_and_request_ids() {
    let s = TestServer::start().await;
    let health = s.raw(Method::GET, "/healthz").send().await.unwrap();
    assert_eq!(health.status(), 200);
    let unknown = s.raw(Method::GET, "/v1/nope").bearer_auth(KEY).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    let body: serde_json::Value = unknown.json().await.unwrap();
    assert_eq!(body["error"]["type"], "not_found_error");
    let a = s.raw(Method::GET, "/healthz").send().await.unwrap();
    let b = s.raw(Method::GET, "/healthz").send().await.unwrap();
    assert_ne!(a.headers()["request-id"], b.headers()["request-id"]);
}
