//! TLS to the database: with `sslmode=require` every connection (the pool's and the listener's)
//! is encrypted and the server's certificate is verified; an authority the certificate does not
//! chain to is refused. Needs `MNEMO_TEST_POSTGRES` and `MNEMO_TEST_POSTGRES_CA` (the test
//! cluster's authority: `.ci/postgres ca`; scripts/test exports both).

use std::time::Duration;

use mnemo_store::{Limits, Operations, Store};
use mnemo_store_postgres::{PostgresSettings, PostgresStore};
use mnemo_store_tests::Postgres;

fn authority() -> String {
    std::env::var("MNEMO_TEST_POSTGRES_CA").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| {
        panic!("MNEMO_TEST_POSTGRES_CA is not set: `export MNEMO_TEST_POSTGRES_CA=$(.ci/postgres ca)`")
    })
}

fn settings(schema: &str, query: &str) -> PostgresSettings {
    let url = format!("{}?{query}&options=-csearch_path%3D{schema}", Postgres::url());
    let mut settings = PostgresSettings::from_url(&url).expect("a valid URL");
    settings.connect_timeout = Duration::from_secs(5);
    settings.limits = Limits::default();
    settings
}

/// How many connections named `application` use TLS, and how many there are.
async fn encrypted(application: &str) -> (i64, i64) {
    let (client, connection) = tokio_postgres::connect(&Postgres::url(), tokio_postgres::NoTls).await.unwrap();
    let driver = tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_activity a \
             JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = $1",
            &[&application],
        )
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_encrypts_every_connection_and_verifies_the_server() {
    let schema = Postgres::fresh_schema().await;
    let ca = authority();
    let encoded: String = form_urlencoded::byte_serialize(ca.as_bytes()).collect();
    let app = format!("mnemo-tls-{schema}");
    let store = PostgresStore::open(&settings(
        &schema,
        &format!("sslmode=require&sslrootcert={encoded}&application_name={app}"),
    ))
    .await
    .expect("open over TLS");
    let id = store.ensure_api_key([1; 32], "tls").await.expect("a write over TLS");
    assert_eq!(store.find_api_key([1; 32]).await.unwrap(), Some(id));
    // The listener connects in the background; give it a moment to show up.
    let mut seen = (0, 0);
    for _ in 0..50 {
        seen = encrypted(&app).await;
        if seen.1 >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen.1 >= 2, "the pool's and the listener's connections are there: {seen:?}");
    assert_eq!(seen.0, seen.1, "every connection is encrypted: {seen:?}");
    store.close().await;

    // Without the authority, the test certificate chains to no WebPKI root: refused.
    let err = PostgresStore::open(&settings(&schema, "sslmode=require")).await.expect_err("an unknown authority");
    let message = err.chain();
    assert!(message.to_lowercase().contains("certificate"), "{message}");

    // The default stays in the clear (no unverifiable `prefer`).
    let clear = PostgresStore::open(&settings(&schema, &format!("application_name={app}-clear"))).await.unwrap();
    clear.count_api_keys().await.unwrap();
    let (tls, all) = encrypted(&format!("{app}-clear")).await;
    assert!(all >= 1 && tls == 0, "{tls} of {all} connections encrypted");
    clear.close().await;
}
