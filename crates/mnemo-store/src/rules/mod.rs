//! The rules of the product, as pure functions over typed inputs, shared by every backend.
//!
//! A backend loads what a rule needs inside its transaction, asks the rule, and writes what the
//! rule returns; it decides nothing itself. Each module is tested as a table, one row per rule.
//!
//! - [`agent`]: the agent loop's turn lease and when a session owes a turn.
//! - [`session`]: the session/event state machine ([`session::plan_append`]).
//! - [`work`]: the work-item lease ([`work::Lease`]) and sessions-token liveness.
//! - [`scope`]: which credential may take which action ([`scope::decide`]).
//! - [`memory`]: archived stores, the cap, preconditions, overlaps, redaction.
//! - [`catalog`]: memory stores, environments and keys, agents, and new sessions.
//! - [`console`]: how long a console sign-in lasts and how long an ended one is kept.
//! - [`lifecycle`]: a new session's status, what archiving one does, agent version numbers.
//! - [`webhook`]: which change yields which webhook event, who is sent it, and retries.
//! - [`workspace`]: the Default workspace, the workspace cap, archiving and what it freezes.
//! - [`api_key`]: API and admin keys: status at a time, transitions, caps, hints.
//! - [`rate_limit`]: the rate-limit catalogue, `--rate-limit`, the effective limit, the token
//!   bucket and who is counted.
//! - [`people`]: org roles the API may give, the last admin, invites, workspace roles.
//! - [`audit`]: the audited actions, their details and how long the log is kept.
//! - [`search`]: the search query language, what a query matches, and snippets.
//! - [`retention`]: how long a store keeps versions, and which a purge deletes.
//! - [`refusal`]: how the organization rules above say no ([`refusal::Refusal`]).

pub mod agent;
pub mod api_key;
pub mod audit;
pub mod catalog;
pub mod console;
pub mod dream;
pub mod lifecycle;
pub mod memory;
pub mod people;
pub mod rate_limit;
pub mod refusal;
pub mod retention;
pub mod scope;
pub mod search;
pub mod semantic;
pub mod session;
pub mod sso;
pub mod webhook;
pub mod work;
pub mod workspace;
