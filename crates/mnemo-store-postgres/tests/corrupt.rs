//! A stored row that cannot be decoded is an error naming the table, the row id and the
//! column — never a silent default — and `mnemo db check` reports it (the PostgreSQL side of
//! `mnemo/tests/serve.rs`'s `a_row_that_cannot_be_read_back_is_a_500_logged_with_…`).
//!
//! Needs `MNEMO_TEST_POSTGRES` (see `mnemo_store_tests::Postgres`).

use mnemo_store::{Limits, ListEvents, Operations, Store, StoreError};
use mnemo_store_postgres::PostgresStore;
use mnemo_store_tests::Postgres;
use mnemo_store_tests::cases::fixtures::{environment, person, session, user_message};

/// Runs `sql` in `schema` of the test database, beside the store.
async fn psql(schema: &str, sql: &str, id: &str) {
    let (client, connection) = tokio_postgres::connect(&Postgres::url(), tokio_postgres::NoTls).await.unwrap();
    let driver = tokio::spawn(connection);
    client.batch_execute(&format!("SET search_path = {schema}")).await.unwrap();
    assert_eq!(client.execute(sql, &[&id]).await.unwrap(), 1, "{sql} changes row {id}");
    drop(client);
    let _ = driver.await;
}

/// The read failed because `column` of row `row` of `table` cannot be read, and says so only
/// in its chain (the caller is told "storage failure").
fn assert_corrupt<T: std::fmt::Debug>(read: Result<T, StoreError>, table: &str, row: &str, column: &str) {
    let e = read.expect_err("a corrupt row is an error, not a default");
    assert_eq!(e.to_string(), "storage failure", "the caller is told nothing of the database");
    assert!(!e.is_retryable(), "{e:?}");
    let named = format!("table `{table}`, row `{row}`, column `{column}` cannot be read");
    assert!(e.chain().contains(&named), "{} does not say {named}", e.chain());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_that_cannot_be_read_back_is_an_error_naming_table_row_and_column() {
    let schema = Postgres::fresh_schema().await;
    let settings = Postgres::settings(&schema, Limits::default());
    let store = PostgresStore::open(&settings).await.unwrap();

    let env = environment(&store, true).await;
    let session = session(&store, &env).await;
    let appended = store
        .append_events(&store.default_workspace().await.unwrap(), &session.id, vec![user_message("hi")], person())
        .await
        .unwrap();
    let event = appended.recorded[0].event.id.to_string();
    let ws = store.default_workspace().await.unwrap();
    let work = store.enqueue_healthcheck(&ws, &env.id).await.unwrap();
    let clean = mnemo_store_postgres::check(&settings).await.expect("the check runs");
    assert!(clean.findings.is_ok(), "a fresh deployment checks clean: {:?}", clean.findings.problems());

    psql(&schema, "UPDATE session_events SET body = '{\"type\": \"user.message\", \"id\": 3' WHERE id = $1", &event)
        .await;
    assert_corrupt(
        store.list_events(&store.default_workspace().await.unwrap(), &session.id, events()).await,
        "session_events",
        &event,
        "body",
    );
    assert_corrupt(
        store.events_after(&store.default_workspace().await.unwrap(), &session.id, 0).await,
        "session_events",
        &event,
        "body",
    );

    psql(&schema, "UPDATE sessions SET status = 'napping' WHERE id = $1", session.id.as_str()).await;
    assert_corrupt(
        store.get_session(&store.default_workspace().await.unwrap(), &session.id).await,
        "sessions",
        session.id.as_str(),
        "status",
    );

    psql(&schema, "UPDATE work_items SET state = 'dozing' WHERE id = $1", work.id.as_str()).await;
    assert_corrupt(store.get_work(&ws, &env.id, &work.id).await, "work_items", work.id.as_str(), "state");
    assert_corrupt(store.list_work(&ws, &env.id, 10, None).await, "work_items", work.id.as_str(), "state");

    let report = mnemo_store_postgres::check(&settings).await.expect("the check runs");
    assert!(!report.findings.is_ok(), "{:?}", report.findings.checks);
    let problems = report.findings.problems().join("\n");
    for (table, row, column) in [
        ("session_events", event.as_str(), "body"),
        ("sessions", session.id.as_str(), "status"),
        ("work_items", work.id.as_str(), "state"),
    ] {
        let named = format!("table `{table}`, row `{row}`, column `{column}` cannot be read");
        assert!(problems.contains(&named), "the check does not say {named}:\n{problems}");
    }
    store.close().await;
}

fn events() -> ListEvents {
    ListEvents { limit: 10, ..ListEvents::default() }
}
