//! Semantic search (issue 35 item 2): the exact scan of a store's vectors, on SQLite and (with
//! `MNEMO_BENCH_POSTGRES`) PostgreSQL.
//!
//! Run with `cargo bench -p mnemo --bench semantic`. Knobs: `MNEMO_BENCH_SIZES` (memories per
//! store, comma-separated, default `10000`), `MNEMO_BENCH_DIMS` (vector length, default 768, as
//! `nomic-embed-text`), `MNEMO_BENCH_QUERIES` (runs per measurement, default 50),
//! `MNEMO_BENCH_DIR` (where the SQLite files go, default the temp dir; deleted at the end).
//!
//! In process, through the `Store` (no HTTP, no provider: vectors are deterministic random unit
//! vectors, stored as the server's embedder stores them, so what is timed is the database's and
//! the ranking's share). Per store size:
//! - storing: `pending_embeddings` + `put_embeddings` in batches of 32, as the embedder does;
//! - an idle embedder pass (`pending_embeddings` finding nothing: the anti-join it runs after
//!   every burst of writes);
//! - `rank_by_meaning` alone (the scan, 20 results), and `search::by_meaning` in `semantic` mode
//!   (everything embedded: the scan only) and in `hybrid` mode (the scan and the full-text
//!   ranking of one rare word), each p50/p99 over the runs, 20 results.
//!
//! This is a benchmark, not a test: it asserts nothing about timings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mnemo_api::{MemoryPath, SearchMode, WorkspaceId};
use mnemo_store::ops::embeddings::MeaningQuery;
use mnemo_store::rules::search::parse;
use mnemo_store::rules::semantic::encode;
use mnemo_store::search::{ByMeaning, SearchMemories, SearchScope, by_meaning};
use mnemo_store::{MemoryWriteOp, NewMemoryStore, Store};
use mnemo_store_postgres::PostgresStore;
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};

#[path = "common/knobs.rs"]
mod knobs;
#[path = "common/pg_schema.rs"]
mod pg_schema;

use knobs::{bench_dir, env_usize, ms, percentile, sizes};

const MODEL: &str = "bench-embed";

/// A deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn unit_vector(&mut self, dims: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dims).map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0).collect();
        mnemo_model::embeddings::unit(v).expect("a random vector is not zero")
    }
}

fn actor() -> mnemo_api::Actor {
    mnemo_api::Actor::ApiActor { api_key_id: "apikey_bench".parse().unwrap() }
}

/// A store of `size` memories of ~1 KB, every tenth holding the word `quokka`.
async fn fill(store: &Arc<dyn Store>, ws: &WorkspaceId, size: usize) -> mnemo_api::MemoryStoreId {
    let new = NewMemoryStore { name: "bench".into(), description: String::new(), metadata: Default::default() };
    let id = store.create_memory_store(ws, new).await.unwrap().id;
    for chunk in (0..size).collect::<Vec<_>>().chunks(100) {
        let ops = chunk
            .iter()
            .map(|n| {
                let word = if n % 10 == 0 { "quokka" } else { "wombat" };
                let content = format!("note {n} about the {word} ") + &"lorem ipsum dolor sit amet ".repeat(38);
                MemoryWriteOp::Create { path: MemoryPath::parse(&format!("/notes/{n:06}.md")).unwrap(), content }
            })
            .collect();
        for r in store.write_memories(ws, &id, ops, actor()).await.unwrap() {
            r.unwrap();
        }
    }
    id
}

/// Times `runs` calls of `f`: (p50, p99).
async fn time<F, Fut>(runs: usize, mut f: F) -> (Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut took = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        f().await;
        took.push(started.elapsed());
    }
    took.sort();
    (percentile(&took, 50), percentile(&took, 99))
}

async fn measure(label: &str, store: Arc<dyn Store>, size: usize, dims: usize, runs: usize) {
    let ws = store.default_workspace().await.unwrap();
    let started = Instant::now();
    let id = fill(&store, &ws, size).await;
    let filled = started.elapsed();

    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let started = Instant::now();
    let mut after = 0;
    loop {
        let batch = store.pending_embeddings(MODEL, after, 32).await.unwrap();
        let Some(last) = batch.last() else { break };
        after = last.memory;
        let made = batch.iter().map(|p| (p.memory, p.version, Some(encode(&rng.unit_vector(dims))))).collect();
        store.put_embeddings(MODEL, made).await.unwrap();
    }
    let stored = started.elapsed();

    let idle = time(runs, || async {
        assert!(store.pending_embeddings(MODEL, 0, 32).await.unwrap().is_empty());
    })
    .await;
    let query = rng.unit_vector(dims);
    let scan = time(runs, || async {
        let q = MeaningQuery {
            scope: SearchScope::Store(id.clone()),
            query: parse("quokka").unwrap(),
            path_prefix: None,
            model: MODEL.into(),
            vector: query.clone(),
            depth: 20,
        };
        assert_eq!(store.rank_by_meaning(&ws, q).await.unwrap().ranked.len(), 20);
    })
    .await;
    let search = |mode: SearchMode| {
        let (store, ws, id, query) = (&store, &ws, &id, &query);
        time(runs, move || async move {
            let request = SearchMemories {
                scope: SearchScope::Store(id.clone()),
                query: parse("quokka").unwrap(),
                path_prefix: None,
                limit: 20,
                after: None,
            };
            let meaning = ByMeaning { mode, model: MODEL.into(), vector: query.clone() };
            assert_eq!(by_meaning(&**store, ws, request, meaning).await.unwrap().items.len(), 20);
        })
    };
    let semantic = search(SearchMode::Semantic).await;
    let hybrid = search(SearchMode::Hybrid).await;
    println!(
        "| {label} | {size} | {dims} | {:.1} s | {:.0}/s | {} / {} | {} / {} | {} / {} | {} / {} |",
        filled.as_secs_f64(),
        size as f64 / stored.as_secs_f64(),
        ms(idle.0),
        ms(idle.1),
        ms(scan.0),
        ms(scan.1),
        ms(semantic.0),
        ms(semantic.1),
        ms(hybrid.0),
        ms(hybrid.1),
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let sizes = sizes("10000");
    let dims = env_usize("MNEMO_BENCH_DIMS", 768);
    let runs = env_usize("MNEMO_BENCH_QUERIES", 50);
    let dir = bench_dir("mnemo-bench-semantic");
    let pg = std::env::var("MNEMO_BENCH_POSTGRES").ok();
    println!(
        "| backend | memories | dims | fill | vectors stored | idle embedder pass p50 / p99 ms | rank by meaning p50 / p99 ms | `semantic` search p50 / p99 ms | `hybrid` search p50 / p99 ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &size in &sizes {
        let path = dir.path().join(format!("semantic-{size}.sqlite"));
        let mut settings = SqliteSettings::from_url(&format!("sqlite://{}", path.display())).unwrap();
        settings.durability = Durability::Full;
        settings.limits.max_memories_per_store = 1_000_000;
        let s = SqliteStore::open(&settings).unwrap();
        measure("SQLite", Arc::new(s.clone()), size, dims, runs).await;
        s.close().await;
        if let Some(url) = &pg {
            let mut settings = pg_schema::settings(url, &format!("bench_semantic_{size}")).await;
            settings.limits.max_memories_per_store = 1_000_000;
            let s: Arc<dyn Store> = Arc::new(PostgresStore::open(&settings).await.unwrap());
            measure("PostgreSQL", Arc::clone(&s), size, dims, runs).await;
            s.close().await;
            pg_schema::exec(url, &format!("DROP SCHEMA bench_semantic_{size} CASCADE")).await;
        }
    }
}
