//! Rate limits across replicas (admin-api.md §8.9): two `mnemo serve` processes on one
//! PostgreSQL schema, given `--rate-limit managed_agents:requests_per_minute=N`, answered a burst
//! of concurrent requests of one workspace; together they admit N plus at most the refill of
//! the burst's duration (one second's at the least), because the bucket is a row both lock.

mod common;

use std::time::Instant;

use futures::future::join_all;

use common::{KEY, Server};

const N: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_together_admit_the_limit_plus_at_most_a_second_of_refill() {
    let schema = mnemo_store_tests::Postgres::fresh_schema().await;
    let base = mnemo_store_tests::Postgres::url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-csearch_path%3D{schema}");
    let limit = format!("managed_agents:requests_per_minute={N}");
    let flags = ["--api-key", KEY, "--rate-limit", &limit, "--no-webhooks"];
    let (a, b) = (Server::on(&url, &flags), Server::on(&url, &flags));
    let http = reqwest::Client::new();
    let started = Instant::now();
    let answers = join_all((0..4 * N).map(|i| {
        let target = format!("{}/v1/memory_stores", if i % 2 == 0 { &a.base } else { &b.base });
        let http = http.clone();
        async move {
            let resp = http.get(target).bearer_auth(KEY).send().await.unwrap();
            let retry_after = resp.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
            (resp.status().as_u16(), retry_after)
        }
    }))
    .await;
    let elapsed = started.elapsed();
    let admitted = answers.iter().filter(|(status, _)| *status == 200).count();
    let refused = answers.iter().filter(|(status, retry)| *status == 429 && retry.is_some()).count();
    assert_eq!(admitted + refused, answers.len(), "every answer is a 200 or a 429 with retry-after: {answers:?}");
    let refill = (N as f64 * elapsed.as_secs_f64().max(1.0) / 60.0).ceil() as usize;
    println!("{admitted} of {} admitted in {elapsed:?} at {N}/min across two replicas", answers.len());
    assert!(admitted >= N, "a full bucket admits {N}, not {admitted}");
    assert!(admitted <= N + refill, "{admitted} admitted in {elapsed:?}: more than {N} + {refill}");
}

#[test]
fn a_malformed_rate_limit_stops_the_server_before_it_starts() {
    let out = common::mnemo()
        .args(["serve", "--listen", "127.0.0.1:0", "--database", "sqlite::memory:", "--rate-limit", "batch:rpm=1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--rate-limit `batch:rpm=1`: unknown group `batch`"), "{err}");
}

/// The agent loop's model calls count against their model family's entry (`[families]` in the
/// models file): the Admin API lists it with the `--rate-limit` value, and a call whose
/// workspace spent its output tokens waits inside the session, then goes on, with no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_family_limit_is_listed_and_the_agent_loop_waits_for_it() {
    use mnemo_client::{Client, Method};
    use mnemo_model::testing::{FakeModelServer, FakeReply};
    use serde_json::{Value, json};

    const ADMIN_KEY: &str = "sk-mnemo-admin-ratelimits-0123456789abcdef012";
    let tmp = tempfile::tempdir().unwrap();
    // 248 bytes: 62 output tokens, two more than the minute's 60.
    let fake = FakeModelServer::start(vec![FakeReply::text("x".repeat(248)), FakeReply::text("Short.")]).await;
    let models = tmp.path().join("models.toml");
    std::fs::write(&models, format!("{}[families]\n\"Fake Claude\" = [\"claude-fake\"]\n", fake.config_toml()))
        .unwrap();
    let flags = [
        "--api-key",
        KEY,
        "--admin-key",
        ADMIN_KEY,
        "--models",
        models.to_str().unwrap(),
        "--rate-limit",
        "fake claude:output_tokens_per_minute=60",
    ];
    let server = Server::start(&tmp.path().join("db.sqlite"), &flags);

    let admin = Client::new(&server.base, ADMIN_KEY).unwrap();
    let entries = admin.json(Method::GET, "/v1/organizations/rate_limits", None).await.unwrap();
    let model = entries["data"].as_array().unwrap().iter().find(|e| e["group"]["type"] == "model_group");
    let model = model.unwrap_or_else(|| panic!("no model group: {entries}"));
    assert_eq!(model["id"], "ratelimit_model_fake_claude");
    assert_eq!(model["group"]["display_name"], "Fake Claude");
    assert_eq!(model["models"], json!(["claude-fake"]));
    assert_eq!(model["limits"], json!([{"type": "output_tokens_per_minute", "value": 60}]));

    let api = Client::new(&server.base, KEY).unwrap();
    let agent = json!({"name": "a", "model": "claude-fake", "system": "Be brief."});
    let agent = api.json(Method::POST, "/v1/agents", Some(&agent)).await.unwrap();
    let env = api.json(Method::POST, "/v1/environments", Some(&json!({"name": "e"}))).await.unwrap();
    let body = json!({"agent": agent["id"], "environment_id": env["id"]});
    let session = api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
    let session = session["id"].as_str().unwrap().to_owned();
    let log = async || -> Vec<Value> {
        let page = api.json(Method::GET, &format!("/v1/sessions/{session}/events?limit=1000"), None).await.unwrap();
        page["data"].as_array().unwrap().clone()
    };
    let mut took = Vec::new();
    for (n, words) in ["Tell me everything.", "And briefly?"].into_iter().enumerate() {
        let asked = Instant::now();
        let body = json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": words}]}]});
        api.json(Method::POST, &format!("/v1/sessions/{session}/events"), Some(&body)).await.unwrap();
        let ended = common::wait_until_async(std::time::Duration::from_secs(60), || async {
            log().await.iter().filter(|e| e["stop_reason"]["type"] == "end_turn").count() > n
        })
        .await;
        assert!(ended, "turn {n} never ended: {:#?}", log().await);
        took.push(asked.elapsed());
    }
    let events = log().await;
    assert!(!events.iter().any(|e| e["type"] == "session.error"), "a rate limit is no session error: {events:#?}");
    // The second call waits out the two tokens of debt (three seconds to one token at one a
    // second) before the model is asked.
    assert!(took[1] >= std::time::Duration::from_secs(2), "the second call did not wait: {took:?}");
    assert_eq!(fake.requests().len(), 2, "the model was asked twice, never refused");
}
