//! Each replica keeps its own search index, following the database's log of changed memories:
//! a write through one replica is found at once through another (read past its cursor), and
//! once taken in, through its index; a transaction left open elsewhere holds the cursor back
//! without the same rows being taken in again; an index kept in a folder resumes where it
//! stopped, and one of another database is built again. A replica takes its own writes in from
//! the content it wrote, without reading it back. The log forgets deleted memories once old.
//!
//! Needs `MNEMO_TEST_POSTGRES` (see `mnemo_store_tests::Postgres`).

use mnemo_api::{Actor, MemoryPath, MemoryStoreId, WorkspaceId};
use mnemo_store::rules::search::parse;
use mnemo_store::search::{SearchMemories, SearchScope};
use mnemo_store::{Limits, NewMemoryStore, Operations, Store};
use mnemo_store_postgres::PostgresStore;
use mnemo_store_tests::Postgres;

/// The tests here read the cluster's oldest open transaction (each other's, too): one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn replica(schema: &str, dir: Option<&std::path::Path>) -> PostgresStore {
    let mut settings = Postgres::settings(schema, Limits::default());
    settings.search_index = dir.map(ToOwned::to_owned);
    PostgresStore::open(&settings).await.expect("open a replica")
}

fn request(store: &MemoryStoreId, q: &str) -> SearchMemories {
    SearchMemories {
        scope: SearchScope::Store(store.clone()),
        query: parse(q).unwrap(),
        path_prefix: None,
        limit: 100,
        after: None,
    }
}

async fn found(s: &PostgresStore, ws: &WorkspaceId, store: &MemoryStoreId, q: &str) -> Vec<String> {
    let mut paths: Vec<String> =
        s.search_memories(ws, request(store, q)).await.unwrap().items.into_iter().map(|r| r.path).collect();
    paths.sort();
    paths
}

/// A fresh database, a replica of it (its index in memory) and a store "notes".
async fn one_store() -> (String, PostgresStore, WorkspaceId, MemoryStoreId) {
    let schema = Postgres::fresh_schema().await;
    let a = replica(&schema, None).await;
    let ws = a.default_workspace().await.unwrap();
    let new = NewMemoryStore { name: "notes".into(), description: String::new(), metadata: Default::default() };
    let store = a.create_memory_store(&ws, new).await.unwrap().id;
    (schema, a, ws, store)
}

fn who() -> Actor {
    Actor::UserActor { user_id: "u".into() }
}

#[tokio::test]
async fn every_replica_finds_every_write_through_its_own_index() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let schema = Postgres::fresh_schema().await;
    let dir = tempfile::tempdir().unwrap();
    let a = replica(&schema, None).await;
    let b = replica(&schema, Some(&dir.path().join("index"))).await;
    let ws = a.default_workspace().await.unwrap();
    let new = NewMemoryStore { name: "notes".into(), description: String::new(), metadata: Default::default() };
    let store = a.create_memory_store(&ws, new).await.unwrap().id;
    let path = |p: &str| MemoryPath::parse(p).unwrap();
    a.create_memory(&ws, &store, path("/ops/staging.md"), "staging-db-02 runs Postgres".into(), who()).await.unwrap();

    // Written through A: found through B at once, then through B's index.
    assert_eq!(found(&b, &ws, &store, "staging-db").await, ["/ops/staging.md"]);
    // (B's own indexer may have taken it in already.)
    b.catch_up_search_index().await.unwrap();
    assert_eq!(found(&b, &ws, &store, "staging-db").await, ["/ops/staging.md"]);
    assert_eq!(b.catch_up_search_index().await.unwrap(), 0, "nothing is taken in twice");

    // A transaction open elsewhere holds every replica's cursor back; what it holds back is
    // taken in once, and found.
    let (client, driver) = tokio_postgres::connect(&Postgres::url(), tokio_postgres::NoTls).await.unwrap();
    let driver = tokio::spawn(driver);
    client.batch_execute("BEGIN; SELECT pg_current_xact_id();").await.unwrap();
    let mut held = Vec::new();
    for i in 0..3 {
        let body = format!("held back note {i} about prod-db-0{i}");
        held.push(a.create_memory(&ws, &store, path(&format!("/ops/held-{i}.md")), body, who()).await.unwrap().id);
    }
    b.catch_up_search_index().await.unwrap();
    assert_eq!(b.catch_up_search_index().await.unwrap(), 0, "held back, but not taken in again");
    assert_eq!(found(&b, &ws, &store, "prod-db").await.len(), 3);
    // Held back, but ranked by the index (a memory waiting for it comes unranked: score 0).
    let ranked = b.search_memories(&ws, request(&store, "prod-db")).await.unwrap().items;
    assert!(ranked.iter().all(|r| r.score > 0.0), "{ranked:?}");
    client.batch_execute("COMMIT").await.unwrap();
    drop(client);
    let _ = driver.await;

    // A deletion through A: gone through B at once, and from its index.
    a.delete_memory(&ws, &store, &held[0], None, who()).await.unwrap();
    assert_eq!(found(&b, &ws, &store, "prod-db").await.len(), 2);
    b.catch_up_search_index().await.unwrap();
    assert_eq!(found(&b, &ws, &store, "prod-db").await.len(), 2);

    // B again from its folder: it resumes where it stopped.
    b.close().await;
    drop(b);
    let b = replica(&schema, Some(&dir.path().join("index"))).await;
    assert_eq!(found(&b, &ws, &store, "staging-db").await, ["/ops/staging.md"]);
    let again = b.catch_up_search_index().await.unwrap();
    assert!(again <= 1, "at most the last change again, not {again}");
    assert_eq!(found(&b, &ws, &store, "prod-db").await.len(), 2);
    b.close().await;
    drop(b);

    // The same folder over another database: emptied and built again from that one.
    let other = Postgres::fresh_schema().await;
    let c = replica(&other, Some(&dir.path().join("index"))).await;
    let ws = c.default_workspace().await.unwrap();
    let new = NewMemoryStore { name: "other".into(), description: String::new(), metadata: Default::default() };
    let store_c = c.create_memory_store(&ws, new).await.unwrap().id;
    c.catch_up_search_index().await.unwrap();
    assert_eq!(found(&c, &ws, &store_c, "staging-db").await, Vec::<String>::new());
    c.close().await;
    a.close().await;
}

#[tokio::test]
async fn a_replica_takes_its_own_writes_in_without_reading_them_back() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (schema, a, ws, store) = one_store().await;

    // A transaction open from before the write holds A's cursor back, so each of A's batches
    // reads the write's row again.
    let (client, driver) = tokio_postgres::connect(&Postgres::url(), tokio_postgres::NoTls).await.unwrap();
    let driver = tokio::spawn(driver);
    client.batch_execute("BEGIN; SELECT pg_current_xact_id();").await.unwrap();
    let path = MemoryPath::parse("/ops/db.md").unwrap();
    a.create_memory(&ws, &store, path, "alpha-host runs the database".into(), who()).await.unwrap();

    // The database's copy of the content made unreadable behind both replicas' backs (nothing
    // in mnemo does this: it tells which replica reads content back).
    let (other, other_driver) = tokio_postgres::connect(&Postgres::url(), tokio_postgres::NoTls).await.unwrap();
    let other_driver = tokio::spawn(other_driver);
    other
        .batch_execute(&format!("SET search_path = {schema}; UPDATE memory_versions SET content = NULL"))
        .await
        .unwrap();
    drop(other);
    let _ = other_driver.await;

    // A takes it in (again and again) from what it wrote; B, which did not write it, must
    // read it back.
    for _ in 0..3 {
        a.catch_up_search_index().await.expect("the writer never reads its own content back");
    }
    let b = replica(&schema, None).await;
    assert!(b.catch_up_search_index().await.is_err(), "another replica reads the content back");
    client.batch_execute("COMMIT").await.unwrap();
    drop(client);
    let _ = driver.await;
    a.close().await;
    b.close().await;
}

async fn log_rows(schema: &str) -> i64 {
    let (client, driver) = tokio_postgres::connect(&Postgres::url(), tokio_postgres::NoTls).await.unwrap();
    let driver = tokio::spawn(driver);
    let n = client.query_one(&format!("SELECT count(*) FROM {schema}.memory_search_log"), &[]).await.unwrap().get(0);
    drop(client);
    let _ = driver.await;
    n
}

#[tokio::test]
async fn the_log_forgets_deleted_memories_once_a_mark_is_old_enough() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (schema, a, ws, store) = one_store().await;
    let path = |p: &str| MemoryPath::parse(p).unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        let body = format!("note {i} about gamma-host");
        ids.push(a.create_memory(&ws, &store, path(&format!("/n/{i}.md")), body, who()).await.unwrap().id);
    }
    for id in &ids[..3] {
        a.delete_memory(&ws, &store, id, None, who()).await.unwrap();
    }
    assert_eq!(log_rows(&schema).await, 8);

    // The first pass marks the log; a week is not over, so only the rows each deletion's own
    // row supersedes go.
    let week = std::time::Duration::from_secs(7 * 24 * 3600);
    assert_eq!(a.prune_search_log(week).await.unwrap(), 3);
    assert_eq!(log_rows(&schema).await, 5);
    // With no wait asked for, the mark just taken is old enough: the deleted memories' rows go,
    // the live ones' stay, and a second pass finds nothing more.
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    assert_eq!(a.prune_search_log(std::time::Duration::ZERO).await.unwrap(), 3);
    assert_eq!(log_rows(&schema).await, 2);
    assert_eq!(a.prune_search_log(std::time::Duration::ZERO).await.unwrap(), 0);

    // A replica built from the pruned log finds what lives, and nothing deleted.
    let b = replica(&schema, None).await;
    b.catch_up_search_index().await.unwrap();
    assert_eq!(found(&b, &ws, &store, "gamma-host").await, ["/n/3.md", "/n/4.md"]);
    // A deletion after the mark stays until a later mark is old enough.
    a.delete_memory(&ws, &store, &ids[3], None, who()).await.unwrap();
    assert_eq!(a.prune_search_log(std::time::Duration::ZERO).await.unwrap(), 1);
    assert_eq!(log_rows(&schema).await, 2);
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn the_log_keeps_each_memorys_newest_row_and_no_replica_misses_a_change() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let (schema, a, ws, store) = one_store().await;
    let path = MemoryPath::parse("/n/host.md").unwrap();
    let id = a.create_memory(&ws, &store, path, "the host is alpha-one".into(), who()).await.unwrap().id;
    // B takes the first version in, then stays behind while the memory is rewritten.
    let b = replica(&schema, None).await;
    b.catch_up_search_index().await.unwrap();
    for name in ["beta-two", "gamma-three", "delta-four"] {
        let content = format!("the host is {name}");
        let change = mnemo_store::MemoryChange { content: Some(content), path: None, expected_sha256: None };
        a.update_memory(&ws, &store, &id, change, who()).await.unwrap();
    }
    assert_eq!(log_rows(&schema).await, 4, "a row per write");
    let week = std::time::Duration::from_secs(7 * 24 * 3600);
    assert_eq!(a.prune_search_log(week).await.unwrap(), 3, "the rows the newest supersedes go");
    assert_eq!(log_rows(&schema).await, 1);
    assert_eq!(a.prune_search_log(week).await.unwrap(), 0);

    // B, behind all four, and C, built from the pruned log, find only what the memory says now.
    let c = replica(&schema, None).await;
    for s in [&b, &c] {
        s.catch_up_search_index().await.unwrap();
        assert_eq!(found(s, &ws, &store, "delta-four").await, ["/n/host.md"]);
        assert!(found(s, &ws, &store, "alpha-one").await.is_empty());
        assert!(found(s, &ws, &store, "gamma-three").await.is_empty());
    }
    a.close().await;
    b.close().await;
    c.close().await;
}
