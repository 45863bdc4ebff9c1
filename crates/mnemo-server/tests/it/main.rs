//! End-to-end tests of the HTTP API: a real server on an ephemeral port, driven by the
//! project's own typed client.

mod admin;
mod audit;
mod auth;
mod common;
mod concurrency;
mod environments;
mod events;
mod fairness;
mod hostile;
mod input;
mod isolation_environments;
mod isolation_matrix;
mod isolation_memory;
mod isolation_sessions;
mod memories;
mod memory_batch;
mod memory_changes;
mod memory_retention;
mod memory_search;
mod memory_stores;
mod memory_stream;
mod memory_versions;
mod openapi;
mod rate_limits;
mod timeouts;
mod webhooks;
mod work;
