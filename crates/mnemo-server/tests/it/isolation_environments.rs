//! Workspace isolation over HTTP for environments, their keys, work queues and webhook
//! endpoints: a key of workspace B gets, for A's resources, exactly the answer it gets for ids
//! nobody ever used, and B's listings are empty; an environment key of A reaches A's queue only.

use mnemo_api::{EnvironmentId, WebhookEndpointId, WorkId};
use mnemo_server::hash_credential;
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{Fixtures, KEY, TestServer};

const KEY_B: &str = "sk-test-key-of-workspace-b";

/// `body` with `ids` replaced by a placeholder, and without what differs per request.
fn neutral(mut body: Value, ids: &[&str]) -> String {
    if let Some(o) = body.as_object_mut() {
        o.remove("request_id");
    }
    let mut text = body.to_string();
    for id in ids {
        text = text.replace(id, "<id>");
    }
    text
}

#[tokio::test]
async fn another_workspaces_environments_work_and_endpoints_answer_like_unknown_ids() {
    let s = TestServer::start().await;
    let store = s.store();
    let b = store.create_workspace("B").await.unwrap();
    store.ensure_api_key_in(&b, hash_credential(KEY_B), "b").await.unwrap();

    // A (the Default workspace): an environment with a key and a queued item, and an endpoint.
    let (env, env_key) = s.new_environment_with_key().await;
    let keys = s.call(Method::GET, &format!("/v1/environments/{env}/keys"), KEY, None).await.1;
    let key = keys["data"][0]["id"].as_str().unwrap().to_owned();
    let (status, item) = s.call(Method::POST, &format!("/v1/environments/{env}/work/healthcheck"), KEY, None).await;
    assert_eq!(status, 200, "{item}");
    let item = item["id"].as_str().unwrap().to_owned();
    let body = json!({"url": "https://example.com/hook"});
    let (status, hook) = s.call(Method::POST, "/v1/webhook_endpoints", KEY, Some(body.clone())).await;
    assert_eq!(status, 200, "{hook}");
    let hook = hook["id"].as_str().unwrap().to_owned();

    let (env_x, item_x, hook_x) = (
        EnvironmentId::generate().to_string(),
        WorkId::generate().to_string(),
        WebhookEndpointId::generate().to_string(),
    );
    let key_x = mnemo_api::EnvironmentKeyId::generate().to_string();
    let hb = "heartbeat?expected_last_heartbeat=NO_HEARTBEAT";
    // (method, path about A's resources, the same path about unknown ids, body)
    #[rustfmt::skip]
    let calls: Vec<(Method, String, String, Option<Value>)> = vec![
        (Method::GET, format!("/v1/environments/{env}"), format!("/v1/environments/{env_x}"), None),
        (Method::POST, format!("/v1/environments/{env}"), format!("/v1/environments/{env_x}"), Some(json!({"name": "taken"}))),
        (Method::POST, format!("/v1/environments/{env}/archive"), format!("/v1/environments/{env_x}/archive"), None),
        (Method::POST, format!("/v1/environments/{env}/keys"), format!("/v1/environments/{env_x}/keys"), None),
        (Method::GET, format!("/v1/environments/{env}/keys"), format!("/v1/environments/{env_x}/keys"), None),
        (Method::POST, format!("/v1/environments/{env}/keys/{key}/revoke"), format!("/v1/environments/{env}/keys/{key_x}/revoke"), None),
        (Method::GET, format!("/v1/environments/{env}/work"), format!("/v1/environments/{env_x}/work"), None),
        (Method::GET, format!("/v1/environments/{env}/work/stats"), format!("/v1/environments/{env_x}/work/stats"), None),
        (Method::POST, format!("/v1/environments/{env}/work/healthcheck"), format!("/v1/environments/{env_x}/work/healthcheck"), None),
        (Method::GET, format!("/v1/environments/{env}/work/{item}"), format!("/v1/environments/{env}/work/{item_x}"), None),
        (Method::POST, format!("/v1/environments/{env}/work/{item}"), format!("/v1/environments/{env}/work/{item_x}"), Some(json!({"metadata": {"k": "v"}}))),
        (Method::POST, format!("/v1/environments/{env}/work/{item}/ack"), format!("/v1/environments/{env}/work/{item_x}/ack"), None),
        (Method::POST, format!("/v1/environments/{env}/work/{item}/{hb}"), format!("/v1/environments/{env}/work/{item_x}/{hb}"), None),
        (Method::POST, format!("/v1/environments/{env}/work/{item}/stop"), format!("/v1/environments/{env}/work/{item_x}/stop"), Some(json!({}))),
        (Method::GET, format!("/v1/webhook_endpoints/{hook}"), format!("/v1/webhook_endpoints/{hook_x}"), None),
        (Method::GET, format!("/v1/webhook_endpoints/{hook}/secret"), format!("/v1/webhook_endpoints/{hook_x}/secret"), None),
        (Method::POST, format!("/v1/webhook_endpoints/{hook}"), format!("/v1/webhook_endpoints/{hook_x}"), Some(json!({"description": "taken"}))),
        (Method::POST, format!("/v1/webhook_endpoints/{hook}/rotate_secret"), format!("/v1/webhook_endpoints/{hook_x}/rotate_secret"), None),
        (Method::GET, format!("/v1/webhook_endpoints/{hook}/deliveries"), format!("/v1/webhook_endpoints/{hook_x}/deliveries"), None),
        (Method::DELETE, format!("/v1/webhook_endpoints/{hook}"), format!("/v1/webhook_endpoints/{hook_x}"), None),
        (Method::DELETE, format!("/v1/environments/{env}"), format!("/v1/environments/{env_x}"), None),
    ];
    for (method, of_a, unknown, body) in calls {
        let (got_status, got) = s.call(method.clone(), &of_a, KEY_B, body.clone()).await;
        let (want_status, want) = s.call(method.clone(), &unknown, KEY_B, body).await;
        // 404, or 403 where the scope rules refuse an API key before any lookup (a worker's
        // acknowledgement or heartbeat): either way, what an unknown id gets.
        assert!(matches!(got_status, 403 | 404), "{method} {of_a}: {got}");
        assert_eq!(
            (got_status, neutral(got, &[&env, &key, &item, &hook])),
            (want_status, neutral(want, &[&env_x, &key_x, &item_x, &hook_x])),
            "{method} {of_a}"
        );
    }

    // B's listings are empty; A's resources are all there, untouched.
    for path in ["/v1/environments?include_archived=true", "/v1/webhook_endpoints"] {
        let (status, page) = s.call(Method::GET, path, KEY_B, None).await;
        assert_eq!((status, page["data"].as_array().map(Vec::len)), (200, Some(0)), "{path}: {page}");
    }
    let (_, a_env) = s.call(Method::GET, &format!("/v1/environments/{env}"), KEY, None).await;
    assert_eq!((a_env["name"].as_str(), &a_env["archived_at"]), (Some("e"), &Value::Null), "{a_env}");
    let (_, a_item) = s.call(Method::GET, &format!("/v1/environments/{env}/work/{item}"), KEY, None).await;
    assert_eq!((a_item["state"].as_str(), &a_item["metadata"]), (Some("queued"), &json!({})), "{a_item}");
    let (_, a_hook) = s.call(Method::GET, &format!("/v1/webhook_endpoints/{hook}"), KEY, None).await;
    assert_eq!(a_hook["description"], Value::Null, "{a_hook}");

    // An environment key of A reaches its own queue only: B's environment answers it as an
    // unknown one does, and its own poll hands out A's item.
    let (status, of_b) = s.call(Method::POST, "/v1/environments", KEY_B, Some(json!({"name": "b"}))).await;
    assert_eq!(status, 200, "{of_b}");
    let of_b = of_b["id"].as_str().unwrap().to_owned();
    let poll = |env: &str| format!("/v1/environments/{env}/work/poll?block_ms=50");
    let (got_status, got) = s.call(Method::GET, &poll(&of_b), &env_key, None).await;
    let (want_status, want) = s.call(Method::GET, &poll(&env_x), &env_key, None).await;
    assert_eq!((got_status, neutral(got, &[&of_b])), (want_status, neutral(want, &[&env_x])));
    let (status, polled) = s.call(Method::GET, &poll(&env), &env_key, None).await;
    assert_eq!((status, polled["id"].as_str()), (200, Some(item.as_str())), "{polled}");
}
