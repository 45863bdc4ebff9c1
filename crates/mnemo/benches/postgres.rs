//! `mnemo serve` on PostgreSQL: memory writes against a raw loop of the same rows, one replica
//! against two, work claims by many pollers, and how fast an event appended through one
//! replica reaches a stream open on another.
//!
//! Run with `MNEMO_BENCH_POSTGRES=postgres://USER@HOST:PORT/DB cargo bench -p mnemo --bench
//! postgres`. Every measurement gets a fresh schema (`mnemo_bench_<pid>_<what>`, dropped at
//! the end). Knobs: `MNEMO_BENCH_WRITES` (writes per writer, default 4000), `MNEMO_BENCH_ROUNDS`
//! (rounds they are split into, default 4), `MNEMO_BENCH_CLAIMS` (work items, default 4000),
//! `MNEMO_BENCH_EVENTS` (events, default 1000).
//!
//! - writes: single-memory creates from 16 concurrent HTTP clients (`mnemo-client`) against
//!   in-process servers over [`PostgresStore`], into one store or one store per client, through
//!   one replica or two (clients alternate); raw: the same rows (one version, one memory, the
//!   store's counter) from 16 `tokio-postgres` connections, one transaction per memory. Raw,
//!   one replica and two take turns round by round, so a slow spell of the shared machine
//!   does not fall on one of them only;
//! - claims: 32 HTTP pollers poll and acknowledge queued work items with the environment's key
//!   until the queue is empty; every delivery is counted, duplicates included;
//! - events: a stream open on replica A (and one on B), `agent.message` events appended one at a
//!   time through B; latency from just before the append to the event's arrival.
//!
//! This is a benchmark, not a test: it asserts nothing about timings.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use mnemo_api::{CreateEnvironment, CreateMemoryStore, EnvironmentId, MemoryStoreId, content_sha256};
use mnemo_client::{Client, Method};
use mnemo_server::{AppState, hash_credential};
use mnemo_store::{Operations, Store};
use mnemo_store_postgres::{PostgresSettings, PostgresStore};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::NoTls;

#[path = "common/writes.rs"]
mod writes;
use writes::{CLIENTS, content, join_all, write_round};

const POLLERS: usize = 32;
const WARM_UP: usize = 256;
const API_KEY: &str = "bench";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Throughput and latency of one measurement.
#[derive(Clone, Copy)]
struct Rate {
    per_sec: f64,
    p50: Duration,
    p99: Duration,
}

impl Rate {
    fn new(count: usize, elapsed: Duration, mut latencies: Vec<Duration>) -> Self {
        let (p50, p99) = percentiles(&mut latencies);
        Self { per_sec: count as f64 / elapsed.as_secs_f64(), p50, p99 }
    }
}

fn percentiles(latencies: &mut [Duration]) -> (Duration, Duration) {
    if latencies.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    latencies.sort();
    (latencies[latencies.len() / 2], latencies[(latencies.len() * 99 / 100).min(latencies.len() - 1)])
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// A fresh schema on the benchmark's database: its settings, and the name to drop at the end.
struct Schema {
    settings: PostgresSettings,
    name: String,
}

impl Schema {
    async fn fresh(url: &str, what: &str) -> Self {
        let name = format!("mnemo_bench_{}_{what}", std::process::id());
        let mut settings = PostgresSettings::from_url(url).unwrap_or_else(|e| panic!("MNEMO_BENCH_POSTGRES: {e}"));
        let options = settings.config.get_options().unwrap_or_default().to_owned();
        settings.config.options(format!("{options} -c search_path={name}").trim_start());
        let schema = Self { settings, name };
        schema.drop_schema(url).await;
        schema
    }

    async fn drop_schema(&self, url: &str) {
        let client = connect(&PostgresSettings::from_url(url).unwrap()).await;
        client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name)).await.unwrap();
    }
}

/// A plain connection, its connection task running in the background.
async fn connect(settings: &PostgresSettings) -> tokio_postgres::Client {
    let (client, connection) = settings.config.connect(NoTls).await.expect("connect to MNEMO_BENCH_POSTGRES");
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("raw connection: {e}");
        }
    });
    client
}

/// One in-process `mnemo serve` over its own [`PostgresStore`] (its own pool and listener).
struct Replica {
    store: Arc<PostgresStore>,
    base: String,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Replica {
    async fn start(settings: &PostgresSettings) -> Self {
        let store = Arc::new(PostgresStore::open(settings).await.expect("open the PostgreSQL store"));
        let dyn_store: Arc<dyn Store> = store.clone();
        dyn_store.ensure_api_key(hash_credential(API_KEY), API_KEY).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let router = mnemo_server::router(AppState::new(dyn_store));
        let server = tokio::spawn(mnemo_server::serve(listener, router, async {
            let _ = stopped.await;
        }));
        Self { store, base, stop, server }
    }

    fn client(&self, token: &str) -> Client {
        Client::new(&self.base, token).unwrap()
    }

    async fn shut(self) {
        let _ = self.stop.send(());
        let _ = self.server.await;
        self.store.close().await;
    }
}

async fn replicas(settings: &PostgresSettings, n: usize) -> Vec<Replica> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(Replica::start(settings).await);
    }
    out
}

async fn shut_all(replicas: Vec<Replica>) {
    for r in replicas {
        r.shut().await;
    }
}

// ---- memory writes -------------------------------------------------------------------------

/// One way of writing memories, set up on its own schema.
enum Writer {
    /// `mnemo serve` replicas over [`PostgresStore`], with an API client for each.
    Server { schema: Schema, replicas: Vec<Replica>, clients: Vec<Client>, stores: Vec<MemoryStoreId> },
    /// Plain connections and the row numbers of the stores they write into.
    Raw { schema: Schema, connections: Vec<Arc<tokio_postgres::Client>>, stores: Vec<i64> },
}

impl Writer {
    async fn server(url: &str, replica_count: usize, store_count: usize) -> Self {
        let schema = Schema::fresh(url, &format!("server_{replica_count}r_{store_count}s")).await;
        let replicas = replicas(&schema.settings, replica_count).await;
        let clients: Vec<Client> = replicas.iter().map(|r| r.client(API_KEY)).collect();
        let mut stores = Vec::new();
        for i in 0..store_count {
            let body = CreateMemoryStore { name: format!("bench {i}"), ..Default::default() };
            stores.push(clients[0].create_memory_store(&body).await.unwrap().id);
        }
        Self::Server { schema, replicas, clients, stores }
    }

    /// The server's schema (created by [`PostgresStore::open`]), [`CLIENTS`] connections, and
    /// the stores inserted as plain rows.
    async fn raw(url: &str, store_count: usize) -> Self {
        let schema = Schema::fresh(url, &format!("raw_{store_count}s")).await;
        PostgresStore::open(&schema.settings).await.expect("create the schema").close().await;
        let mut connections = Vec::new();
        for _ in 0..CLIENTS {
            connections.push(Arc::new(connect(&schema.settings).await));
        }
        let mut stores = Vec::new();
        for i in 0..store_count {
            let row = connections[0]
                .query_one(
                    "INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at, workspace_id) \
                     VALUES ($1, 'raw', '', '{}', 0, 0, (SELECT id FROM workspaces WHERE is_default)) RETURNING seq",
                    &[&format!("memstore_raw{i}")],
                )
                .await
                .unwrap();
            stores.push(row.get::<_, i64>(0));
        }
        Self::Raw { schema, connections, stores }
    }

    async fn round(&self, offset: usize, count: usize) -> Vec<Duration> {
        match self {
            Self::Server { clients, stores, .. } => write_round(clients, stores, offset, count).await,
            Self::Raw { connections, stores, .. } => {
                let tasks = (0..CLIENTS)
                    .map(|c| {
                        let conn = Arc::clone(&connections[c]);
                        let store_seq = stores[c % stores.len()];
                        tokio::spawn(async move { raw_client(&conn, store_seq, c, offset, count).await })
                    })
                    .collect();
                join_all(tasks).await
            }
        }
    }

    async fn close(self, url: &str) {
        let schema = match self {
            Self::Server { schema, replicas, .. } => {
                shut_all(replicas).await;
                schema
            }
            Self::Raw { schema, connections, .. } => {
                drop(connections);
                schema
            }
        };
        schema.drop_schema(url).await;
    }
}

/// What one writer did over all rounds.
#[derive(Default)]
struct Tally {
    writes: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
    /// Writes per second of each round.
    rounds: Vec<f64>,
}

impl Tally {
    fn rate(&self) -> Rate {
        Rate::new(self.writes, self.elapsed, self.latencies.clone())
    }
}

/// The same rows the server writes for a create (a version, a memory, the store's counter),
/// one transaction per memory, each statement awaited in turn.
async fn raw_client(
    conn: &tokio_postgres::Client,
    store_seq: i64,
    c: usize,
    offset: usize,
    count: usize,
) -> Vec<Duration> {
    let version = conn
        .prepare(
            "INSERT INTO memory_versions (id, store_seq, memory_id, operation, path, content_sha256, \
             content_size_bytes, created_at, actor_kind, actor_id, content) \
             VALUES ($1, $2, $3, 'created', $4, $5, $6, 0, 'api_actor', 'apikey_raw', $7) RETURNING seq",
        )
        .await
        .unwrap();
    let memory = conn
        .prepare(
            "INSERT INTO memories (id, store_seq, path, content_sha256, content_size_bytes, version_seq, \
             version_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 0)",
        )
        .await
        .unwrap();
    let counter =
        conn.prepare("UPDATE memory_stores SET memory_count = memory_count + 1 WHERE seq = $1").await.unwrap();
    let mut latencies = Vec::new();
    for i in (c..count).step_by(CLIENTS) {
        let n = offset + i;
        let text = content(n);
        let sha = content_sha256(text.as_bytes());
        let (path, memory_id, version_id) = (format!("/bench/{n:07}.md"), format!("mem_{n}"), format!("memver_{n}"));
        let size = text.len() as i64;
        let started = Instant::now();
        conn.batch_execute("BEGIN").await.unwrap();
        let row = conn
            .query_one(&version, &[&version_id, &store_seq, &memory_id, &path, &sha, &size, &text.as_bytes()])
            .await
            .unwrap();
        let version_seq: i64 = row.get(0);
        conn.execute(&memory, &[&memory_id, &store_seq, &path, &sha, &size, &version_seq, &version_id]).await.unwrap();
        conn.execute(&counter, &[&store_seq]).await.unwrap();
        conn.batch_execute("COMMIT").await.unwrap();
        latencies.push(started.elapsed());
    }
    latencies
}

/// Raw, one replica and two, writing into `store_count` stores: after a warm-up each, `rounds`
/// rounds in which every writer writes its share in turn (the order rotating), so that the
/// shared machine's slow spells fall on all of them alike. Answers (raw, [1 replica, 2]).
async fn write_measurements(url: &str, store_count: usize, writes: usize, rounds: usize) -> Vec<Tally> {
    let writers = vec![
        Writer::raw(url, store_count).await,
        Writer::server(url, 1, store_count).await,
        Writer::server(url, 2, store_count).await,
    ];
    for w in &writers {
        w.round(0, WARM_UP).await; // connections, statement caches
    }
    let mut tallies: Vec<Tally> = writers.iter().map(|_| Tally::default()).collect();
    let per_round = writes.div_ceil(rounds);
    for r in 0..rounds {
        for k in 0..writers.len() {
            let w = (r + k) % writers.len();
            let started = Instant::now();
            let latencies = writers[w].round(1_000_000 * (r + 1), per_round).await;
            let elapsed = started.elapsed();
            let t = &mut tallies[w];
            t.writes += per_round;
            t.elapsed += elapsed;
            t.latencies.extend(latencies);
            t.rounds.push(per_round as f64 / elapsed.as_secs_f64());
        }
    }
    for w in writers {
        w.close(url).await;
    }
    tallies
}

// ---- work claims ---------------------------------------------------------------------------

struct Claims {
    rate: Rate,
    queued: usize,
    deliveries: usize,
    distinct: usize,
    failed_acks: usize,
    failed_polls: usize,
    left: u64,
}

/// A self-hosted environment (through the API) and a key for it: (environment, key).
async fn self_hosted_environment(api: &Client) -> (EnvironmentId, String) {
    let body =
        CreateEnvironment { name: "bench".into(), config: Some(json!({"type": "self_hosted"})), ..Default::default() };
    let env = api.create_environment(&body).await.unwrap();
    let key =
        api.create_environment_key(&env.id).await.unwrap().key.expect("a new key shows its secret").into_exposed();
    (env.id, key)
}

async fn claims(url: &str, replica_count: usize, items: usize) -> Claims {
    let schema = Schema::fresh(url, &format!("claims_{replica_count}r")).await;
    let replicas = replicas(&schema.settings, replica_count).await;
    let (env, key) = self_hosted_environment(&replicas[0].client(API_KEY)).await;

    // Queue through the store (faster than sessions over HTTP), 16 writers at once.
    let queued = Arc::new(AtomicUsize::new(0));
    let ws = replicas[0].store.default_workspace().await.unwrap();
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (store, env, queued) = (Arc::clone(&replicas[0].store), env.clone(), Arc::clone(&queued));
            let ws = ws.clone();
            tokio::spawn(async move {
                while queued.fetch_add(1, Ordering::Relaxed) < items {
                    store.enqueue_healthcheck(&ws, &env).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }

    let acked = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..POLLERS)
        .map(|p| {
            let client = replicas[p % replica_count].client(&key);
            let (env, acked) = (env.clone(), Arc::clone(&acked));
            tokio::spawn(async move {
                let worker = format!("bench-worker-{p}");
                let (mut ids, mut latencies, mut last) = (Vec::new(), Vec::new(), None);
                let (mut failed_acks, mut failed_polls, mut empty) = (0, 0, 0);
                while acked.load(Ordering::Relaxed) < items && empty < 20 {
                    let t = Instant::now();
                    let work = match client.poll_work(&env, &worker, 100, None).await {
                        Ok(Some(work)) => work,
                        Ok(None) => {
                            empty += 1;
                            continue;
                        }
                        Err(e) => {
                            eprintln!("poll failed: {e}");
                            failed_polls += 1;
                            continue;
                        }
                    };
                    empty = 0;
                    ids.push(work.id.to_string());
                    match client.ack_work(&env, &work.id).await {
                        Ok(_) => {
                            acked.fetch_add(1, Ordering::Relaxed);
                            latencies.push(t.elapsed());
                            last = Some(Instant::now());
                        }
                        Err(e) => {
                            eprintln!("ack of {} failed: {e}", work.id);
                            failed_acks += 1;
                        }
                    }
                }
                (ids, latencies, last, failed_acks, failed_polls)
            })
        })
        .collect();
    let (mut ids, mut latencies, mut last) = (Vec::new(), Vec::new(), started);
    let (mut failed_acks, mut failed_polls) = (0, 0);
    for t in tasks {
        let (i, l, end, fa, fp) = t.await.unwrap();
        ids.extend(i);
        latencies.extend(l);
        last = last.max(end.unwrap_or(started));
        failed_acks += fa;
        failed_polls += fp;
    }
    let deliveries = ids.len();
    ids.sort();
    ids.dedup();
    let stats = replicas[0].store.work_stats(&ws, &env).await.unwrap();
    let left = stats.depth + stats.pending;
    let done = acked.load(Ordering::Relaxed);
    let result = Claims {
        rate: Rate::new(done, last - started, latencies),
        queued: items,
        deliveries,
        distinct: ids.len(),
        failed_acks,
        failed_polls,
        left,
    };
    shut_all(replicas).await;
    schema.drop_schema(url).await;
    result
}

// ---- cross-replica events ------------------------------------------------------------------

/// p50 and p99 of each path, and how many events each stream received.
struct Delivery {
    /// Append → arrival on the other replica's stream.
    cross: (Duration, Duration),
    /// Append → arrival on the appending replica's own stream.
    same: (Duration, Duration),
    /// Append → the append's answer.
    append: (Duration, Duration),
    received: (usize, usize),
}

fn event_number(event: &Value) -> Option<usize> {
    (event["type"] == "agent.message")
        .then(|| event["content"][0]["text"].as_str()?.strip_prefix("bench-")?.parse().ok())
        .flatten()
}

/// Reads a stream, reporting `(number, arrival)` of each bench event until `last` arrives or
/// the stream goes quiet.
fn receive(
    stream: impl futures::Stream<Item = mnemo_client::Result<Value>> + Send + 'static,
    last: usize,
    arrivals: mpsc::UnboundedSender<usize>,
) -> tokio::task::JoinHandle<Vec<(usize, Instant)>> {
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut got = Vec::new();
        while let Ok(Some(Ok(event))) = tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
            let Some(n) = event_number(&event) else { continue };
            got.push((n, Instant::now()));
            let _ = arrivals.send(n);
            if n == last {
                break;
            }
        }
        got
    })
}

async fn events(url: &str, count: usize) -> Delivery {
    const WARM: usize = 20;
    let schema = Schema::fresh(url, "events").await;
    let replicas = replicas(&schema.settings, 2).await;
    let (a, b) = (replicas[0].client(API_KEY), replicas[1].client(API_KEY));
    let agent = a
        .json(
            Method::POST,
            "/v1/agents",
            Some(&json!({"name": "bench", "model": "claude-opus-4-6", "tools": [{"type": "agent_toolset_20260401"}]})),
        )
        .await
        .unwrap();
    let (env, _) = self_hosted_environment(&a).await;
    let session = a
        .json(Method::POST, "/v1/sessions", Some(&json!({"agent": agent["id"], "environment_id": env.as_str()})))
        .await
        .unwrap();
    let sid = session["id"].as_str().unwrap().to_owned();

    let total = WARM + count;
    let (on_a_tx, mut on_a) = mpsc::unbounded_channel();
    let (on_b_tx, _on_b) = mpsc::unbounded_channel();
    let stream_a = receive(a.stream_events(&sid).await.unwrap(), total - 1, on_a_tx);
    let stream_b = receive(b.stream_events(&sid).await.unwrap(), total - 1, on_b_tx);

    // One event at a time: the next is appended once the previous reached replica A.
    let (mut sent, mut answered) = (Vec::with_capacity(total), Vec::new());
    for n in 0..total {
        let event = json!({"type": "agent.message", "content": [{"type": "text", "text": format!("bench-{n}")}]});
        let t = Instant::now();
        sent.push(t);
        b.send_events(&sid, &[event]).await.unwrap();
        if n >= WARM {
            answered.push(t.elapsed());
        }
        loop {
            match tokio::time::timeout(Duration::from_secs(10), on_a.recv()).await {
                Ok(Some(got)) if got >= n => break,
                Ok(Some(_)) => {}
                _ => {
                    eprintln!("event {n} did not reach replica A within 10 s");
                    break;
                }
            }
        }
    }
    let latencies = |got: Vec<(usize, Instant)>| -> ((Duration, Duration), usize) {
        let mut measured: Vec<Duration> =
            got.iter().filter(|(n, _)| *n >= WARM && *n < total).map(|(n, at)| *at - sent[*n]).collect();
        (percentiles(&mut measured), measured.len())
    };
    let (cross, got_a) = latencies(stream_a.await.unwrap());
    let (same, got_b) = latencies(stream_b.await.unwrap());
    let result = Delivery { cross, same, append: percentiles(&mut answered), received: (got_a, got_b) };
    shut_all(replicas).await;
    schema.drop_schema(url).await;
    result
}

// ---- the run -------------------------------------------------------------------------------

async fn run(url: &str) {
    let writes = env_usize("MNEMO_BENCH_WRITES", 4000);
    let rounds = env_usize("MNEMO_BENCH_ROUNDS", 4).max(1);
    let items = env_usize("MNEMO_BENCH_CLAIMS", 4000);
    let event_count = env_usize("MNEMO_BENCH_EVENTS", 1000);

    let probe = connect(&PostgresSettings::from_url(url).unwrap()).await;
    let setting = |row: tokio_postgres::Row| row.get::<_, String>(0);
    let version = setting(probe.query_one("SHOW server_version", &[]).await.unwrap());
    let sync = setting(probe.query_one("SHOW synchronous_commit", &[]).await.unwrap());
    drop(probe);
    println!(
        "PostgreSQL {version} (synchronous_commit={sync}); pool per replica: {}; cores: {}",
        mnemo_store_postgres::DEFAULT_POOL_SIZE,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "### Memory writes ({writes} per writer in {rounds} alternating rounds, after {WARM_UP} warm-up; {CLIENTS} clients)"
    );
    println!();
    println!(
        "| stores | replicas | raw tx/s | server writes/s | server / raw (rounds) | server p50 | server p99 | raw p50 | raw p99 |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for stores in [1, CLIENTS] {
        let tallies = write_measurements(url, stores, writes, rounds).await;
        let raw = tallies[0].rate();
        for (replicas, t) in [(1, &tallies[1]), (2, &tallies[2])] {
            let server = t.rate();
            let per_round: Vec<f64> = t.rounds.iter().zip(&tallies[0].rounds).map(|(s, r)| s / r).collect();
            let (lo, hi) = per_round.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            println!(
                "| {stores} | {replicas} | {:.0} | {:.0} | **{:.2}** ({lo:.2}–{hi:.2}) | {} | {} | {} | {} |",
                raw.per_sec,
                server.per_sec,
                server.per_sec / raw.per_sec,
                ms(server.p50),
                ms(server.p99),
                ms(raw.p50),
                ms(raw.p99)
            );
        }
    }
    println!();
    println!("### Work claims ({items} queued items, {POLLERS} HTTP pollers, poll + ack each)");
    println!();
    println!(
        "| replicas | claims/s | p50 poll+ack | p99 poll+ack | deliveries | distinct items | delivered twice | failed acks / polls | left queued |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for replicas in [1, 2] {
        let c = claims(url, replicas, items).await;
        println!(
            "| {replicas} | {:.0} | {} | {} | {} | {} / {} | {} | {} / {} | {} |",
            c.rate.per_sec,
            ms(c.rate.p50),
            ms(c.rate.p99),
            c.deliveries,
            c.distinct,
            c.queued,
            c.deliveries - c.distinct,
            c.failed_acks,
            c.failed_polls,
            c.left
        );
    }
    println!();
    println!("### Event delivery ({event_count} `agent.message` events appended one at a time through replica B)");
    println!();
    println!("| stream on | received | p50 | p99 |");
    println!("|---|---:|---:|---:|");
    let d = events(url, event_count).await;
    println!(
        "| replica A (the other one) | {} / {event_count} | {} | {} |",
        d.received.0,
        ms(d.cross.0),
        ms(d.cross.1)
    );
    println!(
        "| replica B (the appending one) | {} / {event_count} | {} | {} |",
        d.received.1,
        ms(d.same.0),
        ms(d.same.1)
    );
    println!("| (the append's own answer) | – | {} | {} |", ms(d.append.0), ms(d.append.1));
}

fn main() {
    let Some(url) = std::env::var("MNEMO_BENCH_POSTGRES").ok().filter(|u| !u.is_empty()) else {
        eprintln!(
            "MNEMO_BENCH_POSTGRES is not set: this benchmark needs a PostgreSQL database it may create and drop \
             schemas in, e.g.\n  MNEMO_BENCH_POSTGRES=postgres://mnemo@127.0.0.1:55432/mnemo cargo bench -p mnemo \
             --bench postgres"
        );
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(run(&url));
}
