//! Version retention (issue 35 item 3): a purge of many expired versions — its wall time, the
//! longest one batch held the store's writer (SQLite: the one writer thread; PostgreSQL: its
//! transaction), and what it does to the latency of writes made meanwhile, beside the same
//! writes with no purge running.
//!
//! Run with `cargo bench -p mnemo --bench purge`. Knobs: `MNEMO_BENCH_VERSIONS` (expired versions
//! to purge, default 1,000,000: 1,000 memories of ~100 bytes each edited until they have that
//! many), `MNEMO_BENCH_POSTGRES` (also on PostgreSQL, a throw-away schema), `MNEMO_BENCH_DIR`
//! (where the SQLite file goes, default the temp dir; deleted at the end).
//!
//! The purge runs as `mnemo serve`'s pass does: batches of `rules::retention::PURGE_BATCH` through
//! `Operations::purge_versions`, each followed by a pause as long as it took. Meanwhile one writer
//! edits memories of the same store one request at a time (each a transaction of its own, as the
//! API's single writes).
//!
//! This is a benchmark, not a test: it asserts nothing about timings.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mnemo_api::{MemoryId, MemoryPath, MemoryStoreId, WorkspaceId};
use mnemo_store::rules::retention::{PURGE_BATCH, Retention};
use mnemo_store::{MemoryChange, MemoryWriteOp, NewMemoryStore, Store};
use mnemo_store_postgres::PostgresStore;
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};

#[path = "common/pg_schema.rs"]
mod pg_schema;

const MEMORIES: usize = 1000;
const WINDOW: Duration = Duration::from_secs(1);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn actor() -> mnemo_api::Actor {
    mnemo_api::Actor::ApiActor { api_key_id: "apikey_bench".parse().unwrap() }
}

fn content(memory: usize, edit: usize) -> String {
    format!("memory {memory:04}, edit {edit:07}: {}\n", "x".repeat(70))
}

fn change(text: String) -> MemoryChange {
    MemoryChange { content: Some(text), path: None, expected_sha256: None }
}

/// A store of [`MEMORIES`] memories edited until it holds `versions` superseded versions.
async fn fill(store: &Arc<dyn Store>, versions: usize) -> (WorkspaceId, MemoryStoreId, Vec<MemoryId>, Duration) {
    let started = Instant::now();
    let ws = store.default_workspace().await.unwrap();
    let new = NewMemoryStore { name: "purged".into(), description: String::new(), metadata: Default::default() };
    let id = store.create_memory_store(&ws, new).await.unwrap().id;
    let mut ids = Vec::with_capacity(MEMORIES);
    for chunk in (0..MEMORIES).collect::<Vec<_>>().chunks(100) {
        let ops = chunk
            .iter()
            .map(|m| MemoryWriteOp::Create {
                path: MemoryPath::parse(&format!("/m/{m:04}.md")).unwrap(),
                content: content(*m, 0),
            })
            .collect();
        for r in store.write_memories(&ws, &id, ops, actor()).await.unwrap() {
            ids.push(r.unwrap().id);
        }
    }
    // Each round edits every memory once, 100 per batch, from 4 tasks.
    let rounds = versions.div_ceil(MEMORIES);
    let ids = Arc::new(ids);
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..4 {
        let (store, ws, id, ids) = (store.clone(), ws.clone(), id.clone(), ids.clone());
        tasks.spawn(async move {
            for edit in 1..=rounds {
                for chunk in ids.chunks(100).skip(t).step_by(4) {
                    let ops = chunk
                        .iter()
                        .enumerate()
                        .map(|(i, m)| MemoryWriteOp::Update { id: m.clone(), change: change(content(i, edit)) })
                        .collect();
                    for r in store.write_memories(&ws, &id, ops, actor()).await.unwrap() {
                        r.unwrap();
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let ids = Arc::try_unwrap(ids).unwrap();
    (ws, id, ids, started.elapsed())
}

/// Single edits, one at a time, until `stop`; each one's latency.
async fn writer(
    store: Arc<dyn Store>,
    ws: WorkspaceId,
    id: MemoryStoreId,
    ids: Vec<MemoryId>,
    stop: Arc<AtomicBool>,
    at_most: Option<usize>,
) -> Vec<Duration> {
    let mut times = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) && at_most.is_none_or(|m| times.len() < m) {
        let memory = &ids[n % ids.len()];
        let started = Instant::now();
        store.update_memory(&ws, &id, memory, change(content(n, 9_999_999)), actor()).await.unwrap();
        times.push(started.elapsed());
        n += 1;
    }
    times
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p / 100.0) as usize).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

struct Measured {
    fill: Duration,
    purged: u64,
    wall: Duration,
    batches: usize,
    longest_batch: Duration,
    batch_p99: Duration,
    quiet: (Duration, Duration, usize),
    during: (Duration, Duration, usize),
}

async fn measure(store: Arc<dyn Store>, versions: usize) -> Measured {
    let (ws, id, ids, fill) = fill(&store, versions).await;
    tokio::time::sleep(WINDOW + Duration::from_millis(200)).await;
    // The writer alone first: the latency a purge is compared with.
    let mut quiet = writer(store.clone(), ws.clone(), id.clone(), ids.clone(), Arc::default(), Some(2000)).await;
    quiet.sort();
    // The quiet writer's versions are young: the purge keeps them.
    let stop = Arc::new(AtomicBool::new(false));
    let during = tokio::spawn(writer(store.clone(), ws.clone(), id.clone(), ids.clone(), stop.clone(), None));
    let started = Instant::now();
    let (mut after, mut purged, mut batches) = (0, 0, Vec::new());
    loop {
        let t = Instant::now();
        let batch = store.purge_versions(&ws, &id, Retention::Window(WINDOW), after, PURGE_BATCH).await.unwrap();
        batches.push(t.elapsed());
        let batch = batch.expect("no other purge runs");
        purged += batch.versions;
        after = batch.next_after;
        if batch.done {
            break;
        }
        // The server's pass pauses as long as each batch took (`purge_pass`).
        tokio::time::sleep(batches.last().copied().unwrap_or_default()).await;
    }
    let wall = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut during = during.await.unwrap();
    during.sort();
    batches.sort();
    Measured {
        fill,
        purged,
        wall,
        batches: batches.len(),
        longest_batch: *batches.last().unwrap(),
        batch_p99: percentile(&batches, 99.0),
        quiet: (percentile(&quiet, 50.0), percentile(&quiet, 99.0), quiet.len()),
        during: (percentile(&during, 50.0), percentile(&during, 99.0), during.len()),
    }
}

fn sqlite_settings(path: &Path) -> SqliteSettings {
    let mut s = SqliteSettings::from_url(&format!("sqlite://{}", path.display())).unwrap();
    s.durability = Durability::Full;
    s
}

fn row(backend: &str, m: &Measured) {
    println!(
        "| {backend} | {} | {:.1} s ({:.0}/s) | {} × ≤{PURGE_BATCH} | {} ms (p99 {} ms) | {} / {} ms ({} writes) | {} / {} ms ({} writes) | {:.0} s |",
        m.purged,
        m.wall.as_secs_f64(),
        m.purged as f64 / m.wall.as_secs_f64(),
        m.batches,
        ms(m.longest_batch),
        ms(m.batch_p99),
        ms(m.quiet.0),
        ms(m.quiet.1),
        m.quiet.2,
        ms(m.during.0),
        ms(m.during.1),
        m.during.2,
        m.fill.as_secs_f64(),
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let versions = env_usize("MNEMO_BENCH_VERSIONS", 1_000_000);
    let base: PathBuf = std::env::var("MNEMO_BENCH_DIR").map(PathBuf::from).unwrap_or_else(|_| std::env::temp_dir());
    let dir = tempfile::Builder::new().prefix("mnemo-bench-purge").tempdir_in(&base).unwrap();
    println!(
        "| backend | expired versions purged | purge wall time | batches | longest batch (lock held) | writes with no purge p50 / p99 | writes during the purge p50 / p99 | fill time |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let path = dir.path().join("purge.sqlite");
    let s = SqliteStore::open(&sqlite_settings(&path)).unwrap();
    let m = measure(Arc::new(s.clone()), versions).await;
    s.close_blocking();
    row("SQLite (`synchronous=FULL`)", &m);
    if let Ok(url) = std::env::var("MNEMO_BENCH_POSTGRES") {
        let name = format!("mnemo_bench_purge_{}", std::process::id());
        let s: Arc<dyn Store> = Arc::new(PostgresStore::open(&pg_schema::settings(&url, &name).await).await.unwrap());
        let m = measure(s.clone(), versions).await;
        s.close().await;
        pg_schema::exec(&url, &format!("DROP SCHEMA {name} CASCADE")).await;
        row("PostgreSQL", &m);
    }
}
