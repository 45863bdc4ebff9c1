//! `--metrics-listen ADDR`: the Prometheus exposition of this process's metrics, on a listener of
//! its own (never the API's, so it is not public by accident).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::sync::Mutex;

/// Latency buckets (seconds) of every `*_seconds` histogram: 0.5 ms to 60 s.
const SECONDS: [f64; 16] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
/// Buckets of the write batch size.
const BATCH: [f64; 8] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];
/// Gauges read from the database are refreshed at most this often, whatever the scrape rate.
const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// Refreshes gauges that are read rather than counted (the server's database totals).
pub(crate) type Refresh = Arc<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// Installs the recorder and serves `GET /metrics` on `addr`; answers the bound address. A
/// second call in one process fails (one recorder per process).
pub(crate) async fn serve(addr: SocketAddr, refresh: Option<Refresh>) -> anyhow::Result<SocketAddr> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS)?
        .set_buckets_for_metric(Matcher::Full("mnemo_write_batch_size".into()), &BATCH)?
        .install_recorder()
        .context("install the metrics recorder")?;
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("listen for metrics on {addr}"))?;
    let bound = listener.local_addr()?;
    let last = Arc::new(Mutex::new(None::<Instant>));
    let app = axum::Router::new()
        .route("/metrics", get(move || exposition(handle.clone(), refresh.clone(), Arc::clone(&last))));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("the metrics listener stopped: {e}");
        }
    });
    tracing::info!(addr = %bound, "metrics at http://{bound}/metrics");
    Ok(bound)
}

async fn exposition(
    handle: PrometheusHandle,
    refresh: Option<Refresh>,
    last: Arc<Mutex<Option<Instant>>>,
) -> ([(&'static str, &'static str); 1], String) {
    if let Some(refresh) = refresh {
        let mut last = last.lock().await;
        if last.is_none_or(|t| t.elapsed() >= REFRESH_EVERY) {
            refresh().await;
            *last = Some(Instant::now());
        }
    }
    handle.run_upkeep();
    ([("content-type", "text/plain; version=0.0.4")], handle.render())
}
