//! The conformance cases: each an `async fn(&impl StoreFactory)` (or, for the property test,
//! a blocking `fn`) that opens its own fresh store, listed by section in
//! [`crate::conformance!`]. Failures are asserted on typed [`mnemo_store::StoreError`]
//! variants, never on messages.
//!
//! What each section checks:
//!
//! - [`people`] — a setup link makes the first admin once, within its life, and never a
//!   second; invites are made (one pending per email, never `admin`), accepted once, deleted
//!   only while pending, expire, and list by email, role and status; roles change as the API
//!   or the console may, never leaving the organization without an admin; members are added,
//!   changed and removed, org admins and billing members implicitly, and removal of a person
//!   ends their memberships; concurrent invites for one email have one winner.
//! - [`credentials`] — API keys are found and counted by the hash of their secret, and an
//!   existing hash keeps its key; `resolve_credential` tells an API key from an environment
//!   key from nothing, and a revoked key resolves to nothing; one secret that is several
//!   credentials resolves by the lookup order (API key, then environment key, then sessions
//!   token); a closed store refuses calls. Console sessions expire on the store's clock, are
//!   revoked one by one, and an absurd TTL ends at the last showable instant.
//! - [`environments`] — environments echo what they were created with; an update patches
//!   (`null`/`""` metadata removes a key, `Some(None)` clears the description), refuses a change
//!   of `config.type` and more than 16 metadata pairs; archiving is idempotent and freezes the
//!   environment; deletion takes its keys with it; an unknown environment is
//!   `environment_not_found`. Keys are listed per environment, revoked only through their own
//!   environment (another's is not found), and revoking twice changes nothing.
//! - [`isolation_environments`] — a call in one workspace about another workspace's
//!   environment, environment key, work item, queue or webhook endpoint fails exactly as for an
//!   unknown id and changes nothing; listings show a workspace's own rows only; an event is
//!   delivered to its resource's workspace's endpoints only, with that workspace's id and the
//!   organization's.
//! - [`agents`] — an update builds a new version on the latest one only (a stale or future
//!   base is a `Conflict`), an update that changes nothing writes no version, old versions stay
//!   readable; listings show the latest version, newest first, archived ones on request;
//!   archived agents refuse updates.
//! - [`sessions`] — a session snapshots its agent (version and overrides) and the stores it
//!   attaches (name, access, mount path), records its initial events and, on a self-hosted
//!   environment, queues its work; what it cannot run (unknown or archived environment,
//!   agent, agent version or store; a store twice) is refused; updates patch title and
//!   metadata; listings filter by agent, store, status, creation time and archival, newest
//!   first; archiving terminates it (with a `session.status_terminated` event) and stops its
//!   work, as does deletion.
//! - [`events`] — the log lists in commit order both ways, by type, within `processed_at`
//!   bounds, page by page without gaps or repeats, and `events_after` resumes from any
//!   position. The state machine end to end: agent tool calls run the session and idle it with
//!   `requires_action` naming the open calls; results answer exactly one open call of their
//!   kind; an identical retried result returns the recorded event and a different one is a
//!   `Conflict`; the last answer runs the session again; confirmations allow (call stays open)
//!   or deny (call answered); disabled tools are denied at once; agent events and turn ends
//!   from a client are `Forbidden`; a terminated session accepts nothing; input queues work on
//!   a self-hosted environment exactly when the session has no live item.
//! - [`work`] — the queue: polls deliver the oldest deliverable item and hide it; ack only a
//!   waiting delivery; conditional heartbeats (`NO_HEARTBEAT` first, each echoing the last;
//!   TTLs clamped to 1..=3600 s); graceful then forced stops, reported by heartbeats, a second
//!   stop a `Conflict`; items are scoped to their environment; listings, metadata patches and
//!   statistics; healthchecks; an unacknowledged delivery is reclaimed after its window.
//! - [`leases`] — with 1 s leases: a lapsed lease returns the item to the queue (seen by the
//!   next poll, or applied by `expire_work`, which counts it); a heartbeat keeps it; a lapsed
//!   `stopping` item becomes `stopped` and its session gets new work on new input. A sessions
//!   token resolves while its delivery or lease lives and dies the moment it lapses — with no
//!   other call in between — and on a stop and on a re-delivery.
//! - [`memories`] — memory stores CRUD (archived: reads and deletes work, writes are
//!   `Archived`); memories: content, rename, `content_sha256` preconditions, the no-op retry,
//!   path conflicts naming the blocker (equal, ancestor or descendant), the per-store cap
//!   counting live memories only; when several checks fail, the same one wins (archived, then
//!   the memory, then the precondition, then the path, then the cap); listings by prefix and depth with rolled-up prefixes, in
//!   byte order of path, paginated, full or basic; `memory_change_seq` moves on every
//!   change and only then; a batch of writes (`write_memories`) applies in order, each judged
//!   on what the ones before it left and with its own outcome (a refusal changes nothing and
//!   stops nothing), leaving the versions of the same writes made one by one; `memory_store_usage` counts live memories and their current
//!   content's bytes per store asked for (0 and 0 for an empty one, nothing for an unknown or
//!   deleted one); `export_memories` streams every live memory with content in byte order
//!   of path, in chunks, from one snapshot (writes after it began are not in it; its
//!   position is `memory_change_seq`'s), ending with `Done`, and stops when its reader goes;
//!   a cursor of another list is `InvalidCursor`.
//! - [`search`] — a memory is found from its write's acknowledgement and never after its deletion
//!   (nor by an old version's content); every form of the query language; a short memory naming a
//!   term five times outranks one mention in a long one; a workspace's search sees its own
//!   stores (or the named ones) only, and another's store is not found; results page by cursor.
//! - [`semantic`] — the embedder's work list follows each memory's current version (a refusal
//!   is kept, a vector of a version the memory has left is not, a change or move makes the
//!   memory pending again); ranking by meaning keeps to the workspace, the named stores, the
//!   path prefix and the query's narrowing terms; `search::by_meaning` finds a memory not yet
//!   embedded by full text, fuses both rankings, and pages each result once.
//! - [`versions`] — every create, change and delete writes exactly one version with its
//!   operation, path, digest, size and actor; version listings filter by memory (after
//!   deletion too), operation, actor and time, newest first, paginated; redaction clears a
//!   version's content, digest, size and path, refuses the current version
//!   (`RedactCurrentVersion`) and is a no-op the second time.
//! - [`concurrency`] — stories a multi-writer backend can fail, each repeated for several
//!   rounds: one winner among writers racing for a path; overlapping paths never coexist;
//!   the cap is filled exactly under concurrent creates; one winner among updates sharing a
//!   precondition; twelve pollers never share a delivery and drain the queue; a reader
//!   following `events_after` while several writers append sees every event, in order.
//! - [`webhooks`] — endpoints are created (showing their secret), read with or without it,
//!   listed newest first without secrets, patched and deleted (with their deliveries); every
//!   change records its webhook events, once and in commit order, with one delivery per
//!   subscribed endpoint in the change's own transaction (a refused write, an archive of an
//!   archived object, an agent update that changes nothing record none); a claim counts an
//!   attempt and hides the delivery for its lease, after which an unreported attempt is made
//!   again; outcomes apply only to the latest attempt (delivered, due again, failed); pruning
//!   drops finished deliveries only; concurrent claimers never share a delivery; a claim takes
//!   the oldest due first (a retry due earlier before a newer event's first attempt; deliveries
//!   due together in the order they were made) and returns them in that order; a rotated
//!   secret is claimed beside the new one until its overlap ends on the store's clock.
//! - [`turns`] — the agent loop's turn lease: granted when free, renewed by its holder, held
//!   against others, released only by its holder, free again once it lapses on the store's
//!   clock; concurrent claimers of one session get exactly one grant; `span.model_request_end`
//!   events add their usage to the session's `usage`, and only the agent side reports them.
//! - [`dreams`] — a create checks its inputs (another workspace's are unknown), the queue and
//!   the one `update_existing` dream per store; an `Idempotency-Key` answers the same dream;
//!   cancel and archive follow the lifecycle; lists filter and page newest first; one runner
//!   per dream until its lease lapses; the start makes one session; the copy of the input is
//!   whole, bounded and made once; a running dream's output store and session refuse others;
//!   a finish keeps a cancel, archives the session and lets the store go.
//! - [`retention`] — a store's own version retention, set, read and cleared, not found from
//!   another workspace; a purge keeps each live memory's newest version and every young one,
//!   deletes the rest (redacted and deleted memories' versions included) in bounded batches,
//!   and loses no write made while it runs.
//! - [`model`] — a property test: random creates, updates (content, rename, preconditions),
//!   deletes, listings and redactions agree with an in-memory model, including the version log
//!   (one version per successful write, none otherwise) and `memory_change_seq` (it moves
//!   exactly when a version is written).

/// Asserts that `$result` is an `Err` matching `$pattern`, printing what it was otherwise (and
/// why it should have matched, when a reason follows).
macro_rules! assert_err {
    ($result:expr, $pattern:pat $(if $guard:expr)? $(,)?) => {
        assert_err!($result, $pattern $(if $guard)?, "")
    };
    ($result:expr, $pattern:pat $(if $guard:expr)?, $why:expr $(,)?) => {
        match $result {
            Err($pattern) $(if $guard)? => {}
            other => panic!(
                "expected Err({}), got {:?} at {}:{} {}",
                stringify!($pattern),
                other,
                file!(),
                line!(),
                $why
            ),
        }
    };
}

/// Set-up the cases share, for a backend's own tests too (e.g. of rows it cannot read back).
pub mod fixtures;

pub mod agents;
pub mod audit;
pub mod concurrency;
pub mod credentials;
pub mod dreams;
pub mod environments;
pub mod events;
pub mod isolation_environments;
pub mod isolation_memory;
pub mod isolation_sessions;
pub mod leases;
pub mod memories;
pub mod model;
pub mod people;
pub mod rate_limits;
pub mod retention;
pub mod search;
pub mod semantic;
pub mod sessions;
pub mod sso;
pub mod turns;
pub mod versions;
pub mod webhooks;
pub mod work;
pub mod workspaces;

/// `[n; 32]` as a credential hash.
pub fn hash(n: u8) -> [u8; 32] {
    [n; 32]
}
