//! Memory search (issue 35): latency over stores of 10,000 and 100,000 memories of ~4 KB, on
//! SQLite and (with `MNEMO_BENCH_POSTGRES`) PostgreSQL, beside `grep -r` over the same memories
//! as files; and the write path with the search index kept vs without it.
//!
//! Run with `cargo bench -p mnemo --bench search`. Knobs: `MNEMO_BENCH_SIZES` (comma-separated
//! store sizes, default `10000,100000`), `MNEMO_BENCH_QUERIES` (runs per query class, default 50),
//! `MNEMO_BENCH_WRITES` (4 KB creates per write-path measurement, default 2000),
//! `MNEMO_BENCH_ROUNDS` (write-path rounds of each kind, default 3),
//! `MNEMO_BENCH_VOCABULARY` (`narrow`, the default, or `wide`: see `Words`),
//! `MNEMO_BENCH_SHOW` (set: each search's time on stderr),
//! `MNEMO_BENCH_DIR` (where the SQLite files and the grep tree go, default the temp dir; all
//! deleted at the end). Searches go through the `Store` (no HTTP), one at a time, 20 results.
//!
//! The write path: 16 concurrent single-memory creates of ~4 KB; "without the index" is the
//! same build on a database whose search triggers were dropped after migrating (nothing is
//! queued, so the indexer has nothing to do), so the difference is exactly the index's upkeep:
//! acknowledged, and until the indexer has taken every write in. Rounds alternate, best of
//! three each.
//!
//! This is a benchmark, not a test: it asserts nothing about timings.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mnemo_api::{MemoryPath, MemoryStoreId, WorkspaceId};
use mnemo_store::rules::search::parse;
use mnemo_store::search::{SearchMemories, SearchScope};
use mnemo_store::{MemoryWriteOp, NewMemoryStore, Store};
use mnemo_store_postgres::{PostgresSettings, PostgresStore};
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};

#[path = "common/knobs.rs"]
mod knobs;
#[path = "common/pg_schema.rs"]
mod pg_schema;

use knobs::{bench_dir, env_usize, ms, percentile, sizes};

/// A small deterministic generator (xorshift), so every run writes the same memories.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Made-up words; word `i` is drawn with weight ~1/(i+1) (Zipf), like prose.
///
/// Two vocabularies (`MNEMO_BENCH_VOCABULARY`):
/// - `narrow` (the default): 4,000 words of 15 syllables. Its few hundred distinct trigrams each
///   stand in nearly every memory, the trigram index's worst case.
/// - `wide`: 20,000 words of consonant–vowel(–consonant) syllables over the whole alphabet, so
///   trigrams spread out as they do in prose.
struct Words {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Words {
    fn new() -> Self {
        let wide = std::env::var("MNEMO_BENCH_VOCABULARY").is_ok_and(|v| v == "wide");
        let syllables: Vec<String> = if wide {
            let (onsets, vowels, codas) = ("bcdfghjklmnprstvwz", "aeiouy", ["", "", "", "n", "r", "s", "t", "l", "x"]);
            let mut all = Vec::new();
            for o in onsets.chars() {
                for v in vowels.chars() {
                    for c in codas {
                        all.push(format!("{o}{v}{c}"));
                    }
                }
            }
            all
        } else {
            ["ka", "lo", "mi", "ren", "to", "sa", "vel", "dor", "ni", "qua", "zet", "bri", "mon", "ul", "fex"]
                .map(str::to_owned)
                .to_vec()
        };
        let count = if wide { 20_000 } else { 4_000 };
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut words = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while words.len() < count {
            let n = 1 + (rng.next() % 4) as usize;
            let w: String =
                (0..n).map(|_| syllables[(rng.next() % syllables.len() as u64) as usize].as_str()).collect();
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        let mut total = 0.0;
        let cumulative = (0..words.len())
            .map(|i| {
                total += 1.0 / (i as f64 + 1.0);
                total
            })
            .collect();
        Self { words, cumulative }
    }

    fn draw(&self, rng: &mut Rng) -> &str {
        let total = *self.cumulative.last().unwrap();
        let x = (rng.next() % 1_000_000) as f64 / 1_000_000.0 * total;
        let i = self.cumulative.partition_point(|c| *c < x).min(self.words.len() - 1);
        &self.words[i]
    }

    /// Memory `n`: ~4 KB of words, with its own identifier `host-<n>` in it.
    fn memory(&self, n: usize) -> (String, String) {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ (n as u64 + 1).wrapping_mul(0x9e37_79b9));
        let mut text = String::with_capacity(4200);
        let at = 1 + (rng.next() % 400) as usize;
        let mut i = 0;
        while text.len() < 4000 {
            if i == at {
                text.push_str(&format!("host-{n:06}_db "));
            }
            text.push_str(self.draw(&mut rng));
            text.push(if rng.next().is_multiple_of(12) { '\n' } else { ' ' });
            i += 1;
        }
        (format!("/team{}/notes/{n:06}.md", n % 10), text)
    }
}

/// Query classes: (name, queries).
fn queries(words: &Words, size: usize, runs: usize) -> Vec<(&'static str, Vec<String>)> {
    let mut rng = Rng(42);
    let mut pick = |f: &mut dyn FnMut(&mut Rng) -> String| (0..runs).map(|_| f(&mut rng)).collect::<Vec<_>>();
    let n = size as u64;
    vec![
        ("identifier (1 match)", pick(&mut |r| format!("host-{:06}_db", r.next() % n))),
        ("rare word", pick(&mut |r| words.words[3000 + (r.next() % 1000) as usize].clone())),
        (
            "two mid words",
            pick(&mut |r| {
                format!(
                    "{} {}",
                    words.words[200 + (r.next() % 100) as usize],
                    words.words[300 + (r.next() % 100) as usize]
                )
            }),
        ),
        (
            "phrase",
            pick(&mut |r| {
                let (_, text) = words.memory((r.next() % n) as usize);
                let w: Vec<&str> = text.split_whitespace().skip(10).take(2).collect();
                format!("\"{} {}\"", w[0], w[1])
            }),
        ),
        (
            "prefix + exclusion",
            pick(&mut |r| format!("{}* -{}", words.words[500 + (r.next() % 100) as usize], words.words[0])),
        ),
        ("common word (most memories)", pick(&mut |r| words.words[(r.next() % 5) as usize].clone())),
    ]
}

async fn fill(store: &Arc<dyn Store>, ws: &WorkspaceId, id: &MemoryStoreId, size: usize) -> Duration {
    let started = Instant::now();
    let batches: Vec<Vec<usize>> = (0..size).collect::<Vec<_>>().chunks(100).map(<[usize]>::to_vec).collect();
    let mut tasks = tokio::task::JoinSet::new();
    let queue = Arc::new(std::sync::Mutex::new(batches));
    for _ in 0..4 {
        let (store, ws, id, queue) = (store.clone(), ws.clone(), id.clone(), queue.clone());
        tasks.spawn(async move {
            let words = Words::new();
            loop {
                let Some(batch) = queue.lock().unwrap().pop() else { break };
                let ops = batch
                    .into_iter()
                    .map(|n| {
                        let (path, content) = words.memory(n);
                        MemoryWriteOp::Create { path: MemoryPath::parse(&path).unwrap(), content }
                    })
                    .collect();
                for r in store.write_memories(&ws, &id, ops, bench_actor()).await.unwrap() {
                    r.unwrap();
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    // Searches are timed over an index that holds everything (the indexer keeps up behind
    // the writes; what still waits is taken in here).
    store.catch_up_search_index().await.unwrap();
    started.elapsed()
}

fn bench_actor() -> mnemo_api::Actor {
    mnemo_api::Actor::ApiActor { api_key_id: "apikey_bench".parse().unwrap() }
}

async fn search_latencies(
    store: &Arc<dyn Store>,
    ws: &WorkspaceId,
    id: &MemoryStoreId,
    classes: &[(&'static str, Vec<String>)],
) -> Vec<(&'static str, Duration, Duration, usize)> {
    let mut out = Vec::new();
    for (name, qs) in classes {
        let mut times = Vec::new();
        let mut found = 0;
        for q in qs {
            let request = SearchMemories {
                scope: SearchScope::Store(id.clone()),
                query: parse(q).unwrap(),
                path_prefix: None,
                limit: 20,
                after: None,
            };
            let started = Instant::now();
            let items = store.search_memories(ws, request).await.unwrap().items.len();
            found += items;
            times.push(started.elapsed());
            if std::env::var_os("MNEMO_BENCH_SHOW").is_some() {
                eprintln!("{name}: {q} -> {items} in {:.2} ms", started.elapsed().as_secs_f64() * 1000.0);
            }
        }
        times.sort();
        out.push((*name, percentile(&times, 50), percentile(&times, 99), found / qs.len().max(1)));
    }
    out
}

/// `grep -r -l -i -F` over the tree, for the first word of each query (grep has no ranking).
fn grep_latencies(dir: &Path, classes: &[(&'static str, Vec<String>)]) -> Vec<(&'static str, Duration, Duration)> {
    classes
        .iter()
        .filter(|(name, _)| !name.starts_with("phrase") && !name.starts_with("prefix"))
        .map(|(name, qs)| {
            let mut times: Vec<Duration> = qs
                .iter()
                .take(10)
                .map(|q| {
                    let term = q.split_whitespace().next().unwrap();
                    let started = Instant::now();
                    let out = std::process::Command::new("grep").args(["-r", "-l", "-i", "-F", term]).arg(dir).output();
                    out.expect("run grep");
                    started.elapsed()
                })
                .collect();
            times.sort();
            (*name, percentile(&times, 50), percentile(&times, 99))
        })
        .collect()
}

/// A store may hold every memory of the run (the default cap is 10,000).
const CAP: u32 = 1_000_000;

fn sqlite_settings(path: &Path, durability: Durability) -> SqliteSettings {
    let mut s = SqliteSettings::from_url(&format!("sqlite://{}", path.display())).unwrap();
    s.durability = durability;
    s.limits.max_memories_per_store = CAP;
    s
}

async fn pg_schema(url: &str, name: &str) -> PostgresSettings {
    let mut s = pg_schema::settings(url, name).await;
    s.limits.max_memories_per_store = CAP;
    s
}

/// Creates of ~4 KB from 16 concurrent tasks: writes per second until the last is
/// acknowledged, and until the index holds them all too.
async fn write_rate(store: Arc<dyn Store>, writes: usize, words: &Words, from: usize) -> (f64, f64) {
    let ws = store.default_workspace().await.unwrap();
    let id = store.create_memory_store(&ws, new_store()).await.unwrap().id;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..16 {
        let (store, ws, id) = (store.clone(), ws.clone(), id.clone());
        let items: Vec<(String, String)> = (0..writes / 16).map(|i| words.memory(from + t * 100_000 + i)).collect();
        tasks.spawn(async move {
            for (path, content) in items {
                store.create_memory(&ws, &id, MemoryPath::parse(&path).unwrap(), content, bench_actor()).await.unwrap();
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let acknowledged = started.elapsed();
    store.catch_up_search_index().await.unwrap();
    let indexed = started.elapsed();
    let n = (writes / 16 * 16) as f64;
    (n / acknowledged.as_secs_f64(), n / indexed.as_secs_f64())
}

/// The round with the better acknowledged rate.
fn best_of(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    if b.0 > a.0 { b } else { a }
}

fn new_store() -> NewMemoryStore {
    NewMemoryStore { name: "bench".into(), description: String::new(), metadata: Default::default() }
}

const DROP_SQLITE: &str = "DROP TRIGGER memory_search_wait_insert; DROP TRIGGER memory_search_wait_update; \
                           DROP TRIGGER memory_search_wait_delete;";
const DROP_PG: &str = "DROP TRIGGER memory_search_log ON memories; DROP TRIGGER memory_search_restart ON memories;";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let sizes = sizes("10000,100000");
    let runs = env_usize("MNEMO_BENCH_QUERIES", 50);
    let writes = env_usize("MNEMO_BENCH_WRITES", 2000);
    let dir = bench_dir("mnemo-bench-search");
    let pg = std::env::var("MNEMO_BENCH_POSTGRES").ok();
    let words = Words::new();

    // The write path, index vs none; alternating rounds, best of three (none with 0 writes).
    // (SQLite, PostgreSQL): best acknowledged rate, and its rate until indexed; and every
    // round's acknowledged rate, for the spread.
    let mut with = ((0.0f64, 0.0f64), (0.0f64, 0.0f64));
    let mut without = (0.0f64, 0.0f64);
    let mut rounds: [[Vec<f64>; 2]; 2] = Default::default();
    for round in 0..(if writes == 0 { 0 } else { env_usize("MNEMO_BENCH_ROUNDS", 3) }) {
        // Which goes first alternates: a round that follows a setup or another round pays for it.
        for indexed in if round % 2 == 0 { [true, false] } else { [false, true] } {
            let path = dir.path().join(format!("writes-{round}-{indexed}.sqlite"));
            let s = SqliteStore::open(&sqlite_settings(&path, Durability::Full)).unwrap();
            s.close_blocking();
            if !indexed {
                rusqlite::Connection::open(&path).unwrap().execute_batch(DROP_SQLITE).unwrap();
            }
            let s = SqliteStore::open(&sqlite_settings(&path, Durability::Full)).unwrap();
            let rate = write_rate(Arc::new(s.clone()), writes, &words, round * 10_000).await;
            s.close_blocking();
            rounds[0][usize::from(!indexed)].push(rate.0);
            if indexed {
                with.0 = best_of(with.0, rate);
            } else {
                without.0 = without.0.max(rate.0);
            }
            if let Some(url) = &pg {
                let name = format!("mnemo_bench_search_w{}", std::process::id());
                let settings = pg_schema(url, &name).await;
                let s: Arc<dyn Store> = Arc::new(PostgresStore::open(&settings).await.unwrap());
                if !indexed {
                    pg_schema::exec(url, &format!("SET search_path = {name}; {DROP_PG}")).await;
                }
                // Untimed: the previous rounds' WAL is written out, so no round pays for another's.
                pg_schema::exec(url, "CHECKPOINT").await;
                let rate = write_rate(s.clone(), writes, &words, round * 10_000).await;
                s.close().await;
                rounds[1][usize::from(!indexed)].push(rate.0);
                pg_schema::exec(url, &format!("DROP SCHEMA {name} CASCADE")).await;
                if indexed {
                    with.1 = best_of(with.1, rate);
                } else {
                    without.1 = without.1.max(rate.0);
                }
            }
        }
    }
    if writes > 0 {
        println!(
            "| write path (16 concurrent ~4 KB creates, {writes} per round, best of 3) | with the index: acknowledged | until indexed | without | ratio (acknowledged) |"
        );
        println!("|---|---:|---:|---:|---:|");
        let row = |name: &str, with: (f64, f64), without: f64| {
            println!("| {name} | {:.0}/s | {:.0}/s | {without:.0}/s | **{:.2}** |", with.0, with.1, with.0 / without);
        };
        row("SQLite (`synchronous=FULL`)", with.0, without.0);
        if pg.is_some() {
            row("PostgreSQL", with.1, without.1);
        }
        println!();
        // Each round, and how far "without" moves between its own rounds (what an A/A
        // comparison of one build with itself would show: the measurement's noise).
        for (name, [with, without]) in ["SQLite", "PostgreSQL"].iter().zip(&rounds) {
            if without.is_empty() {
                continue;
            }
            let list = |v: &[f64]| v.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(" / ");
            let (lo, hi) = without.iter().fold((f64::MAX, 0.0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
            let median = |v: &[f64]| {
                let mut v = v.to_vec();
                v.sort_by(f64::total_cmp);
                (v[(v.len() - 1) / 2] + v[v.len() / 2]) / 2.0
            };
            println!(
                "{name}, each round (acknowledged/s): with the index {}; without {}; median with / median without {:.2}; \
                 without's slowest / fastest round {:.2}",
                list(with),
                list(without),
                median(with) / median(without),
                lo / hi
            );
        }
        println!();
    }

    for size in sizes {
        let classes = queries(&words, size, runs);
        // The memories as files, for grep.
        let tree = dir.path().join(format!("tree-{size}"));
        for n in 0..size {
            let (path, content) = words.memory(n);
            let file = tree.join(&path[1..]);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, content).unwrap();
        }
        let grep = grep_latencies(&tree, &classes);
        std::fs::remove_dir_all(&tree).unwrap();

        let path = dir.path().join(format!("search-{size}.sqlite"));
        let s = SqliteStore::open(&sqlite_settings(&path, Durability::Normal)).unwrap();
        let store: Arc<dyn Store> = Arc::new(s.clone());
        let ws = store.default_workspace().await.unwrap();
        let id = store.create_memory_store(&ws, new_store()).await.unwrap().id;
        let loaded = fill(&store, &ws, &id, size).await;
        let sqlite = search_latencies(&store, &ws, &id, &classes).await;
        s.close_blocking();
        let index = std::path::PathBuf::from(format!("{}.index", path.display()));
        let size_of = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let index_bytes: u64 =
            std::fs::read_dir(&index).map(|entries| entries.flatten().map(|e| size_of(&e.path())).sum()).unwrap_or(0);
        let bytes = size_of(&path);
        std::fs::remove_file(&path).ok();
        std::fs::remove_dir_all(&index).ok();
        println!(
            "### {size} memories of ~4 KB, {} vocabulary (SQLite: loaded and indexed in {:.0} s, database {} MB, search index {} MB)",
            std::env::var("MNEMO_BENCH_VOCABULARY").unwrap_or_else(|_| "narrow".into()),
            loaded.as_secs_f64(),
            bytes / 1_000_000,
            index_bytes / 1_000_000
        );
        let mut postgres = None;
        if let Some(url) = &pg {
            let name = format!("mnemo_bench_search_{}", std::process::id());
            let settings = pg_schema(url, &name).await;
            let store: Arc<dyn Store> = Arc::new(PostgresStore::open(&settings).await.unwrap());
            let ws = store.default_workspace().await.unwrap();
            let id = store.create_memory_store(&ws, new_store()).await.unwrap().id;
            let loaded = fill(&store, &ws, &id, size).await;
            pg_schema::exec(url, &format!("SET search_path = {name}; ANALYZE")).await;
            postgres = Some((search_latencies(&store, &ws, &id, &classes).await, loaded));
            store.close().await;
            pg_schema::exec(url, &format!("DROP SCHEMA {name} CASCADE")).await;
        }
        if let Some((_, loaded)) = &postgres {
            println!("(PostgreSQL: loaded in {:.0} s)", loaded.as_secs_f64());
        }
        println!();
        println!("| query | results | SQLite p50 | p99 | PostgreSQL p50 | p99 | `grep -r` p50 | p99 |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        for (i, (name, p50, p99, found)) in sqlite.iter().enumerate() {
            let (pg50, pg99) = match &postgres {
                Some((rows, _)) => (ms(rows[i].1), ms(rows[i].2)),
                None => ("–".into(), "–".into()),
            };
            let (g50, g99) = match grep.iter().find(|g| g.0 == *name) {
                Some(g) => (ms(g.1), ms(g.2)),
                None => ("–".into(), "–".into()),
            };
            println!("| {name} | {found} | {} | {} | {pg50} | {pg99} | {g50} | {g99} |", ms(*p50), ms(*p99));
        }
        println!();
    }
}
