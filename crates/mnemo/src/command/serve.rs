//! `mnemo serve`: the HTTP API on an embedded SQLite database or a shared PostgreSQL one.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use mnemo_api::Secret;
use mnemo_server::{AppState, ServeConfig, hash_credential};
use mnemo_store::{Limits, Store};

use super::signals::Signals;

/// How often lapsed work leases are applied to the queue (listings and statistics stay fresh;
/// every call that touches an item applies its expiry itself).
const LEASE_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// How long in-flight requests may run after SIGTERM/SIGINT.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Debug, Args)]
pub(crate) struct Serve {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080", env = "MNEMO_LISTEN")]
    listen: SocketAddr,

    /// Database URL; its scheme picks the backend: `sqlite://PATH` (add `?synchronous=normal`
    /// to trade power-loss durability for speed, `memory_mib=N` to bound SQLite's caches,
    /// default 64, `mmap_mib=N` for each reader's mapping of the file, default 256, 0 for none) or `postgres://USER:PASS@HOST:PORT/DB` (several
    /// replicas may share one). Defaults to mnemo.sqlite in the platform data directory.
    #[arg(long, env = "MNEMO_DATABASE", hide_env_values = true)]
    database: Option<Secret>,

    #[command(flatten)]
    postgres: crate::database::PostgresArgs,

    /// An API key to accept (repeatable). Keys are stored hashed; with none given and none in
    /// the database, one is created and printed once on stderr.
    #[arg(long = "api-key", env = "MNEMO_API_KEY", value_delimiter = ',', hide_env_values = true)]
    api_keys: Vec<Secret>,

    /// An admin key to accept (repeatable): it reaches only the Admin API
    /// (`/v1/organizations/…`). Stored hashed; with none given and none in the database, one is
    /// created and printed once on stderr.
    #[arg(long = "admin-key", env = "MNEMO_ADMIN_KEY", value_delimiter = ',', hide_env_values = true)]
    admin_keys: Vec<Secret>,

    /// Not an option: `mnemo quickstart`'s server makes no admin key (its demo does not use the
    /// Admin API; a later `mnemo serve` on the kept data makes one then).
    #[arg(skip)]
    no_generated_admin_key: bool,

    /// The organization's name (`GET /v1/organizations/me`); the stored one is kept when absent.
    #[arg(long, env = "MNEMO_ORG_NAME")]
    org_name: Option<String>,

    /// Most active (not archived) workspaces.
    #[arg(long, default_value_t = mnemo_store::rules::workspace::DEFAULT_MAX_WORKSPACES, env = "MNEMO_MAX_WORKSPACES")]
    max_workspaces: u32,

    /// Most live memories a store may hold.
    #[arg(long, default_value_t = mnemo_api::limits::DEFAULT_MAX_MEMORIES_PER_STORE, env = "MNEMO_MAX_MEMORIES_PER_STORE")]
    max_memories_per_store: u32,

    /// Where workers mount sessions' memory stores (a folder per store, named after it).
    #[arg(long, default_value = mnemo_api::DEFAULT_MEMORY_MOUNT_ROOT, env = "MNEMO_MEMORY_MOUNT_ROOT")]
    memory_mount_root: String,

    /// Seconds an acknowledged work item's lease lasts without a heartbeat.
    #[arg(long, default_value_t = mnemo_store::DEFAULT_WORK_LEASE_TTL_SECONDS, env = "MNEMO_WORK_LEASE_TTL")]
    work_lease_ttl: u64,

    /// Seconds a client may take to send a request's line and headers; also how long an idle
    /// keep-alive connection stays open.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = ServeConfig::DEFAULT_HEADER_READ_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=86_400),
        env = "MNEMO_HEADER_READ_TIMEOUT"
    )]
    header_read_timeout: u64,

    /// Seconds a client may take to send a request's body once its headers are in; a late body
    /// is answered 408. Responses (long polls, event streams) are not limited.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = ServeConfig::DEFAULT_BODY_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=86_400),
        env = "MNEMO_BODY_TIMEOUT"
    )]
    body_timeout: u64,

    /// Most connections served at once (event streams count); more wait to be accepted.
    #[arg(
        long,
        value_name = "N",
        default_value_t = ServeConfig::DEFAULT_MAX_CONNECTIONS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..),
        env = "MNEMO_MAX_CONNECTIONS"
    )]
    max_connections: usize,

    /// Most connections one client address may hold at once; more are answered 429 and closed
    /// (default: half of --max-connections; 0: no cap — behind a reverse proxy, where
    /// every client has the proxy's address).
    #[arg(long, value_name = "N", env = "MNEMO_MAX_CONNECTIONS_PER_ADDRESS")]
    max_connections_per_address: Option<usize>,

    /// Seconds a new connection may stay silent before its first byte; then it is closed.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = ServeConfig::DEFAULT_FIRST_BYTE_TIMEOUT.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=86_400),
        env = "MNEMO_FIRST_BYTE_TIMEOUT"
    )]
    first_byte_timeout: u64,

    /// Most streams (event streams, memory change feeds and their long polls) open at once, over
    /// all clients; the rest of --max-connections stays for other requests (default: half of
    /// --max-connections; it must be below it).
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), env = "MNEMO_MAX_STREAMS")]
    max_streams: Option<usize>,

    /// Most streams one credential (API key, environment key, sessions token) may hold open at
    /// once; more are answered 429.
    #[arg(
        long,
        value_name = "N",
        default_value_t = mnemo_server::StreamLimits::DEFAULT_PER_CREDENTIAL,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..),
        env = "MNEMO_MAX_STREAMS_PER_CREDENTIAL"
    )]
    max_streams_per_credential: usize,

    /// Failed authentications (unknown keys on the API, failed console sign-ins) one client
    /// address may make per minute; past it the address is answered 429 until it may try again
    /// (keys that already worked from it are not slowed). 0 turns the limit off.
    #[arg(
        long,
        value_name = "N",
        default_value_t = mnemo_server::AuthThrottleConfig::DEFAULT_FAILURES_PER_MINUTE,
        env = "MNEMO_AUTH_FAILURES_PER_MINUTE"
    )]
    auth_failures_per_minute: u32,

    /// Serve Prometheus metrics (`GET /metrics`) on this address, a listener of its own (off by
    /// default, so they are never public by accident; `127.0.0.1:0` picks a free port).
    #[arg(long, value_name = "ADDR", env = "MNEMO_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,

    /// Do not serve the MCP server at `/mcp` (streamable HTTP; docs/MCP.md).
    #[arg(long, env = "MNEMO_NO_MCP")]
    no_mcp: bool,

    /// Do not serve the web console (`/console`); the API stays as it is.
    #[arg(long, env = "MNEMO_NO_CONSOLE")]
    no_console: bool,

    /// Do not serve the memory stream extension (`GET /v1/memory_stores/{id}/memories:stream`):
    /// clients then download stores page by page, as from the hosted API (to compare the two).
    #[arg(long, env = "MNEMO_NO_MEMORY_STREAM")]
    no_memory_stream: bool,

    /// Seconds a console sign-in lasts.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 12 * 3600,
        value_parser = clap::value_parser!(u64).range(60..=30 * 86_400),
        env = "MNEMO_CONSOLE_SESSION_TTL"
    )]
    console_session_ttl: u64,

    /// Mark the console's cookies `Secure` (HTTPS only). Without it they are marked so when a
    /// proxy in front says `X-Forwarded-Proto: https`.
    #[arg(long, env = "MNEMO_CONSOLE_SECURE_COOKIES")]
    console_secure_cookies: bool,

    /// Run sessions' agents on the model providers this TOML file configures (providers, the
    /// mapping of agent model ids, the loop's limits; see docs/AGENTS.md). Sessions whose agent's
    /// model maps to no provider stay driven from outside, as without it.
    #[arg(long, value_name = "FILE", env = "MNEMO_MODELS")]
    models: Option<std::path::PathBuf>,

    #[command(flatten)]
    webhooks: WebhookArgs,

    #[command(flatten)]
    oidc: Box<super::oidc::OidcArgs>,

    /// How many days the audit log keeps an entry (`GET /v1/organizations/audit_events`); older
    /// entries are deleted hourly.
    #[arg(long, value_name = "DAYS", default_value_t = mnemo_store::rules::audit::DEFAULT_AUDIT_RETENTION_DAYS,
          value_parser = parse_retention, env = "MNEMO_AUDIT_RETENTION_DAYS")]
    audit_retention_days: u32,

    /// How long memory versions are kept: a window such as `30d`, `12h`, `45m` or `90s`, or
    /// `forever` (the default). Older versions are purged in the background, except each live
    /// memory's newest; a store may set its own (`POST /v1/memory_stores/{id}/version_retention`,
    /// or its page in the console).
    #[arg(long, value_name = "DURATION", default_value = "forever", env = "MNEMO_VERSION_RETENTION")]
    version_retention: mnemo_store::rules::retention::Retention,

    /// How often, in seconds, expired versions are purged (in batches of 1,000, one replica at a
    /// time).
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..),
          env = "MNEMO_VERSION_PURGE_EVERY")]
    version_purge_every: u64,

    /// How long an invite's link stays usable, in seconds (default 7 days).
    #[arg(long, value_name = "SECONDS", default_value_t = mnemo_store::rules::people::DEFAULT_INVITE_TTL_SECS,
          env = "MNEMO_INVITE_TTL")]
    invite_ttl: u64,

    /// Where people reach this server, e.g. `https://mnemo.example.com`: the base of the invite
    /// and setup links it hands out. Default: the address a request came to (invites) or
    /// `--listen` (the setup link).
    #[arg(long, value_name = "URL", env = "MNEMO_PUBLIC_URL")]
    public_url: Option<String>,

    /// The organization's rate limit of a group, `GROUP:TYPE=N` (repeatable, or comma-separated
    /// in the variable), e.g. `managed_agents:requests_per_minute=600`: API-key requests to the
    /// Managed Agents endpoints, per workspace; or `FAMILY:input_tokens_per_minute=N` (also
    /// `requests_per_minute`, `output_tokens_per_minute`) for the agent loop's calls of a model
    /// family of `--models`. None by default (no limit); a workspace's own value (Admin API)
    /// applies when lower. Worker traffic is never limited.
    #[arg(long = "rate-limit", value_name = "GROUP:TYPE=N", env = "MNEMO_RATE_LIMIT", value_delimiter = ',')]
    rate_limits: Vec<String>,
}

/// How webhook events are delivered (endpoints are registered with `mnemo webhook add`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Webhooks")]
pub(crate) struct WebhookArgs {
    /// Send no webhooks from this process (events are still recorded; another replica sharing
    /// the database, or a later start, sends them).
    #[arg(long, env = "MNEMO_NO_WEBHOOKS")]
    no_webhooks: bool,

    /// Seconds one delivery attempt may take (connect, send, answer).
    #[arg(long, value_name = "SECS", default_value = "15", value_parser = parse_secs, env = "MNEMO_WEBHOOK_TIMEOUT")]
    webhook_timeout: std::time::Duration,

    /// Attempts per delivery, the first included; then it is marked failed.
    #[arg(
        long,
        value_name = "N",
        default_value_t = mnemo_store::rules::webhook::DeliveryPolicy::default().max_attempts,
        value_parser = clap::value_parser!(u32).range(1..=100),
        env = "MNEMO_WEBHOOK_MAX_ATTEMPTS"
    )]
    webhook_max_attempts: u32,

    /// Seconds before the first retry; each later one waits twice as long (±25 %), at most an
    /// hour. With the defaults, 8 attempts span about an hour.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = parse_secs, env = "MNEMO_WEBHOOK_RETRY_DELAY")]
    webhook_retry_delay: std::time::Duration,

    /// Seconds between looks at the outbox when nothing is due.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_secs, env = "MNEMO_WEBHOOK_POLL_INTERVAL")]
    webhook_poll_interval: std::time::Duration,

    /// Let webhook endpoints be on any address: loopback, link-local, private networks. Off by
    /// default, when only public addresses are reached (judged on the address connected to)
    /// and a failed delivery records only `connection failed`.
    #[arg(long, env = "MNEMO_WEBHOOK_ALLOW_PRIVATE")]
    webhook_allow_private: bool,

    /// Host names or IP addresses webhook endpoints may use whatever they resolve to (comma
    /// separated or repeated), e.g. `hooks.internal,10.0.0.5`.
    #[arg(long, value_name = "HOST[,HOST]", value_delimiter = ',', env = "MNEMO_WEBHOOK_ALLOW_HOSTS")]
    webhook_allow_hosts: Vec<String>,
}

impl WebhookArgs {
    /// Where webhook endpoints may point.
    fn targets(&self) -> anyhow::Result<mnemo_server::WebhookTargets> {
        mnemo_server::WebhookTargets::public_only()
            .allow_private(self.webhook_allow_private)
            .allow_hosts(&self.webhook_allow_hosts)
            .map_err(|e| anyhow::anyhow!("--webhook-allow-hosts: {e}"))
    }

    /// The delivery settings, or `None` when this process sends no webhooks.
    fn config(&self, targets: &mnemo_server::WebhookTargets) -> Option<mnemo_server::WebhookConfig> {
        if self.no_webhooks {
            return None;
        }
        let defaults = mnemo_server::WebhookConfig::default();
        Some(mnemo_server::WebhookConfig {
            policy: mnemo_store::rules::webhook::DeliveryPolicy {
                max_attempts: self.webhook_max_attempts,
                retry: mnemo_api::Backoff { initial: self.webhook_retry_delay, ..defaults.policy.retry },
            },
            timeout: self.webhook_timeout,
            poll_interval: self.webhook_poll_interval,
            targets: targets.clone(),
            ..defaults
        })
    }
}

/// Fewest characters of an operator-given API key: a short key can be guessed.
const MIN_API_KEY_CHARS: usize = 32;

/// Refuses keys given on the command line or in `MNEMO_API_KEY` that are too short to be safe,
/// without showing them.
fn check_api_keys(keys: &[Secret]) -> anyhow::Result<()> {
    for (i, key) in keys.iter().map(|k| k.expose().trim()).filter(|k| !k.is_empty()).enumerate() {
        let n = key.chars().count();
        if n < MIN_API_KEY_CHARS {
            bail!(
                "API key {} of --api-key / MNEMO_API_KEY is {n} characters long; keys must have at least \
                 {MIN_API_KEY_CHARS} (make one with `openssl rand -hex 24`, or give none and mnemo creates one)",
                i + 1
            );
        }
    }
    Ok(())
}

/// A number of seconds (`15`, `0.5`, `15s`): more than 0, at most a day.
fn parse_secs(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s.trim().trim_end_matches('s').parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !secs.is_finite() || secs <= 0.0 || secs > 86_400.0 {
        return Err(format!("expected more than 0 and at most 86400 seconds (got {s})"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

pub(crate) fn default_database() -> anyhow::Result<String> {
    let dir: PathBuf = dirs::data_dir()
        .context("cannot find the platform data directory; pass --database sqlite://PATH")?
        .join("mnemo");
    Ok(format!("sqlite://{}", dir.join("mnemo.sqlite").display()))
}

/// A server started by [`Serve::start`], serving until [`Running::until`]'s stop future resolves.
pub(crate) struct Running {
    pub(crate) addr: SocketAddr,
    /// Whether the web console is served.
    pub(crate) console: bool,
    pub(crate) store: Arc<dyn Store>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    expiry: tokio::task::JoinHandle<()>,
    /// The webhook sender (`None` with `--no-webhooks`).
    webhooks: Option<tokio::task::JoinHandle<()>>,
}

impl Serve {
    /// The flags of a server on `database` at `listen`, accepting `api_key`, as a user would
    /// give them (for the quick start).
    pub(crate) fn embedded(listen: SocketAddr, database: String, api_key: String, mount_root: String) -> Self {
        use clap::FromArgMatches;
        let matches = <Self as Args>::augment_args(clap::Command::new("serve"))
            .try_get_matches_from(["serve"])
            .expect("the defaults parse");
        let mut serve = Self::from_arg_matches(&matches).expect("the defaults parse");
        serve.listen = listen;
        serve.database = Some(database.into());
        serve.api_keys = vec![api_key.into()];
        serve.no_generated_admin_key = true;
        serve.memory_mount_root = mount_root;
        serve
    }

    /// Runs sessions' agents on the providers of this file (`--models`).
    pub(crate) fn with_models(mut self, models: Option<std::path::PathBuf>) -> Self {
        self.models = models;
        self
    }

    pub(crate) async fn run(self) -> anyhow::Result<()> {
        // Handlers first: a supervisor may signal as soon as it reads the readiness line.
        let mut signals = Signals::install()?;
        let metrics_listen = self.metrics_listen;
        let mcp = !self.no_mcp;
        let running = self.start().await?;
        let addr = running.addr;
        let metrics = match metrics_listen {
            Some(at) => {
                let store = Arc::clone(&running.store);
                let refresh: crate::metrics::Refresh = Arc::new(move || {
                    let store = Arc::clone(&store);
                    Box::pin(async move {
                        if let Err(e) = mnemo_server::refresh_gauges(&*store).await {
                            tracing::warn!(error = %e, "could not read the database totals for the metrics");
                        }
                    })
                });
                Some(crate::metrics::serve(at, Some(refresh)).await?)
            }
            None => None,
        };
        tracing::info!(%addr, "listening");
        // One machine-readable line on stdout for scripts and tests (then the metrics address).
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on http://{addr}")?;
        if let Some(m) = metrics {
            writeln!(stdout, "metrics on http://{m}/metrics")?;
        }
        stdout.flush()?;
        drop(stdout);
        if running.console {
            tracing::info!("web console at http://{addr}/console");
        }
        if mcp {
            tracing::info!("MCP server (streamable HTTP) at http://{addr}/mcp");
        }
        running.until(signals.next()).await
    }

    /// Opens the database, binds the listener and starts serving in the background.
    pub(crate) async fn start(self) -> anyhow::Result<Running> {
        // A bad providers file stops the server before it opens anything.
        let models = self.models.as_deref().map(crate::models::load).transpose()?;
        let families = models.as_ref().map(|m| m.families.as_slice()).unwrap_or_default();
        let rate_limits = mnemo_store::rules::rate_limit::checked_catalogue(families)
            .map_err(|e| anyhow::anyhow!("bad model providers file: {e}"))?;
        let org_limits = mnemo_store::rules::rate_limit::parse_org_limits(&self.rate_limits, &rate_limits)
            .map_err(anyhow::Error::msg)?;
        let url = match self.database {
            Some(url) => url.into_exposed(),
            None => default_database()?,
        };
        check_api_keys(&self.api_keys)?;
        self.oidc.parsed_mappings()?;
        let targets = self.webhooks.targets()?;
        let max_streams = self.max_streams.unwrap_or((self.max_connections / 2).max(1));
        if self.max_streams.is_some() && max_streams >= self.max_connections {
            bail!(
                "--max-streams must be below --max-connections ({max_streams} >= {}), so some connections stay for \
                 other requests",
                self.max_connections
            );
        }
        if !self.memory_mount_root.starts_with('/') || self.memory_mount_root.split('/').any(|s| s == "..") {
            bail!("--memory-mount-root must be an absolute path without `..` (got {})", self.memory_mount_root);
        }
        let limits = Limits {
            max_memories_per_store: self.max_memories_per_store,
            work_lease_ttl_seconds: self.work_lease_ttl.max(1),
        };
        let store: Arc<dyn Store> = crate::database::open(&url, limits, &self.postgres).await?;

        for key in self.api_keys.iter().map(|k| k.expose().trim()).filter(|k| !k.is_empty()) {
            let id = store.ensure_api_key(hash_credential(key), "command line").await?;
            tracing::info!(api_key.id = %id, "accepting API key from the command line");
        }
        if self.api_keys.is_empty() && store.count_api_keys().await? == 0 {
            let key = mnemo_api::generate_secret("sk-mnemo-");
            let id = store.ensure_api_key(hash_credential(&key), "generated on first start").await?;
            eprintln!(
                "Created API key {id} (shown once; only its hash is stored):\n\n    {key}\n\n\
                 Use it as `Authorization: Bearer <key>` or `x-api-key: <key>`, or sign in to the web \
                 console (/console) with it."
            );
        }
        // A database that has never had an admin key is on its first start (or its migration,
        // §8.8): it also gets the one-time setup link for the first person, once.
        let first_start = store.count_admin_keys().await? == 0;
        for key in self.admin_keys.iter().map(|k| k.expose().trim()).filter(|k| !k.is_empty()) {
            let id = store.ensure_admin_key(hash_credential(key), "command line").await?;
            tracing::info!(admin_key.id = %id, "accepting admin key from the command line");
        }
        if self.admin_keys.is_empty() && !self.no_generated_admin_key && store.count_admin_keys().await? == 0 {
            let key = mnemo_api::generate_secret(mnemo_api::ADMIN_KEY_PREFIX);
            let id = store.ensure_admin_key(hash_credential(&key), "generated on first start").await?;
            eprintln!(
                "Created admin key {id} (shown once; only its hash is stored):\n\n    {key}\n\n\
                 It reaches only the Admin API (/v1/organizations/…): workspaces, API keys, rate limits. \
                 Lost it? `mnemo admin bootstrap --database URL` prints a new one."
            );
        }
        if let Some(name) = self.org_name.as_deref() {
            store.rename_organization(name).await.context("--org-name")?;
        }

        let listener =
            tokio::net::TcpListener::bind(self.listen).await.with_context(|| format!("listen on {}", self.listen))?;
        let addr = listener.local_addr()?;
        if first_start && !self.no_generated_admin_key && !self.no_console && store.setup_wanted().await? {
            let base = self.public_url.clone().unwrap_or_else(|| format!("http://{addr}"));
            let link = super::admin::setup_link(&*store, &base).await?;
            eprintln!(
                "One-time setup link for the organization's first admin (valid 24 hours, shown once):\n\n    {}\n\n\
                 Open it to choose the admin's email, name and password. Lost it? \
                 `mnemo admin bootstrap --database URL` prints a new one while no admin exists.",
                link.expose()
            );
        }
        let base = self.public_url.clone().unwrap_or_else(|| format!("http://{addr}"));
        let sso = self.oidc.build(&*store, &base).await?;
        if let Some(sso) = &sso {
            tracing::info!(issuer = sso.provider.issuer(), "single sign-on on");
            eprintln!(
                "Single sign-on with {} is on. Register this redirect (callback) URL at the provider:\n\n    {}\n",
                sso.provider_name, sso.callback_url
            );
        }
        let (leases, audit, versions) = (Arc::clone(&store), Arc::clone(&store), Arc::clone(&store));
        let days = self.audit_retention_days;
        let (retention, purge_every) =
            (self.version_retention, std::time::Duration::from_secs(self.version_purge_every));
        let expiry = tokio::spawn(async move {
            tokio::join!(
                mnemo_server::expire_work_leases(leases, LEASE_SWEEP_EVERY),
                mnemo_server::prune_audit_log(audit, days, mnemo_server::AUDIT_PRUNE_EVERY),
                mnemo_server::purge_expired_versions(versions, retention, purge_every),
            );
        });
        if targets.allows_private() {
            tracing::info!("webhooks may reach private addresses (--webhook-allow-private)");
        }
        let webhooks = self
            .webhooks
            .config(&targets)
            .map(|config| tokio::spawn(mnemo_server::deliver_webhooks(Arc::clone(&store), config)));
        let console = (!self.no_console).then(|| mnemo_console::ConsoleConfig {
            session_ttl: std::time::Duration::from_secs(self.console_session_ttl),
            secure_cookies: self.console_secure_cookies,
            public_url: self.public_url.clone(),
            invite_ttl_secs: self.invite_ttl,
            oidc_provider_name: sso.as_ref().map(|s| s.provider_name.clone()),
            password_sign_in: self.oidc.password_sign_in(),
            oidc: sso.clone(),
            version_retention: self.version_retention,
        });
        let console_on = console.is_some();
        let mut state = AppState::new(Arc::clone(&store))
            .with_admin_settings(mnemo_server::AdminSettings {
                max_workspaces: self.max_workspaces,
                rate_limits,
                org_limits,
                invite_ttl_secs: self.invite_ttl,
                public_url: self.public_url.clone(),
            })
            .with_memory_mount_root(&self.memory_mount_root)
            .with_console(console)
            .with_sso(sso)
            .with_memory_stream(!self.no_memory_stream)
            .with_version_retention(self.version_retention)
            .with_webhook_targets(targets)
            .with_stream_limits(mnemo_server::StreamLimits {
                per_credential: self.max_streams_per_credential,
                total: max_streams,
            })
            .with_auth_throttle(mnemo_server::AuthThrottleConfig {
                failures_per_minute: self.auth_failures_per_minute,
            });
        if !self.no_mcp {
            // The MCP server acts through this server's own API with each caller's credential,
            // so every rule of the API applies to it unchanged.
            let api = mnemo_client::Client::new(&format!("http://{}", loopback(addr)), "")?;
            state = state.with_mcp(mnemo_mcp::http_service(api));
        }
        if let Some(models) = models {
            if let Some(embedder) = models.embedder {
                tracing::info!(model = embedder.model(), "searching memories by meaning (`[embeddings]`)");
                state = state.with_semantic_search(embedder);
            }
            state = state.with_agent_loop(models.resolve, models.limits);
            tracing::info!("running agents on the configured model providers");
        }
        let router = mnemo_server::router(state);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let config = ServeConfig {
            header_read_timeout: std::time::Duration::from_secs(self.header_read_timeout),
            body_timeout: std::time::Duration::from_secs(self.body_timeout),
            max_connections: self.max_connections,
            max_connections_per_address: self
                .max_connections_per_address
                .unwrap_or_else(|| ServeConfig::default_per_address(self.max_connections)),
            first_byte_timeout: std::time::Duration::from_secs(self.first_byte_timeout),
        };
        let server = tokio::spawn(mnemo_server::serve_with(listener, router, config, async {
            let _ = stopped.await;
        }));
        Ok(Running { addr, console: console_on, store, stop, server, expiry, webhooks })
    }
}

/// This server as a local client reaches it: its port on the loopback address when it
/// listens on every address.
fn loopback(addr: std::net::SocketAddr) -> std::net::SocketAddr {
    match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => (std::net::Ipv4Addr::LOCALHOST, addr.port()).into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => (std::net::Ipv6Addr::LOCALHOST, addr.port()).into(),
        _ => addr,
    }
}

impl Running {
    /// Serves until `stop` resolves (or the server fails), then finishes in-flight requests
    /// (at most [`SHUTDOWN_GRACE`]) and closes the database.
    pub(crate) async fn until(self, stop: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
        let Self { store, stop: stop_tx, mut server, expiry, webhooks, .. } = self;
        let served = tokio::select! {
            served = &mut server => served,
            () = stop => {
                tracing::info!("shutting down: finishing in-flight requests");
                let _ = stop_tx.send(());
                match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
                    Ok(served) => served,
                    Err(_) => {
                        tracing::warn!("requests still running after {SHUTDOWN_GRACE:?}; closing anyway");
                        server.abort();
                        Ok(Ok(()))
                    }
                }
            }
        };
        expiry.abort();
        // An attempt cut short here is made again after its lease, by this or another process.
        if let Some(webhooks) = webhooks {
            webhooks.abort();
        }
        // Every acknowledged write is already committed; this only finishes queued ones.
        store.close().await;
        served.context("the server task failed")?.context("serve HTTP")?;
        tracing::info!("stopped");
        Ok(())
    }
}

/// Parses `--audit-retention-days` ([`mnemo_store::rules::audit::parse_retention_days`]).
fn parse_retention(raw: &str) -> Result<u32, String> {
    mnemo_store::rules::audit::parse_retention_days(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_neither_the_keys_nor_the_database_url() {
        let serve = Serve::embedded(
            "127.0.0.1:0".parse().unwrap(),
            "postgres://u:hunter2@h/db".into(),
            "sk-mnemo-TOPSECRET-0123456789abcdef0123".into(),
            "/mnt/memory".into(),
        );
        let shown = format!("{serve:?}");
        assert!(!shown.contains("hunter2") && !shown.contains("TOPSECRET"), "{shown}");
        assert!(shown.contains("api_keys: [[redacted]]") && shown.contains("database: Some([redacted])"), "{shown}");
    }
}
