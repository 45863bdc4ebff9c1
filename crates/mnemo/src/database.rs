//! Opening the database a URL names: the backend is chosen by the URL's scheme.

use std::sync::Arc;

use anyhow::Context;
use mnemo_store::{Limits, Store};
use mnemo_store_sqlite::{SqliteSettings, SqliteStore};

/// The schemes this build can open, with the form of their URLs.
pub(crate) const SCHEMES: &[(&str, &str)] = &[("sqlite", "sqlite://PATH[?synchronous=full|normal]")];

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
pub(crate) async fn open(url: &str, limits: Limits) -> anyhow::Result<Arc<dyn Store>> {
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
        _ => Err(unsupported(url)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_scheme_lists_the_supported_ones_without_echoing_the_url() {
        for url in ["mysql://root:hunter2@db/mnemo", "redis://:hunter2@cache"] {
            let err = open(url, Limits::default()).await.err().expect("refused").to_string();
            assert!(err.starts_with("unsupported database scheme `"), "{err}");
            assert!(err.contains("sqlite://PATH"), "{err}");
            assert!(!err.contains("hunter2"), "a password leaked: {err}");
        }
        let err = open("just-a-path.db", Limits::default()).await.err().expect("refused").to_string();
        assert_eq!(err, "`--database` must be a URL such as `sqlite://PATH[?synchronous=full|normal]`");
    }

    #[tokio::test]
    async fn sqlite_urls_open_and_close() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&format!("sqlite://{}/db.sqlite", dir.path().display()), Limits::default()).await.unwrap();
        assert_eq!(store.count_api_keys().await.unwrap(), 0);
        store.close().await;
        assert!(store.count_api_keys().await.is_err(), "a closed store answers nothing");
    }
}
