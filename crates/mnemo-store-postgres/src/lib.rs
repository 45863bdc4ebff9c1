//! The PostgreSQL backend of [`mnemo_store::Store`]: several `mnemo serve` replicas on one
//! database.
//!
//! Connections come from a pool ([`deadpool_postgres`] over [`tokio_postgres`]); each call is
//! one transaction (`engine` says which rows it locks to keep the rules of
//! [`mnemo_store::rules`] with many writers). The schema lives in `migrations/`, the same
//! shape as SQLite's, and is applied at start under an advisory lock (`schema`). Writes that
//! live views care about send a `NOTIFY` on commit, which every replica hears (`listen`).

mod agents;
mod audit;
mod check;
mod console;
mod copy;
mod credentials;
mod dreams;
mod embeddings;
mod engine;
mod environments;
mod events;
mod listen;
mod memories;
mod people;
mod rate_limits;
mod retention;
mod schema;
mod search_index;
mod sessions;
mod sso;
mod stores;
mod versions;
mod webhooks;
mod work;
mod workspaces;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use mnemo_api::{
    Agent, AgentId, Environment, EnvironmentId, Memory, MemoryId, MemoryListItem, MemoryStore, MemoryStoreId,
    MemoryVersion, MemoryVersionId, Session, SessionId, View, Work,
};
use mnemo_api::{WebhookDelivery, WorkspaceId};
use mnemo_store::ClaimedDelivery;
use mnemo_store::{
    Cursor, Limits, ListEvents, ListMemories, ListMemoryStores, ListMemoryVersions, ListSessions, Listing,
    MemoryExport, MemoryFeedEntry, MemoryStoreUsage, Result, SessionEvent, Signal, Store,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::sync::broadcast;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use check::{PgCheckReport, check};
pub use listen::RECHECK_EVERY;

use crate::engine::{Engine, Pg, failure};
use mnemo_store::ops::{self, SessionRowSql};

/// Where and how to connect.
#[derive(Clone)]
pub struct PostgresSettings {
    /// Host, port, user, password, database and options, from the URL.
    pub config: tokio_postgres::Config,
    /// Most connections this process opens (besides the one that listens).
    pub pool_size: usize,
    /// Longest wait to connect, or for a free connection, before a call fails with `503`.
    pub connect_timeout: Duration,
    /// Longest a statement may run before the database cancels it (`None`: no limit).
    pub statement_timeout: Option<Duration>,
    /// With `sslmode=require`: the PEM file of the certificate authorities the server's
    /// certificate must chain to (`sslrootcert=PATH` in the URL); `None`: the WebPKI roots.
    pub root_certificates: Option<PathBuf>,
    /// The folder of this replica's search index (its own: one per replica), kept across
    /// restarts; `None`: in memory, built again from the database at each start.
    pub search_index: Option<PathBuf>,
    pub limits: Limits,
}

impl std::fmt::Debug for PostgresSettings {
    // The config holds the password: show where, never how.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSettings")
            .field("hosts", &self.config.get_hosts())
            .field("ports", &self.config.get_ports())
            .field("dbname", &self.config.get_dbname())
            .field("user", &self.config.get_user())
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("tls", &self.tls())
            .field("root_certificates", &self.root_certificates)
            .finish_non_exhaustive()
    }
}

/// The pool size when none is given.
pub const DEFAULT_POOL_SIZE: usize = 16;
/// The connect timeout when none is given.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The statement timeout when none is given.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

impl PostgresSettings {
    /// Parses `postgres://USER:PASS@HOST:PORT/DB?…` (or `postgresql://`), with libpq's
    /// connection options in the query. `sslmode=require` connects over TLS, verifying the
    /// server's certificate and name against `sslrootcert=PATH` (a PEM file) or else the WebPKI
    /// roots; any other mode connects in the clear (a `prefer` that cannot verify what it gets
    /// would only look safe). Errors never repeat the URL (it may hold a password).
    pub fn from_url(url: &str) -> Result<Self, String> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err("not a postgres:// URL".into());
        }
        let (url_without_roots, root_certificates) = take_root_certificates(url)?;
        let config: tokio_postgres::Config = url_without_roots.parse().map_err(|e: tokio_postgres::Error| {
            format!("the postgres:// URL is malformed: {}", redact(&e.to_string(), url))
        })?;
        if config.get_dbname().is_none() {
            return Err("the postgres:// URL names no database (postgres://USER:PASS@HOST:PORT/DB)".into());
        }
        if config.get_ssl_mode() != SslMode::Require && root_certificates.is_some() {
            return Err("sslrootcert is given but sslmode is not `require`: add sslmode=require".into());
        }
        Ok(Self {
            config,
            pool_size: DEFAULT_POOL_SIZE,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            statement_timeout: Some(DEFAULT_STATEMENT_TIMEOUT),
            root_certificates,
            search_index: None,
            limits: Limits::default(),
        })
    }

    /// Whether connections use TLS.
    pub fn tls(&self) -> bool {
        self.config.get_ssl_mode() == SslMode::Require
    }

    /// How every connection is made: the URL's settings, the connect timeout, TLS only when
    /// required, and an application name.
    pub(crate) fn client_config(&self) -> tokio_postgres::Config {
        let mut config = self.config.clone();
        config.connect_timeout(self.connect_timeout);
        if !self.tls() {
            // `prefer` would take TLS it cannot verify: in the clear unless TLS is required.
            config.ssl_mode(SslMode::Disable);
        }
        if config.get_application_name().is_none() {
            config.application_name("mnemo");
        }
        config
    }

    /// The TLS connector: the configured roots, or the WebPKI ones.
    fn connector(&self) -> Result<MakeRustlsConnect> {
        let mut roots = rustls::RootCertStore::empty();
        match &self.root_certificates {
            Some(path) => {
                let unreadable =
                    |e: &dyn std::fmt::Display| failure(format!("read sslrootcert {}: {e}", path.display()));
                for cert in CertificateDer::pem_file_iter(path).map_err(|e| unreadable(&e))? {
                    roots.add(cert.map_err(|e| unreadable(&e))?).map_err(|e| unreadable(&e))?;
                }
                if roots.is_empty() {
                    return Err(failure(format!("sslrootcert {} holds no certificate", path.display())));
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| failure(format!("TLS set-up: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(MakeRustlsConnect::new(config))
    }
}

/// Cuts `sslrootcert=PATH` (which the driver does not take) out of a URL's query.
fn take_root_certificates(url: &str) -> Result<(String, Option<PathBuf>), String> {
    let Some((base, query)) = url.split_once('?') else { return Ok((url.to_owned(), None)) };
    let mut roots = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("sslrootcert", value)) => {
                let path: String = form_urlencoded::parse(format!("p={value}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default();
                if path.is_empty() {
                    return Err("sslrootcert names no file".into());
                }
                roots = Some(PathBuf::from(path));
            }
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
    Ok((url, roots))
}

/// `message` with every part of `url` that might be a secret cut out.
fn redact(message: &str, url: &str) -> String {
    let mut out = message.replace(url, "<url>");
    if let Some(password) = url.split_once("://").and_then(|(_, rest)| rest.split_once('@')).map(|(auth, _)| auth)
        && let Some((_, password)) = password.split_once(':')
        && !password.is_empty()
    {
        out = out.replace(password, "<password>");
    }
    out
}

/// A [`Store`] in a PostgreSQL database, shared with other processes.
pub struct PostgresStore {
    engine: Arc<Engine>,
    /// This replica's search index ([`search_index::Replica`]).
    replica: Arc<search_index::Replica>,
    /// Its indexer ([`search_index::keep`]).
    indexer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    limits: Limits,
    /// The `NOTIFY` channel of this deployment (one per schema).
    channel: String,
    signals: broadcast::Sender<Signal>,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore").field("channel", &self.channel).finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects, applies pending migrations (refusing a database newer than this build), and
    /// starts listening for other replicas' changes.
    pub async fn open(settings: &PostgresSettings) -> Result<Self> {
        let mut config = settings.client_config();
        let listen_config = config.clone();
        if let Some(timeout) = settings.statement_timeout {
            let options = config.get_options().unwrap_or_default();
            let ms = timeout.as_millis().max(1);
            config.options(format!("{options} -c statement_timeout={ms}").trim_start());
        }
        let tls = settings.connector()?;
        let manager =
            Manager::from_config(config, tls.clone(), ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let timeout = Some(settings.connect_timeout);
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(timeout)
            .create_timeout(timeout)
            .recycle_timeout(timeout)
            .build()
            .map_err(|e| failure(format!("build the connection pool: {e}")))?;
        let engine = Arc::new(Engine::new(pool));
        let schema = {
            let mut client = engine.client().await?;
            schema::migrate(&mut client).await?
        };
        let channel = listen::channel(&schema);
        let signals = listen::channel_pair();
        let listener = tokio::spawn(listen::run(listen_config, tls, channel.clone(), signals.clone()));
        let replica = Arc::new(search_index::Replica::open(settings.search_index.as_deref())?);
        let indexer = tokio::spawn(search_index::keep(Arc::clone(&engine), Arc::clone(&replica), signals.subscribe()));
        Ok(Self {
            engine,
            replica,
            limits: settings.limits,
            channel,
            signals,
            listener: Mutex::new(Some(listener)),
            indexer: Mutex::new(Some(indexer)),
        })
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.lock().expect("listener lock poisoned").take() {
            listener.abort();
        }
        if let Some(indexer) = self.indexer.lock().expect("indexer lock poisoned").take() {
            indexer.abort();
        }
    }
}

pub(crate) use mnemo_api::rfc3339_micros as rfc3339;
pub(crate) use mnemo_store::row::{actor_columns, actor_from_columns, parse_id, rfc3339_opt, ts, ts_opt};

impl PostgresStore {
    /// Prunes the search log now, as each replica's indexer does once an hour with `keep` a
    /// week (migrations 0018 and 0019): every row a newer one supersedes goes, and so do the
    /// rows of memories deleted before the newest mark older than `keep`; how many.
    pub async fn prune_search_log(&self, keep: std::time::Duration) -> Result<u64> {
        search_index::prune(&self.engine, keep).await
    }
}

impl PostgresStore {
    /// Runs `op` in a read-only transaction on one snapshot.
    async fn read<T>(&self, op: impl AsyncFnOnce(&Pg<'_, '_>) -> Result<T>) -> Result<T> {
        read!(self.engine, |tx| op(&Pg::new(&tx, &self.channel, self.replica.written())).await)
    }

    /// Runs `op` in a read-write transaction that commits when it returns `Ok`; a deadlock or
    /// serialization failure runs it again ([`write!`](crate::write)).
    async fn write<T>(&self, mut op: impl AsyncFnMut(&Pg<'_, '_>) -> Result<T>) -> Result<T> {
        write!(self.engine, |tx| op(&Pg::new(&tx, &self.channel, self.replica.written())).await)
    }
}

mnemo_store::operations!(PostgresStore);

#[async_trait]
impl Store for PostgresStore {
    async fn close(&self) {
        if let Some(listener) = self.listener.lock().expect("listener lock poisoned").take() {
            listener.abort();
        }
        if let Some(indexer) = self.indexer.lock().expect("indexer lock poisoned").take() {
            indexer.abort();
        }
        // The index's merges end (their files are whole for the next start).
        let replica = Arc::clone(&self.replica);
        let _ = tokio::task::spawn_blocking(move || replica.close()).await;
        self.engine.close();
    }

    fn signals(&self) -> Option<broadcast::Receiver<Signal>> {
        Some(self.signals.subscribe())
    }

    /// The same channel as [`Store::signals`]: `NOTIFY`s from every replica, with the
    /// listener's periodic [`Signal::Resync`].
    fn memory_signals(&self) -> broadcast::Receiver<Signal> {
        self.signals.subscribe()
    }

    async fn list_environments(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Environment>> {
        read!(self.engine, |tx| environments::list(&tx, ws, include_archived, limit, after.as_ref()).await)
    }

    async fn get_agent(&self, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent> {
        read!(self.engine, |tx| agents::get(&tx, ws, id, version).await)
    }

    async fn list_agents(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Agent>> {
        read!(self.engine, |tx| agents::list(&tx, ws, include_archived, limit, after.as_ref()).await)
    }

    async fn get_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session> {
        read!(self.engine, |tx| sessions::get_with_seq(&tx, ws, id).await.map(|(s, _)| s))
    }

    async fn list_sessions(&self, ws: &WorkspaceId, query: ListSessions) -> Result<Listing<Session>> {
        read!(self.engine, |tx| sessions::list(&tx, ws, &query).await)
    }

    async fn list_turn_sessions(
        &self,
        statuses: Vec<String>,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<(WorkspaceId, SessionId)>> {
        read!(self.engine, |tx| sessions::list_turn_sessions(&tx, &statuses, limit, after.as_ref()).await)
    }

    async fn session_workspace(&self, id: &SessionId) -> Result<Option<WorkspaceId>> {
        read!(self.engine, |tx| sessions::workspace_of(&tx, id).await)
    }

    async fn list_events(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        query: ListEvents,
    ) -> Result<Listing<SessionEvent>> {
        read!(self.engine, |tx| events::list(&tx, ws, session, &query).await)
    }

    async fn events_after(&self, ws: &WorkspaceId, session: &SessionId, seq: i64) -> Result<Vec<SessionEvent>> {
        read!(self.engine, |tx| events::after(&tx, ws, session, seq).await)
    }

    async fn list_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Work>> {
        read!(self.engine, |tx| work::list(&tx, ws, environment, limit, after.as_ref()).await)
    }

    async fn get_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
        read!(self.engine, |tx| stores::get(&tx, ws, id).await)
    }

    async fn list_memory_stores(&self, ws: &WorkspaceId, query: ListMemoryStores) -> Result<Listing<MemoryStore>> {
        read!(self.engine, |tx| stores::list(&tx, ws, &query).await)
    }

    async fn memory_store_usage(
        &self,
        ws: &WorkspaceId,
        stores: &[MemoryStoreId],
    ) -> Result<HashMap<MemoryStoreId, MemoryStoreUsage>> {
        read!(self.engine, |tx| stores::usage(&tx, ws, stores).await)
    }

    async fn delete_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<()> {
        let (ws, id) = (ws.clone(), id.clone());
        self.write(async move |sql| ops::stores::delete_store(sql, &ws, &id).await).await
    }

    async fn get_memory(&self, ws: &WorkspaceId, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory> {
        read!(self.engine, |tx| memories::get(&tx, ws, store, id).await)
    }

    async fn memory_change_seq(&self, ws: &WorkspaceId, store: &MemoryStoreId) -> Result<i64> {
        read!(self.engine, |tx| stores::change_seq(&tx, ws, store).await)
    }

    async fn list_memories(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        query: ListMemories,
    ) -> Result<Listing<MemoryListItem>> {
        read!(self.engine, |tx| memories::list(&tx, ws, store, &query).await)
    }

    async fn search_memories(
        &self,
        ws: &WorkspaceId,
        request: mnemo_store::search::SearchMemories,
    ) -> Result<Listing<mnemo_api::MemorySearchResult>> {
        read!(self.engine, |tx| memories::search(&tx, &self.replica, ws, &request).await)
    }

    async fn catch_up_search_index(&self) -> Result<u64> {
        self.replica.catch_up(&self.engine).await
    }

    async fn export_memories(&self, ws: &WorkspaceId, store: &MemoryStoreId, chunk: u32) -> Result<MemoryExport> {
        let mut client = self.engine.client().await?;
        // Two chunks in flight at most: the reader's pace holds the transaction (and its snapshot).
        let (out, mut parts) = tokio::sync::mpsc::channel(2);
        let (began, begun) = tokio::sync::oneshot::channel();
        let (ws, id) = (ws.clone(), store.clone());
        tokio::spawn(async move {
            if let Err(e) = memories::export(&mut client, &ws, &id, chunk, began, &out).await {
                let _ = out.send(Err(e)).await;
            }
        });
        match begun.await {
            Ok(seq) => Ok(MemoryExport { seq, parts }),
            Err(_) => match parts.recv().await {
                Some(Err(e)) => Err(e),
                _ => Err(failure("the export ended before it began")),
            },
        }
    }

    async fn memory_changes_after(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        after: i64,
        limit: u32,
        inline: bool,
    ) -> Result<Vec<MemoryFeedEntry>> {
        read!(self.engine, |tx| versions::changes_after(&tx, ws, store, after, limit, inline).await)
    }

    async fn get_memory_version(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryVersionId,
        view: View,
    ) -> Result<MemoryVersion> {
        read!(self.engine, |tx| versions::get(&tx, ws, store, id, view).await)
    }

    async fn list_memory_versions(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        query: ListMemoryVersions,
    ) -> Result<Listing<MemoryVersion>> {
        read!(self.engine, |tx| versions::list(&tx, ws, store, &query).await)
    }

    async fn claim_webhook_deliveries(&self, limit: u32, lease: Duration) -> Result<Vec<ClaimedDelivery>> {
        self.write(async move |sql| ops::webhooks::claim(sql, limit, lease).await).await
    }
}

/// Every table of the schema, in an order that satisfies foreign keys (parents first).
pub const TABLES: &[&str] = &[
    "api_keys",
    "console_sessions",
    "memory_stores",
    "memory_versions",
    "memories",
    "environments",
    "environment_keys",
    "agents",
    "agent_versions",
    "sessions",
    "session_memory_stores",
    "session_events",
    "work_items",
    "session_tokens",
    "worker_polls",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_and_bad_ones_refused_without_echoing_secrets() {
        let ok = PostgresSettings::from_url("postgresql://mnemo:s3cret@db.internal:6543/mnemo?application_name=a")
            .expect("a valid URL");
        assert_eq!(ok.config.get_dbname(), Some("mnemo"));
        assert_eq!(ok.config.get_ports(), &[6543]);
        assert_eq!((ok.pool_size, ok.connect_timeout), (DEFAULT_POOL_SIZE, DEFAULT_CONNECT_TIMEOUT));
        assert!(!format!("{ok:?}").contains("s3cret"), "Debug shows no password: {ok:?}");

        assert_eq!(PostgresSettings::from_url("mysql://x@y/z").unwrap_err(), "not a postgres:// URL");
        let no_db = PostgresSettings::from_url("postgres://mnemo:s3cret@db.internal:5432").unwrap_err();
        assert!(no_db.contains("names no database"), "{no_db}");
        for bad in [
            "postgres://mnemo:s3cret@db.internal:notaport/mnemo",
            "postgres://mnemo:s3cret@db.internal/mnemo?bogus_option=s3cret",
        ] {
            let err = PostgresSettings::from_url(bad).unwrap_err();
            assert!(err.starts_with("the postgres:// URL is malformed"), "{err}");
            assert!(!err.contains("s3cret"), "a secret leaked: {err}");
        }
        let tls = PostgresSettings::from_url("postgres://m:s3cret@h/db?sslmode=require&sslrootcert=%2Fetc%2Fca.pem")
            .expect("TLS with a CA file");
        assert!(tls.tls());
        assert_eq!(tls.root_certificates.as_deref(), Some(std::path::Path::new("/etc/ca.pem")));
        let clear = PostgresSettings::from_url("postgres://m:s3cret@h/db?sslmode=prefer").unwrap();
        assert!(!clear.tls(), "only `require` uses TLS");
        let lone = PostgresSettings::from_url("postgres://m@h/db?sslrootcert=/etc/ca.pem").unwrap_err();
        assert!(lone.contains("add sslmode=require"), "{lone}");
    }
}
