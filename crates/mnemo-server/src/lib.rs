//! The mnemo HTTP server: Anthropic's Managed Agents API (memory stores, agents, environments
//! and their work queues, sessions and their events) and mnemo's extensions (change feeds, the
//! memory stream and batch, webhooks) on top of any [`Store`].
//!
//! [`router`] builds the axum [`Router`] from an [`AppState`] (handy for in-process tests);
//! [`serve`] runs it on a bound listener until a shutdown future completes ([`serve_with`] sets
//! the timeouts and connection caps of a [`ServeConfig`]). Handlers take their input already
//! typed — path ids as `mnemo_http::Id<T>`, queries as `mnemo_http::Query<T>` (paging, views,
//! filters), bodies as JSON into `mnemo-api`'s types — so none parses text by hand. They ask
//! `auth` (and through it `mnemo_store::rules::scope`) who may call what, call the [`Store`], and
//! turn failures into Anthropic's error envelope in one place ([`ApiError`], which also renders
//! `mnemo_http::BadInput`).
//!
//! Beside the handlers: `hub` and `changes` fan committed events and memory changes out to open
//! streams and long polls (fed by the store's signals, so replicas on one database see each
//! other's writes); [`agent`] is the agent loop of `mnemo serve --models`; [`webhooks`] sends the
//! outbox's deliveries, to the addresses `outbound` allows; `listen`, `streams` and `throttle`
//! bound connections, open streams and failed authentications; `rate_limit` counts API-key
//! requests against their workspace's rate limit; `request` gives each request its
//! id and span and refuses oversized heads; [`openapi`] describes the routes from their own
//! annotations; `maintenance` applies lapsed work leases.
//!
//! Several replicas on one PostgreSQL database never talk to each other; the database's
//! notifications feed each one's hub, and row locks and one clock keep their writes apart:
//!
//! ```text
//!  load balancer ──▶ replica A ──┐                      ┌── LISTEN ──▶ A's hub (events → streams,
//!               └──▶ replica B ──┴─▶ PostgreSQL ─ NOTIFY ┤               work → long polls,
//!                                   (row locks, SKIP     └── LISTEN ──▶ B's hub   credentials → forget)
//!                                    LOCKED claims, the one clock)
//! ```
//!
//! This crate never touches the local filesystem beyond the listener, and never depends on a
//! particular database: the binary picks the backend. Every state change goes through the
//! [`Store`] — the agent loop's too — and no body, credential or webhook secret is logged.

pub mod agent;
mod audit;
mod auth;
mod changes;
mod error;
mod extract;
mod hub;
mod jsonl;
mod listen;
mod maintenance;
mod metrics;
pub mod openapi;
mod outbound;
mod rate_limit;
mod request;
mod routes;
pub mod semantic;
mod streams;
mod throttle;
pub mod webhooks;

use std::sync::Arc;

use axum::Router;
use mnemo_store::Store;
use tokio::net::TcpListener;

pub use auth::hash_credential;
pub use error::ApiError;
pub use listen::ServeConfig;
pub use maintenance::{
    AUDIT_PRUNE_EVERY, PurgePass, VERSION_PURGE_EVERY, expire_work_leases, prune_audit_log, purge_expired_versions,
    purge_pass,
};
pub use metrics::refresh_gauges;
pub use outbound::{WebhookTargets, is_public};
pub use streams::StreamLimits;
pub use throttle::AuthThrottleConfig;
pub use webhooks::{WebhookConfig, deliver_webhooks};

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
    /// Open memory change feeds.
    changes: Arc<changes::ChangeHub>,
    /// The change feeds' shared keep-alive tickers.
    pings: Arc<changes::PingClock>,
    /// How the web console behaves (`None`: not served).
    console: Option<mnemo_console::ConsoleConfig>,
    /// The agent loop, when model providers are configured.
    agent: Option<agent::AgentLoop>,
    /// Whether the memory stream extension is served (off: answered like an unknown route, as
    /// the hosted API does, and not named in the extensions header).
    memory_stream: bool,
    /// Which webhook endpoints may be registered (literal addresses and local names are judged
    /// at once; other names when a delivery connects).
    webhook_targets: Arc<outbound::WebhookTargets>,
    /// Open streams, per credential and in all.
    streams: Arc<streams::StreamLimiter>,
    /// Failed authentications per client address (API and console sign-ins alike).
    throttle: Arc<throttle::AuthThrottle>,
    /// Failed console password sign-ins per account.
    accounts: Arc<throttle::AccountThrottle>,
    /// The organization's settings the Admin API needs.
    admin: Arc<AdminSettings>,
    /// The Managed Agents rate limit of each workspace (from `admin`'s values and the
    /// workspaces' overrides).
    rate_limiter: Arc<rate_limit::RateLimiter>,
    /// The organization's id, read from the store once (`anthropic-organization-id` on every
    /// response).
    organization_id: Arc<tokio::sync::OnceCell<String>>,
    /// Single sign-on (`--oidc-issuer`): people's bearer tokens of the identity provider.
    sso: Option<Arc<mnemo_console::oidc::Sso>>,
    /// The MCP server served at `/mcp` (`None`: not served), behind the API's authentication.
    mcp: Option<axum::Router>,
    /// How long versions are kept unless a store says otherwise (`--version-retention`).
    version_retention: mnemo_store::rules::retention::Retention,
    /// Searching by meaning, when the models file names an embeddings provider.
    semantic: Option<Arc<semantic::Semantic>>,
}

/// What the Admin API needs to know of the server's configuration (admin-api.md §8.5, §8.9).
#[derive(Debug, Clone)]
pub struct AdminSettings {
    /// Most active workspaces (`--max-workspaces`).
    pub max_workspaces: u32,
    /// Every rate-limit entry of this server.
    pub rate_limits: Vec<mnemo_store::rules::rate_limit::Entry>,
    /// The organization's values (`--rate-limit`).
    pub org_limits: mnemo_store::rules::rate_limit::OrgLimits,
    /// How long an invite stays acceptable (`--invite-ttl`).
    pub invite_ttl_secs: u64,
    /// Where people reach this server (`--public-url`), for the links it hands out; `None`: the
    /// address the caller used.
    pub public_url: Option<String>,
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self {
            max_workspaces: mnemo_store::rules::workspace::DEFAULT_MAX_WORKSPACES,
            rate_limits: mnemo_store::rules::rate_limit::catalogue(&[]),
            org_limits: mnemo_store::rules::rate_limit::OrgLimits::new(),
            invite_ttl_secs: mnemo_store::rules::people::DEFAULT_INVITE_TTL_SECS,
            public_url: None,
        }
    }
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
            console: Some(mnemo_console::ConsoleConfig::default()),
            changes: Arc::default(),
            pings: Arc::default(),
            agent: None,
            memory_stream: true,
            webhook_targets: Arc::default(),
            streams: Arc::new(streams::StreamLimiter::new(StreamLimits::default())),
            throttle: Arc::new(throttle::AuthThrottle::new(AuthThrottleConfig::default())),
            accounts: Arc::new(throttle::AccountThrottle::new(throttle::ACCOUNT_FAILURES_BURST)),
            admin: Arc::default(),
            rate_limiter: Arc::new(rate_limit::RateLimiter::new(
                &mnemo_store::rules::rate_limit::OrgLimits::new(),
                signals.is_some(),
            )),
            organization_id: Arc::default(),
            sso: None,
            mcp: None,
            version_retention: mnemo_store::rules::retention::Retention::Forever,
            semantic: None,
            store,
        };
        tokio::spawn(changes::follow(
            Arc::downgrade(&state.store),
            Arc::clone(&state.changes),
            state.store.memory_signals(),
        ));
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

    /// How many store reads the memory change feeds have made so far (opening a feed, reading
    /// after a wake-up, PostgreSQL's periodic re-check of each watched store): idle feeds make
    /// none.
    pub fn change_feed_reads(&self) -> u64 {
        self.changes.reads()
    }

    /// Serves `service` (an MCP server over streamable HTTP) at `/mcp`. Only a request with a
    /// known credential that may use memory stores reaches it: others get the API's `401` or
    /// `403`, and unknown keys count against their address as on any endpoint.
    pub fn with_mcp<S>(mut self, service: S) -> Self
    where
        S: tower::Service<axum::extract::Request, Error = std::convert::Infallible> + Clone + Send + Sync + 'static,
        S::Response: axum::response::IntoResponse,
        S::Future: Send + 'static,
    {
        self.mcp = Some(axum::Router::new().fallback_service(service));
        self
    }

    /// Serves the web console under `/console` with `config`, or not at all (`None`).
    /// Accepts people's tokens of the identity provider as `Authorization: Bearer` (the console's
    /// single sign-on is configured through [`mnemo_console::ConsoleConfig`]).
    pub fn with_sso(mut self, sso: Option<Arc<mnemo_console::oidc::Sso>>) -> Self {
        self.sso = sso;
        self
    }

    pub fn with_console(mut self, config: Option<mnemo_console::ConsoleConfig>) -> Self {
        self.console = config;
        self
    }

    /// What the console needs from the server: the event hub and the credential cache.
    fn console(&self) -> Option<mnemo_console::Console> {
        let config = self.console.clone()?;
        let hooks = Arc::new(ConsoleHooks {
            store: Arc::clone(&self.store),
            auth: Arc::clone(&self.auth),
            hub: Arc::clone(&self.hub),
            throttle: Arc::clone(&self.throttle),
            streams: Arc::clone(&self.streams),
            admin: Arc::clone(&self.admin),
            accounts: Arc::clone(&self.accounts),
            agent: self.agent.clone(),
            semantic: self.semantic.clone(),
        });
        Some(mnemo_console::Console::new(Arc::clone(&self.store), hooks, config))
    }

    /// Runs the agent of every session whose agent's model `resolve` maps to a provider
    /// (others stay driven from outside), counting its model calls against the rate limits of
    /// [`AppState::with_admin_settings`] (so set those first); call this inside a Tokio runtime.
    pub fn with_agent_loop(mut self, resolve: agent::Resolve, limits: agent::Limits) -> Self {
        let meter = rate_limit::ModelMeter::new(
            Arc::clone(&self.store),
            Arc::clone(&self.rate_limiter),
            &self.admin.rate_limits,
        );
        self.agent = Some(agent::AgentLoop::start(
            Arc::clone(&self.store),
            Arc::clone(&self.hub),
            Arc::clone(&self.work_signal),
            resolve,
            limits,
            meter,
        ));
        self
    }

    /// Searches by meaning with `embedder` (`mode=semantic|hybrid`), and keeps every live
    /// memory's embedding current in a background task ([`semantic::embed_memories`]) for as
    /// long as the store lives; call this inside a Tokio runtime.
    pub fn with_semantic_search(mut self, embedder: mnemo_model::Embedder) -> Self {
        let semantic = semantic::Semantic::new(embedder);
        tokio::spawn(semantic::embed_memories(Arc::downgrade(&self.store), Arc::clone(&semantic)));
        self.semantic = Some(semantic);
        self
    }

    /// Tells the agent loop (if any) that workspace `ws`'s session changed.
    fn wake_agent(&self, ws: &mnemo_api::WorkspaceId, session: &mnemo_api::SessionId) {
        if let Some(agent) = &self.agent {
            agent.wake(ws, session);
        }
    }

    /// The Admin API's settings (`--max-workspaces`, the rate-limit catalogue and `--rate-limit`).
    pub fn with_admin_settings(mut self, settings: AdminSettings) -> Self {
        debug_assert!(self.agent.is_none(), "the agent loop counts against the limits set before it starts");
        self.rate_limiter = Arc::new(self.rate_limiter.with_org_limits(&settings.org_limits));
        self.admin = Arc::new(settings);
        self
    }

    /// The organization's id, read from the store on first use and kept.
    pub(crate) async fn organization_id(&self) -> Option<&str> {
        let store = Arc::clone(&self.store);
        self.organization_id
            .get_or_try_init(|| async move { store.organization().await.map(|o| o.id) })
            .await
            .ok()
            .map(String::as_str)
    }

    /// Serves the memory stream extension (`GET /v1/memory_stores/{store}/memories:stream`) or
    /// hides it (`false`: clients then download page by page, as from the hosted API). On by
    /// default.
    /// How long versions are kept unless a store says otherwise (`--version-retention`; the
    /// purge itself is [`purge_expired_versions`]'s, started beside the server).
    pub fn with_version_retention(mut self, retention: mnemo_store::rules::retention::Retention) -> Self {
        self.version_retention = retention;
        self
    }

    pub fn with_memory_stream(mut self, on: bool) -> Self {
        self.memory_stream = on;
        self
    }

    /// Lets webhook endpoints be registered only where `targets` allows (public addresses by
    /// default); give the sender ([`WebhookConfig::targets`]) the same.
    pub fn with_webhook_targets(mut self, targets: WebhookTargets) -> Self {
        self.webhook_targets = Arc::new(targets);
        self
    }

    /// Caps open streams (event streams, change feeds and their long polls) per credential and
    /// in all ([`StreamLimits::default`]: 32 per credential, half of the default connection cap).
    pub fn with_stream_limits(mut self, limits: StreamLimits) -> Self {
        self.streams = Arc::new(streams::StreamLimiter::new(limits));
        self
    }

    /// Limits failed authentications per client address (API calls and console sign-ins).
    pub fn with_auth_throttle(mut self, config: AuthThrottleConfig) -> Self {
        self.throttle = Arc::new(throttle::AuthThrottle::new(config));
        self
    }

    /// Mounts sessions' memory stores under `root` instead of `/mnt/memory`.
    pub fn with_memory_mount_root(mut self, root: &str) -> Self {
        self.memory_mount_root = root.trim_end_matches('/').into();
        self
    }
}

/// The console's view of the server: revocations empty the same credential cache the API's
/// revocations do, and transcripts follow the same event hub as the API's streams.
struct ConsoleHooks {
    store: Arc<dyn Store>,
    auth: Arc<auth::Authenticator>,
    hub: Arc<hub::EventHub>,
    throttle: Arc<throttle::AuthThrottle>,
    streams: Arc<streams::StreamLimiter>,
    /// The rate-limit catalogue and the organization's values, for the console's page.
    admin: Arc<AdminSettings>,
    /// Failed password sign-ins per account.
    accounts: Arc<throttle::AccountThrottle>,
    /// The agent loop (its dream runner hears of console cancels).
    agent: Option<agent::AgentLoop>,
    /// Searching by meaning, when the server has an embeddings provider.
    semantic: Option<Arc<semantic::Semantic>>,
}

#[async_trait::async_trait]
impl mnemo_console::Hooks for ConsoleHooks {
    fn query_embedder(&self) -> Option<Arc<dyn mnemo_store::search::QueryEmbedder>> {
        self.semantic.clone().map(|s| s as Arc<dyn mnemo_store::search::QueryEmbedder>)
    }

    fn dream_canceled(&self, id: &mnemo_api::DreamId) {
        if let Some(agent) = &self.agent {
            agent.dream_canceled(id);
        }
    }

    fn rate_limits(&self) -> (Vec<mnemo_store::rules::rate_limit::Entry>, mnemo_store::rules::rate_limit::OrgLimits) {
        (self.admin.rate_limits.clone(), self.admin.org_limits.clone())
    }

    fn credentials_changed(&self) {
        self.auth.forget_all();
    }

    fn sign_in_allowed(&self, peer: Option<std::net::IpAddr>) -> Result<(), std::time::Duration> {
        self.throttle.admit(peer, None)
    }

    fn sign_in_failed(&self, peer: Option<std::net::IpAddr>) -> Result<(), std::time::Duration> {
        self.throttle.failed(peer)
    }

    fn account_sign_in_allowed(&self, account: &mnemo_store::CredentialHash) -> Result<(), std::time::Duration> {
        self.accounts.admit(account)
    }

    fn account_sign_in_failed(&self, account: &mnemo_store::CredentialHash) -> Result<(), std::time::Duration> {
        self.accounts.failed(account)
    }

    fn open_stream(
        &self,
        credential: &mnemo_store::Credential,
    ) -> Result<Box<dyn std::any::Any + Send>, std::time::Duration> {
        let slot = self.streams.open(credential).map_err(|_| streams::RETRY_AFTER)?;
        Ok(Box::new(slot))
    }

    async fn subscribe(
        &self,
        ws: &mnemo_api::WorkspaceId,
        session: &mnemo_api::SessionId,
    ) -> Result<tokio::sync::broadcast::Receiver<mnemo_store::Streamed>, mnemo_store::StoreError> {
        self.hub.subscribe_from(&*self.store, ws, session).await
    }
}

/// The whole HTTP API, and the web console unless it was turned off.
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
