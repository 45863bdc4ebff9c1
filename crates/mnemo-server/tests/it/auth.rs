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

fn client_from(from: &str) -> reqwest::Client {
    reqwest::Client::builder().local_address(from.parse::<std::net::IpAddr>().unwrap()).build().unwrap()
}

/// Guessing API keys from one address: a few failures are plain 401s, then every unproven
/// credential from that address is a 429 with `retry-after` — a right guess included, so the
/// answers tell nothing — while keys that already worked from there, and other addresses, are
/// not slowed.
#[tokio::test]
async fn guessing_keys_is_throttled_per_address_without_telling_which_exist() {
    let throttle = mnemo_server::AuthThrottleConfig { failures_per_minute: 5 };
    let s = TestServer::configured(Default::default(), |state| state.with_auth_throttle(throttle)).await;
    let here = client_from("127.0.0.1");
    let get = |client: &reqwest::Client, path: &str, key: &str| {
        client.get(format!("{}{path}", s.base)).bearer_auth(key).send()
    };
    assert_eq!(get(&here, "/v1/memory_stores", KEY).await.unwrap().status(), 200, "the key works from here");
    let (_, env) = s
        .call(
            Method::POST,
            "/v1/environments",
            KEY,
            Some(serde_json::json!({"name": "e", "config": {"type": "self_hosted"}})),
        )
        .await;
    let env = env["id"].as_str().unwrap().to_owned();
    let (_, minted) = s.call(Method::POST, &format!("/v1/environments/{env}/keys"), KEY, None).await;
    let env_key = minted["key"].as_str().unwrap().to_owned();

    for i in 0..5 {
        let wrong = get(&here, "/v1/memory_stores", &format!("sk-guess-{i:032}")).await.unwrap();
        assert_eq!(wrong.status(), 401, "guess {i} is within the budget");
    }
    let over = get(&here, "/v1/memory_stores", "sk-guess-one-too-many-000000000000").await.unwrap();
    assert_eq!(over.status(), 429, "past the budget the address is throttled");
    let wait: u64 = over.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "retry-after {wait}");
    let body: serde_json::Value = over.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");

    // A valid credential never used from this address gets the same answer as a guess.
    let right = get(&here, &format!("/v1/environments/{env}/work/stats"), &env_key).await.unwrap();
    assert_eq!(right.status(), 429, "a right guess is not told apart from a wrong one");
    assert_eq!(get(&here, "/v1/memory_stores", KEY).await.unwrap().status(), 200, "a proven key is not slowed");
    let elsewhere = client_from("127.0.0.2");
    assert_eq!(get(&elsewhere, "/v1/memory_stores", "sk-guess-from-elsewhere-000000000").await.unwrap().status(), 401);
    assert_eq!(get(&elsewhere, &format!("/v1/environments/{env}/work/stats"), &env_key).await.unwrap().status(), 200);
}

/// The console's sign-in form, from `client`: (status, retry-after, the session cookie if one was set).
pub(crate) async fn console_sign_in(
    s: &TestServer,
    client: &reqwest::Client,
    key: &str,
) -> (u16, Option<String>, Option<String>) {
    let form = client.get(format!("{}/console/sign-in", s.base)).send().await.unwrap();
    let token = form
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| c.strip_prefix("mnemo_console_sign_in="))
        .map(|c| c.split(';').next().unwrap().to_owned())
        .expect("the sign-in form's token cookie");
    let answer = client
        .post(format!("{}/console/sign-in", s.base))
        .header("cookie", format!("mnemo_console_sign_in={token}"))
        .form(&[("api_key", key), ("token", &token), ("next", "/console")])
        .send()
        .await
        .unwrap();
    let signed = answer
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("mnemo_console=mcs_"))
        .map(|c| c.split(';').next().unwrap().to_owned());
    let retry = answer.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (answer.status().as_u16(), retry, signed)
}

#[tokio::test]
async fn a_console_sign_in_brute_force_is_throttled() {
    let throttle = mnemo_server::AuthThrottleConfig { failures_per_minute: 4 };
    let s = TestServer::configured(Default::default(), |state| state.with_auth_throttle(throttle)).await;
    let no_redirects = |from: &str| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .local_address(from.parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap()
    };
    let here = no_redirects("127.0.0.1");
    for i in 0..4 {
        let (status, _, signed) = console_sign_in(&s, &here, &format!("sk-guess-{i:032}")).await;
        assert_eq!((status, signed.is_some()), (401, false), "attempt {i} is within the budget");
    }
    let (status, retry, _) = console_sign_in(&s, &here, "sk-guess-one-too-many-00000000000").await;
    assert_eq!(status, 429, "past the budget sign-ins from the address are throttled");
    assert!(retry.is_some_and(|r| r.parse::<u64>().unwrap() >= 1));
    let (status, _, signed) = console_sign_in(&s, &here, KEY).await;
    assert_eq!((status, signed.is_some()), (429, false), "even the right key: the answer tells nothing");
    let (status, _, signed) = console_sign_in(&s, &no_redirects("127.0.0.2"), KEY).await;
    assert_eq!((status, signed.is_some()), (303, true), "another address signs in");
}
