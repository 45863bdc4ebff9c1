//! Migrations: replicas starting together take turns, and a database a newer mnemo migrated is
//! refused. Needs `MNEMO_TEST_POSTGRES` (see `mnemo_store_tests::Postgres`).

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

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}
