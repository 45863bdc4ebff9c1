//! Rate limits per workspace (admin-api.md §8.9): API-key requests to Managed Agents endpoints
//! take from their workspace's bucket; over it they get a `429 rate_limit_error` with
//! `retry-after`; counted answers carry the `anthropic-ratelimit-requests-*` headers; worker
//! traffic and the Admin API are never counted.

use mnemo_server::{AdminSettings, hash_credential};
use mnemo_store::Limits;
use mnemo_store::rules::rate_limit::{self, MANAGED_AGENTS_ENTRY_ID};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{KEY, TestServer};
use crate::work::world_on;

const ADMIN: &str = "sk-mnemo-admin-test-0123456789abcdefghijklmnopqrstuvwxyz";
const TEAM_KEY: &str = "sk-mnemo-team-b-0123456789abcdefghijklmnopqrstuvwxyz";

/// A server whose organization allows `org` requests per minute (`None`: no `--rate-limit`).
async fn server(org: Option<u64>) -> TestServer {
    let mut settings = AdminSettings::default();
    if let Some(n) = org {
        settings.org_limits.insert((MANAGED_AGENTS_ENTRY_ID.into(), mnemo_api::LimiterType::RequestsPerMinute), n);
    }
    let s = TestServer::configured(Limits::default(), |state| state.with_admin_settings(settings)).await;
    s.store().ensure_admin_key(hash_credential(ADMIN), "test admin").await.unwrap();
    s
}

/// GET `path` with `token`: the status, the rate-limit headers (limit, remaining, reset,
/// retry-after; each `None` when absent) and the body.
async fn get(s: &TestServer, path: &str, token: &str) -> (u16, [Option<String>; 4], Value) {
    send(s, Method::GET, path, token).await
}

/// [`get`] with another method.
async fn send(s: &TestServer, method: Method, path: &str, token: &str) -> (u16, [Option<String>; 4], Value) {
    let resp = s.raw(method, path).bearer_auth(token).send().await.unwrap();
    let header = |name: &str| resp.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
    let headers = [
        header("anthropic-ratelimit-requests-limit"),
        header("anthropic-ratelimit-requests-remaining"),
        header("anthropic-ratelimit-requests-reset"),
        header("retry-after"),
    ];
    let retry = header("x-should-retry");
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if status == 429 {
        assert_eq!(retry.as_deref(), Some("true"), "a 429 is worth retrying");
    }
    (status, headers, body)
}

/// Sets workspace `ws`'s own `requests_per_minute` (`None` clears it) through the Admin API.
async fn override_limit(s: &TestServer, ws: &str, value: Option<u64>) {
    let path = format!("/v1/organizations/workspaces/{ws}/rate_limits/{MANAGED_AGENTS_ENTRY_ID}");
    let body = json!({"limits": [{"type": "requests_per_minute", "value": value}]});
    let (status, answer) = s.call(Method::POST, &path, ADMIN, Some(body)).await;
    assert_eq!(status, 200, "{answer}");
}

fn n(v: &Option<String>) -> u64 {
    v.as_deref().expect("the header is present").parse().unwrap()
}

#[tokio::test]
async fn over_the_limit_a_request_gets_429_with_retry_after_and_every_counted_answer_the_headers() {
    let s = server(Some(3)).await;
    let ws = s.store().default_workspace().await.unwrap();
    let mut remaining = Vec::new();
    for _ in 0..3 {
        let (status, [limit, left, reset, retry], body) = get(&s, "/v1/memory_stores", KEY).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!((n(&limit), retry), (3, None));
        remaining.push(n(&left));
        let reset = chrono::DateTime::parse_from_rfc3339(reset.as_deref().unwrap()).expect("an RFC 3339 reset");
        let ahead = reset.timestamp() - chrono::Utc::now().timestamp();
        assert!((0..=61).contains(&ahead), "a bucket of 3/min is full within a minute: {ahead} s");
    }
    assert_eq!(remaining, [2, 1, 0]);
    let (status, [limit, left, reset, retry], body) = get(&s, "/v1/memory_stores", KEY).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let wait = n(&retry);
    assert!((1..=20).contains(&wait), "3/min: one request fits within 20 s, not {wait}");
    assert_eq!(
        body["error"]["message"],
        rate_limit::limited_message(&ws, &mnemo_api::LimiterType::RequestsPerMinute, 3, wait)
    );
    assert_eq!((n(&limit), n(&left)), (3, 0));
    assert!(reset.is_some(), "a refused answer says when a request fits");
    // A refused request takes nothing: the next is refused the same way.
    assert_eq!(get(&s, "/v1/memory_stores/memstore_nope", KEY).await.0, 429, "refused before the lookup");
    // The Admin API is never counted, nor limited.
    let (status, [limit, ..], _) = get(&s, "/v1/organizations/me", KEY).await;
    assert_eq!((status, limit), (200, None));
}

#[tokio::test]
async fn without_a_limit_nothing_is_counted_and_no_header_is_sent() {
    let s = server(None).await;
    for _ in 0..5 {
        let (status, headers, body) = get(&s, "/v1/memory_stores", KEY).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(headers, [None, None, None, None]);
    }
}

#[tokio::test]
async fn workers_are_never_limited() {
    let w = world_on(server(None).await).await;
    let (session, item, token) = w.leased().await;
    let ws = w.s.store().default_workspace().await.unwrap().to_string();
    override_limit(&w.s, &ws, Some(1)).await;
    assert_eq!(get(&w.s, "/v1/memory_stores", KEY).await.0, 200);
    assert_eq!(get(&w.s, "/v1/memory_stores", KEY).await.0, 429, "the API key's bucket is empty");
    for _ in 0..5 {
        let polled = get(&w.s, &w.work("/poll?block_ms=10"), &w.env_key).await;
        assert!(polled.0 != 429 && polled.1 == [None, None, None, None], "an environment key: {polled:?}");
        let beat = send(&w.s, Method::POST, &w.work(&format!("/{item}/heartbeat")), &token).await;
        // Judged (a 400: no expected_last_heartbeat), never counted.
        assert_eq!((beat.0, &beat.1), (400, &[None, None, None, None]), "a sessions token: {}", beat.2);
        let events = get(&w.s, &format!("/v1/sessions/{session}/events"), &token).await;
        assert_eq!((events.0, &events.1), (200, &[None, None, None, None]), "a sessions token: {}", events.2);
    }
}

#[tokio::test]
async fn an_override_lowers_the_limit_at_once_and_other_workspaces_keep_theirs() {
    let s = server(Some(100)).await;
    let team = s.store().create_workspace("Team B").await.unwrap();
    s.store().ensure_api_key_in(&team, hash_credential(TEAM_KEY), "team").await.unwrap();
    let default = s.store().default_workspace().await.unwrap().to_string();
    let (_, [limit, ..], _) = get(&s, "/v1/memory_stores", KEY).await;
    assert_eq!(n(&limit), 100, "the organization's value");

    override_limit(&s, &default, Some(2)).await;
    let (status, [limit, left, ..], _) = get(&s, "/v1/memory_stores", KEY).await;
    assert_eq!((status, n(&limit), n(&left)), (200, 2, 1), "the bucket holds at most the lower capacity");
    assert_eq!(get(&s, "/v1/memory_stores", KEY).await.0, 200);
    assert_eq!(get(&s, "/v1/memory_stores", KEY).await.0, 429);

    let (status, [limit, left, ..], body) = get(&s, "/v1/memory_stores", TEAM_KEY).await;
    assert_eq!((status, n(&limit), n(&left)), (200, 100, 99), "another workspace is untouched: {body}");

    // An override above the organization's value is kept, but the lower one applies.
    override_limit(&s, &default, Some(1_000)).await;
    let (_, [limit, ..], _) = get(&s, "/v1/memory_stores", KEY).await;
    assert_eq!(n(&limit), 100);
    override_limit(&s, &default, None).await;
    let (_, [limit, ..], _) = get(&s, "/v1/memory_stores", KEY).await;
    assert_eq!(n(&limit), 100, "cleared: the organization's value again");
}
