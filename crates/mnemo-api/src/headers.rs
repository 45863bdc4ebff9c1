//! The HTTP headers of the API that both ends must spell alike.

/// The `anthropic-version` a client sends on every request.
pub const API_VERSION: &str = "2026-10-21";
/// The header that names the betas a request opts into.
pub const BETA_HEADER: &str = "anthropic-beta";
/// The beta the memory endpoints are called under.
pub const MEMORY_BETA: &str = "agent-memory-2026-07-22";
/// The beta of environments, their work queue, agents and sessions.
pub const MANAGED_AGENTS_BETA: &str = "managed-agents-2026-04-01";
