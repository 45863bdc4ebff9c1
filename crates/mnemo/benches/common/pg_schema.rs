//! A throw-away PostgreSQL schema per measurement (`-c search_path=<schema>` in the connection
//! options), for the benches that also run on PostgreSQL (`MNEMO_BENCH_POSTGRES`).

use mnemo_store_postgres::PostgresSettings;

/// Settings whose connections live in schema `name`, dropped first if it exists.
pub(crate) async fn settings(url: &str, name: &str) -> PostgresSettings {
    exec(url, &format!("DROP SCHEMA IF EXISTS {name} CASCADE")).await;
    let mut s = PostgresSettings::from_url(url).unwrap();
    let options = s.config.get_options().unwrap_or_default().to_owned();
    s.config.options(format!("{options} -c search_path={name}").trim_start());
    s
}

/// Runs `sql` on a connection of its own.
pub(crate) async fn exec(url: &str, sql: &str) {
    let settings = PostgresSettings::from_url(url).unwrap();
    let (client, conn) = settings.config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client.batch_execute(sql).await.unwrap();
}
