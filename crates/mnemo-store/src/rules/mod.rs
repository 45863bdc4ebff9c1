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
//! - [`credential`]: when a stored API key still authenticates.
//! - [`console`]: how long a console sign-in lasts and how long an ended one is kept.
//! - [`lifecycle`]: a new session's status, what archiving one does, agent version numbers.
//! - [`webhook`]: which change yields which webhook event, who is sent it, and retries.

pub mod agent;
pub mod catalog;
pub mod console;
pub mod credential;
pub mod lifecycle;
pub mod memory;
pub mod scope;
pub mod session;
pub mod webhook;
pub mod work;
