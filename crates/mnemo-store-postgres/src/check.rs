//! `mnemo db check` on a PostgreSQL deployment: the schema version, every table with the
//! columns this build knows, mnemo's invariants ([`mnemo_store::check::INVARIANTS`]) in one
//! read-only snapshot (so servers may keep writing meanwhile), and — where the `amcheck`
//! extension is installed — a structural check of every B-tree index.
//!
//! It never migrates nor writes: it connects with one plain connection, not the store's pool.
//! What is wrong with the database is a [`Outcome::Problems`] in the report, never an error;
//! an error is what stops the check itself (the database unreachable, a permission missing).

use mnemo_store::StoreError;
use mnemo_store::check::{
    Check, Counts, Findings, INVARIANTS, Outcome, READABLE, Readable, Unreadable, columns_problem, skipped_invariants,
    skipped_readable,
};
use mnemo_store::copy::TABLES;

use crate::PostgresSettings;
use crate::engine::{backend, failure};

/// What a check found.
#[derive(Debug, Clone)]
pub struct PgCheckReport {
    /// The schema (namespace) mnemo's tables were looked for in.
    pub schema: String,
    /// The PostgreSQL server's version (`SHOW server_version`).
    pub server_version: String,
    /// What the tables and their indexes take on disk.
    pub size_bytes: u64,
    /// What the checks found; its schema version is the one `mnemo_schema` records (0: none).
    pub findings: Findings,
}

/// Checks the deployment `settings` reach (its search path names the schema).
pub async fn check(settings: &PostgresSettings) -> Result<PgCheckReport, StoreError> {
    // The URL's settings without the store's statement timeout: a check reads a whole database.
    let config = settings.client_config();
    let tls = settings.connector()?;
    let (mut client, connection) = config.connect(tls).await.map_err(backend)?;
    let driver = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "the check's connection ended");
        }
    });
    let report = run(&mut client).await;
    drop(client);
    let _ = driver.await;
    report
}

async fn run(client: &mut tokio_postgres::Client) -> Result<PgCheckReport, StoreError> {
    let server_version: String = client.query_one("SHOW server_version", &[]).await.map_err(backend)?.get(0);
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(backend)?;
    let schema: Option<String> = tx.query_one("SELECT current_schema()", &[]).await.map_err(backend)?.get(0);
    let Some(schema) = schema else {
        let path: String = tx.query_one("SHOW search_path", &[]).await.map_err(backend)?.get(0);
        return Err(failure(format!("no schema of the search path ({path}) exists: this is not a mnemo deployment")));
    };
    let mut report = PgCheckReport {
        schema,
        server_version,
        size_bytes: 0,
        findings: Findings::new(i64::try_from(crate::schema::VERSION).unwrap_or(i64::MAX)),
    };
    let size: Option<i64> = tx
        .query_one(
            "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'",
            &[],
        )
        .await
        .map_err(backend)?
        .get(0);
    report.size_bytes = size.unwrap_or(0).max(0) as u64;
    let tracked: Option<String> =
        tx.query_one("SELECT to_regclass('mnemo_schema')::text", &[]).await.map_err(backend)?.get(0);
    if tracked.is_some() {
        let version: Option<i32> =
            tx.query_one("SELECT max(version) FROM mnemo_schema", &[]).await.map_err(backend)?.get(0);
        report.findings.schema_version = i64::from(version.unwrap_or(0));
    }
    let schema = schema_outcome(&tx, report.findings.schema_version, report.findings.known_schema_version).await?;
    let schema_ok = schema == Outcome::Ok;
    report.findings.checks.push(Check { name: "schema", outcome: schema });
    if schema_ok {
        for invariant in INVARIANTS {
            let count: i64 = tx.query_one(&invariant.count_sql(), &[]).await.map_err(backend)?.get(0);
            let outcome = if count == 0 {
                Outcome::Ok
            } else {
                let examples: Vec<String> =
                    tx.query(&invariant.examples_sql(), &[]).await.map_err(backend)?.iter().map(|r| r.get(0)).collect();
                Outcome::Problems(vec![invariant.problem(count as u64, &examples)])
            };
            report.findings.checks.push(Check { name: invariant.name, outcome });
        }
        for readable in READABLE {
            report.findings.checks.push(Check { name: readable.name, outcome: unreadable_rows(&tx, readable).await? });
        }
        let count = async |table: &str| -> Result<u64, StoreError> {
            let n: i64 = tx.query_one(&format!("SELECT count(*) FROM \"{table}\""), &[]).await.map_err(backend)?.get(0);
            Ok(n.max(0) as u64)
        };
        report.findings.counts = Some(Counts {
            memory_stores: count("memory_stores").await?,
            memories: count("memories").await?,
            memory_versions: count("memory_versions").await?,
            sessions: count("sessions").await?,
        });
    } else {
        report.findings.checks.extend(skipped_invariants(mnemo_store::check::UNKNOWN_SCHEMA));
        report.findings.checks.extend(skipped_readable(mnemo_store::check::UNKNOWN_SCHEMA));
    }
    tx.commit().await.map_err(backend)?;
    report.findings.checks.push(Check { name: "amcheck", outcome: indexes(client).await? });
    Ok(report)
}

/// Reads every row of `readable`'s table in batches and decodes it as the server would.
async fn unreadable_rows(tx: &tokio_postgres::Transaction<'_>, readable: &Readable) -> Result<Outcome, StoreError> {
    let mut found = Unreadable::default();
    let mut after = i64::MIN;
    loop {
        let rows = tx.query(readable.batch_sql, &[&after, &Readable::BATCH]).await.map_err(backend)?;
        for row in &rows {
            after = row.get(0);
            let columns: Vec<String> = (1..row.len()).map(|i| row.get(i)).collect();
            found.note((readable.decode)(&columns));
        }
        if (rows.len() as i64) < Readable::BATCH {
            return Ok(found.outcome());
        }
    }
}

/// The schema version is this build's, and every table has the columns `mnemo db copy` knows.
async fn schema_outcome(tx: &tokio_postgres::Transaction<'_>, version: i64, known: i64) -> Result<Outcome, StoreError> {
    if let Some(outcome) = mnemo_store::check::schema_version(version, known) {
        return Ok(outcome);
    }
    let columns = tx
        .prepare(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
        )
        .await
        .map_err(backend)?;
    let mut problems = Vec::new();
    for table in TABLES {
        let found: Vec<String> =
            tx.query(&columns, &[&table.name]).await.map_err(backend)?.iter().map(|r| r.get(0)).collect();
        problems.extend(columns_problem(table, &found));
    }
    Ok(Outcome::of(problems))
}

/// `bt_index_check` of every B-tree index of the schema's tables, when `amcheck` is installed.
async fn indexes(client: &tokio_postgres::Client) -> Result<Outcome, StoreError> {
    let installed = client
        .query_opt("SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'amcheck'", &[])
        .await
        .map_err(backend)?;
    let Some(row) = installed else {
        return Ok(Outcome::Skipped(
            "the amcheck extension is not installed in this database (`CREATE EXTENSION amcheck`, then check again, \
             or run PostgreSQL's pg_amcheck)"
                .into(),
        ));
    };
    let extension_schema: String = row.get(0);
    let rows = client
        .query(
            "SELECT c.relname::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_am a ON a.oid = c.relam \
             WHERE n.nspname = current_schema() AND a.amname = 'btree' ORDER BY c.relname",
            &[],
        )
        .await
        .map_err(backend)?;
    let mut problems = Vec::new();
    let quoted = extension_schema.replace('"', "\"\"");
    for row in rows {
        let index: String = row.get(0);
        let sql = format!("SELECT \"{quoted}\".bt_index_check(to_regclass($1)::oid)");
        if let Err(e) = client.query_one(&sql, &[&format!("\"{}\"", index.replace('"', "\"\""))]).await {
            problems.push(format!(
                "index `{index}`: {}",
                e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned())
            ));
        }
    }
    Ok(Outcome::of(problems))
}
