//! The mnemo HTTP server: Anthropic's memory-stores API on top of any [`Store`].
//!
//! [`router`] builds the axum [`Router`] (handy for in-process tests); [`serve`] runs it on a
//! bound listener until a shutdown future completes ([`serve_with`] sets the timeouts and the
//! connection cap of a [`ServeConfig`]). Handlers parse every input into the types of
//! `mnemo-api` at the edge, call the [`Store`], and turn failures into Anthropic's error
//! envelope in one place ([`ApiError`]).
//!
//! This crate never touches the local filesystem beyond the listener, and never depends on a
//! particular database: the binary picks the backend.

mod auth;
mod error;
mod extract;
mod hub;
mod listen;
mod maintenance;
mod request;
mod routes;

use std::sync::Arc;

use axum::Router;
use mnemo_store::Store;
use tokio::net::TcpListener;

pub use auth::hash_credential;
pub use error::ApiError;
pub use listen::ServeConfig;
pub use maintenance::expire_work_leases;

/// Largest request body accepted. Content is capped at 100 kB, but JSON escaping can
/// inflate it up to six-fold.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Everything a handler can reach.
#[derive(Clone)]
pub struct AppState {
    store: Arc<dyn Store>,
    auth: Arc<auth::Authenticator>,
    /// Wakes long polls when work is queued.
    work_signal: Arc<tokio::sync::Notify>,
    /// Where sessions' memory stores are mounted on workers.
    memory_mount_root: Arc<str>,
    /// Open event streams.
    hub: Arc<hub::EventHub>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl AppState {
    /// State over `store`. A store other processes share (one that [`Store::signals`]) is
    /// followed by a background task, so streams, long polls and remembered credentials see
    /// what other replicas change; call this inside a Tokio runtime.
    pub fn new(store: Arc<dyn Store>) -> Self {
        let signals = store.signals();
        let state = Self {
            auth: Arc::new(auth::Authenticator::new(Arc::clone(&store))),
            work_signal: Arc::default(),
            memory_mount_root: mnemo_api::DEFAULT_MEMORY_MOUNT_ROOT.into(),
            hub: Arc::new(if signals.is_some() { hub::EventHub::shared() } else { hub::EventHub::default() }),
            store,
        };
        if let Some(signals) = signals {
            let auth = Arc::clone(&state.auth);
            let followers = hub::Followers {
                work: Arc::clone(&state.work_signal),
                forget_credentials: Box::new(move || auth.forget_all()),
            };
            tokio::spawn(hub::follow(Arc::clone(&state.store), Arc::clone(&state.hub), signals, followers));
        }
        state
    }

    /// Mounts sessions' memory stores under `root` instead of `/mnt/memory`.
    pub fn with_memory_mount_root(mut self, root: &str) -> Self {
        self.memory_mount_root = root.trim_end_matches('/').into();
        self
    }
}

/// The whole HTTP API.
pub fn router(state: AppState) -> Router {
    routes::router(state)
}

/// Serves `router` on `listener` with the default [`ServeConfig`] until `shutdown` completes,
/// then finishes in-flight requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, router, ServeConfig::default(), shutdown).await
}

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting and finishes
/// in-flight requests. Slow clients are cut off by `config`'s header-read and body timeouts;
/// at most `config.max_connections` connections are served at once.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    config: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    listen::run(listener, router, config, shutdown).await
}
