//! The HTTP headers of the API that both ends must spell alike.

/// The `anthropic-version` a client sends on every request.
pub const API_VERSION: &str = "2026-10-21";
/// The header that names the betas a request opts into.
pub const BETA_HEADER: &str = "anthropic-beta";
/// The beta the memory endpoints are called under.
pub const MEMORY_BETA: &str = "agent-memory-2026-07-22";
/// The beta of environments, their work queue, agents and sessions.
pub const MANAGED_AGENTS_BETA: &str = "managed-agents-2026-04-01";
/// The beta of dreams (`/v1/dreams`).
pub const DREAMING_BETA: &str = "dreaming-2026-04-21";
/// Sent by `mnemo serve` on every answer: the mnemo extensions it serves, comma-separated. A
/// client learns from any answer (an error included) that it talks to `mnemo serve`; the hosted
/// API sends no such header.
pub const EXTENSIONS_HEADER: &str = "mnemo-extensions";
/// The extension of [`EXTENSIONS_HEADER`] that is a store's memory stream
/// (`GET /v1/memory_stores/{store}/memories:stream`).
pub const MEMORY_STREAM_EXTENSION: &str = "memory-stream";
/// The extension of [`EXTENSIONS_HEADER`] that applies an ordered batch of memory writes in one
/// request (`POST /v1/memory_stores/{store}/memories:batch`).
pub const MEMORY_BATCH_EXTENSION: &str = "memory-batch";
/// The extension of [`EXTENSIONS_HEADER`] that searches memories
/// (`GET /v1/memory_stores/{store}/memories:search` and `GET /v1/memories:search`).
pub const MEMORY_SEARCH_EXTENSION: &str = "memory-search";
/// The extension of [`EXTENSIONS_HEADER`] that says memory searches may rank by meaning
/// (`mode=semantic|hybrid`): the server has an embeddings provider.
pub const MEMORY_SEARCH_SEMANTIC_EXTENSION: &str = "memory-search-semantic";
/// The extension of [`EXTENSIONS_HEADER`] that reads and sets a store's version retention
/// (`GET`/`POST /v1/memory_stores/{store}/version_retention`).
pub const VERSION_RETENTION_EXTENSION: &str = "version-retention";
