//! Schema migrations, tracked in `PRAGMA user_version`.

use mnemo_store::StoreError;
use rusqlite::Connection;

use crate::engine::backend;

/// Every migration in order; the schema version is the count applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_initial.sql"),
    include_str!("../migrations/0002_environments.sql"),
    include_str!("../migrations/0003_agents_sessions_work.sql"),
    include_str!("../migrations/0004_console_sessions.sql"),
    include_str!("../migrations/0005_webhooks.sql"),
    include_str!("../migrations/0006_agent_turns.sql"),
    include_str!("../migrations/0007_workspaces.sql"),
    include_str!("../migrations/0008_workspace_rate_limits.sql"),
    include_str!("../migrations/0009_audit.sql"),
    include_str!("../migrations/0010_rate_limit_buckets.sql"),
    include_str!("../migrations/0011_people.sql"),
    include_str!("../migrations/0012_person_sessions.sql"),
    include_str!("../migrations/0013_sso_identities.sql"),
    include_str!("../migrations/0014_memory_search.sql"),
    include_str!("../migrations/0015_version_retention.sql"),
    include_str!("../migrations/0016_dreams.sql"),
    include_str!("../migrations/0017_memory_embeddings.sql"),
    include_str!("../migrations/0018_search_index_behind_writes.sql"),
];

/// The newest schema version: what a migrated database's `user_version` says.
pub(crate) const VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database up to the newest schema, one transaction per migration.
pub(crate) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let current: usize = conn
        .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map_err(backend)?
        .try_into()
        .map_err(backend)?;
    if current > MIGRATIONS.len() {
        return Err(crate::engine::failure(mnemo_store::check::newer_schema(current, MIGRATIONS.len())));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        conn.execute_batch(&format!("BEGIN IMMEDIATE; {sql}; PRAGMA user_version = {}; COMMIT;", i + 1))
            .map_err(|e| crate::engine::failure(format!("migration {}: {e}", i + 1)))?;
    }
    Ok(())
}
