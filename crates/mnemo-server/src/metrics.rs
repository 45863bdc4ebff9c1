//! What the server reports through the `metrics` facade. Nothing is recorded unless the binary
//! installs an exporter (`mnemo serve --metrics-listen ADDR`); the names are documented in
//! `docs/OPERATIONS.md`.

use std::time::{Duration, Instant};

use axum::http::Method;
use mnemo_store::{ListMemoryStores, Store, StoreError};

/// One answered request: `mnemo_http_requests_total{method,route,status}` and its latency in
/// `mnemo_http_request_duration_seconds{method,route}`. `route` is the router's template
/// (`/v1/memory_stores/{memory_store_id}`), never the raw path, so the label set stays small.
pub(crate) fn request_done(method: &Method, route: &str, status: u16, elapsed: Duration) {
    let (method, route) = (method.as_str().to_owned(), route.to_owned());
    metrics::counter!("mnemo_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status.to_string())
        .increment(1);
    metrics::histogram!("mnemo_http_request_duration_seconds", "method" => method, "route" => route)
        .record(elapsed.as_secs_f64());
}

/// An open SSE stream (session events or a memory change feed), counted in
/// `mnemo_sse_streams_open` while it lives.
pub(crate) struct OpenStream(());

impl OpenStream {
    pub(crate) fn new() -> Self {
        metrics::gauge!("mnemo_sse_streams_open").increment(1.0);
        Self(())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        metrics::gauge!("mnemo_sse_streams_open").decrement(1.0);
    }
}

/// Sets the gauges that describe what the database holds — `mnemo_memory_stores`,
/// `mnemo_memories`, `mnemo_memory_bytes` (live stores), `mnemo_work_queue_depth` and
/// `mnemo_work_queue_pending` (summed over environments) — with one page query and one usage
/// query per 100 stores and one statistics query per environment. A scrape calls this at most
/// every few seconds (the exporter caches it), never per request.
pub async fn refresh_gauges(store: &dyn Store) -> Result<(), StoreError> {
    let started = Instant::now();
    let (mut stores, mut memories, mut bytes) = (0u64, 0u64, 0u64);
    // Stores are listed per workspace; until workspaces can be listed, the Default one's.
    let ws = store.default_workspace().await?;
    let mut after = None;
    loop {
        let query =
            ListMemoryStores { include_archived: false, created_at_gte: None, created_at_lte: None, limit: 100, after };
        let page = store.list_memory_stores(&ws, query).await?;
        let ids: Vec<_> = page.items.iter().map(|s| s.id.clone()).collect();
        stores += ids.len() as u64;
        for usage in store.memory_store_usage(&ws, &ids).await?.values() {
            memories += usage.memories;
            bytes += usage.bytes;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let (mut depth, mut pending) = (0u64, 0u64);
    let mut after = None;
    loop {
        let page = store.list_environments(false, 100, after).await?;
        for env in &page.items {
            let stats = store.work_stats(&env.id).await?;
            depth += stats.depth;
            pending += stats.pending;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    metrics::gauge!("mnemo_memory_stores").set(stores as f64);
    metrics::gauge!("mnemo_memories").set(memories as f64);
    metrics::gauge!("mnemo_memory_bytes").set(bytes as f64);
    metrics::gauge!("mnemo_work_queue_depth").set(depth as f64);
    metrics::gauge!("mnemo_work_queue_pending").set(pending as f64);
    metrics::histogram!("mnemo_metrics_refresh_seconds").record(started.elapsed().as_secs_f64());
    Ok(())
}
