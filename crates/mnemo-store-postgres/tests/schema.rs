//! Migrations: replicas starting together take turns, and a database a newer mnemo migrated is
//! refused; the search index's shape. Needs `MNEMO_TEST_POSTGRES` (see `mnemo_store_tests::Postgres`).

use std::sync::Arc;

use mnemo_store::{Limits, Operations, Store};
use mnemo_store_postgres::PostgresStore;
use mnemo_store_tests::Postgres;

async fn psql(sql: &str) {
    let (client, connection) = tokio_postgres::connect(&Postgres::url(), tokio_postgres::NoTls).await.unwrap();
    let driver = tokio::spawn(connection);
    client.batch_execute(sql).await.unwrap();
    drop(client);
    let _ = driver.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_starting_together_migrate_once() {
    // A schema that does not exist yet: the first replica creates it, under the same lock.
    let schema = format!("t_{:016x}", rand_suffix());
    let opened = futures::future::join_all((0..6).map(|_| {
        let settings = Postgres::settings(&schema, Limits::default());
        async move { PostgresStore::open(&settings).await }
    }))
    .await;
    let stores: Vec<Arc<PostgresStore>> =
        opened.into_iter().map(|r| Arc::new(r.expect("every replica starts"))).collect();
    // They all see one database.
    let id = stores[0].ensure_api_key([7; 32], "a").await.unwrap();
    for store in &stores {
        assert_eq!(store.ensure_api_key([7; 32], "b").await.unwrap(), id);
        store.close().await;
    }
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_mnemo_is_refused() {
    let schema = Postgres::fresh_schema().await;
    let store = PostgresStore::open(&Postgres::settings(&schema, Limits::default())).await.unwrap();
    store.close().await;
    psql(&format!("UPDATE {schema}.mnemo_schema SET version = 99")).await;
    let err = PostgresStore::open(&Postgres::settings(&schema, Limits::default())).await.expect_err("refused");
    let message = err.chain();
    assert!(message.contains("schema version 99, newer than this mnemo knows"), "{message}");
    assert!(message.contains("upgrade mnemo"), "{message}");
}

#[tokio::test]
async fn the_search_trigram_indexes_keep_no_pending_list() {
    // Every search reads a GIN index's pending list until it is merged; the indexer inserts
    // behind the writes, so the entries go into the tree at once (migration 0017).
    let schema = Postgres::fresh_schema().await;
    let store = PostgresStore::open(&Postgres::settings(&schema, Limits::default())).await.unwrap();
    store.close().await;
    let (client, connection) = tokio_postgres::connect(&Postgres::url(), tokio_postgres::NoTls).await.unwrap();
    let driver = tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT c.relname, coalesce(array_to_string(c.reloptions, ','), '') FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname LIKE 'memory_search_%_trgm' ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap();
    let found: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        found,
        [
            ("memory_search_body_trgm".to_owned(), "fastupdate=off".to_owned()),
            ("memory_search_path_trgm".to_owned(), "fastupdate=off".to_owned())
        ]
    );
    drop(client);
    let _ = driver.await;
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}
