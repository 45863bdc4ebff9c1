//! A busy day for one `mnemo serve`: open SSE streams, work pollers, memory writers and event
//! senders at once, every request timed, every failure counted, the server's memory sampled.
//!
//! Shared by the `load` test (a short, fixed-size run in CI that checks for zero errors and
//! complete delivery) and the `load` benchmark (60 s, or a soak, with the figures printed).
//! Nothing here asserts a timing.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hdrhistogram::Histogram;
use mnemo_api::{EnvironmentId, MemoryId, MemoryStoreId, Precondition, UpdateMemory};
use mnemo_client::{Client, ClientError, Method, NO_HEARTBEAT};
use rand::Rng;
use serde_json::{Value, json};

/// How many of each client, for how long.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Sessions, each with one open event stream.
    pub streams: usize,
    /// Workers long-polling the environment's queue (poll → ack → heartbeat → stop).
    pub pollers: usize,
    /// Memory writers, each creating then updating (with a precondition) its own memories.
    pub writers: usize,
    /// Senders of `user.message` events to random sessions (each queues a work item and reaches
    /// one stream).
    pub senders: usize,
    /// Pause between two messages of one sender.
    pub send_every: Duration,
    /// How long the load runs.
    pub duration: Duration,
    /// How often the server's memory is sampled.
    pub sample_every: Duration,
}

impl Shape {
    /// The campaign's shape: 200 streams, 32 pollers, 16 writers.
    pub fn campaign(duration: Duration) -> Self {
        Self {
            streams: 200,
            pollers: 32,
            writers: 16,
            senders: 4,
            send_every: Duration::from_millis(10),
            duration,
            sample_every: Duration::from_secs(1),
        }
    }
}

/// What a run measured.
#[derive(Debug)]
pub struct Report {
    /// Latency in microseconds per request kind (`memory.create`, `work.poll`, `sse.delivery`…).
    pub latencies: BTreeMap<&'static str, Histogram<u64>>,
    /// Failures by kind and reason; the goal is none.
    pub errors: BTreeMap<String, u64>,
    /// Messages sent, and how many of them reached their session's stream.
    pub sent: u64,
    pub delivered: u64,
    /// Work items claimed and stopped by the pollers.
    pub items_served: u64,
    /// Memory versions written by the writers.
    pub versions_written: u64,
    /// The server's resident set size over time (seconds since the load began, bytes), and its
    /// peak (`VmHWM`) at the end.
    /// (seconds into the run, the server's memory then).
    pub rss: Vec<(f64, Memory)>,
    pub peak_rss: u64,
    pub elapsed: Duration,
    /// Requests that took over a second: (seconds into the run when they ended, kind, ms).
    pub stalls: Vec<(f64, &'static str, f64)>,
}

impl Report {
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// The figures as a Markdown table, then the memory line.
    pub fn table(&self) -> String {
        let secs = self.elapsed.as_secs_f64();
        let mut out =
            String::from("| request | count | per s | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|---:|\n");
        for (kind, h) in &self.latencies {
            let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
            out += &format!(
                "| {kind} | {} | {:.0} | {:.2} | {:.2} | {:.1} |\n",
                h.len(),
                h.len() as f64 / secs,
                ms(0.5),
                ms(0.99),
                h.max() as f64 / 1000.0
            );
        }
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let first = self.rss.first().map_or(0, |s| s.1.rss);
        let last = self.rss.last().map_or(0, |s| s.1.rss);
        out += &format!(
            "\nserver RSS: {:.1} MiB at the start, {:.1} MiB at the end, peak {:.1} MiB; \
             {} messages sent, {} delivered; {} work items served; {} memory versions; {} errors\n",
            mib(first),
            mib(last),
            mib(self.peak_rss),
            self.sent,
            self.delivered,
            self.items_served,
            self.versions_written,
            self.error_count()
        );
        out
    }

    /// RSS and its anonymous part in MiB at each whole minute (and the last sample), for a soak.
    pub fn rss_by_minute(&self) -> String {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let mut out = String::from("    time       RSS   of it anon\n");
        let mut next = 0.0;
        for (t, m) in &self.rss {
            if *t >= next {
                out += &format!("{:>6.0} s {:>7.1} MiB {:>7.1} MiB\n", t, mib(m.rss), mib(m.anon));
                next += 60.0;
            }
        }
        if let Some((t, m)) = self.rss.last() {
            out += &format!("{:>6.0} s {:>7.1} MiB {:>7.1} MiB (last)\n", t, mib(m.rss), mib(m.anon));
        }
        out
    }
}

/// Timings and failures shared by every client task.
#[derive(Debug)]
struct Tally {
    epoch: Instant,
    latencies: Mutex<BTreeMap<&'static str, Histogram<u64>>>,
    errors: Mutex<BTreeMap<String, u64>>,
    stalls: Mutex<Vec<(f64, &'static str, f64)>>,
}

/// A request slower than this is listed with when it ended, to line stalls up with each other
/// (long polls aside).
const STALL: Duration = Duration::from_secs(1);

impl Tally {
    fn new() -> Self {
        Self { epoch: Instant::now(), latencies: Mutex::default(), errors: Mutex::default(), stalls: Mutex::default() }
    }

    fn time(&self, kind: &'static str, took: Duration) {
        // A poll's time includes its wait for an item (up to `block_ms`, then the queue's turn).
        if took > STALL && !kind.starts_with("work.poll") {
            let at = self.epoch.elapsed().as_secs_f64();
            self.stalls.lock().unwrap().push((at, kind, took.as_secs_f64() * 1e3));
        }
        let mut map = self.latencies.lock().unwrap();
        let h = map.entry(kind).or_insert_with(|| Histogram::new_with_bounds(1, 600_000_000, 3).unwrap());
        h.saturating_record(took.as_micros().max(1) as u64);
    }

    fn fail(&self, kind: &str, error: &ClientError) {
        let reason = match error {
            ClientError::Api { status, .. } => format!("{kind}: HTTP {status}"),
            ClientError::Transport(e) if e.is_timeout() => format!("{kind}: timeout"),
            ClientError::Transport(e) if e.is_connect() => format!("{kind}: connect"),
            other => format!("{kind}: {}", first_line(&other.to_string())),
        };
        *self.errors.lock().unwrap().entry(reason).or_default() += 1;
    }

    fn fail_with(&self, reason: String) {
        *self.errors.lock().unwrap().entry(reason).or_default() += 1;
    }

    /// Times `call` under `kind`, counting a failure; answers its value on success.
    async fn call<T>(
        &self,
        kind: &'static str,
        call: impl std::future::Future<Output = Result<T, ClientError>>,
    ) -> Option<T> {
        let started = Instant::now();
        match call.await {
            Ok(v) => {
                self.time(kind, started.elapsed());
                Some(v)
            }
            Err(e) => {
                self.fail(kind, &e);
                None
            }
        }
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// A process's memory, in bytes, from `/proc/PID/status`.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// `VmRSS`: resident, file-backed and shared pages included.
    pub rss: u64,
    /// `VmHWM`: the peak of `rss`.
    pub peak: u64,
    /// `RssAnon`: the resident heap and stacks (what a leak grows).
    pub anon: u64,
}

/// The server's memory now.
pub fn memory_of(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Some(Memory { rss: field("VmRSS:")?, peak: field("VmHWM:")?, anon: field("RssAnon:")? })
}

/// What the clients share: the server and the resources made for the run.
struct World {
    api: Client,
    env: EnvironmentId,
    env_key: String,
    base: String,
    sessions: Vec<String>,
    stores: Vec<MemoryStoreId>,
    /// When the load began: message texts carry their send time relative to it.
    epoch: Instant,
    stop: AtomicBool,
    tally: Tally,
    sent: AtomicU64,
    delivered: AtomicU64,
    items: AtomicU64,
    versions: AtomicU64,
    /// Every message token sent, so a stream can tell a duplicate or a stranger.
    outstanding: Mutex<HashSet<String>>,
}

/// Runs the load against the server at `base` (process `pid`), authenticating with `key`.
pub async fn run(base: &str, pid: u32, key: &str, shape: &Shape) -> Report {
    let api = Client::new(base, key).unwrap().with_max_retries(0);
    let agent = api
        .json(
            Method::POST,
            "/v1/agents",
            Some(&json!({"name": "load", "model": "m", "tools": [{"type": "agent_toolset_20260401"}]})),
        )
        .await
        .unwrap();
    let env = api.json(Method::POST, "/v1/environments", Some(&json!({"name": "load"}))).await.unwrap();
    let env_id: EnvironmentId = env["id"].as_str().unwrap().parse().unwrap();
    let env_key = api.json(Method::POST, &format!("/v1/environments/{env_id}/keys"), None).await.unwrap()["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stores = Vec::new();
    for i in 0..shape.writers.div_ceil(4).max(1) {
        let s = api.json(Method::POST, "/v1/memory_stores", Some(&json!({"name": format!("load-{i}")}))).await.unwrap();
        stores.push(s["id"].as_str().unwrap().parse().unwrap());
    }
    let mut sessions = Vec::new();
    for _ in 0..shape.streams {
        let body = json!({"agent": agent["id"], "environment_id": env_id});
        let s = api.json(Method::POST, "/v1/sessions", Some(&body)).await.unwrap();
        sessions.push(s["id"].as_str().unwrap().to_owned());
    }
    let world = Arc::new(World {
        api,
        env: env_id,
        env_key,
        base: base.to_owned(),
        sessions,
        stores,
        epoch: Instant::now(),
        stop: AtomicBool::new(false),
        tally: Tally::new(),
        sent: AtomicU64::new(0),
        delivered: AtomicU64::new(0),
        items: AtomicU64::new(0),
        versions: AtomicU64::new(0),
        outstanding: Mutex::new(HashSet::new()),
    });

    // Streams first, all open before the load starts.
    let (opened_tx, mut opened_rx) = tokio::sync::mpsc::channel::<()>(shape.streams.max(1));
    let mut streams = Vec::new();
    for i in 0..shape.streams {
        streams.push(tokio::spawn(stream_task(world.clone(), i, opened_tx.clone())));
    }
    drop(opened_tx);
    for _ in 0..shape.streams {
        if opened_rx.recv().await.is_none() {
            break;
        }
    }

    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..shape.pollers {
        tasks.push(tokio::spawn(poller_task(world.clone(), i)));
    }
    for i in 0..shape.writers {
        tasks.push(tokio::spawn(writer_task(world.clone(), i)));
    }
    for _ in 0..shape.senders {
        tasks.push(tokio::spawn(sender_task(world.clone(), shape.send_every)));
    }
    let mut rss = Vec::new();
    while started.elapsed() < shape.duration {
        if let Some(now) = memory_of(pid) {
            rss.push((started.elapsed().as_secs_f64(), now));
        }
        tokio::time::sleep(shape.sample_every.min(shape.duration.saturating_sub(started.elapsed()))).await;
    }
    world.stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();
    // Every message sent must reach its stream; give the last ones a moment.
    let grace = Instant::now() + Duration::from_secs(15);
    while world.delivered.load(Ordering::SeqCst) < world.sent.load(Ordering::SeqCst) && Instant::now() < grace {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for s in &streams {
        s.abort();
    }
    if let Some(now) = memory_of(pid) {
        rss.push((started.elapsed().as_secs_f64(), now));
    }
    let peak_rss = memory_of(pid).map_or(0, |m| m.peak);
    let missing: Vec<String> = world.outstanding.lock().unwrap().iter().cloned().collect();
    for token in missing {
        // Tell a message the log lacks from one the stream dropped.
        let session = token.split('/').nth(1).unwrap_or_default().to_owned();
        let logged = match world.api.list_events(&session, 1000, None).await {
            Ok(page) => page.data.iter().any(|e| e["content"][0]["text"] == token.as_str()),
            Err(_) => false,
        };
        let what = if logged { "is in the log but never reached its stream" } else { "is missing from the log" };
        world.tally.fail_with(format!("sse: message {token} {what}"));
    }
    Report {
        latencies: std::mem::take(&mut *world.tally.latencies.lock().unwrap()),
        errors: std::mem::take(&mut *world.tally.errors.lock().unwrap()),
        sent: world.sent.load(Ordering::SeqCst),
        delivered: world.delivered.load(Ordering::SeqCst),
        items_served: world.items.load(Ordering::SeqCst),
        versions_written: world.versions.load(Ordering::SeqCst),
        rss,
        peak_rss,
        elapsed,
        stalls: std::mem::take(&mut *world.tally.stalls.lock().unwrap()),
    }
}

/// One session's stream: counts each message it was sent, once, and times its delivery.
async fn stream_task(world: Arc<World>, i: usize, opened: tokio::sync::mpsc::Sender<()>) {
    let session = world.sessions[i].clone();
    let started = Instant::now();
    let stream = match world.api.stream_events(&session).await {
        Ok(s) => s,
        Err(e) => {
            world.tally.fail("sse.open", &e);
            let _ = opened.send(()).await;
            return;
        }
    };
    world.tally.time("sse.open", started.elapsed());
    let _ = opened.send(()).await;
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                if !world.stop.load(Ordering::SeqCst) {
                    world.tally.fail("sse.read", &e);
                }
                return;
            }
        };
        if event["type"] != "user.message" {
            continue;
        }
        let Some(token) = event["content"][0]["text"].as_str().map(str::to_owned) else { continue };
        let Some((at, _)) = token.split_once('/') else { continue };
        if !world.outstanding.lock().unwrap().remove(&token) {
            world.tally.fail_with(format!("sse: a message delivered twice or to the wrong stream ({session})"));
            continue;
        }
        let sent_at = Duration::from_micros(at.parse().unwrap_or(0));
        world.tally.time("sse.delivery", world.epoch.elapsed().saturating_sub(sent_at));
        world.delivered.fetch_add(1, Ordering::SeqCst);
    }
    if !world.stop.load(Ordering::SeqCst) {
        world.tally.fail_with("sse: a stream ended early".into());
    }
}

/// Sends `user.message`s to random sessions; each text is `<µs since epoch>/<session>/<n>`.
async fn sender_task(world: Arc<World>, every: Duration) {
    let mut n = 0u64;
    while !world.stop.load(Ordering::SeqCst) {
        let session = &world.sessions[rand::rng().random_range(0..world.sessions.len())];
        let token = format!("{}/{session}/{n}", world.epoch.elapsed().as_micros());
        n += 1;
        world.outstanding.lock().unwrap().insert(token.clone());
        let event = json!({"type": "user.message", "content": [{"type": "text", "text": token}]});
        match world.tally.call("events.send", world.api.send_events(session, &[event])).await {
            Some(_) => {
                world.sent.fetch_add(1, Ordering::SeqCst);
            }
            None => {
                world.outstanding.lock().unwrap().remove(&token);
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// How long a polled but unacknowledged item stays pending before it is delivered again (the
/// contract's default `reclaim_older_than_ms`).
const RECLAIM: Duration = Duration::from_secs(5);

/// A worker's queue cycle with the environment key: long poll, ack, one heartbeat, stop.
async fn poller_task(world: Arc<World>, i: usize) {
    let client = Client::new(&world.base, &world.env_key).unwrap().with_max_retries(0);
    let worker_id = format!("load-worker-{i}");
    while !world.stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let item = match client.poll_work(&world.env, &worker_id, 500, None).await {
            Ok(item) => item,
            Err(e) => {
                world.tally.fail("work.poll", &e);
                continue;
            }
        };
        let Some(item) = item else {
            world.tally.time("work.poll (empty)", started.elapsed());
            continue;
        };
        world.tally.time("work.poll", started.elapsed());
        let polled = Instant::now();
        match client.ack_work(&world.env, &item.id).await {
            Ok(_) => world.tally.time("work.ack", polled.elapsed()),
            Err(ClientError::Api { status: 409, .. }) if polled.elapsed() > RECLAIM => {
                // The contract's outcome of a late ack: the item went back to the queue and
                // another poller serves it. Still counted, since only a stall gets here.
                world.tally.fail_with(format!(
                    "work.ack: HTTP 409, sent {:.1} s after its poll (past the {} s reclaim window)",
                    polled.elapsed().as_secs_f64(),
                    RECLAIM.as_secs()
                ));
                continue;
            }
            Err(e) => {
                world.tally.fail("work.ack", &e);
                continue;
            }
        }
        let beat = client.heartbeat_work(&world.env, &item.id, NO_HEARTBEAT, Duration::from_secs(30));
        world.tally.call("work.heartbeat", beat).await;
        if world.tally.call("work.stop", client.stop_work(&world.env, &item.id, true)).await.is_some() {
            world.items.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Creates its 20 memories, then keeps updating them in turn, each with its content's hash as
/// the precondition (a lost or doubled write would surface as a 409).
async fn writer_task(world: Arc<World>, i: usize) {
    let store = world.stores[i % world.stores.len()].clone();
    let mut mine: Vec<Option<(MemoryId, String)>> = vec![None; 20];
    let mut round = 0u64;
    while !world.stop.load(Ordering::SeqCst) {
        for (k, slot) in mine.iter_mut().enumerate() {
            if world.stop.load(Ordering::SeqCst) {
                return;
            }
            let content = format!("writer {i}, memory {k}, round {round}: {}", "x".repeat(200));
            let written = match slot {
                None => {
                    let path = format!("/load/w{i:02}/m{k:02}.md");
                    world.tally.call("memory.create", world.api.create_memory(&store, &path, &content, None)).await
                }
                Some((id, sha)) => {
                    let body = UpdateMemory {
                        content: Some(content.clone()),
                        path: None,
                        precondition: Some(Precondition::ContentSha256 { content_sha256: sha.clone() }),
                    };
                    world.tally.call("memory.update", world.api.update_memory(&store, id, &body, None)).await
                }
            };
            if let Some(m) = written {
                world.versions.fetch_add(1, Ordering::SeqCst);
                *slot = Some((m.id, m.content_sha256));
            }
        }
        round += 1;
    }
}

/// The figures of `report` as a JSON value (for scripts).
pub fn to_json(report: &Report) -> Value {
    let kinds: serde_json::Map<String, Value> = report
        .latencies
        .iter()
        .map(|(k, h)| {
            let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
            (
                (*k).to_owned(),
                json!({"count": h.len(), "p50_ms": ms(0.5), "p99_ms": ms(0.99), "max_ms": h.max() as f64 / 1000.0}),
            )
        })
        .collect();
    json!({"requests": kinds, "errors": report.errors, "sent": report.sent, "delivered": report.delivered,
           "items_served": report.items_served, "peak_rss": report.peak_rss})
}
