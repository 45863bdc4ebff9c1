//! `mnemo db copy`: move a deployment between databases (SQLite ⇄ PostgreSQL, or between two
//! of one kind), row for row, and verify the copy. The work is [`mnemo_store::copy::run`];
//! this file opens the two sides, shows progress and prints the summary. `mnemo db backup`
//! and `mnemo db check` live in [`backup`].

mod backup;

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use mnemo_api::Secret;
use mnemo_store::Store;
use mnemo_store::copy::{self, Phase, Progress, Report, RowAccess, Side};
use mnemo_store_postgres::{PostgresSettings, PostgresStore};
use mnemo_store_sqlite::{SqliteSettings, SqliteStore};

#[derive(Debug, Subcommand)]
pub(crate) enum Db {
    /// Copy a whole deployment into another database (SQLite ⇄ PostgreSQL) and verify it.
    #[command(long_about = COPY_ABOUT)]
    Copy(Copy),
    /// Write a consistent copy of an SQLite database while the server keeps running.
    Backup(backup::Backup),
    /// Check a database (SQLite or PostgreSQL): its integrity, schema version and mnemo's invariants.
    Check(backup::Check),
}

const COPY_ABOUT: &str = "\
Copy a whole deployment into another database (SQLite ⇄ PostgreSQL, or between two of one \
kind) and verify it.

Every row of every table moves as it is: memory stores, memories and every version (with its \
actor and redaction), environments and their keys (as hashes), agents and their versions, \
sessions with their attached stores and events, work items with their queue state, sessions \
tokens, worker polls and API keys — ids and `seq` values included, so clients, workers and \
keys keep working against the copy.

Stop every `mnemo serve` using the source first: the source must not change during the copy \
(a change is detected, and the copy fails). Both databases are opened as a server opens them, \
which brings their schemas up to date.

The target must be empty unless --replace is given, which first deletes everything in it. \
After copying, both sides are read back: per table, the row counts and a SHA-256 digest of \
every row must match, or the command fails naming the table. A failed copy leaves the target \
partly filled; run it again with --replace.";

/// `mnemo db copy`. (URLs may carry passwords: they are [`Secret`]s.)
#[derive(Debug, Args)]
pub(crate) struct Copy {
    /// The database to copy: `sqlite://PATH` or `postgres://USER:PASS@HOST:PORT/DB`. Nothing
    /// may write to it meanwhile.
    #[arg(long, value_name = "URL", env = "MNEMO_COPY_FROM", hide_env_values = true)]
    from: Secret,

    /// The database to fill (an SQLite file is created if missing); it must be empty unless
    /// --replace is given.
    #[arg(long, value_name = "URL", env = "MNEMO_COPY_TO", hide_env_values = true)]
    to: Secret,

    /// Delete everything in the target before copying.
    #[arg(long)]
    replace: bool,
}

impl Db {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Copy(cmd) => cmd.run().await,
            Self::Backup(cmd) => cmd.run().await,
            Self::Check(cmd) => cmd.run().await,
        }
    }
}

impl Copy {
    async fn run(self) -> anyhow::Result<()> {
        let source = Database::open("--from", self.from.expose(), Side::Source).await?;
        let target = match Database::open("--to", self.to.expose(), Side::Target).await {
            Ok(target) => target,
            Err(e) => {
                source.close().await;
                return Err(e);
            }
        };
        tracing::info!(from = %source.name, to = %target.name, replace = self.replace, "copying");
        let started = Instant::now();
        let bar = Bar::new();
        let options = copy::Options { replace: self.replace, ..copy::Options::default() };
        let outcome = copy::run(source.rows(), target.rows(), options, &bar).await;
        bar.0.finish_and_clear();
        source.close().await;
        target.close().await;
        let report = outcome?;
        let elapsed = started.elapsed();
        tracing::info!(rows = report.total_rows(), elapsed_ms = elapsed.as_millis(), "copied and verified");
        print!("{}", summary(&report, &source.name, &target.name, elapsed.as_secs_f64()));
        Ok(())
    }
}

/// What the copy did, for stdout: one line per table.
fn summary(report: &Report, from: &str, to: &str, seconds: f64) -> String {
    let mut out = format!(
        "copied {} rows from {from} to {to} in {seconds:.2} s; verified: every table's row count and SHA-256 \
         digest match\n",
        report.total_rows()
    );
    out.push_str(&format!("{:<24}{:>10}  sha256\n", "table", "rows"));
    for table in &report.tables {
        out.push_str(&format!("{:<24}{:>10}  {}\n", table.table, table.summary.rows, table.summary.hex()));
    }
    out
}

/// One side of the copy.
struct Database {
    store: Backend,
    /// How messages name it (never with a password).
    name: String,
}

enum Backend {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

/// The scheme of a database URL (what precedes `:`), if it has one.
fn scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once(':')?;
    let valid = !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    valid.then_some(scheme)
}

const FORMS: &str = "`sqlite://PATH` or `postgres://USER:PASS@HOST:PORT/DB`";

impl Database {
    /// Opens the database `url` names as a server would (migrating it); `flag` names the
    /// option in messages, which never repeat the URL past its scheme.
    async fn open(flag: &str, url: &str, side: Side) -> anyhow::Result<Self> {
        let scheme = scheme(url).map(str::to_ascii_lowercase);
        match scheme.as_deref() {
            Some("sqlite") => {
                let settings = SqliteSettings::from_url(url).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
                let path = settings.path.display().to_string();
                if side == Side::Source && !settings.path.is_file() {
                    anyhow::bail!("{flag}: there is no SQLite database at {path}");
                }
                let store = tokio::task::spawn_blocking(move || SqliteStore::open(&settings))
                    .await
                    .context("open the database")?
                    .map_err(|e| anyhow::anyhow!("{flag}: open {path}: {}", e.chain()))?;
                Ok(Self { store: Backend::Sqlite(store), name: format!("SQLite database {path}") })
            }
            Some("postgres" | "postgresql") => {
                let mut settings = PostgresSettings::from_url(url).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
                // A copy holds few connections, and a long statement is not a stuck request.
                settings.pool_size = 4;
                settings.statement_timeout = None;
                let name = postgres_name(&settings);
                let store = PostgresStore::open(&settings)
                    .await
                    .map_err(|e| anyhow::anyhow!("{flag}: open {name}: {}", e.chain()))?;
                Ok(Self { store: Backend::Postgres(store), name })
            }
            Some(other) => anyhow::bail!("{flag}: unsupported database scheme `{other}:`; use {FORMS}"),
            None => anyhow::bail!("{flag} must be a database URL: {FORMS}"),
        }
    }

    fn rows(&self) -> &dyn RowAccess {
        match &self.store {
            Backend::Sqlite(s) => s,
            Backend::Postgres(s) => s,
        }
    }

    async fn close(&self) {
        match &self.store {
            Backend::Sqlite(s) => s.close().await,
            Backend::Postgres(s) => s.close().await,
        }
    }
}

/// `PostgreSQL database `mnemo` on 127.0.0.1:5432`, and the options when they pick a schema.
fn postgres_name(settings: &PostgresSettings) -> String {
    let config = &settings.config;
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let mut name = format!("PostgreSQL database `{}` on {host}:{port}", config.get_dbname().unwrap_or_default());
    if let Some(options) = config.get_options().filter(|o| o.contains("search_path")) {
        name.push_str(&format!(" ({options})"));
    }
    name
}

/// The progress bar on stderr, drawn only when stderr is a terminal.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn new() -> Self {
        if !std::io::stderr().is_terminal() {
            return Self(indicatif::ProgressBar::hidden());
        }
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{prefix:>9} [{bar:30}] {pos}/{len} rows  {msg} ({elapsed})")
                .expect("the template is valid")
                .progress_chars("=> "),
        );
        Self(bar)
    }
}

impl Progress for Bar {
    fn phase(&self, phase: Phase, rows: u64) {
        self.0.set_prefix(match phase {
            Phase::Copy => "copying",
            Phase::Verify => "verifying",
        });
        self.0.set_length(rows);
        self.0.set_position(0);
    }

    fn table(&self, table: &'static str) {
        self.0.set_message(table);
    }

    fn advance(&self, rows: u64) {
        self.0.inc(rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_has_one_line_per_table() {
        let report = Report {
            tables: vec![
                copy::TableReport { table: "api_keys", summary: copy::Summary { rows: 2, sha256: [0xab; 32] } },
                copy::TableReport { table: "worker_polls", summary: copy::Summary { rows: 0, sha256: [1; 32] } },
            ],
        };
        let text = summary(&report, "SQLite a.db", "PostgreSQL mnemo on h:1", 1.234);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "copied 2 rows from SQLite a.db to PostgreSQL mnemo on h:1 in 1.23 s; verified: every table's row count \
             and SHA-256 digest match"
        );
        assert_eq!(lines[2], format!("api_keys                         2  {}", "ab".repeat(32)));
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn debug_shows_no_url() {
        // URLs may carry passwords: they are `Secret`s, whole (the scheme is not worth a
        // hand-written `Debug`).
        let copy = Copy { from: "postgres://u:hunter2@h/db".into(), to: "sqlite://x".into(), replace: false };
        let shown = format!("{copy:?}");
        assert!(!shown.contains("hunter2") && !shown.contains("sqlite://x"), "{shown}");
        assert_eq!(shown, "Copy { from: [redacted], to: [redacted], replace: false }");
        assert_eq!(copy.from.expose(), "postgres://u:hunter2@h/db");
    }
}
