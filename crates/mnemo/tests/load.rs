//! `mnemo serve` under many clients at once, briefly: 200 open SSE streams, 32 work pollers,
//! 16 memory writers and 4 event senders for a few seconds on a debug build. Every request must
//! succeed and every message must reach its stream exactly once; the figures are printed, never
//! asserted (the 60-second run and the soak are `cargo bench -p mnemo --bench load`).

mod common;
#[path = "common/load.rs"]
mod load;

use std::time::Duration;

use common::{KEY, Server};

async fn busy(server: &Server) {
    let secs = std::env::var("MNEMO_LOAD_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let shape = load::Shape::campaign(Duration::from_secs(secs));
    let report = load::run(&server.base, server.child.id(), KEY, &shape).await;
    println!("{}", report.table());
    assert_eq!(report.error_count(), 0, "failures under load: {:#?}", report.errors);
    assert!(report.sent > 0 && report.items_served > 0 && report.versions_written > 0, "{report:#?}");
    assert_eq!(report.delivered, report.sent, "every message reaches its stream once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_server_answers_every_client_and_delivers_every_event_once() {
    let tmp = tempfile::tempdir().unwrap();
    busy(&Server::start(
        &tmp.path().join("db.sqlite"),
        &["--api-key", KEY, "--max-streams-per-credential", "400", "--max-connections-per-address", "0"],
    ))
    .await;
}

/// The same on PostgreSQL, where events reach streams through the store's notifications (the
/// load run found them queued behind one another: 4 s to deliver a message at p50).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_server_on_postgres_answers_every_client_and_delivers_every_event_once() {
    let schema = mnemo_store_tests::Postgres::fresh_schema().await;
    let base = mnemo_store_tests::Postgres::url();
    let sep = if base.contains('?') { '&' } else { '?' };
    busy(&Server::on(
        &format!("{base}{sep}options=-csearch_path%3D{schema}"),
        &["--api-key", KEY, "--max-streams-per-credential", "400", "--max-connections-per-address", "0"],
    ))
    .await;
}
