//! What a rate-limit check costs a request (admin-api.md §8.9).
//!
//! Run with `cargo bench -p mnemo --bench rate_limit` (SQLite, the default durability), and
//! `MNEMO_BENCH_POSTGRES=postgres://USER@HOST:PORT/DB` to measure PostgreSQL too (a fresh
//! schema, dropped at the end). `MNEMO_BENCH_REQUESTS` sets the requests per round (default
//! 1000; four rounds of each kind, taking turns).
//!
//! - HTTP: one client sends `GET /v1/memory_stores?limit=1` one request at a time to an
//!   in-process server with no limit, and to one whose organization allows 10⁹ requests a
//!   minute (every request is counted and admitted, so each takes from its bucket); the
//!   difference of the two is what the check adds to a request;
//! - store: `Operations::take_rate_limit` alone, one call at a time: the bucket's transaction.
//!
//! This is a benchmark, not a test: it asserts nothing about timings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mnemo_api::LimiterType;
use mnemo_server::{AdminSettings, AppState, hash_credential};
use mnemo_store::Store;
use mnemo_store::rules::rate_limit::{Draw, MANAGED_AGENTS_ENTRY_ID};
use mnemo_store_postgres::{PostgresSettings, PostgresStore};
use mnemo_store_sqlite::{SqliteSettings, SqliteStore};

const KEY: &str = "bench";

fn percentiles(mut latencies: Vec<Duration>) -> (Duration, Duration) {
    latencies.sort();
    (latencies[latencies.len() / 2], latencies[latencies.len() * 99 / 100])
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// An in-process server over `store`, limited to `limit` requests a minute (or not at all):
/// its base URL and the sender that stops it.
async fn server(store: Arc<dyn Store>, limit: Option<u64>) -> (String, tokio::sync::oneshot::Sender<()>) {
    let mut settings = AdminSettings::default();
    if let Some(n) = limit {
        settings.org_limits.insert((MANAGED_AGENTS_ENTRY_ID.into(), LimiterType::RequestsPerMinute), n);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let router = mnemo_server::router(AppState::new(store).with_admin_settings(settings));
    tokio::spawn(mnemo_server::serve(listener, router, async {
        let _ = stopped.await;
    }));
    (base, stop)
}

async fn http_round(http: &reqwest::Client, base: &str, count: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        let resp = http.get(format!("{base}/v1/memory_stores?limit=1")).bearer_auth(KEY).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "every request is admitted");
        resp.bytes().await.unwrap();
        out.push(started.elapsed());
    }
    out
}

async fn measure(name: &str, store: Arc<dyn Store>, requests: usize) {
    store.ensure_api_key(hash_credential(KEY), "bench").await.unwrap();
    let (free, stop_free) = server(Arc::clone(&store), None).await;
    let (limited, stop_limited) = server(Arc::clone(&store), Some(1_000_000_000)).await;
    let http = reqwest::Client::new();
    http_round(&http, &free, 200).await; // warm-up: connections, statement caches
    http_round(&http, &limited, 200).await;
    let (mut none, mut with) = (Vec::new(), Vec::new());
    for _ in 0..4 {
        none.extend(http_round(&http, &free, requests).await);
        with.extend(http_round(&http, &limited, requests).await);
    }
    let ws = store.default_workspace().await.unwrap();
    let mut takes = Vec::new();
    for _ in 0..4 * requests {
        let started = Instant::now();
        store
            .take_rate_limit(&ws, MANAGED_AGENTS_ENTRY_ID, &LimiterType::RequestsPerMinute, 1_000_000_000, Draw::One)
            .await
            .unwrap();
        takes.push(started.elapsed());
    }
    let _ = (stop_free.send(()), stop_limited.send(()));
    let ((n50, n99), (w50, w99), (t50, t99)) = (percentiles(none), percentiles(with), percentiles(takes));
    println!("| {name} | no limit: request | {} | {} |", ms(n50), ms(n99));
    println!("| {name} | a limit: request | {} | {} |", ms(w50), ms(w99));
    println!("| {name} | the check (difference) | {} | {} |", ms(w50.saturating_sub(n50)), ms(w99.saturating_sub(n99)));
    println!("| {name} | `take_rate_limit` alone | {} | {} |", ms(t50), ms(t99));
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let requests = std::env::var("MNEMO_BENCH_REQUESTS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000);
    println!("| backend | measurement | p50 | p99 |\n|---|---|---:|---:|");
    let dir = tempfile::tempdir().unwrap();
    let sqlite =
        SqliteStore::open(&SqliteSettings::from_url(&format!("sqlite://{}/rl.sqlite", dir.path().display())).unwrap())
            .unwrap();
    measure("SQLite", Arc::new(sqlite.clone()), requests).await;
    sqlite.close_blocking();
    if let Ok(url) = std::env::var("MNEMO_BENCH_POSTGRES") {
        let name = format!("mnemo_bench_{}_rate_limit", std::process::id());
        let mut settings = PostgresSettings::from_url(&url).unwrap_or_else(|e| panic!("MNEMO_BENCH_POSTGRES: {e}"));
        let options = settings.config.get_options().unwrap_or_default().to_owned();
        settings.config.options(format!("{options} -c search_path={name}").trim_start());
        let store = PostgresStore::open(&settings).await.expect("open the PostgreSQL store");
        measure("PostgreSQL", Arc::new(store), requests).await;
        let (client, connection) =
            PostgresSettings::from_url(&url).unwrap().config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE")).await.unwrap();
    }
}
