//! `--metrics-listen`: the Prometheus exposition of `mnemo serve` and `mnemo mount` parses, and
//! its counters and gauges move when the work happens. Real processes on 127.0.0.1.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use mnemo_api::{CreateMemoryStore, View};
use mnemo_client::Client;
use openmetrics_parser::prometheus::parse_prometheus;
use openmetrics_parser::{MetricsExposition, PrometheusType, PrometheusValue};

use common::{KEY, mnemo, wait_until_async};

/// A child killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free port on 127.0.0.1 (for processes that only log their metrics address).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

type Scrape = MetricsExposition<PrometheusType, PrometheusValue>;

async fn scrape(url: &str) -> Scrape {
    let text = reqwest::get(url).await.unwrap().error_for_status().unwrap().text().await.unwrap();
    // The format ignores empty lines (the exporter separates families with them); this parser
    // does not accept them everywhere, so they go first.
    let text: String = text.lines().filter(|l| !l.trim().is_empty()).map(|l| format!("{l}\n")).collect();
    if text.is_empty() {
        return Scrape { families: Default::default() }; // nothing recorded yet (valid, but this parser refuses it)
    }
    parse_prometheus(&text).unwrap_or_else(|e| panic!("the exposition does not parse: {e:?}\n{text}"))
}

/// The values of family `name`'s samples whose labels include every pair of `labels`.
fn matching<'a>(s: &'a Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<&'a PrometheusValue> {
    let Some(family) = s.families.get(name) else { return Vec::new() };
    family
        .iter_samples()
        .filter(|x| {
            let set = x.get_labelset().unwrap();
            labels.iter().all(|(k, v)| set.get_label_value(k) == Some(*v))
        })
        .map(|x| &x.value)
        .collect()
}

/// The sum of the counter or gauge `name` over the samples matching `labels`.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    matching(s, name, labels)
        .into_iter()
        .map(|v| match v {
            PrometheusValue::Counter(c) => c.value.as_f64(),
            PrometheusValue::Gauge(g) | PrometheusValue::Unknown(g) => g.as_f64(),
            _ => 0.0,
        })
        .sum()
}

/// How many observations the histogram `name` holds over the samples matching `labels`.
fn observations(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> u64 {
    matching(s, name, labels)
        .into_iter()
        .map(|v| match v {
            PrometheusValue::Histogram(h) => h.count.unwrap_or(0),
            _ => 0,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_and_a_mount_expose_metrics_that_move_with_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = mnemo()
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--api-key", KEY])
        .arg("--database")
        .arg(format!("sqlite://{}", dir.path().join("db.sqlite").display()))
        .env_remove("MNEMO_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let base = lines.next().unwrap().unwrap().strip_prefix("listening on ").unwrap().to_owned();
    let metrics = lines.next().unwrap().unwrap().strip_prefix("metrics on ").expect("a metrics line").to_owned();
    let _server = Proc(child);
    assert!(!metrics.contains(&base), "the metrics have a listener of their own");
    // The API's listener does not serve them.
    assert_eq!(reqwest::get(format!("{base}/metrics")).await.unwrap().status(), 404);

    let api = Client::new(&base, KEY).unwrap();
    let store = api
        .create_memory_store(&CreateMemoryStore { name: "m".into(), description: None, metadata: None })
        .await
        .unwrap();
    for i in 0..3 {
        api.create_memory(&store.id, &format!("/n{i}.md"), "hello", Some(View::Basic)).await.unwrap();
    }
    let s = scrape(&metrics).await;
    let create = [("method", "POST"), ("route", "/v1/memory_stores/{store}/memories"), ("status", "200")];
    assert_eq!(value(&s, "mnemo_http_requests_total", &create), 3.0);
    assert!(observations(&s, "mnemo_http_request_duration_seconds", &create[..2]) >= 3);
    assert_eq!(value(&s, "mnemo_memory_stores", &[]), 1.0);
    assert_eq!(value(&s, "mnemo_memories", &[]), 3.0);
    assert_eq!(value(&s, "mnemo_memory_bytes", &[]), 15.0);
    assert!(observations(&s, "mnemo_write_commit_seconds", &[]) >= 4, "every write is committed");
    assert_eq!(value(&s, "mnemo_write_queue_depth", &[]), 0.0, "nothing waits once every write answered");
    assert_eq!(value(&s, "mnemo_sse_streams_open", &[]), 0.0);

    // A mount: its change feed is an open stream on the server; a local write is synced live.
    let port = free_port();
    let folder = dir.path().join("folder");
    let mount = mnemo()
        .args(["mount", store.id.as_str()])
        .arg(&folder)
        .args(["--metrics-listen", &format!("127.0.0.1:{port}")])
        .env("ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_API_KEY", KEY)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("mount.log")).unwrap())
        .spawn()
        .unwrap();
    let _mount = Proc(mount);
    let mount_metrics = format!("http://127.0.0.1:{port}/metrics");
    // Mounted = downloaded and watched (a write during the download waits for a full walk).
    let log = dir.path().join("mount.log");
    let up = wait_until_async(Duration::from_secs(20), || async {
        reqwest::get(&mount_metrics).await.is_ok()
            && std::fs::read_to_string(&log).unwrap_or_default().contains("mounted memory store")
    })
    .await;
    assert!(up, "the mount is up with its metrics");
    assert!(
        wait_until_async(Duration::from_secs(10), || async {
            value(&scrape(&metrics).await, "mnemo_sse_streams_open", &[]) == 1.0
        })
        .await,
        "the mount's change feed is counted as an open stream"
    );
    std::fs::write(folder.join("local.md"), "from the folder").unwrap();
    assert!(
        wait_until_async(Duration::from_secs(20), || async {
            value(&scrape(&mount_metrics).await, "mnemo_sync_uploaded_total", &[("kind", "live")]) == 1.0
        })
        .await,
        "the live upload is counted: {}",
        std::fs::read_to_string(&log).unwrap()
    );
    let m = scrape(&mount_metrics).await;
    assert!(value(&m, "mnemo_syncs_total", &[("kind", "live"), ("result", "ok")]) >= 1.0);
    assert!(observations(&m, "mnemo_sync_duration_seconds", &[("kind", "live")]) >= 1);
}
