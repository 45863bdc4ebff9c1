//! The embedded SQLite backend of [`mnemo_store::Store`].
//!
//! One database file in write-ahead-logging mode. Writes run on one thread and are group
//! committed (see `engine`); reads run on a small pool of read-only connections. The schema
//! lives in `migrations/` and is applied on open. [`backup()`] and [`check()`] are `mnemo db
//! backup` and `mnemo db check`: they open the file themselves, beside any server using it.

mod agents;
mod audit;
mod backup;
mod check;
mod console;
mod copy;
mod credentials;
mod dreams;
mod embeddings;
mod engine;
mod environments;
mod events;
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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use mnemo_api::{
    Actor, ApiKeyId, Environment, EnvironmentId, EnvironmentKey, EnvironmentKeyId, Memory, MemoryId, MemoryListItem,
    MemoryPath, MemoryStore, MemoryStoreId, MemoryVersion, MemoryVersionId, View,
};
use std::collections::{BTreeMap, HashMap};

use mnemo_api::{
    Access, Agent, AgentId, AgentParams, AgentSpec, Event, Session, SessionId, Work, WorkId, WorkQueueStats,
};
use mnemo_api::{AdminKeyId, WebhookDelivery, WebhookEndpoint, WebhookEndpointId, WorkspaceId};
use mnemo_store::Principal;
use mnemo_store::{Appended, EventAuthor, HeartbeatOutcome, ListEvents, ListSessions, NewSession, SessionEvent};
use mnemo_store::{ClaimedDelivery, ListWebhookDeliveries, NewWebhookEndpoint, WebhookAttempt, WebhookEndpointPatch};
use mnemo_store::{
    ConsoleSession, CredentialHash, Cursor, EnvironmentPatch, Limits, ListMemories, ListMemoryStores,
    ListMemoryVersions, Listing, MemoryChange, MemoryExport, MemoryFeedEntry, MemoryStorePatch, MemoryStoreUsage,
    MemoryWriteOp, NewEnvironment, NewMemoryStore, Result, Signal, Store,
};
use tokio::sync::broadcast;

pub use crate::backup::{BackupError, BackupOptions, BackupReport, backup};
pub use crate::check::{Check, CheckError, CheckReport, Counts, Findings, Outcome, check};
use crate::engine::{Engine, Lite, backend, failure};
use mnemo_store::ops::{self, SessionRowSql, run_ready};

/// How hard a commit tries to reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous=FULL`: a commit survives power loss (the default).
    #[default]
    Full,
    /// `synchronous=NORMAL`: a commit survives a process crash but possibly not power loss.
    Normal,
}

/// Where and how to open the database.
#[derive(Debug, Clone)]
pub struct SqliteSettings {
    pub path: PathBuf,
    pub durability: Durability,
    pub limits: Limits,
    /// What SQLite may hold in this process, in bytes (page caches and statements of every
    /// connection; one limit per process): past it, connections reuse cache pages.
    pub memory_limit: i64,
}

/// The default of [`SqliteSettings::memory_limit`]: 64 MiB.
pub const DEFAULT_MEMORY_LIMIT: i64 = 64 << 20;
/// The bounds of `?memory_mib=` on an `sqlite://` URL.
const MEMORY_MIB: std::ops::RangeInclusive<i64> = 4..=65_536;

impl SqliteSettings {
    /// Parses `sqlite://PATH`, `sqlite:PATH` or `sqlite:///ABS/PATH`, optionally followed by
    /// `?synchronous=full|normal` and `&memory_mib=N` (SQLite's memory bound, 4–65,536 MiB).
    pub fn from_url(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .ok_or_else(|| format!("`{url}` is not an sqlite:// URL"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() {
            return Err("the sqlite:// URL names no file (use sqlite://PATH)".into());
        }
        let mut durability = Durability::Full;
        let mut memory_limit = DEFAULT_MEMORY_LIMIT;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("memory_mib", v)) => {
                    memory_limit = v.parse::<i64>().ok().filter(|n| MEMORY_MIB.contains(n)).ok_or_else(|| {
                        format!(
                            "sqlite:// option memory_mib must be a whole number of MiB from {} to {}, got `{v}`",
                            MEMORY_MIB.start(),
                            MEMORY_MIB.end()
                        )
                    })? << 20;
                }
                Some(("synchronous", v)) if v.eq_ignore_ascii_case("full") => durability = Durability::Full,
                Some(("synchronous", v)) if v.eq_ignore_ascii_case("normal") => {
                    durability = Durability::Normal;
                }
                _ => {
                    return Err(format!(
                        "unknown sqlite:// option `{pair}` (known: synchronous=full|normal, memory_mib=N)"
                    ));
                }
            }
        }
        Ok(Self { path: PathBuf::from(path), durability, limits: Limits::default(), memory_limit })
    }
}

/// A [`Store`] in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    engine: Arc<Engine>,
    limits: Limits,
    /// Memory changes, sent once their write committed (this process makes every change).
    memory_signals: broadcast::Sender<Signal>,
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database.
    pub fn open(settings: &SqliteSettings) -> Result<Self> {
        if let Some(parent) = settings.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| failure(format!("create {}: {e}", parent.display())))?;
        }
        let engine = Engine::start(&settings.path, settings.durability, settings.memory_limit)?;
        Ok(Self { engine, limits: settings.limits, memory_signals: broadcast::channel(MEMORY_SIGNALS).0 })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        self.engine.path()
    }

    /// Finishes queued writes and closes the database (blocking; [`Store::close`] is the
    /// async form).
    pub fn close_blocking(&self) {
        self.engine.shutdown();
    }
}

/// Memory signals buffered for slow subscribers (one that falls behind re-checks everything).
const MEMORY_SIGNALS: usize = 4096;

impl SqliteStore {
    /// Tells subscribers that a version at `seq` committed in `store` (called after the write
    /// returned, so after its commit).
    fn memory_changed(&self, store: &MemoryStoreId, seq: i64) {
        let _ = self.memory_signals.send(Signal::Memory { store: store.clone(), seq });
        self.poke_indexer();
    }

    /// Tells the search indexer that memories wait for it.
    fn poke_indexer(&self) {
        if let Some(index) = self.engine.index.lock().expect("index lock poisoned").as_ref() {
            index.poke();
        }
    }
}

pub(crate) fn now_micros() -> i64 {
    Utc::now().timestamp_micros()
}

/// RFC 3339 text in UTC with microseconds, for the API's string-typed timestamps.
pub(crate) use mnemo_api::rfc3339_micros as rfc3339;
pub(crate) use mnemo_store::row::{actor_columns, actor_from_columns, parse_id, rfc3339_opt, ts, ts_opt};

#[async_trait]
impl Store for SqliteStore {
    fn memory_signals(&self) -> broadcast::Receiver<Signal> {
        self.memory_signals.subscribe()
    }

    async fn close(&self) {
        let engine = Arc::clone(&self.engine);
        // Joining the writer thread blocks; keep it off the async workers.
        let _ = tokio::task::spawn_blocking(move || engine.shutdown()).await;
    }

    async fn find_api_key(&self, hash: CredentialHash) -> Result<Option<ApiKeyId>> {
        self.engine.read(move |c| run_ready(ops::credentials::find_api_key(&Lite(c), &hash))).await
    }

    async fn ensure_api_key(&self, hash: CredentialHash, label: &str) -> Result<ApiKeyId> {
        let label = label.to_owned();
        self.engine.write(move |c| run_ready(ops::credentials::ensure_api_key(&Lite(c), &hash, &label))).await
    }

    async fn ensure_api_key_in(&self, ws: &WorkspaceId, hash: CredentialHash, label: &str) -> Result<ApiKeyId> {
        let (ws, label) = (ws.clone(), label.to_owned());
        self.engine.write(move |c| run_ready(ops::credentials::ensure_api_key_in(&Lite(c), &ws, &hash, &label))).await
    }

    async fn count_api_keys(&self) -> Result<u64> {
        self.engine.read(|c| run_ready(ops::credentials::count_api_keys(&Lite(c)))).await
    }

    async fn ensure_admin_key(&self, hash: CredentialHash, name: &str) -> Result<AdminKeyId> {
        let name = name.to_owned();
        self.engine.write(move |c| run_ready(ops::credentials::ensure_admin_key(&Lite(c), &hash, &name))).await
    }

    async fn resolve_credential(&self, hash: CredentialHash) -> Result<Option<Principal>> {
        self.engine.read(move |c| run_ready(ops::credentials::resolve_credential(&Lite(c), &hash))).await
    }

    async fn default_workspace(&self) -> Result<WorkspaceId> {
        self.engine.read(|c| run_ready(ops::CredentialSql::default_workspace(&Lite(c)))).await
    }

    async fn create_workspace(&self, name: &str) -> Result<WorkspaceId> {
        let name = name.to_owned();
        self.engine.write(move |c| run_ready(ops::workspaces::create(&Lite(c), &name))).await
    }

    async fn organization(&self) -> Result<mnemo_api::Organization> {
        self.engine.read(|c| run_ready(ops::workspaces::organization(&Lite(c)))).await
    }

    async fn rename_organization(&self, name: &str) -> Result<mnemo_api::Organization> {
        let name = name.to_owned();
        self.engine.write(move |c| run_ready(ops::workspaces::rename_organization(&Lite(c), &name))).await
    }

    async fn create_workspace_with(&self, new: mnemo_api::NewWorkspace, max: u32) -> Result<mnemo_api::Workspace> {
        self.engine.write(move |c| run_ready(ops::workspaces::create_workspace(&Lite(c), &new, max))).await
    }

    async fn get_workspace(&self, id: &WorkspaceId) -> Result<mnemo_api::Workspace> {
        let id = id.clone();
        self.engine.read(move |c| run_ready(ops::workspaces::get(&Lite(c), &id))).await
    }

    async fn update_workspace(
        &self,
        id: &WorkspaceId,
        body: mnemo_api::WorkspaceUpdate,
    ) -> Result<mnemo_api::Workspace> {
        let id = id.clone();
        self.engine.write(move |c| run_ready(ops::workspaces::update(&Lite(c), &id, &body))).await
    }

    async fn list_workspaces(
        &self,
        query: ops::workspaces::ListWorkspaces,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::Workspace>> {
        self.engine.read(move |c| run_ready(ops::workspaces::list(&Lite(c), &query))).await
    }

    async fn archive_workspace(&self, id: &WorkspaceId) -> Result<mnemo_api::Workspace> {
        let id = id.clone();
        let (workspace, _) = self.engine.write(move |c| run_ready(ops::workspaces::archive(&Lite(c), &id))).await?;
        Ok(workspace)
    }

    async fn workspace_rate_limits(&self, id: &WorkspaceId) -> Result<ops::workspaces::Overrides> {
        let id = id.clone();
        self.engine.read(move |c| run_ready(ops::workspaces::overrides(&Lite(c), &id))).await
    }

    async fn update_workspace_rate_limits(
        &self,
        id: &WorkspaceId,
        entry: mnemo_store::rules::rate_limit::Entry,
        body: mnemo_api::RateLimitUpdate,
    ) -> Result<BTreeMap<mnemo_api::LimiterType, u64>> {
        let id = id.clone();
        self.engine.write(move |c| run_ready(ops::workspaces::update_overrides(&Lite(c), &id, &entry, &body))).await
    }

    async fn create_api_key(
        &self,
        new: mnemo_api::NewApiKey,
        hash: CredentialHash,
        hint: &str,
        created_by: Option<&str>,
    ) -> Result<mnemo_api::ApiKey> {
        let (hint, created_by) = (hint.to_owned(), created_by.map(str::to_owned));
        self.engine
            .write(move |c| {
                run_ready(ops::credentials::create_api_key(&Lite(c), &new, &hash, &hint, created_by.as_deref()))
            })
            .await
    }

    async fn get_api_key(&self, id: &ApiKeyId) -> Result<mnemo_api::ApiKey> {
        let id = id.clone();
        self.engine.read(move |c| run_ready(ops::credentials::get_api_key(&Lite(c), &id))).await
    }

    async fn list_api_keys(
        &self,
        query: ops::credentials::ListApiKeys,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::ApiKey>> {
        self.engine.read(move |c| run_ready(ops::credentials::list_api_keys(&Lite(c), &query))).await
    }

    async fn update_api_key(&self, id: &ApiKeyId, body: mnemo_api::ApiKeyUpdate) -> Result<(mnemo_api::ApiKey, bool)> {
        let id = id.clone();
        self.engine.write(move |c| run_ready(ops::credentials::update_api_key(&Lite(c), &id, &body))).await
    }

    async fn count_admin_keys(&self) -> Result<u64> {
        self.engine.read(|c| run_ready(ops::CredentialSql::count_live_admin_keys(&Lite(c)))).await
    }

    async fn create_invite(
        &self,
        new: mnemo_api::NewInvite,
        hash: CredentialHash,
        ttl_secs: u64,
    ) -> Result<mnemo_api::Invite> {
        self.engine.write(move |c| run_ready(ops::people::create_invite(&Lite(c), &new, &hash, ttl_secs))).await
    }

    async fn get_invite(&self, id: &mnemo_api::InviteId) -> Result<mnemo_api::Invite> {
        let id = id.clone();
        self.engine.read(move |c| run_ready(ops::people::get_invite(&Lite(c), &id))).await
    }

    async fn list_invites(&self, query: ops::people::ListInvites) -> Result<mnemo_api::AdminPage<mnemo_api::Invite>> {
        self.engine.read(move |c| run_ready(ops::people::list_invites(&Lite(c), &query))).await
    }

    async fn delete_invite(&self, id: &mnemo_api::InviteId) -> Result<mnemo_api::InviteDeleted> {
        let id = id.clone();
        self.engine.write(move |c| run_ready(ops::people::delete_invite(&Lite(c), &id))).await
    }

    async fn get_user(&self, id: &mnemo_api::UserId) -> Result<mnemo_api::User> {
        let id = id.clone();
        self.engine.read(move |c| run_ready(ops::people::get_user(&Lite(c), &id))).await
    }

    async fn list_users(&self, query: ops::people::ListUsers) -> Result<mnemo_api::AdminPage<mnemo_api::User>> {
        self.engine.read(move |c| run_ready(ops::people::list_users(&Lite(c), &query))).await
    }

    async fn update_user(
        &self,
        id: &mnemo_api::UserId,
        role: mnemo_api::OrgRole,
        via: mnemo_store::rules::people::Via,
    ) -> Result<mnemo_api::User> {
        let id = id.clone();
        self.engine.write(move |c| run_ready(ops::people::update_user(&Lite(c), &id, role, via))).await
    }

    async fn remove_user(
        &self,
        id: &mnemo_api::UserId,
        via: mnemo_store::rules::people::Via,
    ) -> Result<mnemo_api::UserDeleted> {
        let id = id.clone();
        self.engine.write(move |c| run_ready(ops::people::remove_user(&Lite(c), &id, via))).await
    }

    async fn sign_out_user(&self, id: &mnemo_api::UserId) -> Result<mnemo_api::User> {
        let id = id.clone();
        self.engine.write(move |c| run_ready(ops::people::sign_out_user(&Lite(c), &id)).map(|(user, _)| user)).await
    }

    async fn create_person_session(
        &self,
        hash: CredentialHash,
        user: &mnemo_api::UserId,
        ttl_seconds: u64,
    ) -> Result<mnemo_store::PersonSession> {
        let user = user.clone();
        self.engine
            .write(move |c| run_ready(ops::people::create_person_session(&Lite(c), &hash, &user, ttl_seconds)))
            .await
    }

    async fn sign_in_candidate(&self, email: String) -> Result<Option<(mnemo_api::User, Option<String>)>> {
        self.engine.read(move |c| run_ready(ops::people::sign_in_candidate(&Lite(c), &email))).await
    }

    async fn person_sessions(&self, user: &mnemo_api::UserId) -> Result<Vec<mnemo_store::PersonSessionTimes>> {
        let user = user.clone();
        self.engine.read(move |c| run_ready(ops::people::person_sessions(&Lite(c), &user))).await
    }

    async fn find_person_session(&self, hash: CredentialHash) -> Result<Option<mnemo_store::PersonSession>> {
        self.engine.read(move |c| run_ready(ops::people::find_person_session(&Lite(c), &hash))).await
    }

    async fn revoke_person_session(&self, hash: CredentialHash) -> Result<()> {
        self.engine.write(move |c| run_ready(ops::people::revoke_person_session(&Lite(c), &hash)).map(drop)).await
    }

    async fn add_member(&self, ws: &WorkspaceId, body: mnemo_api::MemberAdd) -> Result<mnemo_api::WorkspaceMember> {
        let ws = ws.clone();
        self.engine.write(move |c| run_ready(ops::people::add_member(&Lite(c), &ws, &body))).await
    }

    async fn person_principal(
        &self,
        user: &mnemo_api::UserId,
        workspace: Option<&WorkspaceId>,
    ) -> Result<mnemo_store::Principal> {
        let (user, ws) = (user.clone(), workspace.cloned());
        self.engine.read(move |c| run_ready(ops::people::person_principal(&Lite(c), &user, ws.as_ref()))).await
    }

    async fn person_workspaces(
        &self,
        user: &mnemo_api::UserId,
    ) -> Result<Vec<(mnemo_api::Workspace, mnemo_api::WorkspaceRole)>> {
        let user = user.clone();
        self.engine.read(move |c| run_ready(ops::people::workspaces_of(&Lite(c), &user))).await
    }

    async fn get_member(&self, ws: &WorkspaceId, user: &mnemo_api::UserId) -> Result<mnemo_api::WorkspaceMember> {
        let (ws, user) = (ws.clone(), user.clone());
        self.engine.read(move |c| run_ready(ops::people::get_member(&Lite(c), &ws, &user))).await
    }

    async fn update_member(
        &self,
        ws: &WorkspaceId,
        user: &mnemo_api::UserId,
        role: String,
    ) -> Result<mnemo_api::WorkspaceMember> {
        let (ws, user) = (ws.clone(), user.clone());
        self.engine.write(move |c| run_ready(ops::people::update_member(&Lite(c), &ws, &user, &role))).await
    }

    async fn remove_member(
        &self,
        ws: &WorkspaceId,
        user: &mnemo_api::UserId,
    ) -> Result<mnemo_api::WorkspaceMemberDeleted> {
        let (ws, user) = (ws.clone(), user.clone());
        self.engine.write(move |c| run_ready(ops::people::remove_member(&Lite(c), &ws, &user))).await
    }

    async fn invite_by_link(&self, hash: CredentialHash) -> Result<Option<mnemo_api::Invite>> {
        self.engine.read(move |c| run_ready(ops::people::invite_by_link(&Lite(c), &hash))).await
    }

    async fn accept_invite(&self, hash: CredentialHash, joining: ops::people::Joining) -> Result<mnemo_api::User> {
        self.engine.write(move |c| run_ready(ops::people::accept_invite(&Lite(c), &hash, &joining))).await
    }

    async fn setup_wanted(&self) -> Result<bool> {
        self.engine.read(|c| run_ready(ops::people::setup_wanted(&Lite(c)))).await
    }

    async fn sso_sign_in(
        &self,
        identity: ops::sso::SsoIdentity,
        grants: mnemo_store::rules::sso::Grants<WorkspaceId>,
    ) -> Result<ops::sso::SsoSignIn> {
        self.engine.write(move |c| run_ready(ops::sso::sign_in(&Lite(c), &identity, &grants))).await
    }

    async fn sso_person(
        &self,
        issuer: String,
        subject: String,
    ) -> Result<Option<(mnemo_api::User, mnemo_store::rules::sso::Grants<WorkspaceId>)>> {
        self.engine
            .read(move |c| {
                run_ready(async {
                    let sql = Lite(c);
                    let Some(user) = ops::sso::person(&sql, &issuer, &subject).await? else { return Ok(None) };
                    let grants = ops::sso::current_grants(&sql, &user.id).await?;
                    Ok(Some((user, grants)))
                })
            })
            .await
    }

    async fn create_setup_link(&self, hash: CredentialHash, ttl_secs: u64) -> Result<()> {
        self.engine.write(move |c| run_ready(ops::people::create_setup_link(&Lite(c), &hash, ttl_secs))).await
    }

    async fn setup_link_usable(&self, hash: CredentialHash) -> Result<bool> {
        self.engine.read(move |c| run_ready(ops::people::setup_link_usable(&Lite(c), &hash))).await
    }

    async fn use_setup_link(
        &self,
        hash: CredentialHash,
        email: String,
        joining: ops::people::Joining,
    ) -> Result<mnemo_api::User> {
        self.engine.write(move |c| run_ready(ops::people::use_setup_link(&Lite(c), &hash, &email, &joining))).await
    }

    async fn list_members(
        &self,
        ws: &WorkspaceId,
        page: mnemo_api::AdminPageQuery,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::WorkspaceMember>> {
        let ws = ws.clone();
        self.engine.read(move |c| run_ready(ops::people::list_members(&Lite(c), &ws, &page))).await
    }

    async fn take_rate_limit(
        &self,
        ws: &WorkspaceId,
        entry: &str,
        limiter: &mnemo_api::LimiterType,
        capacity: u64,
        draw: mnemo_store::rules::rate_limit::Draw,
    ) -> Result<mnemo_store::rules::rate_limit::Outcome> {
        let (ws, entry, limiter) = (ws.clone(), entry.to_owned(), limiter.clone());
        self.engine
            .write(move |c| {
                let key = ops::BucketKey { workspace: &ws, entry: &entry, limiter: &limiter };
                run_ready(ops::rate_limits::take(&Lite(c), key, capacity, draw))
            })
            .await
    }

    async fn record_audit_event(&self, event: ops::NewAuditEvent) -> Result<mnemo_api::AuditEventId> {
        self.engine.write(move |c| run_ready(ops::audit::record(&Lite(c), event))).await
    }

    async fn list_audit_events(
        &self,
        filter: ops::AuditFilter,
        page: mnemo_api::AdminPageQuery,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::AuditEvent>> {
        self.engine.read(move |c| run_ready(ops::audit::list(&Lite(c), &filter, &page))).await
    }

    async fn prune_audit_events(&self, days: u32) -> Result<u64> {
        self.engine.write(move |c| run_ready(ops::audit::prune(&Lite(c), days))).await
    }

    async fn create_environment(&self, ws: &WorkspaceId, new: NewEnvironment) -> Result<Environment> {
        let ws = ws.clone();
        self.engine.write(move |c| run_ready(ops::environments::create(&Lite(c), &ws, &new))).await
    }

    async fn get_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Environment> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| run_ready(ops::environments::get(&Lite(c), &ws, &id))).await
    }

    async fn update_environment(
        &self,
        ws: &WorkspaceId,
        id: &EnvironmentId,
        patch: EnvironmentPatch,
    ) -> Result<Environment> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::environments::update(&Lite(c), &ws, &id, patch))).await
    }

    async fn list_environments(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Environment>> {
        let ws = ws.clone();
        self.engine.read(move |c| environments::list(c, &ws, include_archived, limit, after.as_ref())).await
    }

    async fn archive_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Environment> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::environments::archive(&Lite(c), &ws, &id))).await
    }

    async fn delete_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<()> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::environments::delete(&Lite(c), &ws, &id))).await
    }

    async fn create_environment_key(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        hash: CredentialHash,
    ) -> Result<EnvironmentKey> {
        let (ws, environment) = (ws.clone(), environment.clone());
        self.engine.write(move |c| run_ready(ops::environments::create_key(&Lite(c), &ws, &environment, &hash))).await
    }

    async fn revoke_environment_key(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        id: &EnvironmentKeyId,
    ) -> Result<EnvironmentKey> {
        let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::environments::revoke_key(&Lite(c), &ws, &environment, &id))).await
    }

    async fn list_environment_keys(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
    ) -> Result<Vec<EnvironmentKey>> {
        let (ws, environment) = (ws.clone(), environment.clone());
        self.engine.read(move |c| run_ready(ops::environments::list_keys(&Lite(c), &ws, &environment))).await
    }

    async fn create_agent(&self, ws: &WorkspaceId, spec: AgentSpec) -> Result<Agent> {
        let ws = ws.clone();
        self.engine.write(move |c| run_ready(ops::agents::create(&Lite(c), &ws, &spec))).await
    }

    async fn get_agent(&self, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| agents::get(c, &ws, &id, version)).await
    }

    async fn update_agent(&self, ws: &WorkspaceId, id: &AgentId, base: u32, params: AgentParams) -> Result<Agent> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::agents::update(&Lite(c), &ws, &id, base, &params))).await
    }

    async fn list_agents(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Agent>> {
        let ws = ws.clone();
        self.engine.read(move |c| agents::list(c, &ws, include_archived, limit, after.as_ref())).await
    }

    async fn archive_agent(&self, ws: &WorkspaceId, id: &AgentId) -> Result<Agent> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::agents::archive(&Lite(c), &ws, &id))).await
    }

    async fn create_session(&self, ws: &WorkspaceId, new: NewSession) -> Result<Session> {
        let ttl = self.limits.work_lease_ttl_seconds;
        let ws = ws.clone();
        self.engine
            .write(move |c| run_ready(ops::sessions::create(&Lite(c), &ws, &new, ttl)).map(|created| created.session))
            .await
    }

    async fn get_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| sessions::get_with_seq(c, &ws, &id).map(|(s, _)| s)).await
    }

    async fn update_session(
        &self,
        ws: &WorkspaceId,
        id: &SessionId,
        title: Option<Option<String>>,
        metadata: Option<BTreeMap<String, Option<String>>>,
    ) -> Result<Session> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::sessions::update(&Lite(c), &ws, &id, title, metadata.as_ref()))).await
    }

    async fn list_sessions(&self, ws: &WorkspaceId, query: ListSessions) -> Result<Listing<Session>> {
        let ws = ws.clone();
        self.engine.read(move |c| sessions::list(c, &ws, &query)).await
    }

    async fn list_turn_sessions(
        &self,
        statuses: Vec<String>,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<(WorkspaceId, SessionId)>> {
        self.engine.read(move |c| sessions::list_turn_sessions(c, &statuses, limit, after.as_ref())).await
    }

    async fn session_workspace(&self, id: &SessionId) -> Result<Option<WorkspaceId>> {
        let id = id.clone();
        self.engine.read(move |c| sessions::workspace_of(c, &id)).await
    }

    async fn archive_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::sessions::archive(&Lite(c), &ws, &id))).await
    }

    async fn delete_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<()> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::sessions::delete(&Lite(c), &ws, &id))).await
    }

    async fn list_events(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        query: ListEvents,
    ) -> Result<Listing<SessionEvent>> {
        let (ws, session) = (ws.clone(), session.clone());
        self.engine.read(move |c| events::list(c, &ws, &session, &query)).await
    }

    async fn events_after(&self, ws: &WorkspaceId, session: &SessionId, seq: i64) -> Result<Vec<SessionEvent>> {
        let (ws, session) = (ws.clone(), session.clone());
        self.engine.read(move |c| events::after(c, &ws, &session, seq)).await
    }

    async fn append_events(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        events: Vec<Event>,
        author: EventAuthor,
    ) -> Result<Appended> {
        let (ws, session) = (ws.clone(), session.clone());
        let ttl = self.limits.work_lease_ttl_seconds;
        self.engine.write(move |c| events::append(c, &ws, &session, events, &author, ttl)).await
    }

    async fn claim_turn(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool> {
        let (ws, session, holder) = (ws.clone(), session.clone(), holder.to_owned());
        let ttl = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
        self.engine.write(move |c| run_ready(ops::sessions::claim_turn(&Lite(c), &ws, &session, &holder, ttl))).await
    }

    async fn release_turn(&self, ws: &WorkspaceId, session: &SessionId, holder: &str) -> Result<()> {
        let (ws, session, holder) = (ws.clone(), session.clone(), holder.to_owned());
        self.engine.write(move |c| run_ready(ops::sessions::release_turn(&Lite(c), &ws, &session, &holder))).await
    }

    async fn session_store_access(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        store: &MemoryStoreId,
    ) -> Result<Option<Access>> {
        let (ws, session, store) = (ws.clone(), session.clone(), store.clone());
        self.engine.read(move |c| run_ready(Lite(c).store_access(&ws, &session, &store))).await
    }

    async fn poll_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        worker_id: Option<String>,
        reclaim_ms: u64,
        token_hash: CredentialHash,
    ) -> Result<Option<Work>> {
        let (ws, environment) = (ws.clone(), environment.clone());
        self.engine
            .write(move |c| {
                run_ready(ops::work::poll(
                    &crate::engine::Lite(c),
                    &ws,
                    &environment,
                    worker_id.as_deref(),
                    reclaim_ms,
                    &token_hash,
                ))
            })
            .await
    }

    async fn expire_work(&self) -> Result<u64> {
        self.engine.write(|c| run_ready(ops::work::expire_all(&Lite(c)))).await
    }

    async fn next_work_lapse(&self) -> Result<Option<std::time::Duration>> {
        self.engine.read(|c| run_ready(ops::work::next_lapse(&Lite(c)))).await
    }

    async fn enqueue_healthcheck(&self, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<Work> {
        let (ws, environment) = (ws.clone(), environment.clone());
        let ttl = self.limits.work_lease_ttl_seconds;
        self.engine
            .write(move |c| run_ready(ops::work::enqueue_healthcheck(&crate::engine::Lite(c), &ws, &environment, ttl)))
            .await
    }

    async fn ack_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work> {
        let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::work::ack(&Lite(c), &ws, &environment, &id))).await
    }

    async fn heartbeat_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        id: &WorkId,
        expected_last_heartbeat: &str,
        desired_ttl_seconds: Option<u64>,
    ) -> Result<HeartbeatOutcome> {
        let (ws, environment, id, expected) =
            (ws.clone(), environment.clone(), id.clone(), expected_last_heartbeat.to_owned());
        self.engine
            .write(move |c| {
                run_ready(ops::work::heartbeat(
                    &crate::engine::Lite(c),
                    &ws,
                    &environment,
                    &id,
                    &expected,
                    desired_ttl_seconds,
                ))
            })
            .await
    }

    async fn stop_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId, force: bool) -> Result<Work> {
        let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
        self.engine
            .write(move |c| run_ready(ops::work::stop(&crate::engine::Lite(c), &ws, &environment, &id, force)))
            .await
    }

    async fn get_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work> {
        let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
        self.engine.read(move |c| run_ready(ops::work::get(&Lite(c), &ws, &environment, &id))).await
    }

    async fn update_work_metadata(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        id: &WorkId,
        patch: BTreeMap<String, Option<String>>,
    ) -> Result<Work> {
        let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
        self.engine
            .write(move |c| {
                run_ready(ops::work::update_metadata(&crate::engine::Lite(c), &ws, &environment, &id, &patch))
            })
            .await
    }

    async fn list_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Work>> {
        let (ws, environment) = (ws.clone(), environment.clone());
        self.engine.read(move |c| work::list(c, &ws, &environment, limit, after.as_ref())).await
    }

    async fn work_stats(&self, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<WorkQueueStats> {
        let (ws, environment) = (ws.clone(), environment.clone());
        self.engine.read(move |c| run_ready(ops::work::stats(&Lite(c), &ws, &environment))).await
    }

    async fn create_memory_store(&self, ws: &WorkspaceId, new: NewMemoryStore) -> Result<MemoryStore> {
        let ws = ws.clone();
        self.engine.write(move |c| run_ready(ops::stores::create_store(&Lite(c), &ws, new))).await
    }

    async fn get_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| stores::get(c, &ws, &id)).await
    }

    async fn update_memory_store(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        patch: MemoryStorePatch,
    ) -> Result<MemoryStore> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::stores::update_store(&Lite(c), &ws, &id, patch))).await
    }

    async fn list_memory_stores(&self, ws: &WorkspaceId, query: ListMemoryStores) -> Result<Listing<MemoryStore>> {
        let ws = ws.clone();
        self.engine.read(move |c| stores::list(c, &ws, &query)).await
    }

    async fn memory_store_usage(
        &self,
        ws: &WorkspaceId,
        stores: &[MemoryStoreId],
    ) -> Result<HashMap<MemoryStoreId, MemoryStoreUsage>> {
        let (ws, ids) = (ws.clone(), stores.to_vec());
        self.engine.read(move |c| stores::usage(c, &ws, &ids)).await
    }

    async fn archive_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::stores::archive_store(&Lite(c), &ws, &id))).await
    }

    async fn delete_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<()> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::stores::delete_store(&Lite(c), &ws, &id))).await?;
        // Feeds of the store re-check, find it gone and end.
        let _ = self.memory_signals.send(Signal::Resync);
        // Its memories wait to leave the index: the indexer takes them out now, not at a sweep.
        self.poke_indexer();
        Ok(())
    }

    async fn create_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        path: MemoryPath,
        content: String,
        actor: Actor,
    ) -> Result<Memory> {
        let (ws, owned) = (ws.clone(), store.clone());
        let limit = self.limits.max_memories_per_store;
        let (memory, seq) = self
            .engine
            .write(move |c| {
                run_ready(ops::memories::create_memory(&Lite(c), &ws, &owned, &path, content, &actor, limit))
            })
            .await?;
        self.memory_changed(store, seq);
        Ok(memory)
    }

    /// One job on the writer thread: the writes commit together (one flush), each in its own
    /// savepoint, so a refused one is rolled back alone.
    async fn write_memories(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        writes: Vec<MemoryWriteOp>,
        actor: Actor,
    ) -> Result<Vec<Result<Memory>>> {
        let limit = self.limits.max_memories_per_store;
        let jobs: Vec<_> = writes
            .into_iter()
            .map(|write| {
                let (ws, owned, actor) = (ws.clone(), store.clone(), actor.clone());
                move |c: &rusqlite::Connection| {
                    run_ready(ops::memories::write_memory(&Lite(c), &ws, &owned, write, &actor, limit))
                }
            })
            .collect();
        let outcomes = self.engine.write_each(jobs).await?;
        if let Some(seq) = outcomes.iter().filter_map(|o| o.as_ref().ok()?.1).max() {
            self.memory_changed(store, seq);
        }
        Ok(outcomes.into_iter().map(|o| o.map(|(memory, _)| memory)).collect())
    }

    async fn get_memory(&self, ws: &WorkspaceId, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory> {
        let (ws, store, id) = (ws.clone(), store.clone(), id.clone());
        self.engine.read(move |c| memories::get(c, &ws, &store, &id)).await
    }

    async fn update_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryId,
        change: MemoryChange,
        actor: Actor,
    ) -> Result<Memory> {
        let (ws, owned, id) = (ws.clone(), store.clone(), id.clone());
        let (memory, seq) = self
            .engine
            .write(move |c| run_ready(ops::memories::update_memory(&Lite(c), &ws, &owned, &id, change, &actor)))
            .await?;
        if let Some(seq) = seq {
            self.memory_changed(store, seq);
        }
        Ok(memory)
    }

    async fn delete_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryId,
        expected_sha256: Option<String>,
        actor: Actor,
    ) -> Result<()> {
        let (ws, owned, id) = (ws.clone(), store.clone(), id.clone());
        let seq = self
            .engine
            .write(move |c| {
                let expected = expected_sha256.as_deref();
                run_ready(ops::memories::delete_memory(&Lite(c), &ws, &owned, &id, expected, &actor))
            })
            .await?;
        self.memory_changed(store, seq);
        Ok(())
    }

    async fn memory_change_seq(&self, ws: &WorkspaceId, store: &MemoryStoreId) -> Result<i64> {
        let (ws, store) = (ws.clone(), store.clone());
        self.engine
            .read(move |c| {
                let (_, seq) = stores::get_with_seq(c, &ws, &store)?;
                c.prepare_cached("SELECT COALESCE(MAX(seq), 0) FROM memory_versions WHERE store_seq = ?1")
                    .and_then(|mut s| s.query_row([seq], |r| r.get(0)))
                    .map_err(backend)
            })
            .await
    }

    async fn list_memories(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        query: ListMemories,
    ) -> Result<Listing<MemoryListItem>> {
        let (ws, store) = (ws.clone(), store.clone());
        self.engine.read(move |c| memories::list(c, &ws, &store, &query)).await
    }

    async fn create_dream(
        &self,
        ws: &WorkspaceId,
        request: mnemo_api::DreamRequest,
        idempotency: Option<(String, String)>,
        max_pending: u32,
    ) -> Result<mnemo_api::Dream> {
        let (ws,) = (ws.clone(),);
        self.engine
            .write(move |c| run_ready(ops::dreams::create(&Lite(c), &ws, &request, idempotency.clone(), max_pending)))
            .await
    }

    async fn get_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| run_ready(ops::dreams::get(&Lite(c), &ws, &id))).await
    }

    async fn list_dreams(&self, ws: &WorkspaceId, query: ops::dreams::ListDreams) -> Result<Listing<mnemo_api::Dream>> {
        let (ws,) = (ws.clone(),);
        self.engine.read(move |c| run_ready(ops::dreams::list(&Lite(c), &ws, &query))).await
    }

    async fn cancel_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::dreams::cancel(&Lite(c), &ws, &id))).await
    }

    async fn archive_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::dreams::archive(&Lite(c), &ws, &id))).await
    }

    async fn claim_dream(
        &self,
        holder: &str,
        ttl: std::time::Duration,
        max_running: u32,
    ) -> Result<Option<ops::dreams::Claimed>> {
        let ttl = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
        let (holder,) = (holder.to_owned(),);
        self.engine.write(move |c| run_ready(ops::dreams::claim_next(&Lite(c), &holder, ttl, max_running))).await
    }

    async fn renew_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<mnemo_api::Dream>> {
        let ttl = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
        let (ws, id, holder) = (ws.clone(), id.clone(), holder.to_owned());
        self.engine.write(move |c| run_ready(ops::dreams::renew(&Lite(c), &ws, &id, &holder, ttl))).await
    }

    async fn start_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        session: NewSession,
    ) -> Result<mnemo_api::Dream> {
        let work_ttl = self.limits.work_lease_ttl_seconds;
        let (ws, id, holder) = (ws.clone(), id.clone(), holder.to_owned());
        self.engine.write(move |c| run_ready(ops::dreams::start(&Lite(c), &ws, &id, &holder, &session, work_ttl))).await
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
        let (ws, id, holder) = (ws.clone(), id.clone(), holder.to_owned());
        self.engine
            .write(move |c| run_ready(ops::dreams::copy_input(&Lite(c), &ws, &id, &holder, &actor, max_bytes, cap)))
            .await
    }

    async fn set_dream_usage(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        usage: mnemo_api::DreamUsage,
    ) -> Result<mnemo_api::Dream> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::dreams::set_usage(&Lite(c), &ws, &id, usage))).await
    }

    async fn dream_verification(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        start_memories: u64,
    ) -> Result<mnemo_store::rules::dream::Verification> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| run_ready(ops::dreams::verification(&Lite(c), &ws, &id, start_memories))).await
    }

    async fn finish_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        outcome: mnemo_store::rules::dream::Outcome,
    ) -> Result<mnemo_api::Dream> {
        let (ws, id, holder) = (ws.clone(), id.clone(), holder.to_owned());
        self.engine.write(move |c| run_ready(ops::dreams::finish(&Lite(c), &ws, &id, &holder, outcome.clone()))).await
    }

    async fn store_retention(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
    ) -> Result<Option<mnemo_store::rules::retention::Retention>> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| run_ready(ops::retention::get(&Lite(c), &ws, &id))).await
    }

    async fn set_store_retention(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        own: Option<mnemo_store::rules::retention::Retention>,
    ) -> Result<Option<mnemo_store::rules::retention::Retention>> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::retention::set(&Lite(c), &ws, &id, own))).await
    }

    async fn retention_stores(&self) -> Result<Vec<ops::retention::RetentionStore>> {
        self.engine.read(move |c| run_ready(ops::retention::stores(&Lite(c)))).await
    }

    async fn purge_versions(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        retention: mnemo_store::rules::retention::Retention,
        after: i64,
        limit: u32,
    ) -> Result<Option<ops::retention::PurgeBatch>> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine
            .write(move |c| run_ready(ops::retention::purge_batch(&Lite(c), &ws, &id, retention, after, limit)))
            .await
    }

    async fn search_memories(
        &self,
        ws: &WorkspaceId,
        request: mnemo_store::search::SearchMemories,
    ) -> Result<Listing<mnemo_api::MemorySearchResult>> {
        let ws = ws.clone();
        self.engine.read(move |c| memories::search(c, &ws, &request)).await
    }

    async fn catch_up_search_index(&self) -> Result<u64> {
        let Some(conn) = self.engine.index.lock().expect("index lock poisoned").as_ref().map(|i| i.conn()) else {
            return Err(failure("the store is shut down"));
        };
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || search_index::catch_up(&conn, &engine)).await.map_err(backend)?
    }

    async fn rank_by_meaning(
        &self,
        ws: &WorkspaceId,
        query: ops::embeddings::MeaningQuery,
    ) -> Result<ops::embeddings::MeaningRanking> {
        let ws = ws.clone();
        self.engine.read(move |c| run_ready(ops::embeddings::rank(&Lite(c), &ws, &query))).await
    }

    async fn pending_embeddings(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<ops::embeddings::PendingEmbedding>> {
        let model = model.to_owned();
        self.engine.read(move |c| run_ready(ops::embeddings::pending(&Lite(c), &model, after, limit))).await
    }

    async fn put_embeddings(&self, model: &str, made: Vec<(i64, i64, Option<Vec<u8>>)>) -> Result<usize> {
        let model = model.to_owned();
        self.engine.write(move |c| run_ready(ops::embeddings::put(&Lite(c), &model, &made))).await
    }

    async fn export_memories(&self, ws: &WorkspaceId, store: &MemoryStoreId, chunk: u32) -> Result<MemoryExport> {
        // Two chunks in flight at most: the reader's pace holds the read (and its snapshot).
        let (out, parts) = tokio::sync::mpsc::channel(2);
        let (began, begun) = tokio::sync::oneshot::channel();
        let (engine, ws, id) = (Arc::clone(&self.engine), ws.clone(), store.clone());
        tokio::spawn(async move {
            let tell = out.clone();
            if let Err(e) = engine.read_paced(move |c| memories::export(c, &ws, &id, chunk, began, &tell)).await {
                let _ = out.send(Err(e)).await;
            }
        });
        started_export(begun, parts).await
    }

    async fn memory_changes_after(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        after: i64,
        limit: u32,
        inline: bool,
    ) -> Result<Vec<MemoryFeedEntry>> {
        let (ws, store) = (ws.clone(), store.clone());
        self.engine.read(move |c| versions::changes_after(c, &ws, &store, after, limit, inline)).await
    }

    async fn get_memory_version(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryVersionId,
        view: View,
    ) -> Result<MemoryVersion> {
        let (ws, store, id) = (ws.clone(), store.clone(), id.clone());
        self.engine.read(move |c| versions::get(c, &ws, &store, &id, view)).await
    }

    async fn list_memory_versions(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        query: ListMemoryVersions,
    ) -> Result<Listing<MemoryVersion>> {
        let (ws, store) = (ws.clone(), store.clone());
        self.engine.read(move |c| versions::list(c, &ws, &store, &query)).await
    }

    async fn redact_memory_version(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryVersionId,
        actor: Actor,
    ) -> Result<MemoryVersion> {
        let (ws, store, id) = (ws.clone(), store.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::versions::redact(&Lite(c), &ws, &store, &id, &actor))).await
    }

    async fn create_console_session(
        &self,
        hash: CredentialHash,
        api_key: &ApiKeyId,
        ttl_seconds: u64,
    ) -> Result<ConsoleSession> {
        let api_key = api_key.clone();
        self.engine.write(move |c| run_ready(ops::console::create(&Lite(c), &hash, &api_key, ttl_seconds))).await
    }

    async fn find_console_session(&self, hash: CredentialHash) -> Result<Option<ConsoleSession>> {
        self.engine.read(move |c| run_ready(ops::console::find(&Lite(c), &hash))).await
    }

    async fn revoke_console_session(&self, hash: CredentialHash) -> Result<()> {
        self.engine.write(move |c| run_ready(ops::console::revoke(&Lite(c), &hash)).map(drop)).await
    }

    async fn create_webhook_endpoint(&self, ws: &WorkspaceId, new: NewWebhookEndpoint) -> Result<WebhookEndpoint> {
        let ws = ws.clone();
        self.engine.write(move |c| run_ready(ops::webhooks::create_endpoint(&Lite(c), &ws, &new))).await
    }

    async fn get_webhook_endpoint(
        &self,
        ws: &WorkspaceId,
        id: &WebhookEndpointId,
        with_secret: bool,
    ) -> Result<WebhookEndpoint> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.read(move |c| run_ready(ops::webhooks::get_endpoint(&Lite(c), &ws, &id, with_secret))).await
    }

    async fn rotate_webhook_secret(
        &self,
        ws: &WorkspaceId,
        id: &WebhookEndpointId,
        secret: String,
        keep_previous: Duration,
    ) -> Result<WebhookEndpoint> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine
            .write(move |c| run_ready(ops::webhooks::rotate_secret(&Lite(c), &ws, &id, &secret, keep_previous)))
            .await
    }

    async fn update_webhook_endpoint(
        &self,
        ws: &WorkspaceId,
        id: &WebhookEndpointId,
        patch: WebhookEndpointPatch,
    ) -> Result<WebhookEndpoint> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::webhooks::update_endpoint(&Lite(c), &ws, &id, patch))).await
    }

    async fn list_webhook_endpoints(
        &self,
        ws: &WorkspaceId,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<WebhookEndpoint>> {
        let ws = ws.clone();
        self.engine.read(move |c| run_ready(ops::webhooks::list_endpoints(&Lite(c), &ws, limit, after.as_ref()))).await
    }

    async fn delete_webhook_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<()> {
        let (ws, id) = (ws.clone(), id.clone());
        self.engine.write(move |c| run_ready(ops::webhooks::delete_endpoint(&Lite(c), &ws, &id))).await
    }

    async fn list_webhook_deliveries(
        &self,
        ws: &WorkspaceId,
        endpoint: &WebhookEndpointId,
        query: ListWebhookDeliveries,
    ) -> Result<Listing<WebhookDelivery>> {
        let (ws, endpoint) = (ws.clone(), endpoint.clone());
        self.engine.read(move |c| run_ready(ops::webhooks::list_deliveries(&Lite(c), &ws, &endpoint, &query))).await
    }

    async fn claim_webhook_deliveries(&self, limit: u32, lease: Duration) -> Result<Vec<ClaimedDelivery>> {
        // Senders look every second or so; most looks find nothing due, and a read answers that
        // without taking the writer's turn (a delivery committed meanwhile waits for the next look).
        if !self.engine.read(|c| run_ready(ops::webhooks::any_due(&Lite(c)))).await? {
            return Ok(Vec::new());
        }
        self.engine.write(move |c| run_ready(ops::webhooks::claim(&Lite(c), limit, lease))).await
    }

    async fn next_webhook_attempt_in(&self) -> Result<Option<Duration>> {
        self.engine.read(|c| run_ready(ops::webhooks::next_due_in(&Lite(c)))).await
    }

    async fn finish_webhook_attempt(&self, attempt: WebhookAttempt) -> Result<bool> {
        self.engine.write(move |c| run_ready(ops::webhooks::finish_attempt(&Lite(c), &attempt))).await
    }

    async fn prune_webhook_deliveries(&self, age: Duration) -> Result<u64> {
        self.engine.write(move |c| run_ready(ops::webhooks::prune(&Lite(c), age))).await
    }
}

/// The export once its read began (its snapshot's position), or why it never did: the read
/// failed (an unknown store, a closed database) before telling its position.
async fn started_export(
    begun: tokio::sync::oneshot::Receiver<i64>,
    mut parts: tokio::sync::mpsc::Receiver<Result<mnemo_store::ExportPart>>,
) -> Result<MemoryExport> {
    match begun.await {
        Ok(seq) => Ok(MemoryExport { seq, parts }),
        Err(_) => match parts.recv().await {
            Some(Err(e)) => Err(e),
            _ => Err(failure("the export ended before it began")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sqlite_url_names_its_durability_and_memory_bound() {
        let plain = SqliteSettings::from_url("sqlite:///var/lib/mnemo/db.sqlite").unwrap();
        assert_eq!(plain.path, PathBuf::from("/var/lib/mnemo/db.sqlite"));
        assert_eq!((plain.durability, plain.memory_limit), (Durability::Full, DEFAULT_MEMORY_LIMIT));
        let tuned = SqliteSettings::from_url("sqlite://db.sqlite?synchronous=normal&memory_mib=16").unwrap();
        assert_eq!((tuned.durability, tuned.memory_limit), (Durability::Normal, 16 << 20));
        for bad in ["memory_mib=3", "memory_mib=65537", "memory_mib=-1", "memory_mib=1.5", "memory_mib="] {
            let e = SqliteSettings::from_url(&format!("sqlite://db.sqlite?{bad}")).unwrap_err();
            assert!(e.contains("memory_mib must be a whole number of MiB from 4 to 65536"), "{bad}: {e}");
        }
        let e = SqliteSettings::from_url("sqlite://db.sqlite?cache=big").unwrap_err();
        assert!(e.contains("unknown sqlite:// option `cache=big`") && e.contains("memory_mib=N"), "{e}");
    }
}
