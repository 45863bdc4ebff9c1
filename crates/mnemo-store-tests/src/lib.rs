//! The conformance suite of [`mnemo_store::Store`]: every backend passes the same tests, the
//! concurrency stories a multi-writer backend can fail included.
//!
//! A backend is reached through a [`StoreFactory`], which opens a fresh, empty store per test.
//! [`from_env`] picks one from `MNEMO_TEST_DATABASE` (unset or `sqlite`: an SQLite file in a
//! temporary folder), so the server's integration tests can run against every backend too.
//! [`conformance!`] expands to one `#[tokio::test]` per case for a factory.

use std::ops::Deref;
use std::sync::Arc;

use async_trait::async_trait;
use mnemo_store::{Limits, Store};
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};

pub mod cases;

/// A store opened for one test, with whatever must outlive it (a temporary folder).
pub struct TestStore {
    pub store: Arc<dyn Store>,
    _keep: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for TestStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestStore").finish_non_exhaustive()
    }
}

impl Deref for TestStore {
    type Target = dyn Store;

    fn deref(&self) -> &Self::Target {
        &*self.store
    }
}

/// Opens fresh, empty stores of one backend.
#[async_trait]
pub trait StoreFactory: Send + Sync + 'static {
    /// The backend's name, for messages.
    fn name(&self) -> &'static str;
    /// A new empty store with these limits.
    async fn open(&self, limits: Limits) -> TestStore;
}

/// SQLite files in temporary folders (`synchronous=normal`: tests need no power-loss safety).
#[derive(Debug, Clone, Copy, Default)]
pub struct Sqlite;

#[async_trait]
impl StoreFactory for Sqlite {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    async fn open(&self, limits: Limits) -> TestStore {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let mut settings = SqliteSettings::from_url(&format!("sqlite://{}/test.sqlite", dir.path().display()))
            .expect("a valid sqlite URL");
        settings.durability = Durability::Normal;
        settings.limits = limits;
        let store = SqliteStore::open(&settings).expect("open a fresh SQLite store");
        TestStore { store: Arc::new(store), _keep: Some(dir) }
    }
}

/// The backend `MNEMO_TEST_DATABASE` names: unset or `sqlite` for [`Sqlite`].
///
/// # Panics
/// On a value naming no backend this build knows, so a misconfigured run fails loudly rather
/// than silently testing SQLite.
pub fn from_env() -> Arc<dyn StoreFactory> {
    match std::env::var("MNEMO_TEST_DATABASE").ok().as_deref() {
        None | Some("" | "sqlite") => Arc::new(Sqlite),
        Some(other) => {
            let scheme = other.split(':').next().unwrap_or_default();
            panic!("MNEMO_TEST_DATABASE names an unknown backend `{scheme}` (known: sqlite)")
        }
    }
}

/// One `#[tokio::test]` per conformance case, each with a fresh store from `$factory`.
///
/// ```ignore
/// mnemo_store_tests::conformance!(mnemo_store_tests::Sqlite);
/// ```
#[macro_export]
macro_rules! conformance {
    ($factory:expr) => {
        $crate::conformance!(@cases $factory;
            api_keys_are_found_by_hash_and_counted,
        );
    };
    (@cases $factory:expr; $($case:ident,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let factory = $factory;
                $crate::cases::$case(&factory).await;
            }
        )*
    };
}
