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
pub mod operations;
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
pub use operations::Operations;
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
    /// What [`Operations::create_memory`] does.
    Create { path: MemoryPath, content: String },
    /// What [`Operations::update_memory`] does.
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
    /// one workspace, the [`Principal`]'s, with their roles there
    /// ([`Operations::person_principal`]).
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
///
/// Most calls are [`Operations`], written once for every backend; the ones here each backend
/// answers its own way (its reads of lists and single objects, its batched writes, its streams).
#[async_trait]
pub trait Store: Operations {
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
    async fn list_environments(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Environment>>;
    async fn get_agent(&self, ws: &WorkspaceId, id: &AgentId, version: Option<u32>) -> Result<Agent>;
    async fn list_agents(
        &self,
        ws: &WorkspaceId,
        include_archived: bool,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Agent>>;
    async fn get_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session>;
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
    /// A page of a session's events in log order (or reversed).
    async fn list_events(
        &self,
        ws: &WorkspaceId,
        session: &SessionId,
        query: ListEvents,
    ) -> Result<Listing<SessionEvent>>;
    /// Every event after position `seq` (for resuming streams).
    async fn events_after(&self, ws: &WorkspaceId, session: &SessionId, seq: i64) -> Result<Vec<SessionEvent>>;
    async fn list_work(
        &self,
        ws: &WorkspaceId,
        environment: &EnvironmentId,
        limit: u32,
        after: Option<Cursor>,
    ) -> Result<Listing<Work>>;
    async fn get_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore>;
    async fn list_memory_stores(&self, ws: &WorkspaceId, query: ListMemoryStores) -> Result<Listing<MemoryStore>>;
    /// How many live memories each store holds and their total content size, for the given stores
    /// (an unknown id is simply absent from the answer). One query per call, not per store.
    async fn memory_store_usage(
        &self,
        ws: &WorkspaceId,
        stores: &[MemoryStoreId],
    ) -> Result<HashMap<MemoryStoreId, MemoryStoreUsage>>;
    /// Deletes a store with all its memories and versions.
    async fn delete_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<()>;
    /// A memory with its content.
    async fn get_memory(&self, ws: &WorkspaceId, store: &MemoryStoreId, id: &MemoryId) -> Result<Memory>;
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
    /// Claims up to `limit` (at most [`webhook::MAX_CLAIM`]) pending deliveries that are due,
    /// oldest due first, for one attempt each: counts the attempt and hides each from other
    /// claims for `lease` (at least [`webhook::MIN_CLAIM_LEASE`]; after it, an attempt never
    /// reported is made again). Two claimers, in this process or another, never get the same
    /// delivery while its lease runs.
    async fn claim_webhook_deliveries(&self, limit: u32, lease: std::time::Duration) -> Result<Vec<ClaimedDelivery>>;
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
