//! The store calls every backend runs the same way, written once: each is one operation of
//! [`crate::ops`] in one transaction, with the signals it sends.
//!
//! [`Store`] is [`Operations`] and the calls a backend makes its own (its queries
//! of lists and single objects, its batched writes, its export stream). A backend implements
//! [`Operations`] by expanding [`operations!`](macro@crate::operations) for its store type, which then
//! has a field `limits: Limits` and two methods:
//!
//! - `async fn read<T>(&self, op: impl AsyncFnOnce(&Sql) -> Result<T>) -> Result<T>` runs `op` in
//!   a read-only transaction that sees one snapshot;
//! - `async fn write<T>(&self, op: impl AsyncFnMut(&Sql) -> Result<T>) -> Result<T>` runs `op` in
//!   a read-write transaction that commits when `op` returns `Ok` and rolls back otherwise. It
//!   may run `op` again after a conflict, so `op` reads its inputs and never moves them out.
//!
//! `Sql` implements every primitive trait of [`crate::ops`] and [`crate::ops::SignalSql`] (a
//! signal is sent only if its transaction commits). Each `op` is an `async move` closure that
//! owns its inputs (cloned from the call's arguments): SQLite runs it on another thread, and a
//! closure that borrowed the caller's references would make PostgreSQL's futures fail to be
//! `Send` for every lifetime.
//!
//! A macro, not `impl<B: Backend> Operations for B`: a [`Store`] call's future
//! must be `Send`, and stable Rust cannot state that the futures of a generic backend's `async`
//! primitives are. Expanded in each backend, every future is checked on concrete types.

use super::*;

/// The calls of [`Store`] that are one operation of [`crate::ops`] in one
/// transaction; every backend implements them with [`operations!`](macro@crate::operations).
#[async_trait]
pub trait Operations: Send + Sync + 'static {
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
    /// Applies `params` on top of version `base`, which must be the latest: a new version.
    async fn update_agent(&self, ws: &WorkspaceId, id: &AgentId, base: u32, params: AgentParams) -> Result<Agent>;
    async fn archive_agent(&self, ws: &WorkspaceId, id: &AgentId) -> Result<Agent>;
    /// Creates a session (and, on a self-hosted environment, its work item). Its agent,
    /// environment and stores are looked up in `ws`: another workspace's is an unknown id.
    async fn create_session(&self, ws: &WorkspaceId, new: NewSession) -> Result<Session>;
    /// Changes a session's title (`Some(None)` clears it) and patches its metadata.
    async fn update_session(
        &self,
        ws: &WorkspaceId,
        id: &SessionId,
        title: Option<Option<String>>,
        metadata: Option<BTreeMap<String, Option<String>>>,
    ) -> Result<Session>;
    /// Archives (and so terminates) a session, stopping its live work item.
    async fn archive_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session>;
    async fn delete_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<()>;
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
    async fn work_stats(&self, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<WorkQueueStats>;
    /// Memory stores and everything in them belong to workspace `ws`: every call below takes the
    /// caller's workspace first, and a store of another workspace is not found, with the same
    /// error as an unknown id (admin-api.md §8.2), in lookups, writes, listings and the feed.
    async fn create_memory_store(&self, ws: &WorkspaceId, new: NewMemoryStore) -> Result<MemoryStore>;
    async fn update_memory_store(
        &self,
        ws: &WorkspaceId,
        id: &MemoryStoreId,
        patch: MemoryStorePatch,
    ) -> Result<MemoryStore>;
    /// Archives a store; archiving an archived store returns it unchanged.
    async fn archive_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore>;
    /// Creates a memory and its `created` version. Returns it with content.
    async fn create_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        path: MemoryPath,
        content: String,
        actor: Actor,
    ) -> Result<Memory>;
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
    /// Deletes a memory and writes its `deleted` version.
    async fn delete_memory(
        &self,
        ws: &WorkspaceId,
        store: &MemoryStoreId,
        id: &MemoryId,
        expected_sha256: Option<String>,
        actor: Actor,
    ) -> Result<()>;
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
    /// What the server checks before a dream completes ([`ops::dreams::verification`]); a
    /// write transaction, as it locks the dream and its stores.
    async fn dream_verification(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        start_memories: u64,
    ) -> Result<crate::rules::dream::Verification>;
    /// Ends `holder`'s run of a dream ([`ops::dreams::finish`]): the outcome unless it is
    /// already final, the session archived, the lease let go.
    async fn finish_dream(
        &self,
        ws: &WorkspaceId,
        id: &mnemo_api::DreamId,
        holder: &str,
        outcome: rules::dream::Outcome,
    ) -> Result<mnemo_api::Dream>;
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

/// What the expansion of [`operations!`](macro@crate::operations) names.
#[doc(hidden)]
pub mod prelude {
    pub use crate::ops::SignalSql;
    pub use crate::*;
    pub use async_trait::async_trait;
    pub use mnemo_api;
    pub use mnemo_api::{
        Access, Actor, AdminKeyId, Agent, AgentParams, AgentSpec, ApiKeyId, Environment, EnvironmentId, EnvironmentKey,
        EnvironmentKeyId, Event, Memory, MemoryId, MemoryPath, MemoryStore, MemoryStoreId, MemoryVersion,
        MemoryVersionId, Session, SessionId, WebhookEndpoint, WebhookEndpointId, Work, WorkId, WorkQueueStats,
        WorkspaceId,
    };
    pub use std::collections::BTreeMap;
    pub use std::time::Duration;
}

/// Implements [`Operations`] for a backend's store type (see the [module](self) for what the
/// type provides).
#[macro_export]
macro_rules! operations {
    ($store:ty) => {
        const _: () = {
            use $crate::operations::prelude::*;

            #[async_trait]
            impl $crate::Operations for $store {
                async fn find_api_key(&self, hash: CredentialHash) -> Result<Option<ApiKeyId>> {
                    self.read(async move |sql| ops::credentials::find_api_key(sql, &hash).await).await
                }

                async fn ensure_api_key(&self, hash: CredentialHash, label: &str) -> Result<ApiKeyId> {
                    let label = label.to_owned();
                    self.write(async move |sql| ops::credentials::ensure_api_key(sql, &hash, &label).await).await
                }

                async fn ensure_api_key_in(
                    &self,
                    ws: &WorkspaceId,
                    hash: CredentialHash,
                    label: &str,
                ) -> Result<ApiKeyId> {
                    let (ws, label) = (ws.clone(), label.to_owned());
                    self.write(async move |sql| ops::credentials::ensure_api_key_in(sql, &ws, &hash, &label).await)
                        .await
                }

                async fn count_api_keys(&self) -> Result<u64> {
                    self.read(async move |sql| ops::credentials::count_api_keys(sql).await).await
                }

                async fn ensure_admin_key(&self, hash: CredentialHash, name: &str) -> Result<AdminKeyId> {
                    let name = name.to_owned();
                    self.write(async move |sql| ops::credentials::ensure_admin_key(sql, &hash, &name).await).await
                }

                async fn resolve_credential(&self, hash: CredentialHash) -> Result<Option<Principal>> {
                    self.read(async move |sql| ops::credentials::resolve_credential(sql, &hash).await).await
                }

                async fn default_workspace(&self) -> Result<WorkspaceId> {
                    self.read(async move |sql| ops::CredentialSql::default_workspace(sql).await).await
                }

                async fn create_workspace(&self, name: &str) -> Result<WorkspaceId> {
                    let name = name.to_owned();
                    self.write(async move |sql| ops::workspaces::create(sql, &name).await).await
                }

                async fn organization(&self) -> Result<mnemo_api::Organization> {
                    self.read(async move |sql| ops::workspaces::organization(sql).await).await
                }

                async fn rename_organization(&self, name: &str) -> Result<mnemo_api::Organization> {
                    let name = name.to_owned();
                    self.write(async move |sql| ops::workspaces::rename_organization(sql, &name).await).await
                }

                async fn create_workspace_with(
                    &self,
                    new: mnemo_api::NewWorkspace,
                    max: u32,
                ) -> Result<mnemo_api::Workspace> {
                    self.write(async move |sql| ops::workspaces::create_workspace(sql, &new, max).await).await
                }

                async fn get_workspace(&self, id: &WorkspaceId) -> Result<mnemo_api::Workspace> {
                    let id = id.clone();
                    self.read(async move |sql| ops::workspaces::get(sql, &id).await).await
                }

                async fn update_workspace(
                    &self,
                    id: &WorkspaceId,
                    body: mnemo_api::WorkspaceUpdate,
                ) -> Result<mnemo_api::Workspace> {
                    let id = id.clone();
                    self.write(async move |sql| ops::workspaces::update(sql, &id, &body).await).await
                }

                async fn list_workspaces(
                    &self,
                    query: ops::workspaces::ListWorkspaces,
                ) -> Result<mnemo_api::AdminPage<mnemo_api::Workspace>> {
                    self.read(async move |sql| ops::workspaces::list(sql, &query).await).await
                }

                async fn archive_workspace(&self, id: &WorkspaceId) -> Result<mnemo_api::Workspace> {
                    let id = id.clone();
                    self.write(async move |sql| {
                        let (workspace, revoked) = ops::workspaces::archive(sql, &id).await?;
                        if revoked {
                            sql.signal(Signal::Credentials).await?;
                        }
                        Ok(workspace)
                    })
                    .await
                }

                async fn workspace_rate_limits(&self, id: &WorkspaceId) -> Result<ops::workspaces::Overrides> {
                    let id = id.clone();
                    self.read(async move |sql| ops::workspaces::overrides(sql, &id).await).await
                }

                async fn update_workspace_rate_limits(
                    &self,
                    id: &WorkspaceId,
                    entry: $crate::rules::rate_limit::Entry,
                    body: mnemo_api::RateLimitUpdate,
                ) -> Result<BTreeMap<mnemo_api::LimiterType, u64>> {
                    let id = id.clone();
                    self.write(async move |sql| ops::workspaces::update_overrides(sql, &id, &entry, &body).await).await
                }

                async fn create_api_key(
                    &self,
                    new: mnemo_api::NewApiKey,
                    hash: CredentialHash,
                    hint: &str,
                    created_by: Option<&str>,
                ) -> Result<mnemo_api::ApiKey> {
                    let (hint, created_by) = (hint.to_owned(), created_by.map(str::to_owned));
                    self.write(async move |sql| {
                        ops::credentials::create_api_key(sql, &new, &hash, &hint, created_by.as_deref()).await
                    })
                    .await
                }

                async fn get_api_key(&self, id: &ApiKeyId) -> Result<mnemo_api::ApiKey> {
                    let id = id.clone();
                    self.read(async move |sql| ops::credentials::get_api_key(sql, &id).await).await
                }

                async fn list_api_keys(
                    &self,
                    query: ops::credentials::ListApiKeys,
                ) -> Result<mnemo_api::AdminPage<mnemo_api::ApiKey>> {
                    self.read(async move |sql| ops::credentials::list_api_keys(sql, &query).await).await
                }

                async fn update_api_key(
                    &self,
                    id: &ApiKeyId,
                    body: mnemo_api::ApiKeyUpdate,
                ) -> Result<(mnemo_api::ApiKey, bool)> {
                    let id = id.clone();
                    self.write(async move |sql| {
                        let (key, revoked) = ops::credentials::update_api_key(sql, &id, &body).await?;
                        if revoked {
                            sql.signal(Signal::Credentials).await?;
                        }
                        Ok((key, revoked))
                    })
                    .await
                }

                async fn count_admin_keys(&self) -> Result<u64> {
                    self.read(async move |sql| ops::CredentialSql::count_live_admin_keys(sql).await).await
                }

                async fn create_invite(
                    &self,
                    new: mnemo_api::NewInvite,
                    hash: CredentialHash,
                    ttl_secs: u64,
                ) -> Result<mnemo_api::Invite> {
                    self.write(async move |sql| ops::people::create_invite(sql, &new, &hash, ttl_secs).await).await
                }

                async fn get_invite(&self, id: &mnemo_api::InviteId) -> Result<mnemo_api::Invite> {
                    let id = id.clone();
                    self.read(async move |sql| ops::people::get_invite(sql, &id).await).await
                }

                async fn list_invites(
                    &self,
                    query: ops::people::ListInvites,
                ) -> Result<mnemo_api::AdminPage<mnemo_api::Invite>> {
                    self.read(async move |sql| ops::people::list_invites(sql, &query).await).await
                }

                async fn delete_invite(&self, id: &mnemo_api::InviteId) -> Result<mnemo_api::InviteDeleted> {
                    let id = id.clone();
                    self.write(async move |sql| ops::people::delete_invite(sql, &id).await).await
                }

                async fn get_user(&self, id: &mnemo_api::UserId) -> Result<mnemo_api::User> {
                    let id = id.clone();
                    self.read(async move |sql| ops::people::get_user(sql, &id).await).await
                }

                async fn list_users(
                    &self,
                    query: ops::people::ListUsers,
                ) -> Result<mnemo_api::AdminPage<mnemo_api::User>> {
                    self.read(async move |sql| ops::people::list_users(sql, &query).await).await
                }

                async fn update_user(
                    &self,
                    id: &mnemo_api::UserId,
                    role: mnemo_api::OrgRole,
                    via: $crate::rules::people::Via,
                ) -> Result<mnemo_api::User> {
                    let id = id.clone();
                    self.write(async move |sql| ops::people::update_user(sql, &id, role, via).await).await
                }

                async fn remove_user(
                    &self,
                    id: &mnemo_api::UserId,
                    via: $crate::rules::people::Via,
                ) -> Result<mnemo_api::UserDeleted> {
                    let id = id.clone();
                    self.write(async move |sql| {
                        let removed = ops::people::remove_user(sql, &id, via).await?;
                        // Their console sessions were deleted with them: processes forget cached ones.
                        sql.signal(Signal::Credentials).await?;
                        Ok(removed)
                    })
                    .await
                }

                async fn sign_out_user(&self, id: &mnemo_api::UserId) -> Result<mnemo_api::User> {
                    let id = id.clone();
                    self.write(async move |sql| {
                        let (user, ended) = ops::people::sign_out_user(sql, &id).await?;
                        if ended > 0 {
                            sql.signal(Signal::Credentials).await?;
                        }
                        Ok(user)
                    })
                    .await
                }

                async fn create_person_session(
                    &self,
                    hash: CredentialHash,
                    user: &mnemo_api::UserId,
                    ttl_seconds: u64,
                ) -> Result<$crate::PersonSession> {
                    let user = user.clone();
                    self.write(async move |sql| {
                        ops::people::create_person_session(sql, &hash, &user, ttl_seconds).await
                    })
                    .await
                }

                async fn sign_in_candidate(&self, email: String) -> Result<Option<(mnemo_api::User, Option<String>)>> {
                    self.read(async move |sql| ops::people::sign_in_candidate(sql, &email).await).await
                }

                async fn person_sessions(&self, user: &mnemo_api::UserId) -> Result<Vec<$crate::PersonSessionTimes>> {
                    let user = user.clone();
                    self.read(async move |sql| ops::people::person_sessions(sql, &user).await).await
                }

                async fn find_person_session(&self, hash: CredentialHash) -> Result<Option<$crate::PersonSession>> {
                    self.read(async move |sql| ops::people::find_person_session(sql, &hash).await).await
                }

                async fn revoke_person_session(&self, hash: CredentialHash) -> Result<()> {
                    self.write(async move |sql| {
                        if ops::people::revoke_person_session(sql, &hash).await? {
                            sql.signal(Signal::Credentials).await?;
                        }
                        Ok(())
                    })
                    .await
                }

                async fn add_member(
                    &self,
                    ws: &WorkspaceId,
                    body: mnemo_api::MemberAdd,
                ) -> Result<mnemo_api::WorkspaceMember> {
                    let ws = ws.clone();
                    self.write(async move |sql| ops::people::add_member(sql, &ws, &body).await).await
                }

                async fn person_principal(
                    &self,
                    user: &mnemo_api::UserId,
                    workspace: Option<&WorkspaceId>,
                ) -> Result<$crate::Principal> {
                    let (user, ws) = (user.clone(), workspace.cloned());
                    self.read(async move |sql| ops::people::person_principal(sql, &user, ws.as_ref()).await).await
                }

                async fn person_workspaces(
                    &self,
                    user: &mnemo_api::UserId,
                ) -> Result<Vec<(mnemo_api::Workspace, mnemo_api::WorkspaceRole)>> {
                    let user = user.clone();
                    self.read(async move |sql| ops::people::workspaces_of(sql, &user).await).await
                }

                async fn get_member(
                    &self,
                    ws: &WorkspaceId,
                    user: &mnemo_api::UserId,
                ) -> Result<mnemo_api::WorkspaceMember> {
                    let (ws, user) = (ws.clone(), user.clone());
                    self.read(async move |sql| ops::people::get_member(sql, &ws, &user).await).await
                }

                async fn update_member(
                    &self,
                    ws: &WorkspaceId,
                    user: &mnemo_api::UserId,
                    role: String,
                ) -> Result<mnemo_api::WorkspaceMember> {
                    let (ws, user) = (ws.clone(), user.clone());
                    self.write(async move |sql| ops::people::update_member(sql, &ws, &user, &role).await).await
                }

                async fn remove_member(
                    &self,
                    ws: &WorkspaceId,
                    user: &mnemo_api::UserId,
                ) -> Result<mnemo_api::WorkspaceMemberDeleted> {
                    let (ws, user) = (ws.clone(), user.clone());
                    self.write(async move |sql| ops::people::remove_member(sql, &ws, &user).await).await
                }

                async fn invite_by_link(&self, hash: CredentialHash) -> Result<Option<mnemo_api::Invite>> {
                    self.read(async move |sql| ops::people::invite_by_link(sql, &hash).await).await
                }

                async fn accept_invite(
                    &self,
                    hash: CredentialHash,
                    joining: ops::people::Joining,
                ) -> Result<mnemo_api::User> {
                    self.write(async move |sql| ops::people::accept_invite(sql, &hash, &joining).await).await
                }

                async fn setup_wanted(&self) -> Result<bool> {
                    self.read(async move |sql| ops::people::setup_wanted(sql).await).await
                }

                async fn sso_sign_in(
                    &self,
                    identity: ops::sso::SsoIdentity,
                    grants: $crate::rules::sso::Grants<WorkspaceId>,
                ) -> Result<ops::sso::SsoSignIn> {
                    self.write(async move |sql| ops::sso::sign_in(sql, &identity, &grants).await).await
                }

                async fn sso_person(
                    &self,
                    issuer: String,
                    subject: String,
                ) -> Result<Option<(mnemo_api::User, $crate::rules::sso::Grants<WorkspaceId>)>> {
                    self.read(async move |sql| {
                        let Some(user) = ops::sso::person(sql, &issuer, &subject).await? else { return Ok(None) };
                        let grants = ops::sso::current_grants(sql, &user.id).await?;
                        Ok(Some((user, grants)))
                    })
                    .await
                }

                async fn create_setup_link(&self, hash: CredentialHash, ttl_secs: u64) -> Result<()> {
                    self.write(async move |sql| ops::people::create_setup_link(sql, &hash, ttl_secs).await).await
                }

                async fn setup_link_usable(&self, hash: CredentialHash) -> Result<bool> {
                    self.read(async move |sql| ops::people::setup_link_usable(sql, &hash).await).await
                }

                async fn use_setup_link(
                    &self,
                    hash: CredentialHash,
                    email: String,
                    joining: ops::people::Joining,
                ) -> Result<mnemo_api::User> {
                    self.write(async move |sql| ops::people::use_setup_link(sql, &hash, &email, &joining).await).await
                }

                async fn list_members(
                    &self,
                    ws: &WorkspaceId,
                    page: mnemo_api::AdminPageQuery,
                ) -> Result<mnemo_api::AdminPage<mnemo_api::WorkspaceMember>> {
                    let ws = ws.clone();
                    self.read(async move |sql| ops::people::list_members(sql, &ws, &page).await).await
                }

                async fn take_rate_limit(
                    &self,
                    ws: &WorkspaceId,
                    entry: &str,
                    limiter: &mnemo_api::LimiterType,
                    capacity: u64,
                    draw: $crate::rules::rate_limit::Draw,
                ) -> Result<$crate::rules::rate_limit::Outcome> {
                    let (ws, entry, limiter) = (ws.clone(), entry.to_owned(), limiter.clone());
                    self.write(async move |sql| {
                        let key = ops::BucketKey { workspace: &ws, entry: &entry, limiter: &limiter };
                        ops::rate_limits::take(sql, key, capacity, draw).await
                    })
                    .await
                }

                async fn record_audit_event(&self, event: ops::NewAuditEvent) -> Result<mnemo_api::AuditEventId> {
                    self.write(async move |sql| ops::audit::record(sql, event.clone()).await).await
                }

                async fn list_audit_events(
                    &self,
                    filter: ops::AuditFilter,
                    page: mnemo_api::AdminPageQuery,
                ) -> Result<mnemo_api::AdminPage<mnemo_api::AuditEvent>> {
                    self.read(async move |sql| ops::audit::list(sql, &filter, &page).await).await
                }

                async fn prune_audit_events(&self, days: u32) -> Result<u64> {
                    self.write(async move |sql| ops::audit::prune(sql, days).await).await
                }

                async fn create_environment(&self, ws: &WorkspaceId, new: NewEnvironment) -> Result<Environment> {
                    let ws = ws.clone();
                    self.write(async move |sql| ops::environments::create(sql, &ws, &new).await).await
                }

                async fn get_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Environment> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.read(async move |sql| ops::environments::get(sql, &ws, &id).await).await
                }

                async fn update_environment(
                    &self,
                    ws: &WorkspaceId,
                    id: &EnvironmentId,
                    patch: EnvironmentPatch,
                ) -> Result<Environment> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::environments::update(sql, &ws, &id, patch.clone()).await).await
                }

                async fn archive_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<Environment> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| {
                        let archived = ops::environments::archive(sql, &ws, &id).await?;
                        sql.signal(Signal::Credentials).await?;
                        Ok(archived)
                    })
                    .await
                }

                async fn delete_environment(&self, ws: &WorkspaceId, id: &EnvironmentId) -> Result<()> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| {
                        ops::environments::delete(sql, &ws, &id).await?;
                        sql.signal(Signal::Credentials).await
                    })
                    .await
                }

                async fn create_environment_key(
                    &self,
                    ws: &WorkspaceId,
                    environment: &EnvironmentId,
                    hash: CredentialHash,
                ) -> Result<EnvironmentKey> {
                    let (ws, environment) = (ws.clone(), environment.clone());
                    self.write(async move |sql| ops::environments::create_key(sql, &ws, &environment, &hash).await)
                        .await
                }

                async fn revoke_environment_key(
                    &self,
                    ws: &WorkspaceId,
                    environment: &EnvironmentId,
                    id: &EnvironmentKeyId,
                ) -> Result<EnvironmentKey> {
                    let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
                    self.write(async move |sql| {
                        let key = ops::environments::revoke_key(sql, &ws, &environment, &id).await?;
                        sql.signal(Signal::Credentials).await?;
                        Ok(key)
                    })
                    .await
                }

                async fn list_environment_keys(
                    &self,
                    ws: &WorkspaceId,
                    environment: &EnvironmentId,
                ) -> Result<Vec<EnvironmentKey>> {
                    let (ws, environment) = (ws.clone(), environment.clone());
                    self.read(async move |sql| ops::environments::list_keys(sql, &ws, &environment).await).await
                }

                async fn create_agent(&self, ws: &WorkspaceId, spec: AgentSpec) -> Result<Agent> {
                    let ws = ws.clone();
                    self.write(async move |sql| ops::agents::create(sql, &ws, &spec).await).await
                }

                async fn update_agent(
                    &self,
                    ws: &WorkspaceId,
                    id: &AgentId,
                    base: u32,
                    params: AgentParams,
                ) -> Result<Agent> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::agents::update(sql, &ws, &id, base, &params).await).await
                }

                async fn archive_agent(&self, ws: &WorkspaceId, id: &AgentId) -> Result<Agent> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::agents::archive(sql, &ws, &id).await).await
                }

                async fn create_session(&self, ws: &WorkspaceId, new: NewSession) -> Result<Session> {
                    let ttl = self.limits.work_lease_ttl_seconds;
                    let ws = ws.clone();
                    self.write(async move |sql| {
                        let created = ops::sessions::create(sql, &ws, &new, ttl).await?;
                        if created.queued_work {
                            sql.signal(Signal::Work).await?;
                        }
                        Ok(created.session)
                    })
                    .await
                }

                async fn update_session(
                    &self,
                    ws: &WorkspaceId,
                    id: &SessionId,
                    title: Option<Option<String>>,
                    metadata: Option<BTreeMap<String, Option<String>>>,
                ) -> Result<Session> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| {
                        ops::sessions::update(sql, &ws, &id, title.clone(), metadata.as_ref()).await
                    })
                    .await
                }

                async fn archive_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<Session> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| {
                        let session = ops::sessions::archive(sql, &ws, &id).await?;
                        sql.signal(Signal::Credentials).await?;
                        Ok(session)
                    })
                    .await
                }

                async fn delete_session(&self, ws: &WorkspaceId, id: &SessionId) -> Result<()> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| {
                        ops::sessions::delete(sql, &ws, &id).await?;
                        sql.signal(Signal::Credentials).await
                    })
                    .await
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
                    self.write(async move |sql| {
                        let appended = ops::events::append(sql, &ws, &session, events.clone(), &author, ttl).await?;
                        if let (Some(first), Some(last)) = (appended.written.first(), appended.written.last()) {
                            sql.signal(Signal::Events { session: session.clone(), first: first.seq, last: last.seq })
                                .await?;
                        }
                        if appended.enqueued_work {
                            sql.signal(Signal::Work).await?;
                        }
                        Ok(appended)
                    })
                    .await
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
                    self.write(async move |sql| ops::sessions::claim_turn(sql, &ws, &session, &holder, ttl).await).await
                }

                async fn release_turn(&self, ws: &WorkspaceId, session: &SessionId, holder: &str) -> Result<()> {
                    let (ws, session, holder) = (ws.clone(), session.clone(), holder.to_owned());
                    self.write(async move |sql| ops::sessions::release_turn(sql, &ws, &session, &holder).await).await
                }

                async fn session_store_access(
                    &self,
                    ws: &WorkspaceId,
                    session: &SessionId,
                    store: &MemoryStoreId,
                ) -> Result<Option<Access>> {
                    let (ws, session, store) = (ws.clone(), session.clone(), store.clone());
                    self.read(async move |sql| sql.store_access(&ws, &session, &store).await).await
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
                    self.write(async move |sql| {
                        ops::work::poll(sql, &ws, &environment, worker_id.as_deref(), reclaim_ms, &token_hash).await
                    })
                    .await
                }

                async fn expire_work(&self) -> Result<u64> {
                    self.write(async move |sql| {
                        let changed = ops::work::expire_all(sql).await?;
                        if changed > 0 {
                            sql.signal(Signal::Work).await?;
                        }
                        Ok(changed)
                    })
                    .await
                }

                async fn next_work_lapse(&self) -> Result<Option<std::time::Duration>> {
                    self.read(async move |sql| ops::work::next_lapse(sql).await).await
                }

                async fn enqueue_healthcheck(&self, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<Work> {
                    let (ws, environment) = (ws.clone(), environment.clone());
                    let ttl = self.limits.work_lease_ttl_seconds;
                    self.write(async move |sql| {
                        let item = ops::work::enqueue_healthcheck(sql, &ws, &environment, ttl).await?;
                        sql.signal(Signal::Work).await?;
                        Ok(item)
                    })
                    .await
                }

                async fn ack_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work> {
                    let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
                    self.write(async move |sql| ops::work::ack(sql, &ws, &environment, &id).await).await
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
                    self.write(async move |sql| {
                        ops::work::heartbeat(sql, &ws, &environment, &id, &expected, desired_ttl_seconds).await
                    })
                    .await
                }

                async fn stop_work(
                    &self,
                    ws: &WorkspaceId,
                    environment: &EnvironmentId,
                    id: &WorkId,
                    force: bool,
                ) -> Result<Work> {
                    let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
                    self.write(async move |sql| ops::work::stop(sql, &ws, &environment, &id, force).await).await
                }

                async fn get_work(&self, ws: &WorkspaceId, environment: &EnvironmentId, id: &WorkId) -> Result<Work> {
                    let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
                    self.read(async move |sql| ops::work::get(sql, &ws, &environment, &id).await).await
                }

                async fn update_work_metadata(
                    &self,
                    ws: &WorkspaceId,
                    environment: &EnvironmentId,
                    id: &WorkId,
                    patch: BTreeMap<String, Option<String>>,
                ) -> Result<Work> {
                    let (ws, environment, id) = (ws.clone(), environment.clone(), id.clone());
                    self.write(async move |sql| ops::work::update_metadata(sql, &ws, &environment, &id, &patch).await)
                        .await
                }

                async fn work_stats(&self, ws: &WorkspaceId, environment: &EnvironmentId) -> Result<WorkQueueStats> {
                    let (ws, environment) = (ws.clone(), environment.clone());
                    self.read(async move |sql| ops::work::stats(sql, &ws, &environment).await).await
                }

                async fn create_memory_store(&self, ws: &WorkspaceId, new: NewMemoryStore) -> Result<MemoryStore> {
                    let ws = ws.clone();
                    self.write(async move |sql| ops::stores::create_store(sql, &ws, new.clone()).await).await
                }

                async fn update_memory_store(
                    &self,
                    ws: &WorkspaceId,
                    id: &MemoryStoreId,
                    patch: MemoryStorePatch,
                ) -> Result<MemoryStore> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::stores::update_store(sql, &ws, &id, patch.clone()).await).await
                }

                async fn archive_memory_store(&self, ws: &WorkspaceId, id: &MemoryStoreId) -> Result<MemoryStore> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::stores::archive_store(sql, &ws, &id).await).await
                }

                async fn create_memory(
                    &self,
                    ws: &WorkspaceId,
                    store: &MemoryStoreId,
                    path: MemoryPath,
                    content: String,
                    actor: Actor,
                ) -> Result<Memory> {
                    let (ws, store) = (ws.clone(), store.clone());
                    let limit = self.limits.max_memories_per_store;
                    self.write(async move |sql| {
                        let (memory, seq) =
                            ops::memories::create_memory(sql, &ws, &store, &path, content.clone(), &actor, limit)
                                .await?;
                        sql.signal(Signal::Memory { store: store.clone(), seq }).await?;
                        Ok(memory)
                    })
                    .await
                }

                async fn update_memory(
                    &self,
                    ws: &WorkspaceId,
                    store: &MemoryStoreId,
                    id: &MemoryId,
                    change: MemoryChange,
                    actor: Actor,
                ) -> Result<Memory> {
                    let (ws, store, id) = (ws.clone(), store.clone(), id.clone());
                    self.write(async move |sql| {
                        let (memory, seq) =
                            ops::memories::update_memory(sql, &ws, &store, &id, change.clone(), &actor).await?;
                        if let Some(seq) = seq {
                            sql.signal(Signal::Memory { store: store.clone(), seq }).await?;
                        }
                        Ok(memory)
                    })
                    .await
                }

                async fn delete_memory(
                    &self,
                    ws: &WorkspaceId,
                    store: &MemoryStoreId,
                    id: &MemoryId,
                    expected_sha256: Option<String>,
                    actor: Actor,
                ) -> Result<()> {
                    let (ws, store, id) = (ws.clone(), store.clone(), id.clone());
                    self.write(async move |sql| {
                        let expected = expected_sha256.as_deref();
                        let seq = ops::memories::delete_memory(sql, &ws, &store, &id, expected, &actor).await?;
                        sql.signal(Signal::Memory { store: store.clone(), seq }).await
                    })
                    .await
                }

                async fn create_dream(
                    &self,
                    ws: &WorkspaceId,
                    request: mnemo_api::DreamRequest,
                    idempotency: Option<(String, String)>,
                    max_pending: u32,
                ) -> Result<mnemo_api::Dream> {
                    let (ws,) = (ws.clone(),);
                    self.write(async move |sql| {
                        ops::dreams::create(sql, &ws, &request, idempotency.clone(), max_pending).await
                    })
                    .await
                }

                async fn get_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.read(async move |sql| ops::dreams::get(sql, &ws, &id).await).await
                }

                async fn list_dreams(
                    &self,
                    ws: &WorkspaceId,
                    query: ops::dreams::ListDreams,
                ) -> Result<Listing<mnemo_api::Dream>> {
                    let (ws,) = (ws.clone(),);
                    self.read(async move |sql| ops::dreams::list(sql, &ws, &query).await).await
                }

                async fn cancel_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::dreams::cancel(sql, &ws, &id).await).await
                }

                async fn archive_dream(&self, ws: &WorkspaceId, id: &mnemo_api::DreamId) -> Result<mnemo_api::Dream> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::dreams::archive(sql, &ws, &id).await).await
                }

                async fn claim_dream(
                    &self,
                    holder: &str,
                    ttl: std::time::Duration,
                    max_running: u32,
                ) -> Result<Option<ops::dreams::Claimed>> {
                    let ttl = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
                    let (holder,) = (holder.to_owned(),);
                    self.write(async move |sql| ops::dreams::claim_next(sql, &holder, ttl, max_running).await).await
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
                    self.write(async move |sql| ops::dreams::renew(sql, &ws, &id, &holder, ttl).await).await
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
                    self.write(async move |sql| ops::dreams::start(sql, &ws, &id, &holder, &session, work_ttl).await)
                        .await
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
                    self.write(async move |sql| {
                        ops::dreams::copy_input(sql, &ws, &id, &holder, &actor, max_bytes, cap).await
                    })
                    .await
                }

                async fn set_dream_usage(
                    &self,
                    ws: &WorkspaceId,
                    id: &mnemo_api::DreamId,
                    usage: mnemo_api::DreamUsage,
                ) -> Result<mnemo_api::Dream> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::dreams::set_usage(sql, &ws, &id, usage).await).await
                }

                async fn dream_verification(
                    &self,
                    ws: &WorkspaceId,
                    id: &mnemo_api::DreamId,
                    start_memories: u64,
                ) -> Result<$crate::rules::dream::Verification> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::dreams::verification(sql, &ws, &id, start_memories).await).await
                }

                async fn finish_dream(
                    &self,
                    ws: &WorkspaceId,
                    id: &mnemo_api::DreamId,
                    holder: &str,
                    outcome: $crate::rules::dream::Outcome,
                ) -> Result<mnemo_api::Dream> {
                    let (ws, id, holder) = (ws.clone(), id.clone(), holder.to_owned());
                    self.write(async move |sql| ops::dreams::finish(sql, &ws, &id, &holder, outcome.clone()).await)
                        .await
                }

                async fn store_retention(
                    &self,
                    ws: &WorkspaceId,
                    id: &MemoryStoreId,
                ) -> Result<Option<$crate::rules::retention::Retention>> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.read(async move |sql| ops::retention::get(sql, &ws, &id).await).await
                }

                async fn set_store_retention(
                    &self,
                    ws: &WorkspaceId,
                    id: &MemoryStoreId,
                    own: Option<$crate::rules::retention::Retention>,
                ) -> Result<Option<$crate::rules::retention::Retention>> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::retention::set(sql, &ws, &id, own).await).await
                }

                async fn retention_stores(&self) -> Result<Vec<ops::retention::RetentionStore>> {
                    self.read(async move |sql| ops::retention::stores(sql).await).await
                }

                async fn purge_versions(
                    &self,
                    ws: &WorkspaceId,
                    id: &MemoryStoreId,
                    retention: $crate::rules::retention::Retention,
                    after: i64,
                    limit: u32,
                ) -> Result<Option<ops::retention::PurgeBatch>> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| {
                        ops::retention::purge_batch(sql, &ws, &id, retention, after, limit).await
                    })
                    .await
                }

                async fn rank_by_meaning(
                    &self,
                    ws: &WorkspaceId,
                    query: ops::embeddings::MeaningQuery,
                ) -> Result<ops::embeddings::MeaningRanking> {
                    let ws = ws.clone();
                    self.read(async move |sql| ops::embeddings::rank(sql, &ws, &query).await).await
                }

                async fn pending_embeddings(
                    &self,
                    model: &str,
                    after: i64,
                    limit: u32,
                ) -> Result<Vec<ops::embeddings::PendingEmbedding>> {
                    let model = model.to_owned();
                    self.read(async move |sql| ops::embeddings::pending(sql, &model, after, limit).await).await
                }

                async fn put_embeddings(&self, model: &str, made: Vec<(i64, i64, Option<Vec<u8>>)>) -> Result<usize> {
                    let model = model.to_owned();
                    self.write(async move |sql| ops::embeddings::put(sql, &model, &made).await).await
                }

                async fn redact_memory_version(
                    &self,
                    ws: &WorkspaceId,
                    store: &MemoryStoreId,
                    id: &MemoryVersionId,
                    actor: Actor,
                ) -> Result<MemoryVersion> {
                    let (ws, store, id) = (ws.clone(), store.clone(), id.clone());
                    self.write(async move |sql| ops::versions::redact(sql, &ws, &store, &id, &actor).await).await
                }

                async fn create_console_session(
                    &self,
                    hash: CredentialHash,
                    api_key: &ApiKeyId,
                    ttl_seconds: u64,
                ) -> Result<ConsoleSession> {
                    let api_key = api_key.clone();
                    self.write(async move |sql| ops::console::create(sql, &hash, &api_key, ttl_seconds).await).await
                }

                async fn find_console_session(&self, hash: CredentialHash) -> Result<Option<ConsoleSession>> {
                    self.read(async move |sql| ops::console::find(sql, &hash).await).await
                }

                async fn revoke_console_session(&self, hash: CredentialHash) -> Result<()> {
                    self.write(async move |sql| {
                        if ops::console::revoke(sql, &hash).await? {
                            sql.signal(Signal::Credentials).await?;
                        }
                        Ok(())
                    })
                    .await
                }

                async fn create_webhook_endpoint(
                    &self,
                    ws: &WorkspaceId,
                    new: NewWebhookEndpoint,
                ) -> Result<WebhookEndpoint> {
                    let ws = ws.clone();
                    self.write(async move |sql| ops::webhooks::create_endpoint(sql, &ws, &new).await).await
                }

                async fn get_webhook_endpoint(
                    &self,
                    ws: &WorkspaceId,
                    id: &WebhookEndpointId,
                    with_secret: bool,
                ) -> Result<WebhookEndpoint> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.read(async move |sql| ops::webhooks::get_endpoint(sql, &ws, &id, with_secret).await).await
                }

                async fn rotate_webhook_secret(
                    &self,
                    ws: &WorkspaceId,
                    id: &WebhookEndpointId,
                    secret: String,
                    keep_previous: Duration,
                ) -> Result<WebhookEndpoint> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| {
                        ops::webhooks::rotate_secret(sql, &ws, &id, &secret, keep_previous).await
                    })
                    .await
                }

                async fn update_webhook_endpoint(
                    &self,
                    ws: &WorkspaceId,
                    id: &WebhookEndpointId,
                    patch: WebhookEndpointPatch,
                ) -> Result<WebhookEndpoint> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::webhooks::update_endpoint(sql, &ws, &id, patch.clone()).await)
                        .await
                }

                async fn list_webhook_endpoints(
                    &self,
                    ws: &WorkspaceId,
                    limit: u32,
                    after: Option<Cursor>,
                ) -> Result<Listing<WebhookEndpoint>> {
                    let ws = ws.clone();
                    self.read(async move |sql| ops::webhooks::list_endpoints(sql, &ws, limit, after.as_ref()).await)
                        .await
                }

                async fn delete_webhook_endpoint(&self, ws: &WorkspaceId, id: &WebhookEndpointId) -> Result<()> {
                    let (ws, id) = (ws.clone(), id.clone());
                    self.write(async move |sql| ops::webhooks::delete_endpoint(sql, &ws, &id).await).await
                }

                async fn list_webhook_deliveries(
                    &self,
                    ws: &WorkspaceId,
                    endpoint: &WebhookEndpointId,
                    query: ListWebhookDeliveries,
                ) -> Result<Listing<WebhookDelivery>> {
                    let (ws, endpoint) = (ws.clone(), endpoint.clone());
                    self.read(async move |sql| ops::webhooks::list_deliveries(sql, &ws, &endpoint, &query).await).await
                }

                async fn next_webhook_attempt_in(&self) -> Result<Option<Duration>> {
                    self.read(async move |sql| ops::webhooks::next_due_in(sql).await).await
                }

                async fn finish_webhook_attempt(&self, attempt: WebhookAttempt) -> Result<bool> {
                    self.write(async move |sql| ops::webhooks::finish_attempt(sql, &attempt).await).await
                }

                async fn prune_webhook_deliveries(&self, age: Duration) -> Result<u64> {
                    self.write(async move |sql| ops::webhooks::prune(sql, age).await).await
                }
            }
        };
    };
}
