//! Typed input over HTTP: a malformed path id or query parameter is refused with the status,
//! error type and words the API has always used, whichever route carries it.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{KEY, TestServer};

#[tokio::test]
async fn malformed_ids_and_queries_are_refused_in_the_apis_words() {
    let s = TestServer::start().await;
    let store = s.new_store("s").await.id;
    let (_, env) = s.call(Method::POST, "/v1/environments", KEY, Some(json!({"name": "e"}))).await;
    let env = env["id"].as_str().unwrap().to_owned();
    let not_found = |message: &str| json!({"type": "not_found_error", "message": message});
    let invalid = |message: &str| json!({"type": "invalid_request_error", "message": message});
    let env_not_found = json!({"type": "not_found_error", "message": "environment `bad` not found",
                               "details": {"error_code": "environment_not_found"}});
    let limit = "limit must be an integer from 1 to 100 (got `0`)";
    let cases: Vec<(Method, String, u16, Value)> = vec![
        (Method::GET, "/v1/memory_stores/bad".into(), 404, not_found("memory store `bad` not found")),
        (Method::GET, "/v1/memory_stores/bad/memories/worse".into(), 404, not_found("memory store `bad` not found")),
        (Method::GET, format!("/v1/memory_stores/{store}/memories/bad"), 404, not_found("memory `bad` not found")),
        (
            Method::GET,
            format!("/v1/memory_stores/{store}/memory_versions/bad"),
            404,
            not_found("memory version `bad` not found"),
        ),
        (Method::POST, "/v1/agents/bad/archive".into(), 404, not_found("agent `bad` not found")),
        (Method::GET, "/v1/environments/bad/work/stats".into(), 404, env_not_found.clone()),
        (Method::POST, "/v1/environments/bad/keys".into(), 404, env_not_found),
        (
            Method::POST,
            format!("/v1/environments/{env}/keys/bad/revoke"),
            404,
            not_found("environment key `bad` not found"),
        ),
        (Method::GET, format!("/v1/environments/{env}/work/bad"), 404, not_found("work item `bad` not found")),
        (Method::DELETE, "/v1/sessions/bad".into(), 404, not_found("session `bad` not found")),
        (
            Method::GET,
            "/v1/webhook_endpoints/bad/deliveries".into(),
            404,
            not_found("webhook endpoint `bad` not found"),
        ),
        // Percent-escapes are decoded before an id is judged.
        (Method::GET, "/v1/sessions/sesn_%E2%80%8B".into(), 404, not_found("session `sesn_\u{200b}` not found")),
        (Method::GET, "/v1/memory_stores?limit=0".into(), 400, invalid(limit)),
        (
            Method::GET,
            "/v1/agents?include_archived=maybe".into(),
            400,
            invalid("include_archived must be `true` or `false` (got `maybe`)"),
        ),
        (
            Method::GET,
            "/v1/environments?limit=5&limit=6".into(),
            400,
            invalid("invalid query string: duplicate field `limit`"),
        ),
        (
            Method::GET,
            format!("/v1/memory_stores/{store}/memories?view=x"),
            400,
            invalid("view must be `basic` or `full` (got `x`)"),
        ),
        (
            Method::GET,
            format!("/v1/memory_stores/{store}/memories?depth=2"),
            400,
            invalid("depth must be 0 or 1 (got `2`)"),
        ),
        (
            Method::GET,
            format!("/v1/memory_stores/{store}/memory_versions?session_id=x"),
            400,
            invalid("session_id: `x` is not a valid session id (expected `sesn_…`)"),
        ),
        (
            Method::GET,
            format!("/v1/environments/{env}/work?page=x"),
            400,
            invalid(&mnemo_store::StoreError::InvalidCursor.to_string()),
        ),
        (
            Method::GET,
            "/v1/sessions?statuses[]=x".into(),
            400,
            invalid("statuses accepts idle, running, rescheduling and terminated (got `x`)"),
        ),
        (
            Method::GET,
            "/v1/webhook_endpoints?limit=101".into(),
            400,
            invalid("limit must be an integer from 1 to 100 (got `101`)"),
        ),
        (
            Method::DELETE,
            format!("/v1/memory_stores/{store}/memories/mem_x?expected_content_sha256=zz"),
            400,
            invalid("expected_content_sha256 must be 64 lowercase hexadecimal characters"),
        ),
    ];
    for (method, path, status, error) in cases {
        let (got, body) = s.call(method.clone(), &path, KEY, None).await;
        assert_eq!((got, &body["error"]), (status, &error), "{method} {path}: {body}");
    }
    // The session list has always taken the first of a repeated parameter.
    let (status, _) = s.call(Method::GET, "/v1/sessions?limit=2&limit=x", KEY, None).await;
    assert_eq!(status, 200);
    // A path that is not UTF-8 once decoded is answered by the HTTP layer, as it always was.
    let resp = s.raw(Method::GET, "/v1/sessions/%FF/events").bearer_auth(KEY).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert_eq!(resp.text().await.unwrap(), "Invalid URL: Invalid UTF-8 in `session`");
}
