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
