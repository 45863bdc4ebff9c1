//! Write throughput of `mnemo serve` against the raw SQLite rate for the same rows.
//!
//! Run with `cargo bench -p mnemo --bench write_throughput` (env `MNEMO_BENCH_WRITES` sets
//! the writes per measurement, default 4000). For each durability mode it reports:
//! - server: single-memory creates per second from 16 concurrent HTTP clients on loopback,
//!   with p50/p99 latency;
//! - raw: the same rows (one version, one memory, the store's counter) inserted in-process
//!   with rusqlite, one transaction per memory, on the same schema and pragmas.
//!
//! This is a benchmark, not a test: it asserts nothing about timings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mnemo_api::{CreateMemoryStore, content_sha256};
use mnemo_client::Client;
use mnemo_server::{AppState, hash_credential};
use mnemo_store::Store;
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};

#[path = "common/writes.rs"]
mod writes;
use writes::{CLIENTS, content, write_round};

fn settings(dir: &std::path::Path, name: &str, durability: Durability) -> SqliteSettings {
    let mut s = SqliteSettings::from_url(&format!("sqlite://{}/{name}.sqlite", dir.display())).unwrap();
    s.durability = durability;
    s
}

async fn server_rate(dir: &std::path::Path, durability: Durability, writes: usize) -> (f64, Duration, Duration) {
    let sqlite = SqliteStore::open(&settings(dir, "server", durability)).unwrap();
    let store: Arc<dyn Store> = Arc::new(sqlite.clone());
    store.ensure_api_key(hash_credential("bench"), "bench").await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(mnemo_server::serve(listener, mnemo_server::router(AppState::new(store)), async {
        let _ = stopped.await;
    }));
    let client = Client::new(&base, "bench").unwrap();
    let ms =
        client.create_memory_store(&CreateMemoryStore { name: "bench".into(), ..Default::default() }).await.unwrap();

    let (clients, stores) = ([client], [ms.id]);
    write_round(&clients, &stores, 0, 256).await; // warm-up: connections, statement caches
    let started = Instant::now();
    let mut latencies = write_round(&clients, &stores, 1_000_000, writes).await;
    let elapsed = started.elapsed();
    latencies.sort();
    let _ = stop.send(());
    let _ = server.await;
    sqlite.close_blocking();
    (writes as f64 / elapsed.as_secs_f64(), latencies[latencies.len() / 2], latencies[latencies.len() * 99 / 100])
}

fn raw_rate(dir: &std::path::Path, durability: Durability, writes: usize) -> f64 {
    let s = settings(dir, "raw", durability);
    SqliteStore::open(&s).unwrap().close_blocking(); // create the schema
    let conn = rusqlite::Connection::open(&s.path).unwrap();
    let sync = if durability == Durability::Full { "FULL" } else { "NORMAL" };
    conn.execute_batch(&format!("PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync}; PRAGMA foreign_keys = ON;"))
        .unwrap();
    conn.execute(
        "INSERT INTO memory_stores (id, name, description, metadata, created_at, updated_at) VALUES ('memstore_raw', 'raw', '', '{}', 0, 0)",
        [],
    )
    .unwrap();
    let store_seq = conn.last_insert_rowid();
    let started = Instant::now();
    for n in 0..writes {
        let text = content(n);
        let sha = content_sha256(text.as_bytes());
        let path = format!("/bench/{n:07}.md");
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        conn.prepare_cached(
            "INSERT INTO memory_versions (id, store_seq, memory_id, operation, path, content_sha256, content_size_bytes, \
             created_at, actor_kind, actor_id, content) VALUES (?1, ?2, ?3, 'created', ?4, ?5, ?6, 0, 'api_actor', 'apikey_raw', ?7)",
        )
        .unwrap()
        .execute(rusqlite::params![format!("memver_{n}"), store_seq, format!("mem_{n}"), path, sha, text.len() as i64, text])
        .unwrap();
        let version_seq = conn.last_insert_rowid();
        conn.prepare_cached(
            "INSERT INTO memories (id, store_seq, path, content_sha256, content_size_bytes, version_seq, version_id, \
             created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, 0)",
        )
        .unwrap()
        .execute(rusqlite::params![
            format!("mem_{n}"),
            store_seq,
            path,
            sha,
            text.len() as i64,
            version_seq,
            format!("memver_{n}")
        ])
        .unwrap();
        conn.prepare_cached("UPDATE memory_stores SET memory_count = memory_count + 1 WHERE seq = ?1")
            .unwrap()
            .execute([store_seq])
            .unwrap();
        conn.execute_batch("COMMIT").unwrap();
    }
    writes as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let writes: usize = std::env::var("MNEMO_BENCH_WRITES").ok().and_then(|v| v.parse().ok()).unwrap_or(4000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!(
        "writes per measurement: {writes}; HTTP clients: {CLIENTS}; cores: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("| durability | raw SQLite tx/s | server writes/s | server / raw | p50 | p99 |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, durability) in
        [("synchronous=FULL (default)", Durability::Full), ("synchronous=NORMAL", Durability::Normal)]
    {
        let dir = tempfile::tempdir().unwrap();
        let raw = raw_rate(dir.path(), durability, writes);
        let (server, p50, p99) = rt.block_on(server_rate(dir.path(), durability, writes));
        println!(
            "| {name} | {raw:.0} | {server:.0} | {:.2} | {:.2} ms | {:.2} ms |",
            server / raw,
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
}
