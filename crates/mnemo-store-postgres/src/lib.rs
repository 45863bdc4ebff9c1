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

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use mnemo_api::{
    Access, Actor, Agent, AgentId, AgentParams, AgentSpec, ApiKeyId, Environment, EnvironmentId, EnvironmentKey,
    EnvironmentKeyId, Event, Memory, MemoryId, MemoryListItem, MemoryPath, MemoryStore, MemoryStoreId, MemoryVersion,
    MemoryVersionId, Session, SessionId, View, Work, WorkId, WorkQueueStats,
};
use mnemo_api::{AdminKeyId, WebhookDelivery, WebhookEndpoint, WebhookEndpointId, WorkspaceId};
use mnemo_store::Principal;
use mnemo_store::{
    Appended, ConsoleSession, CredentialHash, Cursor, EnvironmentPatch, EventAuthor, HeartbeatOutcome, Limits,
    ListEvents, ListMemories, ListMemoryStores, ListMemoryVersions, ListSessions, Listing, MemoryChange, MemoryExport,
    MemoryFeedEntry, MemoryStorePatch, MemoryStoreUsage, NewEnvironment, NewMemoryStore, NewSession, Result,
    SessionEvent, Signal, Store,
};
use mnemo_store::{ClaimedDelivery, ListWebhookDeliveries, NewWebhookEndpoint, WebhookAttempt, WebhookEndpointPatch};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio::sync::broadcast;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use check::{PgCheckReport, check};
pub use listen::RECHECK_EVERY;

use crate::engine::{Engine, Pg, failure, notify};
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
    /// The search indexer ([`search_index::keep`]).
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
        let indexer = tokio::spawn(search_index::keep(Arc::clone(&engine), signals.subscribe()));
        Ok(Self {
            engine,
            limits: settings.limits,
            channel,
            signals,
            listener: Mutex::new(Some(listener)),
            indexer: Mutex::new(Some(indexer)),
        })
    }

    async fn signal(&self, tx: &engine::Tx<'_>, signal: &Signal) -> Result<()> {
        notify(tx, &self.channel, signal).await
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

/// Writes that kill credentials tell every replica to forget the ones it remembers.
async fn credentials_changed(store: &PostgresStore, tx: &engine::Tx<'_>) -> Result<()> {
    store.signal(tx, &Signal::Credentials).await
}

#[async_trait]
impl Store for PostgresStore {
    async fn close(&self) {
        if let Some(listener) = self.listener.lock().expect("listener lock poisoned").take() {
            listener.abort();
        }
        if let Some(indexer) = self.indexer.lock().expect("indexer lock poisoned").take() {
            indexer.abort();
        }
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

    async fn find_api_key(&self, hash: CredentialHash) -> Result<Option<ApiKeyId>> {
        read!(self.engine, |tx| ops::credentials::find_api_key(&Pg(&tx), &hash).await)
    }

    async fn ensure_api_key(&self, hash: CredentialHash, label: &str) -> Result<ApiKeyId> {
        write!(self.engine, |tx| ops::credentials::ensure_api_key(&Pg(&tx), &hash, label).await)
    }

    async fn ensure_api_key_in(&self, ws: &WorkspaceId, hash: CredentialHash, label: &str) -> Result<ApiKeyId> {
        write!(self.engine, |tx| ops::credentials::ensure_api_key_in(&Pg(&tx), ws, &hash, label).await)
    }

    async fn count_api_keys(&self) -> Result<u64> {
        read!(self.engine, |tx| ops::credentials::count_api_keys(&Pg(&tx)).await)
    }

    async fn ensure_admin_key(&self, hash: CredentialHash, name: &str) -> Result<AdminKeyId> {
        write!(self.engine, |tx| ops::credentials::ensure_admin_key(&Pg(&tx), &hash, name).await)
    }

    async fn resolve_credential(&self, hash: CredentialHash) -> Result<Option<Principal>> {
        read!(self.engine, |tx| ops::credentials::resolve_credential(&Pg(&tx), &hash).await)
    }

    async fn default_workspace(&self) -> Result<WorkspaceId> {
        read!(self.engine, |tx| ops::CredentialSql::default_workspace(&Pg(&tx)).await)
    }

    async fn create_workspace(&self, name: &str) -> Result<WorkspaceId> {
        write!(self.engine, |tx| ops::workspaces::create(&Pg(&tx), name).await)
    }

    async fn organization(&self) -> Result<mnemo_api::Organization> {
        read!(self.engine, |tx| ops::workspaces::organization(&Pg(&tx)).await)
    }

    async fn rename_organization(&self, name: &str) -> Result<mnemo_api::Organization> {
        write!(self.engine, |tx| ops::workspaces::rename_organization(&Pg(&tx), name).await)
    }

    async fn create_workspace_with(&self, new: mnemo_api::NewWorkspace, max: u32) -> Result<mnemo_api::Workspace> {
        write!(self.engine, |tx| ops::workspaces::create_workspace(&Pg(&tx), &new, max).await)
    }

    async fn get_workspace(&self, id: &WorkspaceId) -> Result<mnemo_api::Workspace> {
        read!(self.engine, |tx| ops::workspaces::get(&Pg(&tx), id).await)
    }

    async fn update_workspace(
        &self,
        id: &WorkspaceId,
        body: mnemo_api::WorkspaceUpdate,
    ) -> Result<mnemo_api::Workspace> {
        write!(self.engine, |tx| ops::workspaces::update(&Pg(&tx), id, &body).await)
    }

    async fn list_workspaces(
        &self,
        query: ops::workspaces::ListWorkspaces,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::Workspace>> {
        read!(self.engine, |tx| ops::workspaces::list(&Pg(&tx), &query).await)
    }

    async fn archive_workspace(&self, id: &WorkspaceId) -> Result<mnemo_api::Workspace> {
        write!(self.engine, |tx| {
            let (workspace, revoked) = ops::workspaces::archive(&Pg(&tx), id).await?;
            if revoked {
                credentials_changed(self, &tx).await?;
            }
            Ok(workspace)
        })
    }

    async fn workspace_rate_limits(&self, id: &WorkspaceId) -> Result<ops::workspaces::Overrides> {
        read!(self.engine, |tx| ops::workspaces::overrides(&Pg(&tx), id).await)
    }

    async fn update_workspace_rate_limits(
        &self,
        id: &WorkspaceId,
        entry: mnemo_store::rules::rate_limit::Entry,
        body: mnemo_api::RateLimitUpdate,
    ) -> Result<BTreeMap<mnemo_api::LimiterType, u64>> {
        write!(self.engine, |tx| ops::workspaces::update_overrides(&Pg(&tx), id, &entry, &body).await)
    }

    async fn create_api_key(
        &self,
        new: mnemo_api::NewApiKey,
        hash: CredentialHash,
        hint: &str,
        created_by: Option<&str>,
    ) -> Result<mnemo_api::ApiKey> {
        write!(self.engine, |tx| ops::credentials::create_api_key(&Pg(&tx), &new, &hash, hint, created_by).await)
    }

    async fn get_api_key(&self, id: &ApiKeyId) -> Result<mnemo_api::ApiKey> {
        read!(self.engine, |tx| ops::credentials::get_api_key(&Pg(&tx), id).await)
    }

    async fn list_api_keys(
        &self,
        query: ops::credentials::ListApiKeys,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::ApiKey>> {
        read!(self.engine, |tx| ops::credentials::list_api_keys(&Pg(&tx), &query).await)
    }

    async fn update_api_key(&self, id: &ApiKeyId, body: mnemo_api::ApiKeyUpdate) -> Result<(mnemo_api::ApiKey, bool)> {
        write!(self.engine, |tx| {
            let (key, revoked) = ops::credentials::update_api_key(&Pg(&tx), id, &body).await?;
            if revoked {
                credentials_changed(self, &tx).await?;
            }
            Ok((key, revoked))
        })
    }

    async fn count_admin_keys(&self) -> Result<u64> {
        read!(self.engine, |tx| ops::CredentialSql::count_live_admin_keys(&Pg(&tx)).await)
    }

    async fn create_invite(
        &self,
        new: mnemo_api::NewInvite,
        hash: CredentialHash,
        ttl_secs: u64,
    ) -> Result<mnemo_api::Invite> {
        write!(self.engine, |tx| ops::people::create_invite(&Pg(&tx), &new, &hash, ttl_secs).await)
    }

    async fn get_invite(&self, id: &mnemo_api::InviteId) -> Result<mnemo_api::Invite> {
        read!(self.engine, |tx| ops::people::get_invite(&Pg(&tx), id).await)
    }

    async fn list_invites(&self, query: ops::people::ListInvites) -> Result<mnemo_api::AdminPage<mnemo_api::Invite>> {
        read!(self.engine, |tx| ops::people::list_invites(&Pg(&tx), &query).await)
    }

    async fn delete_invite(&self, id: &mnemo_api::InviteId) -> Result<mnemo_api::InviteDeleted> {
        write!(self.engine, |tx| ops::people::delete_invite(&Pg(&tx), id).await)
    }

    async fn get_user(&self, id: &mnemo_api::UserId) -> Result<mnemo_api::User> {
        read!(self.engine, |tx| ops::people::get_user(&Pg(&tx), id).await)
    }

    async fn list_users(&self, query: ops::people::ListUsers) -> Result<mnemo_api::AdminPage<mnemo_api::User>> {
        read!(self.engine, |tx| ops::people::list_users(&Pg(&tx), &query).await)
    }

    async fn update_user(
        &self,
        id: &mnemo_api::UserId,
        role: mnemo_api::OrgRole,
        via: mnemo_store::rules::people::Via,
    ) -> Result<mnemo_api::User> {
        write!(self.engine, |tx| ops::people::update_user(&Pg(&tx), id, role, via).await)
    }

    async fn remove_user(
        &self,
        id: &mnemo_api::UserId,
        via: mnemo_store::rules::people::Via,
    ) -> Result<mnemo_api::UserDeleted> {
        write!(self.engine, |tx| {
            let removed = ops::people::remove_user(&Pg(&tx), id, via).await?;
            // Their console sessions were deleted with them: other replicas forget cached ones.
            credentials_changed(self, &tx).await?;
            Ok(removed)
        })
    }

    async fn sign_out_user(&self, id: &mnemo_api::UserId) -> Result<mnemo_api::User> {
        write!(self.engine, |tx| {
            let (user, ended) = ops::people::sign_out_user(&Pg(&tx), id).await?;
            if ended > 0 {
                credentials_changed(self, &tx).await?;
            }
            Ok(user)
        })
    }

    async fn create_person_session(
        &self,
        hash: CredentialHash,
        user: &mnemo_api::UserId,
        ttl_seconds: u64,
    ) -> Result<mnemo_store::PersonSession> {
        write!(self.engine, |tx| ops::people::create_person_session(&Pg(&tx), &hash, user, ttl_seconds).await)
    }

    async fn sign_in_candidate(&self, email: String) -> Result<Option<(mnemo_api::User, Option<String>)>> {
        read!(self.engine, |tx| ops::people::sign_in_candidate(&Pg(&tx), &email).await)
    }

    async fn person_sessions(&self, user: &mnemo_api::UserId) -> Result<Vec<mnemo_store::PersonSessionTimes>> {
        read!(self.engine, |tx| ops::people::person_sessions(&Pg(&tx), user).await)
    }

    async fn find_person_session(&self, hash: CredentialHash) -> Result<Option<mnemo_store::PersonSession>> {
        read!(self.engine, |tx| ops::people::find_person_session(&Pg(&tx), &hash).await)
    }

    async fn revoke_person_session(&self, hash: CredentialHash) -> Result<()> {
        write!(self.engine, |tx| {
            if ops::people::revoke_person_session(&Pg(&tx), &hash).await? {
                credentials_changed(self, &tx).await?;
            }
            Ok(())
        })
    }

    async fn add_member(&self, ws: &WorkspaceId, body: mnemo_api::MemberAdd) -> Result<mnemo_api::WorkspaceMember> {
        write!(self.engine, |tx| ops::people::add_member(&Pg(&tx), ws, &body).await)
    }

    async fn person_principal(
        &self,
        user: &mnemo_api::UserId,
        workspace: Option<&WorkspaceId>,
    ) -> Result<mnemo_store::Principal> {
        read!(self.engine, |tx| ops::people::person_principal(&Pg(&tx), user, workspace).await)
    }

    async fn person_workspaces(
        &self,
        user: &mnemo_api::UserId,
    ) -> Result<Vec<(mnemo_api::Workspace, mnemo_api::WorkspaceRole)>> {
        read!(self.engine, |tx| ops::people::workspaces_of(&Pg(&tx), user).await)
    }

    async fn get_member(&self, ws: &WorkspaceId, user: &mnemo_api::UserId) -> Result<mnemo_api::WorkspaceMember> {
        read!(self.engine, |tx| ops::people::get_member(&Pg(&tx), ws, user).await)
    }

    async fn update_member(
        &self,
        ws: &WorkspaceId,
        user: &mnemo_api::UserId,
        role: String,
    ) -> Result<mnemo_api::WorkspaceMember> {
        write!(self.engine, |tx| ops::people::update_member(&Pg(&tx), ws, user, &role).await)
    }

    async fn remove_member(
        &self,
        ws: &WorkspaceId,
        user: &mnemo_api::UserId,
    ) -> Result<mnemo_api::WorkspaceMemberDeleted> {
        write!(self.engine, |tx| ops::people::remove_member(&Pg(&tx), ws, user).await)
    }

    async fn invite_by_link(&self, hash: CredentialHash) -> Result<Option<mnemo_api::Invite>> {
        read!(self.engine, |tx| ops::people::invite_by_link(&Pg(&tx), &hash).await)
    }

    async fn accept_invite(&self, hash: CredentialHash, joining: ops::people::Joining) -> Result<mnemo_api::User> {
        write!(self.engine, |tx| ops::people::accept_invite(&Pg(&tx), &hash, &joining).await)
    }

    async fn setup_wanted(&self) -> Result<bool> {
        read!(self.engine, |tx| ops::people::setup_wanted(&Pg(&tx)).await)
    }

    async fn sso_sign_in(
        &self,
        identity: ops::sso::SsoIdentity,
        grants: mnemo_store::rules::sso::Grants<WorkspaceId>,
    ) -> Result<ops::sso::SsoSignIn> {
        write!(self.engine, |tx| ops::sso::sign_in(&Pg(&tx), &identity, &grants).await)
    }

    async fn sso_person(
        &self,
        issuer: String,
        subject: String,
    ) -> Result<Option<(mnemo_api::User, mnemo_store::rules::sso::Grants<WorkspaceId>)>> {
        read!(self.engine, |tx| {
            let sql = Pg(&tx);
            match ops::sso::person(&sql, &issuer, &subject).await? {
                None => Ok(None),
                Some(user) => {
                    let grants = ops::sso::current_grants(&sql, &user.id).await?;
                    Ok(Some((user, grants)))
                }
            }
        })
    }

    async fn create_setup_link(&self, hash: CredentialHash, ttl_secs: u64) -> Result<()> {
        write!(self.engine, |tx| ops::people::create_setup_link(&Pg(&tx), &hash, ttl_secs).await)
    }

    async fn setup_link_usable(&self, hash: CredentialHash) -> Result<bool> {
        read!(self.engine, |tx| ops::people::setup_link_usable(&Pg(&tx), &hash).await)
    }

    async fn use_setup_link(
        &self,
        hash: CredentialHash,
        email: String,
        joining: ops::people::Joining,
    ) -> Result<mnemo_api::User> {
        write!(self.engine, |tx| ops::people::use_setup_link(&Pg(&tx), &hash, &email, &joining).await)
    }

    async fn list_members(
        &self,
        ws: &WorkspaceId,
        page: mnemo_api::AdminPageQuery,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::WorkspaceMember>> {
        read!(self.engine, |tx| ops::people::list_members(&Pg(&tx), ws, &page).await)
    }

    async fn take_rate_limit(
        &self,
        ws: &WorkspaceId,
        entry: &str,
        limiter: &mnemo_api::LimiterType,
        capacity: u64,
        draw: mnemo_store::rules::rate_limit::Draw,
    ) -> Result<mnemo_store::rules::rate_limit::Outcome> {
        let key = ops::BucketKey { workspace: ws, entry, limiter };
        write!(self.engine, |tx| ops::rate_limits::take(&Pg(&tx), key, capacity, draw).await)
    }

    async fn record_audit_event(&self, event: ops::NewAuditEvent) -> Result<mnemo_api::AuditEventId> {
        write!(self.engine, |tx| ops::audit::record(&Pg(&tx), event.clone()).await)
    }

    async fn list_audit_events(
        &self,
        filter: ops::AuditFilter,
        page: mnemo_api::AdminPageQuery,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::AuditEvent>> {
        read!(self.engine, |tx| ops::audit::list(&Pg(&tx), &filter, &page).await)
    }

    async fn prune_audit_events(&self, days: u32) -> Result<u64> {
        write!(self.engine, |tx| ops::audit::prune(&Pg(&tx), days).await)
    }

    async fn create_environment(&self, ws: &WorkspaceId, new: NewEnvironment) -> Result<Environment> {
        write!(self.engine, |tx| ops::environments::create(&Pg(&tx), ws, &new).await)
    }

    async fn get_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Environment> {
        read!(self.engine, |tx| ops::environments::get(&Pg(&tx), ws, id).await)
    }

    async fn update_environment(
        &self,
        ws: &WorkspaceId,
        id: &EnvironmentId,
        patch: EnvironmentPatch,
    ) -> Result<Environment> {
        write!(self.engine, |tx| ops::environments::update(&Pg(&tx), ws, id, patch.clone()).await)
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

    async fn archive_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Environment> {
        write!(self.engine, |tx| {
            let archived = ops::environments::archive(&Pg(&tx), ws, id).await?;
            credentials_changed(self, &tx).await?;
            Ok(archived)
        })
    }

    async fn delete_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<()> {
        write!(self.engine, |tx| {
            ops::environments::delete(&Pg(&tx), ws, id).await?;
            credentials_changed(self, &tx).await
        })
    }

    async fn create_environment_key(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        hash: CredentialHash,
    ) -> Result<EnvironmentKey> {
        write!(self.engine, |tx| ops::environments::create_key(&Pg(&tx), ws, environment, &hash).await)
    }

    async fn revoke_environment_key(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        id: &EnvironmentKeyId,
    ) -> Result<EnvironmentKey> {
        write!(self.engine, |tx| {
            let key = ops::environments::revoke_key(&Pg(&tx), ws, environment, id).await?;
            credentials_changed(self, &tx).await?;
            Ok(key)
        })
    }

    async fn list_environment_keys(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
    ) -> Result<Vec<EnvironmentKey>> {
        read!(self.engine, |tx| ops::environments::list_keys(&Pg(&tx), ws, environment).await)
    }

    async fn create_agent(&self, ws: &WorkspaceId, spec: AgentSpec) -> Result<Agent> {
        write!(self.engine, |tx| ops::agents::create(&Pg(&tx), ws, &spec).await)
    }

    async fn get_agent(&self, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent> {
        read!(self.engine, |tx| agents::get(&tx, ws, id, version).await)
    }

    async fn update_agent(&self, ws: &WorkspaceId, id: &AgentId, base: u32, params: AgentParams) -> Result<Agent> {
        write!(self.engine, |tx| ops::agents::update(&Pg(&tx), ws, id, base, &params).await)
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

    async fn archive_agent(&self, ws: &WorkspaceId, id: &AgentId) -> Result<Agent> {
        write!(self.engine, |tx| ops::agents::archive(&Pg(&tx), ws, id).await)
    }

    async fn create_session(&self, ws: &WorkspaceId, new: NewSession) -> Result<Session> {
        let ttl = self.limits.work_lease_ttl_seconds;
        write!(self.engine, |tx| {
            let created = ops::sessions::create(&Pg(&tx), ws, &new, ttl).await?;
            if created.queued_work {
                self.signal(&tx, &Signal::Work).await?;
            }
            Ok(created.session)
        })
    }

    async fn get_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session> {
        read!(self.engine, |tx| sessions::get_with_seq(&tx, ws, id).await.map(|(s, _)| s))
    }

    async fn update_session(
        &self,
        ws: &WorkspaceId,
        id: &SessionId,
        title: Option<Option<String>>,
        metadata: Option<BTreeMap<String, Option<String>>>,
    ) -> Result<Session> {
        write!(self.engine, |tx| ops::sessions::update(&Pg(&tx), ws, id, title.clone(), metadata.as_ref()).await)
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

    async fn archive_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session> {
        write!(self.engine, |tx| {
            let session = ops::sessions::archive(&Pg(&tx), ws, id).await?;
            credentials_changed(self, &tx).await?;
            Ok(session)
        })
    }

    async fn delete_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<()> {
        write!(self.engine, |tx| {
            ops::sessions::delete(&Pg(&tx), ws, id).await?;
            credentials_changed(self, &tx).await
        })
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

    async fn append_events(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        events: Vec<Event>,
        author: EventAuthor,
    ) -> Result<Appended> {
        let ttl = self.limits.work_lease_ttl_seconds;
        write!(self.engine, |tx| {
            let appended = events::append(&tx, ws, session, events.clone(), &author, ttl).await?;
            if let (Some(first), Some(last)) = (appended.written.first(), appended.written.last()) {
                let signal = Signal::Events { session: session.clone(), first: first.seq, last: last.seq };
                self.signal(&tx, &signal).await?;
            }
            if appended.enqueued_work {
                self.signal(&tx, &Signal::Work).await?;
            }
            Ok(appended)
        })
    }

    async fn claim_turn(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool> {
        let ttl = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
        write!(self.engine, |tx| ops::sessions::claim_turn(&Pg(&tx), ws, session, holder, ttl).await)
    }

    async fn release_turn(&self, ws: &WorkspaceId, session: &SessionId, holder: &str) -> Result<()> {
        write!(self.engine, |tx| ops::sessions::release_turn(&Pg(&tx), ws, session, holder).await)
    }

    async fn session_store_access(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        store: &MemoryStoreId,
    ) -> Result<Option<Access>> {
        read!(self.engine, |tx| Pg(&tx).store_access(ws, session, store).await)
    }

    async fn poll_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        worker_id: Option<String>,
        reclaim_ms: u64,
        token_hash: CredentialHash,
    ) -> Result<Option<Work>> {
        write!(self.engine, |tx| {
            ops::work::poll(&Pg(&tx), ws, environment, worker_id.as_deref(), reclaim_ms, &token_hash).await
        })
    }

    async fn expire_work(&self) -> Result<u64> {
        write!(self.engine, |tx| {
            let changed = ops::work::expire_all(&Pg(&tx)).await?;
            if changed > 0 {
                self.signal(&tx, &Signal::Work).await?;
            }
            Ok(changed)
        })
    }

    async fn next_work_lapse(&self) -> Result<Option<std::time::Duration>> {
        read!(self.engine, |tx| ops::work::next_lapse(&Pg(&tx)).await)
    }

    async fn enqueue_healthcheck(&self, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<Work> {
        let ttl = self.limits.work_lease_ttl_seconds;
        write!(self.engine, |tx| {
            let item = ops::work::enqueue_healthcheck(&Pg(&tx), ws, environment, ttl).await?;
            self.signal(&tx, &Signal::Work).await?;
            Ok(item)
        })
    }

    async fn ack_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work> {
        write!(self.engine, |tx| ops::work::ack(&Pg(&tx), ws, environment, id).await)
    }

    async fn heartbeat_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        id: &WorkId,
        expected_last_heartbeat: &str,
        desired_ttl_seconds: Option<u64>,
    ) -> Result<HeartbeatOutcome> {
        write!(self.engine, |tx| {
            ops::work::heartbeat(&Pg(&tx), ws, environment, id, expected_last_heartbeat, desired_ttl_seconds).await
        })
    }

    async fn stop_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId, force: bool) -> Result<Work> {
        write!(self.engine, |tx| ops::work::stop(&Pg(&tx), ws, environment, id, force).await)
    }

    async fn get_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work> {
        read!(self.engine, |tx| ops::work::get(&Pg(&tx), ws, environment, id).await)
    }

    async fn update_work_metadata(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        id: &WorkId,
        patch: BTreeMap<String, Option<String>>,
    ) -> Result<Work> {
        write!(self.engine, |tx| ops::work::update_metadata(&Pg(&tx), ws, environment, id, &patch).await)
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

    async fn work_stats(&self, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<WorkQueueStats> {
        read!(self.engine, |tx| ops::work::stats(&Pg(&tx), ws, environment).await)
    }

    async fn create_memory_store(&self, ws: &WorkspaceId, new: NewMemoryStore) -> Result<MemoryStore> {
        write!(self.engine, |tx| ops::stores::create_store(&Pg(&tx), ws, new.clone()).await)
    }

    async fn get_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
        read!(self.engine, |tx| stores::get(&tx, ws, id).await)
    }

    async fn update_memory_store(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        patch: MemoryStorePatch,
    ) -> Result<MemoryStore> {
        write!(self.engine, |tx| ops::stores::update_store(&Pg(&tx), ws, id, patch.clone()).await)
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

    async fn archive_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
        write!(self.engine, |tx| ops::stores::archive_store(&Pg(&tx), ws, id).await)
    }

    async fn delete_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<()> {
        write!(self.engine, |tx| ops::stores::delete_store(&Pg(&tx), ws, id).await)
    }

    async fn create_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        path: MemoryPath,
        content: String,
        actor: Actor,
    ) -> Result<Memory> {
        let limit = self.limits.max_memories_per_store;
        write!(self.engine, |tx| {
            let (memory, seq) =
                ops::memories::create_memory(&Pg(&tx), ws, store, &path, content.clone(), &actor, limit).await?;
            self.signal(&tx, &Signal::Memory { store: store.clone(), seq }).await?;
            Ok(memory)
        })
    }

    async fn get_memory(&self, ws: &WorkspaceId, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory> {
        read!(self.engine, |tx| memories::get(&tx, ws, store, id).await)
    }

    async fn update_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryId,
        change: MemoryChange,
        actor: Actor,
    ) -> Result<Memory> {
        write!(self.engine, |tx| {
            let (memory, seq) = ops::memories::update_memory(&Pg(&tx), ws, store, id, change.clone(), &actor).await?;
            if let Some(seq) = seq {
                self.signal(&tx, &Signal::Memory { store: store.clone(), seq }).await?;
            }
            Ok(memory)
        })
    }

    async fn delete_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryId,
        expected_sha256: Option<String>,
        actor: Actor,
    ) -> Result<()> {
        write!(self.engine, |tx| {
            let seq = ops::memories::delete_memory(&Pg(&tx), ws, store, id, expected_sha256.as_deref(), &actor).await?;
            self.signal(&tx, &Signal::Memory { store: store.clone(), seq }).await
        })
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

    async fn create_dream(
        &self,
        ws: &WorkspaceId,
        request: mnemo_api::DreamRequest,
        idempotency: Option<(String, String)>,
        max_pending: u32,
    ) -> Result<mnemo_api::Dream> {
        write!(self.engine, |tx| ops::dreams::create(&Pg(&tx), ws, &request, idempotency.clone(), max_pending).await)
    }

    async fn get_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream> {
        read!(self.engine, |tx| ops::dreams::get(&Pg(&tx), ws, id).await)
    }

    async fn list_dreams(&self, ws: &WorkspaceId, query: ops::dreams::ListDreams) -> Result<Listing<mnemo_api::Dream>> {
        read!(self.engine, |tx| ops::dreams::list(&Pg(&tx), ws, &query).await)
    }

    async fn cancel_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream> {
        write!(self.engine, |tx| ops::dreams::cancel(&Pg(&tx), ws, id).await)
    }

    async fn archive_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream> {
        write!(self.engine, |tx| ops::dreams::archive(&Pg(&tx), ws, id).await)
    }

    async fn claim_dream(
        &self,
        holder: &str,
        ttl: std::time::Duration,
        max_running: u32,
    ) -> Result<Option<ops::dreams::Claimed>> {
        let ttl = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
        write!(self.engine, |tx| ops::dreams::claim_next(&Pg(&tx), holder, ttl, max_running).await)
    }

    async fn renew_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<mnemo_api::Dream>> {
        let ttl = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
        write!(self.engine, |tx| ops::dreams::renew(&Pg(&tx), ws, id, holder, ttl).await)
    }

    async fn start_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        session: NewSession,
    ) -> Result<mnemo_api::Dream> {
        let work_ttl = self.limits.work_lease_ttl_seconds;
        write!(self.engine, |tx| ops::dreams::start(&Pg(&tx), ws, id, holder, &session, work_ttl).await)
    }

    async fn copy_dream_input(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        actor: mnemo_api::Actor,
        max_bytes: u64,
    ) -> Result<ops::dreams::Copied> {
        let cap = self.limits.max_memories_per_store;
        write!(self.engine, |tx| ops::dreams::copy_input(&Pg(&tx), ws, id, holder, &actor, max_bytes, cap).await)
    }

    async fn set_dream_usage(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        usage: mnemo_api::DreamUsage,
    ) -> Result<mnemo_api::Dream> {
        write!(self.engine, |tx| ops::dreams::set_usage(&Pg(&tx), ws, id, usage).await)
    }

    async fn dream_verification(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        start_memories: u64,
    ) -> Result<mnemo_store::rules::dream::Verification> {
        write!(self.engine, |tx| ops::dreams::verification(&Pg(&tx), ws, id, start_memories).await)
    }

    async fn finish_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        outcome: mnemo_store::rules::dream::Outcome,
    ) -> Result<mnemo_api::Dream> {
        write!(self.engine, |tx| ops::dreams::finish(&Pg(&tx), ws, id, holder, outcome.clone()).await)
    }

    async fn store_retention(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
    ) -> Result<Option<mnemo_store::rules::retention::Retention>> {
        read!(self.engine, |tx| ops::retention::get(&Pg(&tx), ws, id).await)
    }

    async fn set_store_retention(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        own: Option<mnemo_store::rules::retention::Retention>,
    ) -> Result<Option<mnemo_store::rules::retention::Retention>> {
        write!(self.engine, |tx| ops::retention::set(&Pg(&tx), ws, id, own).await)
    }

    async fn retention_stores(&self) -> Result<Vec<ops::retention::RetentionStore>> {
        read!(self.engine, |tx| ops::retention::stores(&Pg(&tx)).await)
    }

    async fn purge_versions(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        retention: mnemo_store::rules::retention::Retention,
        after: i64,
        limit: u32,
    ) -> Result<Option<ops::retention::PurgeBatch>> {
        write!(self.engine, |tx| ops::retention::purge_batch(&Pg(&tx), ws, id, retention, after, limit).await)
    }

    async fn search_memories(
        &self,
        ws: &WorkspaceId,
        request: mnemo_store::search::SearchMemories,
    ) -> Result<Listing<mnemo_api::MemorySearchResult>> {
        read!(self.engine, |tx| memories::search(&tx, ws, &request).await)
    }

    async fn catch_up_search_index(&self) -> Result<u64> {
        search_index::catch_up(&self.engine).await
    }

    async fn rank_by_meaning(
        &self,
        ws: &WorkspaceId,
        query: ops::embeddings::MeaningQuery,
    ) -> Result<ops::embeddings::MeaningRanking> {
        read!(self.engine, |tx| ops::embeddings::rank(&Pg(&tx), ws, &query).await)
    }

    async fn pending_embeddings(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<ops::embeddings::PendingEmbedding>> {
        read!(self.engine, |tx| ops::embeddings::pending(&Pg(&tx), model, after, limit).await)
    }

    async fn put_embeddings(&self, model: &str, made: Vec<(i64, i64, Option<Vec<u8>>)>) -> Result<usize> {
        write!(self.engine, |tx| ops::embeddings::put(&Pg(&tx), model, &made).await)
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

    async fn redact_memory_version(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryVersionId,
        actor: Actor,
    ) -> Result<MemoryVersion> {
        write!(self.engine, |tx| ops::versions::redact(&Pg(&tx), ws, store, id, &actor).await)
    }

    async fn create_console_session(
        &self,
        hash: CredentialHash,
        api_key: &ApiKeyId,
        ttl_seconds: u64,
    ) -> Result<ConsoleSession> {
        write!(self.engine, |tx| ops::console::create(&Pg(&tx), &hash, api_key, ttl_seconds).await)
    }

    async fn find_console_session(&self, hash: CredentialHash) -> Result<Option<ConsoleSession>> {
        read!(self.engine, |tx| ops::console::find(&Pg(&tx), &hash).await)
    }

    async fn revoke_console_session(&self, hash: CredentialHash) -> Result<()> {
        write!(self.engine, |tx| {
            if ops::console::revoke(&Pg(&tx), &hash).await? {
                credentials_changed(self, &tx).await?;
            }
            Ok(())
        })
    }
    async fn create_webhook_endpoint(&self, ws: &WorkspaceId, new: NewWebhookEndpoint) -> Result<WebhookEndpoint> {
        write!(self.engine, |tx| ops::webhooks::create_endpoint(&Pg(&tx), ws, &new).await)
    }

    async fn get_webhook_endpoint(
        &self,
        ws: &WorkspaceId,
        id: &WebhookEndpointId,
        with_secret: bool,
    ) -> Result<WebhookEndpoint> {
        read!(self.engine, |tx| ops::webhooks::get_endpoint(&Pg(&tx), ws, id, with_secret).await)
    }

    async fn rotate_webhook_secret(
        &self,
        ws: &WorkspaceId,
        id: &WebhookEndpointId,
        secret: String,
        keep_previous: Duration,
    ) -> Result<WebhookEndpoint> {
        write!(self.engine, |tx| ops::webhooks::rotate_secret(&Pg(&tx), ws, id, &secret, keep_previous).await)
    }

    async fn update_webhook_endpoint(
        &self,
        ws: &WorkspaceId,
        id: &WebhookEndpointId,
        patch: WebhookEndpointPatch,
    ) -> Result<WebhookEndpoint> {
        write!(self.engine, |tx| ops::webhooks::update_endpoint(&Pg(&tx), ws, id, patch.clone()).await)
    }

    async fn list_webhook_endpoints(
        &self,
        ws: &WorkspaceId,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<WebhookEndpoint>> {
        read!(self.engine, |tx| ops::webhooks::list_endpoints(&Pg(&tx), ws, limit, after.as_ref()).await)
    }

    async fn delete_webhook_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<()> {
        write!(self.engine, |tx| ops::webhooks::delete_endpoint(&Pg(&tx), ws, id).await)
    }

    async fn list_webhook_deliveries(
        &self,
        ws: &WorkspaceId,
        endpoint: &WebhookEndpointId,
        query: ListWebhookDeliveries,
    ) -> Result<Listing<WebhookDelivery>> {
        read!(self.engine, |tx| ops::webhooks::list_deliveries(&Pg(&tx), ws, endpoint, &query).await)
    }

    async fn claim_webhook_deliveries(&self, limit: u32, lease: Duration) -> Result<Vec<ClaimedDelivery>> {
        write!(self.engine, |tx| ops::webhooks::claim(&Pg(&tx), limit, lease).await)
    }

    async fn next_webhook_attempt_in(&self) -> Result<Option<Duration>> {
        read!(self.engine, |tx| ops::webhooks::next_due_in(&Pg(&tx)).await)
    }

    async fn finish_webhook_attempt(&self, attempt: WebhookAttempt) -> Result<bool> {
        write!(self.engine, |tx| ops::webhooks::finish_attempt(&Pg(&tx), &attempt).await)
    }

    async fn prune_webhook_deliveries(&self, age: Duration) -> Result<u64> {
        write!(self.engine, |tx| ops::webhooks::prune(&Pg(&tx), age).await)
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
