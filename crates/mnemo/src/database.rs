//! Opening the database a URL names: the backend is chosen by the URL's scheme.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use mnemo_store::{Limits, Store};
use mnemo_store_postgres::{PostgresSettings, PostgresStore};
use mnemo_store_sqlite::{SqliteSettings, SqliteStore};

/// The schemes this build can open, with the form of their URLs.
pub(crate) const SCHEMES: &[(&str, &str)] = &[
    ("sqlite", "sqlite://PATH[?synchronous=full|normal]"),
    ("postgres", "postgres://USER:PASS@HOST:PORT/DB"),
    ("postgresql", "postgresql://USER:PASS@HOST:PORT/DB"),
];

/// How a server reaches a PostgreSQL database (ignored for SQLite).
#[derive(Debug, Clone, Args)]
pub(crate) struct PostgresArgs {
    /// PostgreSQL: most connections this process holds (each replica has its own pool; keep
    /// replicas × pool size below the server's `max_connections`).
    #[arg(
        long,
        value_name = "N",
        default_value_t = mnemo_store_postgres::DEFAULT_POOL_SIZE,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000),
        env = "MNEMO_PG_POOL_SIZE"
    )]
    pub(crate) pg_pool_size: usize,

    /// PostgreSQL: seconds to wait to connect, or for a free connection, before a request
    /// fails with 503 and `retry-after`.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = mnemo_store_postgres::DEFAULT_CONNECT_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=600),
        env = "MNEMO_PG_CONNECT_TIMEOUT"
    )]
    pub(crate) pg_connect_timeout: u64,

    /// PostgreSQL: seconds a statement may run before the database cancels it (0: no limit).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = mnemo_store_postgres::DEFAULT_STATEMENT_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(0..=86_400),
        env = "MNEMO_PG_STATEMENT_TIMEOUT"
    )]
    pub(crate) pg_statement_timeout: u64,

    /// PostgreSQL: the folder of this replica's memory search index, kept across restarts (one
    /// per replica, never shared); without it the index is held in memory and built again from
    /// the database at each start (searches find everything meanwhile, more slowly).
    #[arg(long, value_name = "DIR", env = "MNEMO_PG_SEARCH_INDEX")]
    pub(crate) pg_search_index: Option<std::path::PathBuf>,
}

impl Default for PostgresArgs {
    fn default() -> Self {
        Self {
            pg_pool_size: mnemo_store_postgres::DEFAULT_POOL_SIZE,
            pg_connect_timeout: mnemo_store_postgres::DEFAULT_CONNECT_TIMEOUT.as_secs(),
            pg_statement_timeout: mnemo_store_postgres::DEFAULT_STATEMENT_TIMEOUT.as_secs(),
            pg_search_index: None,
        }
    }
}

/// The scheme of a database URL: what precedes `:`.
fn scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once(':')?;
    let valid = !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    valid.then_some(scheme)
}

/// An unsupported or malformed URL: the message lists what is supported. The URL itself is
/// not repeated past its scheme, since it may carry a password.
fn unsupported(url: &str) -> anyhow::Error {
    let supported: Vec<String> = SCHEMES.iter().map(|(_, form)| format!("`{form}`")).collect();
    match scheme(url) {
        Some(s) => anyhow::anyhow!("unsupported database scheme `{s}:`; this build supports {}", supported.join(", ")),
        None => anyhow::anyhow!("`--database` must be a URL such as {}", supported.join(", ")),
    }
}

/// Opens (creating and migrating as needed) the database `url` names.
pub(crate) async fn open(url: &str, limits: Limits, pg: &PostgresArgs) -> anyhow::Result<Arc<dyn Store>> {
    match scheme(url) {
        Some(s) if s.eq_ignore_ascii_case("sqlite") => {
            let mut settings = SqliteSettings::from_url(url).map_err(anyhow::Error::msg)?;
            settings.limits = limits;
            let path = settings.path.display().to_string();
            let store = tokio::task::spawn_blocking(move || SqliteStore::open(&settings))
                .await
                .context("open the database")?
                .with_context(|| format!("open {path}"))?;
            tracing::info!(database = %path, backend = "sqlite", "opened database");
            Ok(Arc::new(store))
        }
        Some(s) if s.eq_ignore_ascii_case("postgres") || s.eq_ignore_ascii_case("postgresql") => {
            let mut settings = PostgresSettings::from_url(url).map_err(anyhow::Error::msg)?;
            settings.limits = limits;
            settings.pool_size = pg.pg_pool_size;
            settings.connect_timeout = Duration::from_secs(pg.pg_connect_timeout);
            settings.statement_timeout =
                (pg.pg_statement_timeout > 0).then(|| Duration::from_secs(pg.pg_statement_timeout));
            settings.search_index = pg.pg_search_index.clone();
            let host = settings.config.get_hosts().first().map(|h| format!("{h:?}")).unwrap_or_default();
            let dbname = settings.config.get_dbname().unwrap_or_default().to_owned();
            let store = PostgresStore::open(&settings)
                .await
                .map_err(|e| anyhow::anyhow!("open the PostgreSQL database `{dbname}`: {}", e.chain()))?;
            tracing::info!(database = %dbname, host = %host, backend = "postgres", pool_size = settings.pool_size, "opened database");
            Ok(Arc::new(store))
        }
        _ => Err(unsupported(url)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_scheme_lists_the_supported_ones_without_echoing_the_url() {
        for url in ["mysql://root:hunter2@db/mnemo", "redis://:hunter2@cache"] {
            let err = open(url, Limits::default(), &PostgresArgs::default()).await.err().expect("refused").to_string();
            assert!(err.starts_with("unsupported database scheme `"), "{err}");
            assert!(err.contains("sqlite://PATH"), "{err}");
            assert!(!err.contains("hunter2"), "a password leaked: {err}");
        }
        let err = open("just-a-path.db", Limits::default(), &PostgresArgs::default())
            .await
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.starts_with("`--database` must be a URL such as `sqlite://PATH[?synchronous=full|normal]`"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn sqlite_urls_open_and_close() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            open(&format!("sqlite://{}/db.sqlite", dir.path().display()), Limits::default(), &PostgresArgs::default())
                .await
                .unwrap();
        assert_eq!(store.count_api_keys().await.unwrap(), 0);
        store.close().await;
        assert!(store.count_api_keys().await.is_err(), "a closed store answers nothing");
    }
}
