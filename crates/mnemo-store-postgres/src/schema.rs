//! Schema migrations, tracked in the table `mnemo_schema`.
//!
//! Every replica migrates at start. The whole migration runs in one transaction holding an
//! advisory lock keyed by the schema's name, so replicas starting at once take turns: the first
//! applies what is missing, the others find nothing left to do. A database migrated by a newer
//! mnemo is refused rather than misread.

use deadpool_postgres::Object;
use mnemo_store::StoreError;

use crate::engine::{backend, failure};

/// Every migration in order; the schema version is the count applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_initial.sql"),
    include_str!("../migrations/0002_console_sessions.sql"),
    include_str!("../migrations/0003_webhooks.sql"),
    include_str!("../migrations/0004_agent_turns.sql"),
    include_str!("../migrations/0005_workspaces.sql"),
    include_str!("../migrations/0006_workspace_rate_limits.sql"),
    include_str!("../migrations/0007_audit.sql"),
    include_str!("../migrations/0008_rate_limit_buckets.sql"),
    include_str!("../migrations/0009_people.sql"),
    include_str!("../migrations/0010_person_sessions.sql"),
    include_str!("../migrations/0011_sso_identities.sql"),
    include_str!("../migrations/0012_memory_search.sql"),
    include_str!("../migrations/0013_version_retention.sql"),
    include_str!("../migrations/0014_dreams.sql"),
    include_str!("../migrations/0015_memory_embeddings.sql"),
    include_str!("../migrations/0016_search_index_behind_writes.sql"),
    include_str!("../migrations/0017_search_index_per_replica.sql"),
    include_str!("../migrations/0018_search_log_marks.sql"),
    include_str!("../migrations/0019_search_log_appended.sql"),
];

/// The newest schema version this build knows.
pub(crate) const VERSION: usize = MIGRATIONS.len();

/// Brings the database up to the newest schema; returns the schema (namespace) it lives in.
pub(crate) async fn migrate(client: &mut Object) -> Result<String, StoreError> {
    let tx = client.transaction().await.map_err(backend)?;
    // Keyed by the search path, which names the schema even before it exists.
    tx.execute("SELECT pg_advisory_xact_lock(hashtext('mnemo migrations ' || current_setting('search_path')))", &[])
        .await
        .map_err(backend)?;
    let schema = match tx.query_one("SELECT current_schema()", &[]).await.map_err(backend)?.get(0) {
        Some(schema) => schema,
        // The search path names a schema that does not exist yet: create the first one named
        // (`?options=-csearch_path%3Dmnemo` gives a deployment its own schema).
        None => {
            let path: String = tx.query_one("SHOW search_path", &[]).await.map_err(backend)?.get(0);
            let first = path.split(',').map(|s| s.trim().trim_matches('"')).find(|s| !s.is_empty() && *s != "$user");
            let Some(first) = first else {
                return Err(failure("the search_path names no schema to create the tables in"));
            };
            let quoted = first.replace('"', "\"\"");
            tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{quoted}\"")).await.map_err(backend)?;
            first.to_owned()
        }
    };
    // Looked up first: `IF NOT EXISTS` would log a notice on every start.
    let tracked: Option<String> =
        tx.query_one("SELECT to_regclass('mnemo_schema')::text", &[]).await.map_err(backend)?.get(0);
    if tracked.is_none() {
        tx.batch_execute("CREATE TABLE mnemo_schema (version INTEGER NOT NULL)").await.map_err(backend)?;
    }
    let current: Option<i32> =
        tx.query_opt("SELECT max(version) FROM mnemo_schema", &[]).await.map_err(backend)?.and_then(|r| r.get(0));
    let current = usize::try_from(current.unwrap_or(0)).unwrap_or(0);
    if current > VERSION {
        return Err(failure(mnemo_store::check::newer_schema(current, VERSION)));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        tx.batch_execute(sql).await.map_err(|e| failure(format!("migration {}: {e}", i + 1)))?;
        let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
        tx.execute("DELETE FROM mnemo_schema", &[]).await.map_err(backend)?;
        tx.execute("INSERT INTO mnemo_schema (version) VALUES ($1)", &[&version]).await.map_err(backend)?;
        tracing::info!(version, "applied a schema migration");
    }
    tx.commit().await.map_err(backend)?;
    Ok(schema)
}
