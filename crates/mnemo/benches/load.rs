//! One `mnemo serve` under the reliability campaign's load: 200 open SSE streams, 32 work
//! pollers (poll → ack → heartbeat → stop), 16 memory writers (create, then updates with a
//! precondition) and 4 senders of `user.message` events, for 60 s by default.
//!
//! `cargo bench -p mnemo --bench load` prints, per request kind, the count, rate and p50 / p99 /
//! max latency, the errors (the goal is none), how many messages reached their streams, and the
//! server's resident memory over the run. `MNEMO_LOAD_SECS=600` is the soak: it also prints the
//! RSS minute by minute, which should stay flat. With `MNEMO_BENCH_POSTGRES=<url>` the same load
//! runs on PostgreSQL too (a throw-away database: `.ci/postgres start`);
//! `MNEMO_LOAD_BACKENDS=postgres` (or `sqlite`) runs only one of the two;
//! `MNEMO_LOAD_SQLITE_OPTIONS=memory_mib=16` adds options to the SQLite URL.
//!
//! A benchmark, not a test: it asserts nothing about timings.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/load.rs"]
mod load;

use std::time::Duration;

use common::{KEY, Server};

async fn one(label: &str, server: &Server, shape: &load::Shape) {
    println!(
        "== {label}: {} streams, {} pollers, {} writers, {} senders for {} s",
        shape.streams,
        shape.pollers,
        shape.writers,
        shape.senders,
        shape.duration.as_secs()
    );
    let report = load::run(&server.base, server.child.id(), KEY, shape).await;
    println!("{}", report.table());
    if shape.duration >= Duration::from_secs(120) {
        println!("server RSS by minute:\n{}", report.rss_by_minute());
    }
    if !report.stalls.is_empty() {
        println!("requests slower than 1 s (seconds into the run when they ended, kind, ms):");
        for (at, kind, ms) in &report.stalls {
            println!("  {at:>7.1} s  {kind}  {ms:.0} ms");
        }
    }
    if report.error_count() > 0 {
        println!("errors: {:#?}", report.errors);
    }
}

fn main() {
    let secs = std::env::var("MNEMO_LOAD_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let shape = load::Shape::campaign(Duration::from_secs(secs));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let only = std::env::var("MNEMO_LOAD_BACKENDS").unwrap_or_default();
        let wanted = |name: &str| only.is_empty() || only.split(',').any(|b| b.trim().eq_ignore_ascii_case(name));
        if !only.is_empty() && !wanted("sqlite") && !wanted("postgres") {
            eprintln!("MNEMO_LOAD_BACKENDS={only:?}: name sqlite, postgres or both (comma-separated)");
            std::process::exit(2);
        }
        let tmp = tempfile::tempdir().unwrap();
        if wanted("sqlite") {
            let mut url = format!("sqlite://{}", tmp.path().join("db.sqlite").display());
            if let Ok(options) = std::env::var("MNEMO_LOAD_SQLITE_OPTIONS") {
                url = format!("{url}?{options}");
            }
            let server = Server::on(
                &url,
                &["--api-key", KEY, "--max-streams-per-credential", "400", "--max-connections-per-address", "0"],
            );
            one("SQLite", &server, &shape).await;
        }
        if !wanted("postgres") {
            return;
        }
        if let Ok(url) = std::env::var("MNEMO_BENCH_POSTGRES") {
            let server = Server::on(
                &url,
                &["--api-key", KEY, "--max-streams-per-credential", "400", "--max-connections-per-address", "0"],
            );
            one("PostgreSQL", &server, &shape).await;
        } else if !only.is_empty() {
            eprintln!("MNEMO_LOAD_BACKENDS names postgres but MNEMO_BENCH_POSTGRES is not set");
            std::process::exit(2);
        }
    });
}
