//! The memory writes both write benchmarks measure, so their server numbers compare: the same
//! clients, the same rows, the same content.
// Each bench uses a part (`write_throughput` has no raw rounds to join).
#![allow(dead_code)]

use std::time::{Duration, Instant};

use mnemo_api::MemoryStoreId;
use mnemo_client::Client;

/// Concurrent writers of a measurement.
pub(crate) const CLIENTS: usize = 16;

/// The content of memory `i` (about 220 bytes).
pub(crate) fn content(i: usize) -> String {
    format!("memory {i}: {}", "the agent noted something worth keeping. ".repeat(5))
}

/// Writes `count` memories (numbered from `offset`) from [`CLIENTS`] concurrent clients; client
/// `c` talks to `clients[c % len]` and writes into `stores[c % len]`. Answers each write's
/// latency.
pub(crate) async fn write_round(
    clients: &[Client],
    stores: &[MemoryStoreId],
    offset: usize,
    count: usize,
) -> Vec<Duration> {
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let client = clients[c % clients.len()].clone();
            let store = stores[c % stores.len()].clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                for i in (c..count).step_by(CLIENTS) {
                    let n = offset + i;
                    let started = Instant::now();
                    client.create_memory(&store, &format!("/bench/{n:07}.md"), &content(n), None).await.unwrap();
                    latencies.push(started.elapsed());
                }
                latencies
            })
        })
        .collect();
    join_all(tasks).await
}

/// Every task's latencies, in one list.
pub(crate) async fn join_all(tasks: Vec<tokio::task::JoinHandle<Vec<Duration>>>) -> Vec<Duration> {
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}
