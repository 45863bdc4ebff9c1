//! The storage boundary of mnemo: the [`Store`] trait, the types it speaks, and every decision a
//! store call makes.
//!
//! The HTTP server, the console and the agent loop are written against [`Store`] only; each
//! backend (`mnemo-store-sqlite`, `mnemo-store-postgres`) lives in its own crate and the binary
//! picks one. Three layers live here:
//!
//! - [`rules`] — every rule of the product, a pure function over typed inputs with a table test:
//!   the session state machine, the work lease, credential scopes, memory preconditions, overlaps
//!   and the cap, catalog updates, the agent loop's turn lease, webhook events and retries.
//! - [`ops`] — every store operation written once: it loads what a rule needs, asks the rule, and
//!   writes what it returns (rows, events, lease transitions, the webhook outbox) through SQL
//!   primitives, per-domain traits each backend implements on its own transaction. A backend
//!   holds SQL, transactions, locks and its engine, and decides nothing.
//! - What both backends share about rows: [`row`] (how values are laid out in columns),
//!   [`copy`] (`mnemo db copy`, verified by per-table digests) and [`check`] (`mnemo db check`'s
//!   invariants as SQL both can run).
//!
//! Request-shape rules (path syntax, sizes, names, event shapes) are checked before a call
//! reaches the store, by the types of `mnemo-api`.
//!
//! # What every backend keeps
//!
//! `mnemo-store-tests` checks these on every backend, concurrency stories included:
//!
//! - each call is one transaction; a refused call changes nothing;
//! - a path, the per-store cap and a precondition are judged on the state the write commits on
//!   (a single writer, a row lock on the store, or serializable transactions with retries): two
//!   writers racing for one path or the last slot cannot both win;
//! - a work item is delivered to one poller at a time; leases and token liveness are judged by
//!   one clock (the database's when there are several servers); a token dies when its lease
//!   lapses, whether or not expiry has been written;
//! - a memory version's time grows with its position in the store (a writer that waited for
//!   another stamps after it);
//! - a session's events are numbered in commit order: [`Store::events_after`] never misses an
//!   event that commits later with a smaller number;
//! - a store's version positions grow in commit order: [`Store::memory_changes_after`] (the
//!   change feed) never misses a version that commits later with a smaller position, and a
//!   memory's listing change counter moves on every created, modified or deleted version;
//! - a write that yields webhook events records them, and one pending delivery per subscribed
//!   endpoint, in its own transaction (an event exists exactly when its change committed); a
//!   claim ([`Store::claim_webhook_deliveries`]) counts an attempt and hides the delivery from
//!   every other claimer, in any process, for the attempt's lease; an outcome is recorded only
//!   for the delivery's latest attempt;
//! - [`Store::export_memories`] reads every live memory of a store from one snapshot, chunk by
//!   chunk in path order, held only as long as the reader keeps reading;
//! - [`Store::write_memories`] applies a batch in order, each write judged on what the writes
//!   before it left and with its own outcome (a refusal stops nothing);
//! - committed memory versions are told through [`Store::memory_signals`] whoever wrote them
//!   ([`Signal::Memory`], and [`Signal::Resync`] when some may be lost); a store several
//!   processes share tells of every other change through [`Store::signals`].
//!
//! Failures are typed the same way on every backend: a transient database failure is
//! [`StoreError::Retryable`], an unreachable database [`StoreError::Unavailable`], a full
//! database volume [`StoreError::DiskFull`].
//!
//! This crate must not depend on any database driver or HTTP framework.

pub mod check;
pub mod copy;
mod cursor;
mod error;
pub mod ops;
pub mod row;
pub mod rules;
pub mod search;
pub mod webhook;

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use mnemo_api::{
    Access, Actor, AdminKeyId, Agent, AgentId, AgentParams, AgentSpec, ApiKeyId, Environment, EnvironmentId,
    EnvironmentKey, EnvironmentKeyId, Event, Memory, MemoryChangeEvent, MemoryId, MemoryListItem, MemoryPath,
    MemoryStore, MemoryStoreId, MemoryVersion, MemoryVersionId, Operation, PathPrefix, Session, SessionId, Timestamp,
    View, WebhookDelivery, WebhookEndpoint, WebhookEndpointId, Work, WorkHeartbeat, WorkId, WorkQueueStats,
    WorkspaceId,
};

pub use cursor::Cursor;
pub use error::{BoxError, CorruptRow, ErrorCode, StoreError};
pub use rules::session::EventAuthor;
pub use webhook::{ClaimedDelivery, ListWebhookDeliveries, NewWebhookEndpoint, WebhookAttempt, WebhookEndpointPatch};

/// Result of every store call.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Rules that a deployment may tune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Creating a memory beyond this many live memories in one store fails.
    pub max_memories_per_store: u32,
    /// Lease of an acknowledged work item without heartbeats, unless a heartbeat asks otherwise.
    pub work_lease_ttl_seconds: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_memories_per_store: mnemo_api::limits::DEFAULT_MAX_MEMORIES_PER_STORE,
            work_lease_ttl_seconds: DEFAULT_WORK_LEASE_TTL_SECONDS,
        }
    }
}

/// The lease TTL the reference runner calls the server's default.
pub const DEFAULT_WORK_LEASE_TTL_SECONDS: u64 = 300;

/// Which agent a session runs.
#[derive(Debug, Clone)]
pub struct AgentRef {
    pub id: AgentId,
    /// `None`: the latest version.
    pub version: Option<u32>,
    /// `agent_with_overrides` fields (`model`, `system`, `tools`, `mcp_servers`, `skills`), each
    /// replacing the agent's value.
    pub overrides: Option<AgentParams>,
}

/// A memory store to attach to a new session.
#[derive(Debug, Clone)]
pub struct Attachment {
    pub store: MemoryStoreId,
    pub access: Access,
    pub instructions: Option<String>,
}

/// A new session, validated for shape; the backend checks what needs stored state.
#[derive(Debug, Clone)]
pub struct NewSession {
    pub agent: AgentRef,
    pub environment: EnvironmentId,
    pub attachments: Vec<Attachment>,
    pub title: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub budget: Option<serde_json::Value>,
    /// `user.message` / `user.define_outcome` events to record first.
    pub initial_events: Vec<Event>,
    /// Who posts `initial_events`: the API key creating the session.
    pub poster: mnemo_api::EventPoster,
    /// Where mount paths are rooted (`/mnt/memory` by default).
    pub mount_root: String,
}

/// Filters of the session listing.
#[derive(Debug, Clone, Default)]
pub struct ListSessions {
    pub created_at_gte: Option<Timestamp>,
    pub created_at_lte: Option<Timestamp>,
    pub agent_id: Option<AgentId>,
    pub memory_store_id: Option<MemoryStoreId>,
    pub statuses: Vec<String>,
    pub include_archived: bool,
    pub limit: u32,
    pub after: Option<Cursor>,
}

/// One stored session event: its position in the session's log and the event, read back
/// ([`mnemo_api::LoggedEvent::from_json`]; a type this build does not know is an
/// [`Event::Unknown`] that writes back unchanged).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub seq: i64,
    pub event: mnemo_api::LoggedEvent,
}

impl SessionEvent {
    /// Reads a stored event row: position `seq`, the event's `id` column and its `body`
    /// column's text. A body that cannot be read is a [`StoreError::corrupt`] naming the row.
    pub fn decode(seq: i64, id: &str, body: &str) -> Result<Self> {
        let value = serde_json::from_str(body).map_err(|e| StoreError::corrupt(EVENTS_TABLE, &id, "body", e))?;
        let event =
            mnemo_api::LoggedEvent::from_json(value).map_err(|e| StoreError::corrupt(EVENTS_TABLE, &id, "body", e))?;
        Ok(Self { seq, event })
    }

    /// The JSON the API lists and streams.
    pub fn to_json(&self) -> serde_json::Value {
        self.event.to_json()
    }
}

/// What a session's live streams are handed: its log's events as they are appended, and, when
/// the session is deleted, a last `session.deleted` (a stream-only event, never logged).
#[derive(Debug, Clone, PartialEq)]
pub enum Streamed {
    Logged(SessionEvent),
    Deleted { id: mnemo_api::EventId, processed_at: String },
}

impl Streamed {
    /// The position in the log (`i64::MAX` for the deletion, which comes after everything).
    pub fn seq(&self) -> i64 {
        match self {
            Self::Logged(e) => e.seq,
            Self::Deleted { .. } => i64::MAX,
        }
    }

    /// The event's `type`.
    pub fn kind(&self) -> &str {
        match self {
            Self::Logged(e) => e.event.event.kind(),
            Self::Deleted { .. } => "session.deleted",
        }
    }

    /// The event's id.
    pub fn id(&self) -> &mnemo_api::EventId {
        match self {
            Self::Logged(e) => &e.event.id,
            Self::Deleted { id, .. } => id,
        }
    }

    /// Whether nothing follows it on a stream: the session ended or is gone.
    pub fn ends_stream(&self) -> bool {
        matches!(
            self,
            Self::Deleted { .. }
                | Self::Logged(SessionEvent {
                    event: mnemo_api::LoggedEvent { event: Event::StatusTerminated, .. },
                    ..
                })
        )
    }

    /// The JSON a stream sends.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Self::Logged(e) => e.to_json(),
            Self::Deleted { id, processed_at } => {
                serde_json::json!({"type": "session.deleted", "id": id, "processed_at": processed_at})
            }
        }
    }
}

/// The table of session events, as [`StoreError::corrupt`] names it.
pub const EVENTS_TABLE: &str = "session_events";
/// The table of sessions, as [`StoreError::corrupt`] names it.
pub const SESSIONS_TABLE: &str = "sessions";

/// Filters of the event listing.
#[derive(Debug, Clone, Default)]
pub struct ListEvents {
    /// Bounds on `processed_at`, inclusive.
    pub processed_gte: Option<Timestamp>,
    pub processed_lte: Option<Timestamp>,
    pub descending: bool,
    pub limit: u32,
    pub types: Vec<String>,
    pub after: Option<Cursor>,
}

/// What an append recorded.
#[derive(Debug, Clone, Default)]
pub struct Appended {
    /// The request's events as recorded (an idempotent duplicate returns the original).
    pub recorded: Vec<SessionEvent>,
    /// Every event written, server-emitted status changes included, in log order.
    pub written: Vec<SessionEvent>,
    /// A work item was queued for the session.
    pub enqueued_work: bool,
}

/// What happened to a heartbeat.
#[derive(Debug, Clone)]
pub enum HeartbeatOutcome {
    Beat(WorkHeartbeat),
    /// The expectation was stale or the lease is gone: the lease as it stands.
    PreconditionFailed(mnemo_api::WorkLeaseState),
}

/// The SHA-256 of a bearer credential: stores never see the secret itself.
pub type CredentialHash = [u8; 32];

/// Fields of a new store, already validated.
#[derive(Debug, Clone)]
pub struct NewMemoryStore {
    pub name: String,
    pub description: String,
    pub metadata: BTreeMap<String, String>,
}

/// A store update, already validated; `None` keeps a field. The metadata patch is applied by
/// the backend inside its transaction with [`mnemo_api::apply_metadata_patch`].
#[derive(Debug, Clone, Default)]
pub struct MemoryStorePatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<BTreeMap<String, Option<String>>>,
}

/// Filters of the store listing.
#[derive(Debug, Clone)]
pub struct ListMemoryStores {
    pub include_archived: bool,
    pub created_at_gte: Option<Timestamp>,
    pub created_at_lte: Option<Timestamp>,
    pub limit: u32,
    pub after: Option<Cursor>,
}

/// How much a memory store holds: its live memories and their content's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryStoreUsage {
    pub memories: u64,
    pub bytes: u64,
}

/// A content or path change to a memory.
#[derive(Debug, Clone)]
pub struct MemoryChange {
    pub content: Option<String>,
    pub path: Option<MemoryPath>,
    /// The `content_sha256` the memory must hold for the change to apply.
    pub expected_sha256: Option<String>,
}

/// One write of [`Store::write_memories`], already checked as its own endpoint checks it.
#[derive(Debug, Clone)]
pub enum MemoryWriteOp {
    /// What [`Store::create_memory`] does.
    Create { path: MemoryPath, content: String },
    /// What [`Store::update_memory`] does.
    Update { id: MemoryId, change: MemoryChange },
}

/// One entry of a store's change feed: a version (with its content only under `content=inline`) and its position, the
/// number [`Store::memory_change_seq`] reports once it is the newest. Positions grow in commit
/// order within a store; they are not dense (stores share one numbering).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFeedEntry {
    pub seq: i64,
    pub change: MemoryChangeEvent,
}

/// The most entries one [`Store::memory_changes_after`] call returns.
pub const MAX_FEED_PAGE: u32 = 1000;

/// Filters of the memory listing.
#[derive(Debug, Clone)]
pub struct ListMemories {
    pub prefix: PathPrefix,
    /// 0 lists everything below the prefix; `n` rolls deeper memories up into prefixes.
    pub depth: u32,
    pub limit: u32,
    pub view: View,
    pub after: Option<Cursor>,
}

/// Memories per step of [`Store::export_memories`]: what a backend reads (and a server holds)
/// at a time, whatever the store's size.
pub const EXPORT_CHUNK: u32 = 100;

/// One step of an export: a chunk of memories in path order, or the end.
#[derive(Debug)]
pub enum ExportPart {
    /// The next memories in path order, with content.
    Memories(Vec<Memory>),
    /// Every live memory was sent; nothing follows.
    Done,
}

/// A store's live memories read from one snapshot ([`Store::export_memories`]): the snapshot's
/// change position, then chunks as the reader takes them. A reader that stops reading (drops
/// `parts`) ends the read; a channel that closes without [`ExportPart::Done`] — the backend
/// failed or went away — is a cut export, never a complete one.
#[derive(Debug)]
pub struct MemoryExport {
    /// What [`Store::memory_change_seq`] reported on the snapshot: the store's listing ETag.
    pub seq: i64,
    /// The chunks, then `Done`; an error ends the export.
    pub parts: tokio::sync::mpsc::Receiver<Result<ExportPart>>,
}

/// Filters of the version listing.
#[derive(Debug, Clone)]
pub struct ListMemoryVersions {
    pub memory_id: Option<MemoryId>,
    pub operation: Option<Operation>,
    pub session_id: Option<SessionId>,
    pub api_key_id: Option<ApiKeyId>,
    pub service_account_id: Option<String>,
    pub created_at_gte: Option<Timestamp>,
    pub created_at_lte: Option<Timestamp>,
    pub limit: u32,
    pub view: View,
    pub after: Option<Cursor>,
}

impl ListMemoryVersions {
    /// The newest `limit` versions without content, unfiltered: set filters on top of it with
    /// struct update syntax.
    pub fn newest(limit: u32) -> Self {
        Self {
            memory_id: None,
            operation: None,
            session_id: None,
            api_key_id: None,
            service_account_id: None,
            created_at_gte: None,
            created_at_lte: None,
            limit,
            view: View::Basic,
            after: None,
        }
    }
}

/// Fields of a new environment, already validated.
#[derive(Debug, Clone)]
pub struct NewEnvironment {
    pub name: String,
    pub description: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub config: serde_json::Value,
    pub scope: Option<String>,
}

/// An environment update, already validated; `None` keeps a field.
#[derive(Debug, Clone, Default)]
pub struct EnvironmentPatch {
    pub name: Option<String>,
    /// `Some(None)` clears the description.
    pub description: Option<Option<String>>,
    pub config: Option<serde_json::Value>,
    /// `None` values (and empty strings) remove keys.
    pub metadata: Option<BTreeMap<String, Option<String>>>,
    pub scope: Option<String>,
}

/// What a bearer credential turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// Reaches the Admin API only (admin-api.md §8.2); bound to no workspace.
    AdminKey(AdminKeyId),
    ApiKey(ApiKeyId),
    EnvironmentKey {
        id: EnvironmentKeyId,
        environment: EnvironmentId,
    },
    /// Minted for one delivery of one work item; dies when the item stops or its lease is lost.
    SessionToken {
        work: WorkId,
        /// The item's session; `None` for a healthcheck, whose token reaches only its item.
        session: Option<SessionId>,
        environment: EnvironmentId,
    },
    /// A person (a console session of theirs, or later an identity provider's token) acting in
    /// one workspace, the [`Principal`]'s, with their roles there ([`Store::person_principal`]).
    Person {
        user: mnemo_api::UserId,
        role: rules::scope::PersonRole,
    },
}

/// A resolved credential and the workspace it is bound to: every credential but an admin key
/// is bound to exactly one (admin-api.md §8.2), the one its requests work in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub credential: Credential,
    /// `None` only for an admin key.
    pub workspace: Option<WorkspaceId>,
}

/// A person signed in to the web console, known by the hash of its cookie's secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    /// The API key the person signed in with: the actor of what they write.
    pub api_key: ApiKeyId,
    /// That key's workspace: the one the console's pages show.
    pub workspace: WorkspaceId,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

/// A person signed in to the web console as themselves (issue 33 part 2), known by the hash of
/// its cookie's secret. They act with their org role and workspace memberships as they are
/// when the session is used, so a role change takes effect at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonSession {
    /// The person, as they are now.
    pub user: mnemo_api::User,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

/// When one of a person's console sessions began and when it ends (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonSessionTimes {
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
}

/// One page of results and where the next one starts.
#[derive(Debug, Clone)]
pub struct Listing<T> {
    pub items: Vec<T>,
    pub next: Option<Cursor>,
}

/// A change that live views (event streams, long polls, remembered credentials) must hear
/// about, whichever server process sharing the database made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// Events were appended to a session, positions `first..=last`.
    Events { session: SessionId, first: i64, last: i64 },
    /// Work was queued or returned to a queue: long polls look again.
    Work,
    /// A credential may have died: a key or environment key revoked, an environment or a
    /// session archived or deleted.
    Credentials,
    /// Memory versions were committed in a store; `seq` is the newest one's position (what
    /// [`Store::memory_change_seq`] then reports).
    Memory { store: MemoryStoreId, seq: i64 },
    /// Signals may have been lost (the listener reconnected): re-check everything.
    Resync,
}

/// Persistent state of a mnemo server.
///
/// Every mutating call commits before it returns: an acknowledged write survives a crash.
/// The invariants every backend keeps (and `mnemo-store-tests` checks, concurrency included):
/// each write is one transaction applying [`rules`]; a memory path, the per-store cap and a
/// precondition are judged on the state the write commits on; a work item is delivered to one
/// poller at a time and its lease is judged by one clock; a session's events are numbered in
/// commit order, so `events_after(seq)` never misses an event committed later.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Finishes queued writes and releases the database; later calls fail.
    async fn close(&self);

    /// Changes made through every process sharing this database (this one included), for a
    /// backend several processes share; `None` when this process makes every change itself.
    fn signals(&self) -> Option<tokio::sync::broadcast::Receiver<Signal>> {
        None
    }

    /// Memory changes as they commit, through every process sharing this database, for every
    /// backend (the change feed waits on these instead of polling): a [`Signal::Memory`] after
    /// each commit that wrote versions, and [`Signal::Resync`] when some may have been missed.
    /// Other signals may be mixed in; subscribers ignore them.
    fn memory_signals(&self) -> tokio::sync::broadcast::Receiver<Signal>;

    /// The API key whose secret hashes to `hash`, unless revoked.
    async fn find_api_key(&self, hash: CredentialHash) -> Result<Option<ApiKeyId>>;
    /// Records an API key by the hash of its secret; an already known hash is left alone.
    /// Returns the key's id.
    async fn ensure_api_key(&self, hash: CredentialHash, label: &str) -> Result<ApiKeyId>;
    /// Records an API key of workspace `ws` by the hash of its secret; an already known hash is
    /// left alone (wherever it is). Returns the key's id.
    async fn ensure_api_key_in(&self, ws: &WorkspaceId, hash: CredentialHash, label: &str) -> Result<ApiKeyId>;
    /// How many active API keys exist.
    async fn count_api_keys(&self) -> Result<u64>;
    /// Records an admin key by the hash of its secret; an already known hash is left alone.
    /// Returns the key's id.
    async fn ensure_admin_key(&self, hash: CredentialHash, name: &str) -> Result<AdminKeyId>;
    /// Whatever live credential hashes to `hash`, and the workspace it is bound to.
    async fn resolve_credential(&self, hash: CredentialHash) -> Result<Option<Principal>>;
    /// The Default workspace.
    async fn default_workspace(&self) -> Result<WorkspaceId>;
    /// Creates a workspace named `name` (default colour, no tags).
    async fn create_workspace(&self, name: &str) -> Result<WorkspaceId>;
    /// The organization this server is (admin-api.md §8.1).
    async fn organization(&self) -> Result<mnemo_api::Organization>;
    /// Renames the organization (`mnemo serve --org-name`).
    async fn rename_organization(&self, name: &str) -> Result<mnemo_api::Organization>;
    /// Creates a validated workspace unless `max` active ones exist.
    async fn create_workspace_with(&self, new: mnemo_api::NewWorkspace, max: u32) -> Result<mnemo_api::Workspace>;
    /// One workspace, archived or not.
    async fn get_workspace(&self, id: &WorkspaceId) -> Result<mnemo_api::Workspace>;
    /// Updates a workspace (the Default one keeps its name).
    async fn update_workspace(
        &self,
        id: &WorkspaceId,
        body: mnemo_api::WorkspaceUpdate,
    ) -> Result<mnemo_api::Workspace>;
    /// A page of workspaces.
    async fn list_workspaces(
        &self,
        query: ops::workspaces::ListWorkspaces,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::Workspace>>;
    /// Archives a workspace and, in the same transaction, its keys, environment keys, work and
    /// webhook deliveries (admin-api.md §8.5); idempotent. Credentials that died are announced
    /// to every process sharing the database ([`Signal::Credentials`]).
    async fn archive_workspace(&self, id: &WorkspaceId) -> Result<mnemo_api::Workspace>;
    /// A workspace's rate-limit overrides by entry.
    async fn workspace_rate_limits(&self, id: &WorkspaceId) -> Result<ops::workspaces::Overrides>;
    /// Changes a workspace's overrides of one entry; answers that entry's overrides.
    async fn update_workspace_rate_limits(
        &self,
        id: &WorkspaceId,
        entry: rules::rate_limit::Entry,
        body: mnemo_api::RateLimitUpdate,
    ) -> Result<BTreeMap<mnemo_api::LimiterType, u64>>;
    /// Mints an API key (its secret's hash and hint given) in an open workspace.
    async fn create_api_key(
        &self,
        new: mnemo_api::NewApiKey,
        hash: CredentialHash,
        hint: &str,
        created_by: Option<&str>,
    ) -> Result<mnemo_api::ApiKey>;
    /// One API key.
    async fn get_api_key(&self, id: &ApiKeyId) -> Result<mnemo_api::ApiKey>;
    /// A page of API keys.
    async fn list_api_keys(
        &self,
        query: ops::credentials::ListApiKeys,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::ApiKey>>;
    /// Renames a key or changes its status; answers the key and whether it stopped
    /// authenticating (then announced as [`Signal::Credentials`]).
    async fn update_api_key(&self, id: &ApiKeyId, body: mnemo_api::ApiKeyUpdate) -> Result<(mnemo_api::ApiKey, bool)>;
    /// How many admin keys are not revoked.
    async fn count_admin_keys(&self) -> Result<u64>;

    // People (admin-api.md §8.6, §8.7): every change is judged by `rules::people` on the state
    // it commits on.

    /// Invites `new.email` as `new.role` for `ttl_secs`, the link's secret kept as `hash`.
    async fn create_invite(
        &self,
        new: mnemo_api::NewInvite,
        hash: CredentialHash,
        ttl_secs: u64,
    ) -> Result<mnemo_api::Invite>;
    /// One invite, whatever its status.
    async fn get_invite(&self, id: &mnemo_api::InviteId) -> Result<mnemo_api::Invite>;
    /// A page of invites.
    async fn list_invites(&self, query: ops::people::ListInvites) -> Result<mnemo_api::AdminPage<mnemo_api::Invite>>;
    /// Deletes a pending invite.
    async fn delete_invite(&self, id: &mnemo_api::InviteId) -> Result<mnemo_api::InviteDeleted>;
    /// One person.
    async fn get_user(&self, id: &mnemo_api::UserId) -> Result<mnemo_api::User>;
    /// A page of people.
    async fn list_users(&self, query: ops::people::ListUsers) -> Result<mnemo_api::AdminPage<mnemo_api::User>>;
    /// Changes a person's org role, as `via` may.
    async fn update_user(
        &self,
        id: &mnemo_api::UserId,
        role: mnemo_api::OrgRole,
        via: rules::people::Via,
    ) -> Result<mnemo_api::User>;
    /// Removes a person, as `via` may, ending their memberships at once.
    async fn remove_user(&self, id: &mnemo_api::UserId, via: rules::people::Via) -> Result<mnemo_api::UserDeleted>;
    /// Ends every console session of a person at once, on every replica.
    async fn sign_out_user(&self, id: &mnemo_api::UserId) -> Result<mnemo_api::User>;
    /// Starts a console session for person `user`, known by the hash of its secret, expiring
    /// after `ttl_seconds` on the store's clock; an unknown person is `NotFound` ("user"). It
    /// may delete the person's sessions that ended more than a day ago.
    async fn create_person_session(
        &self,
        hash: CredentialHash,
        user: &mnemo_api::UserId,
        ttl_seconds: u64,
    ) -> Result<PersonSession>;
    /// Who signs in with `email` (normalized by the store) and the PHC string of their
    /// password's hash, if they have one; none for an address no person has.
    async fn sign_in_candidate(&self, email: String) -> Result<Option<(mnemo_api::User, Option<String>)>>;
    /// The person session whose secret hashes to `hash`, unless it expired, was revoked, or the
    /// person was removed.
    async fn find_person_session(&self, hash: CredentialHash) -> Result<Option<PersonSession>>;
    /// A person's live console sessions, newest first.
    async fn person_sessions(&self, user: &mnemo_api::UserId) -> Result<Vec<PersonSessionTimes>>;
    /// Ends a person session (signing out), on every replica; an unknown or ended one: nothing.
    async fn revoke_person_session(&self, hash: CredentialHash) -> Result<()>;
    /// The principal of an active person acting in `workspace` (spec §8.2, §8.6): `None` picks
    /// their only open workspace (Default for an org admin); a person in several naming none is
    /// [`StoreError::WorkspaceUnspecified`]; a workspace they are not a member of is the same
    /// `NotFound` as an unknown workspace; a removed person is [`StoreError::Unauthenticated`];
    /// a person in no workspace is `Forbidden`.
    async fn person_principal(&self, user: &mnemo_api::UserId, workspace: Option<&WorkspaceId>) -> Result<Principal>;
    /// The open workspaces person `user` has a role in, with that role (implicit roles
    /// included), in creation order; none for an unknown person.
    async fn person_workspaces(
        &self,
        user: &mnemo_api::UserId,
    ) -> Result<Vec<(mnemo_api::Workspace, mnemo_api::WorkspaceRole)>>;
    /// Adds a person to an open workspace.
    async fn add_member(&self, ws: &WorkspaceId, body: mnemo_api::MemberAdd) -> Result<mnemo_api::WorkspaceMember>;
    /// A person's role in a workspace, implicit ones included.
    async fn get_member(&self, ws: &WorkspaceId, user: &mnemo_api::UserId) -> Result<mnemo_api::WorkspaceMember>;
    /// Changes a member's workspace role.
    async fn update_member(
        &self,
        ws: &WorkspaceId,
        user: &mnemo_api::UserId,
        role: String,
    ) -> Result<mnemo_api::WorkspaceMember>;
    /// Removes a person from a workspace.
    async fn remove_member(
        &self,
        ws: &WorkspaceId,
        user: &mnemo_api::UserId,
    ) -> Result<mnemo_api::WorkspaceMemberDeleted>;
    /// A page of a workspace's members, implicit ones included.
    async fn list_members(
        &self,
        ws: &WorkspaceId,
        page: mnemo_api::AdminPageQuery,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::WorkspaceMember>>;

    /// The invite whose link's secret hashes to `hash`, whatever its status.
    async fn invite_by_link(&self, hash: CredentialHash) -> Result<Option<mnemo_api::Invite>>;
    /// Accepts the pending invite whose link hashes to `hash`; the person joins.
    async fn accept_invite(&self, hash: CredentialHash, joining: ops::people::Joining) -> Result<mnemo_api::User>;
    /// Whether no admin is active, so a setup link is wanted.
    async fn setup_wanted(&self) -> Result<bool>;
    /// Signs in a person through the identity provider: created at their first sign-in, their
    /// org role and memberships set to `grants` ([`ops::sso::sign_in`]).
    async fn sso_sign_in(
        &self,
        identity: ops::sso::SsoIdentity,
        grants: rules::sso::Grants<WorkspaceId>,
    ) -> Result<ops::sso::SsoSignIn>;
    /// The person linked to `subject` at `issuer` and the grants they hold now, if they are a
    /// person of the organization.
    async fn sso_person(
        &self,
        issuer: String,
        subject: String,
    ) -> Result<Option<(mnemo_api::User, rules::sso::Grants<WorkspaceId>)>>;
    /// Records a setup link valid for `ttl_secs`.
    async fn create_setup_link(&self, hash: CredentialHash, ttl_secs: u64) -> Result<()>;
    /// Whether the setup link hashing to `hash` would make an admin now.
    async fn setup_link_usable(&self, hash: CredentialHash) -> Result<bool>;
    /// Spends the setup link hashing to `hash`: the person joins as org admin.
    async fn use_setup_link(
        &self,
        hash: CredentialHash,
        email: String,
        joining: ops::people::Joining,
    ) -> Result<mnemo_api::User>;

    /// Draws `draw` (a request, a model call's admission or its tokens) from workspace `ws`'s
    /// bucket of `limiter` in rate-limit entry `entry` (capacity `capacity` per minute,
    /// admin-api.md §8.9), in one transaction on the bucket's locked row, so every process
    /// sharing the database counts against one bucket.
    async fn take_rate_limit(
        &self,
        ws: &WorkspaceId,
        entry: &str,
        limiter: &mnemo_api::LimiterType,
        capacity: u64,
        draw: rules::rate_limit::Draw,
    ) -> Result<rules::rate_limit::Outcome>;

    /// Appends an entry to the audit log.
    async fn record_audit_event(&self, event: ops::NewAuditEvent) -> Result<mnemo_api::AuditEventId>;
    /// A page of the audit log, newest first.
    async fn list_audit_events(
        &self,
        filter: ops::AuditFilter,
        page: mnemo_api::AdminPageQuery,
    ) -> Result<mnemo_api::AdminPage<mnemo_api::AuditEvent>>;
    /// Deletes audit entries older than `days` days; how many.
    async fn prune_audit_events(&self, days: u32) -> Result<u64>;

    // Environments, their keys and their work queues belong to workspace `ws`: every call
    // below finds only `ws`'s, and answers another workspace's exactly like an unknown id.
    async fn create_environment(&self, ws: &WorkspaceId, new: NewEnvironment) -> Result<Environment>;
    async fn get_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Environment>;
    /// Updates an environment; an archived one, or a change of `config.type`, is refused.
    async fn update_environment(
        &self,
        ws: &WorkspaceId,
        id: &EnvironmentId,
        patch: EnvironmentPatch,
    ) -> Result<Environment>;
    async fn list_environments(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Environment>>;
    async fn archive_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Environment>;
    /// Deletes an environment with its keys.
    async fn delete_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<()>;
    /// Records a new key for an environment by the hash of its secret.
    async fn create_environment_key(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        hash: CredentialHash,
    ) -> Result<EnvironmentKey>;
    /// Revokes a key of `environment` (a key of another environment is not found); revoking
    /// twice returns it unchanged.
    async fn revoke_environment_key(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        id: &EnvironmentKeyId,
    ) -> Result<EnvironmentKey>;
    async fn list_environment_keys(&self, ws: &WorkspaceId, environment: &EnvironmentId)
    -> Result<Vec<EnvironmentKey>>;

    async fn create_agent(&self, ws: &WorkspaceId, spec: AgentSpec) -> Result<Agent>;
    async fn get_agent(&self, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent>;
    /// Applies `params` on top of version `base`, which must be the latest: a new version.
    async fn update_agent(&self, ws: &WorkspaceId, id: &AgentId, base: u32, params: AgentParams) -> Result<Agent>;
    async fn list_agents(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Agent>>;
    async fn archive_agent(&self, ws: &WorkspaceId, id: &AgentId) -> Result<Agent>;

    /// Creates a session (and, on a self-hosted environment, its work item). Its agent,
    /// environment and stores are looked up in `ws`: another workspace's is an unknown id.
    async fn create_session(&self, ws: &WorkspaceId, new: NewSession) -> Result<Session>;
    async fn get_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session>;
    /// Changes a session's title (`Some(None)` clears it) and patches its metadata.
    async fn update_session(
        &self,
        ws: &WorkspaceId,
        id: &SessionId,
        title: Option<Option<String>>,
        metadata: Option<BTreeMap<String, Option<String>>>,
    ) -> Result<Session>;
    async fn list_sessions(&self, ws: &WorkspaceId, query: ListSessions) -> Result<Listing<Session>>;
    /// Sessions of every workspace in one of `statuses`, newest first, each with its workspace:
    /// what the agent loop scans for turns owed (a background reader, not a workspace's request).
    async fn list_turn_sessions(
        &self,
        statuses: Vec<String>,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<(WorkspaceId, SessionId)>>;
    /// The workspace of session `id`, if it exists: the agent loop hears of appends (through
    /// [`Signal::Events`]) by session id alone.
    async fn session_workspace(&self, id: &SessionId) -> Result<Option<WorkspaceId>>;
    /// Archives (and so terminates) a session, stopping its live work item.
    async fn archive_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session>;
    async fn delete_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<()>;
    /// A page of a session's events in log order (or reversed).
    async fn list_events(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        query: ListEvents,
    ) -> Result<Listing<SessionEvent>>;
    /// Every event after position `seq` (for resuming streams).
    async fn events_after(&self, ws: &WorkspaceId, session: &SessionId, seq: i64) -> Result<Vec<SessionEvent>>;
    /// Appends events in one transaction, carrying out [`rules::session::plan_append`] (results
    /// answer exactly one open tool call; tool calls move the session to `running` and then
    /// `idle` with `requires_action`; …).
    async fn append_events(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        events: Vec<Event>,
        author: EventAuthor,
    ) -> Result<Appended>;
    /// Claims the session's agent-turn lease for `holder` until `ttl` from now on the store's
    /// clock, or renews it ([`rules::agent::claim`]): `false` while another holder's lease
    /// runs. Two claimers, in this process or another, never both get a running lease.
    async fn claim_turn(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool>;
    /// Ends `holder`'s turn lease of the session; another holder's lease is left alone.
    async fn release_turn(&self, ws: &WorkspaceId, session: &SessionId, holder: &str) -> Result<()>;
    /// How a session may use a store, if it has it attached.
    async fn session_store_access(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        store: &MemoryStoreId,
    ) -> Result<Option<Access>>;

    /// Claims the oldest deliverable item of a self-hosted environment, hiding it from other
    /// polls for `reclaim_ms`, and binds a fresh sessions token (by its hash) to it.
    async fn poll_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        worker_id: Option<String>,
        reclaim_ms: u64,
        token_hash: CredentialHash,
    ) -> Result<Option<Work>>;
    /// Applies lease expiry ([`rules::work::Lease::expire`]) to every item of every environment
    /// whose lease has run out; returns how many items changed. Expiry is also applied to the
    /// items a call touches, so this only keeps listings and statistics fresh.
    async fn expire_work(&self) -> Result<u64>;
    /// How long until the next work item lapses, by the store's clock (zero once one has);
    /// `None` while none can ([`ops::work::next_lapse`]). A read: the sweep calls it to sleep
    /// until then instead of writing on a fixed tick.
    async fn next_work_lapse(&self) -> Result<Option<std::time::Duration>>;
    /// Queues a `healthcheck` item (workers ack and stop it without touching any session).
    async fn enqueue_healthcheck(&self, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<Work>;
    async fn ack_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work>;
    async fn heartbeat_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        id: &WorkId,
        expected_last_heartbeat: &str,
        desired_ttl_seconds: Option<u64>,
    ) -> Result<HeartbeatOutcome>;
    async fn stop_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId, force: bool) -> Result<Work>;
    async fn get_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work>;
    async fn update_work_metadata(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        id: &WorkId,
        patch: BTreeMap<String, Option<String>>,
    ) -> Result<Work>;
    async fn list_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Work>>;
    async fn work_stats(&self, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<WorkQueueStats>;

    /// Memory stores and everything in them belong to workspace `ws`: every call below takes the
    /// caller's workspace first, and a store of another workspace is not found, with the same
    /// error as an unknown id (admin-api.md §8.2), in lookups, writes, listings and the feed.
    async fn create_memory_store(&self, ws: &WorkspaceId, new: NewMemoryStore) -> Result<MemoryStore>;
    async fn get_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore>;
    async fn update_memory_store(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        patch: MemoryStorePatch,
    ) -> Result<MemoryStore>;
    async fn list_memory_stores(&self, ws: &WorkspaceId, query: ListMemoryStores) -> Result<Listing<MemoryStore>>;
    /// How many live memories each store holds and their total content size, for the given stores
    /// (an unknown id is simply absent from the answer). One query per call, not per store.
    async fn memory_store_usage(
        &self,
        ws: &WorkspaceId,
        stores: &[MemoryStoreId],
    ) -> Result<HashMap<MemoryStoreId, MemoryStoreUsage>>;
    /// Archives a store; archiving an archived store returns it unchanged.
    async fn archive_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore>;
    /// Deletes a store with all its memories and versions.
    async fn delete_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<()>;

    /// Creates a memory and its `created` version. Returns it with content.
    async fn create_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        path: MemoryPath,
        content: String,
        actor: Actor,
    ) -> Result<Memory>;
    /// A memory with its content.
    async fn get_memory(&self, ws: &WorkspaceId, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory>;
    /// Changes content and/or path and writes a `modified` version; a change to the state the
    /// memory already holds writes nothing. Returns the memory with content.
    async fn update_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryId,
        change: MemoryChange,
        actor: Actor,
    ) -> Result<Memory>;
    /// Applies `writes` to one store in order, each judged on the state the writes before it
    /// left and each with its own outcome: a refused write changes nothing and does not stop
    /// the ones after it. The outer `Err` means none of them applied (a backend that commits
    /// them together could not commit). This default makes one call per write; a backend that
    /// can commit them in one transaction (one flush to disk instead of one each) overrides it.
    async fn write_memories(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        writes: Vec<MemoryWriteOp>,
        actor: Actor,
    ) -> Result<Vec<Result<Memory>>> {
        let mut outcomes = Vec::with_capacity(writes.len());
        for write in writes {
            outcomes.push(match write {
                MemoryWriteOp::Create { path, content } => {
                    self.create_memory(ws, store, path, content, actor.clone()).await
                }
                MemoryWriteOp::Update { id, change } => self.update_memory(ws, store, &id, change, actor.clone()).await,
            });
        }
        Ok(outcomes)
    }
    /// Deletes a memory and writes its `deleted` version.
    async fn delete_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryId,
        expected_sha256: Option<String>,
        actor: Actor,
    ) -> Result<()>;
    /// A number that changes whenever any memory of the store is created, changed or deleted
    /// (the newest version's position): the store's listing ETag.
    async fn memory_change_seq(&self, ws: &WorkspaceId, store: &MemoryStoreId) -> Result<i64>;
    async fn list_memories(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        query: ListMemories,
    ) -> Result<Listing<MemoryListItem>>;
    /// Live memories matching a search ([`search::SearchMemories`]), best first, with snippets:
    /// in one store (an unknown one is not found) or across the workspace's stores. A memory
    /// is found from the commit of its write and never after its deletion. (A mnemo extension.)
    async fn search_memories(
        &self,
        ws: &WorkspaceId,
        request: search::SearchMemories,
    ) -> Result<Listing<mnemo_api::MemorySearchResult>>;
    /// Takes every memory waiting for the search index into it now, and answers how many
    /// ([`search`]: the backend's indexer does this behind the writes on its own; searches
    /// find waiting memories meanwhile). For tests, benchmarks and `mnemo db` commands.
    async fn catch_up_search_index(&self) -> Result<u64>;
    /// Live memories ranked by the closeness of their embedding to a query's
    /// ([`ops::embeddings::rank`]), in one read transaction.
    async fn rank_by_meaning(
        &self,
        ws: &WorkspaceId,
        query: ops::embeddings::MeaningQuery,
    ) -> Result<ops::embeddings::MeaningRanking>;
    /// Live memories without a current embedding by `model`, row number after `after`
    /// ([`ops::embeddings::pending`]): the embedder's work.
    async fn pending_embeddings(
        &self,
        model: &str,
        after: i64,
        limit: u32,
    ) -> Result<Vec<ops::embeddings::PendingEmbedding>>;
    /// Stores the embedder's vectors, `(memory, version, vector)`, in one transaction, each only
    /// while its memory holds that version ([`ops::embeddings::put`]); how many were stored.
    async fn put_embeddings(&self, model: &str, made: Vec<(i64, i64, Option<Vec<u8>>)>) -> Result<usize>;
    /// Store `id`'s own version retention (`None`: the server's `--version-retention`).
    async fn store_retention(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
    ) -> Result<Option<rules::retention::Retention>>;
    /// Sets store `id`'s own version retention, or with `None` returns it to the server's.
    async fn set_store_retention(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        own: Option<rules::retention::Retention>,
    ) -> Result<Option<rules::retention::Retention>>;
    /// Every store of every workspace (archived ones too) with its own retention.
    async fn retention_stores(&self) -> Result<Vec<ops::retention::RetentionStore>>;
    /// One bounded purge batch in store `id` under `retention`, from position `after`
    /// ([`ops::retention::purge_batch`]), in one short transaction that never takes the
    /// store's row lock. `None`: another transaction (another replica) is purging; try later.
    async fn purge_versions(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        retention: rules::retention::Retention,
        after: i64,
        limit: u32,
    ) -> Result<Option<ops::retention::PurgeBatch>>;
    /// Creates a dream, `pending` ([`ops::dreams::create`]): the input store and sessions must
    /// be workspace `ws`'s and live; a second `update_existing` dream on a store is a conflict;
    /// more than `max_pending` waiting is refused. With `idempotency` (key, request digest), a
    /// retried request answers the dream it made.
    async fn create_dream(
        &self,
        ws: &WorkspaceId,
        request: mnemo_api::DreamRequest,
        idempotency: Option<(String, String)>,
        max_pending: u32,
    ) -> Result<mnemo_api::Dream>;
    /// Workspace `ws`'s dream `id` (archived ones too).
    async fn get_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream>;
    /// Workspace `ws`'s dreams, newest first.
    async fn list_dreams(&self, ws: &WorkspaceId, query: ops::dreams::ListDreams) -> Result<Listing<mnemo_api::Dream>>;
    /// Cancels a pending or running dream ([`rules::dream::cancel`]).
    async fn cancel_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream>;
    /// Archives a final dream ([`rules::dream::archive`]).
    async fn archive_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream>;
    /// Claims the next dream to run for `holder` ([`ops::dreams::claim_next`]).
    async fn claim_dream(
        &self,
        holder: &str,
        ttl: std::time::Duration,
        max_running: u32,
    ) -> Result<Option<ops::dreams::Claimed>>;
    /// Renews `holder`'s lease on a dream: the dream as it stands, `None` once the lease is lost.
    async fn renew_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<Option<mnemo_api::Dream>>;
    /// Starts a pending dream: its session and `running`, one transaction ([`ops::dreams::start`]).
    async fn start_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        session: NewSession,
    ) -> Result<mnemo_api::Dream>;
    /// Records a dream's output, copying the input into a new store first under `create_new`
    /// (one transaction, [`ops::dreams::copy_input`]).
    async fn copy_dream_input(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        actor: mnemo_api::Actor,
        max_bytes: u64,
    ) -> Result<ops::dreams::Copied>;
    /// Records a dream's usage.
    async fn set_dream_usage(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        usage: mnemo_api::DreamUsage,
    ) -> Result<mnemo_api::Dream>;
    /// What the server checks before a dream completes ([`ops::dreams::verification`]).
    async fn dream_verification(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        start_memories: u64,
    ) -> Result<rules::dream::Verification>;
    /// Ends `holder`'s run of a dream ([`ops::dreams::finish`]): the outcome unless it is
    /// already final, the session archived, the lease let go.
    async fn finish_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        outcome: rules::dream::Outcome,
    ) -> Result<mnemo_api::Dream>;
    /// Every live memory of the store with its content, in path order (bytes), read from one
    /// snapshot (one read transaction held until the last chunk) and handed over `chunk` at a
    /// time through a small bounded channel, so neither side holds the whole store. A store that
    /// does not exist fails here, before any chunk. (A mnemo extension: the hosted API lists
    /// pages of 20.)
    async fn export_memories(&self, ws: &WorkspaceId, store: &MemoryStoreId, chunk: u32) -> Result<MemoryExport>;
    /// The store's versions after position `after` (0: from the first), oldest first, at most
    /// `limit` (capped at [`MAX_FEED_PAGE`]); redacted ones as the versions listing shows them.
    /// Under `inline`, small versions carry their content, read in the same query
    /// ([`rules::memory::feed_entry`]). A version that commits later never has a smaller
    /// position than one already returned, so reading on from the last position never misses one.
    async fn memory_changes_after(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        after: i64,
        limit: u32,
        inline: bool,
    ) -> Result<Vec<MemoryFeedEntry>>;

    async fn get_memory_version(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryVersionId,
        view: View,
    ) -> Result<MemoryVersion>;
    async fn list_memory_versions(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        query: ListMemoryVersions,
    ) -> Result<Listing<MemoryVersion>>;
    /// Clears a version's content, digest, size and path; redacting twice is a no-op.
    async fn redact_memory_version(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryVersionId,
        actor: Actor,
    ) -> Result<MemoryVersion>;

    /// Starts a console session for `api_key` (which must be live), known by the hash of its
    /// secret, expiring after `ttl_seconds` on the store's clock. An unknown or revoked key is
    /// `NotFound` ("api key"). It may delete the key's sessions that ended (expired or revoked)
    /// more than a day ago, so ended sessions never pile up.
    async fn create_console_session(
        &self,
        hash: CredentialHash,
        api_key: &ApiKeyId,
        ttl_seconds: u64,
    ) -> Result<ConsoleSession>;
    /// The session whose secret hashes to `hash`, unless it expired, was revoked, or its API key
    /// was revoked.
    async fn find_console_session(&self, hash: CredentialHash) -> Result<Option<ConsoleSession>>;
    /// Ends a console session (signing out); ending an unknown or ended one does nothing.
    async fn revoke_console_session(&self, hash: CredentialHash) -> Result<()>;

    /// Registers a webhook endpoint of workspace `ws`; the answer carries its secret. Events of
    /// `ws`'s changes that commit after this one are delivered to it (those of its filter), and
    /// no other workspace's. Every endpoint call below finds only `ws`'s endpoints.
    async fn create_webhook_endpoint(&self, ws: &WorkspaceId, new: NewWebhookEndpoint) -> Result<WebhookEndpoint>;
    /// An endpoint, with its secret only if `with_secret`.
    async fn get_webhook_endpoint(
        &self,
        ws: &WorkspaceId,
        id: &WebhookEndpointId,
        with_secret: bool,
    ) -> Result<WebhookEndpoint>;
    /// Replaces an endpoint's signing secret with `secret`; the one it replaces keeps signing
    /// beside it for `keep_previous` (on the store's clock; zero: not at all). Returns the
    /// endpoint with its new secret.
    async fn rotate_webhook_secret(
        &self,
        ws: &WorkspaceId,
        id: &WebhookEndpointId,
        secret: String,
        keep_previous: std::time::Duration,
    ) -> Result<WebhookEndpoint>;
    /// Changes an endpoint's URL, filter or description (deliveries already made keep theirs:
    /// pending ones go to the new URL).
    async fn update_webhook_endpoint(
        &self,
        ws: &WorkspaceId,
        id: &WebhookEndpointId,
        patch: WebhookEndpointPatch,
    ) -> Result<WebhookEndpoint>;
    /// Endpoints, newest first, without secrets.
    async fn list_webhook_endpoints(
        &self,
        ws: &WorkspaceId,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<WebhookEndpoint>>;
    /// Removes an endpoint and its deliveries (pending ones are never sent).
    async fn delete_webhook_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<()>;
    /// An endpoint's deliveries, newest first.
    async fn list_webhook_deliveries(
        &self,
        ws: &WorkspaceId,
        endpoint: &WebhookEndpointId,
        query: ListWebhookDeliveries,
    ) -> Result<Listing<WebhookDelivery>>;
    /// Claims up to `limit` (at most [`webhook::MAX_CLAIM`]) pending deliveries that are due,
    /// oldest due first, for one attempt each: counts the attempt and hides each from other
    /// claims for `lease` (at least [`webhook::MIN_CLAIM_LEASE`]; after it, an attempt never
    /// reported is made again). Two claimers, in this process or another, never get the same
    /// delivery while its lease runs.
    async fn claim_webhook_deliveries(&self, limit: u32, lease: std::time::Duration) -> Result<Vec<ClaimedDelivery>>;
    /// How long until the earliest pending delivery is due, on the store's clock: zero if one is
    /// due now, `None` if none is pending. A claimed delivery counts from the end of its lease
    /// (when it is made again if its attempt is never reported). A sender sleeps this long
    /// rather than looking on a timer, and a retry scheduled by an earlier process (before a
    /// restart) is still made on time.
    async fn next_webhook_attempt_in(&self) -> Result<Option<std::time::Duration>>;
    /// Records an attempt's outcome: delivered, due again after a delay, or failed. Returns
    /// false (changing nothing) if the attempt is not the delivery's latest or the delivery is
    /// gone (its endpoint was deleted).
    async fn finish_webhook_attempt(&self, attempt: WebhookAttempt) -> Result<bool>;
    /// Deletes deliveries that finished (delivered or failed) more than `age` ago, and the events
    /// no delivery refers to any more; returns how many deliveries went.
    async fn prune_webhook_deliveries(&self, age: std::time::Duration) -> Result<u64>;
}

/// Splits a listed path below `prefix` into what a `depth`-limited listing shows: `None` for
/// the memory itself, or the rolled-up prefix (trailing `/` included) it hides under.
pub fn rollup<'a>(prefix: &PathPrefix, depth: u32, path: &'a str) -> Option<&'a str> {
    if depth == 0 {
        return None;
    }
    let base = prefix.as_str().len();
    let rest = &path[base..];
    let mut seen = 0;
    for (i, _) in rest.match_indices('/') {
        seen += 1;
        if seen == depth {
            return Some(&path[..base + i + 1]);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollup_keeps_direct_children_and_folds_deeper_ones() {
        let root = PathPrefix::root();
        assert_eq!(rollup(&root, 0, "/a/b/c"), None);
        assert_eq!(rollup(&root, 1, "/a"), None);
        assert_eq!(rollup(&root, 1, "/a/b/c"), Some("/a/"));
        assert_eq!(rollup(&root, 2, "/a/b"), None);
        assert_eq!(rollup(&root, 2, "/a/b/c"), Some("/a/b/"));
        let notes = PathPrefix::parse("/notes/").unwrap();
        assert_eq!(rollup(&notes, 1, "/notes/todo.md"), None);
        assert_eq!(rollup(&notes, 1, "/notes/2026/jan.md"), Some("/notes/2026/"));
    }
}
