//! What the server reports through the `metrics` facade. Nothing is recorded unless the binary
//! installs an exporter (`mnemo serve --metrics-listen ADDR`); the names are documented in
//! `docs/OPERATIONS.md`.

use std::time::{Duration, Instant};

use axum::http::Method;
use mnemo_api::{AdminCursor, AdminPageQuery, WorkspaceId};
use mnemo_store::ops::workspaces::ListWorkspaces;
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

/// Sets the gauges that describe what the database holds, summed over every workspace (the
/// operator's view) — `mnemo_memory_stores`, `mnemo_memories`, `mnemo_memory_bytes` (live
/// stores), `mnemo_work_queue_depth` and `mnemo_work_queue_pending` (summed over environments) —
/// with one page query and one usage query per 100 stores and one statistics query per
/// environment. A scrape calls this at most every few seconds (the exporter caches it), never per
/// request.
pub async fn refresh_gauges(store: &dyn Store) -> Result<(), StoreError> {
    let started = Instant::now();
    let mut totals = Totals::default();
    for ws in every_workspace(store).await? {
        add_workspace(store, &ws, &mut totals).await?;
    }
    let Totals { stores, memories, bytes, depth, pending } = totals;
    metrics::gauge!("mnemo_memory_stores").set(stores as f64);
    metrics::gauge!("mnemo_memories").set(memories as f64);
    metrics::gauge!("mnemo_memory_bytes").set(bytes as f64);
    metrics::gauge!("mnemo_work_queue_depth").set(depth as f64);
    metrics::gauge!("mnemo_work_queue_pending").set(pending as f64);
    metrics::histogram!("mnemo_metrics_refresh_seconds").record(started.elapsed().as_secs_f64());
    Ok(())
}

/// What the gauges sum.
#[derive(Default)]
struct Totals {
    stores: u64,
    memories: u64,
    bytes: u64,
    depth: u64,
    pending: u64,
}

/// Every workspace, archived ones too (their data is still held).
async fn every_workspace(store: &dyn Store) -> Result<Vec<WorkspaceId>, StoreError> {
    let mut ids = Vec::new();
    let mut cursor = AdminCursor::Start;
    loop {
        let page = AdminPageQuery { limit: 1000, cursor };
        let query = ListWorkspaces { ids: None, include_archived: true, include_default: true, page };
        let page = store.list_workspaces(query).await?;
        ids.extend(page.data.into_iter().map(|w| w.id));
        match (page.has_more, page.last_id) {
            (true, Some(last)) => cursor = AdminCursor::After(last),
            _ => return Ok(ids),
        }
    }
}

/// Adds workspace `ws`'s stores and queues to `totals`.
async fn add_workspace(store: &dyn Store, ws: &WorkspaceId, totals: &mut Totals) -> Result<(), StoreError> {
    let mut after = None;
    loop {
        let query =
            ListMemoryStores { include_archived: false, created_at_gte: None, created_at_lte: None, limit: 100, after };
        let page = store.list_memory_stores(ws, query).await?;
        let ids: Vec<_> = page.items.iter().map(|s| s.id.clone()).collect();
        totals.stores += ids.len() as u64;
        for usage in store.memory_store_usage(ws, &ids).await?.values() {
            totals.memories += usage.memories;
            totals.bytes += usage.bytes;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let mut after = None;
    loop {
        let page = store.list_environments(ws, false, 100, after).await?;
        for env in &page.items {
            let stats = store.work_stats(ws, &env.id).await?;
            totals.depth += stats.depth;
            totals.pending += stats.pending;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}
