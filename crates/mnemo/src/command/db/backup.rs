//! `mnemo db backup` and `mnemo db check`. The work is [`mnemo_store_sqlite::backup()`] and
//! [`mnemo_store_sqlite::check()`]; this file picks the backend by the URL's scheme, prints
//! the report, and for PostgreSQL says how `pg_dump` does it.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use mnemo_api::Secret;
use mnemo_store::check::{Findings, Outcome};
use mnemo_store_postgres::{PgCheckReport, PostgresSettings};
use mnemo_store_sqlite::{BackupOptions, CheckReport, SqliteSettings};

use super::{postgres_name, scheme};

const BACKUP_ABOUT: &str = "\
Write a consistent copy of an SQLite database to PATH while `mnemo serve` keeps running on it.

The copy is one snapshot, taken through SQLite's online backup API: writes that commit while it \
runs are not in it, and never half in it. It is written beside PATH under a temporary name, \
checked (as `mnemo db check` does), flushed to disk and only then renamed to PATH, so PATH is \
either a whole, checked backup or not there. PATH must not exist unless --force is given.

To restore: stop the server, put the file in place of the database, remove any `-wal` and \
`-shm` files beside it, start the server (see docs/OPERATIONS.md).

For a PostgreSQL URL this prints the `pg_dump` and `pg_restore` commands to use and fails.";

const CHECK_ABOUT: &str = "\
Check a database: that the schema version is one this mnemo knows and every table has the \
columns it expects, and mnemo's own invariants (each store's memory count, every memory's \
current version and version chain, version contents, agent versions). On SQLite also \
`integrity_check` and `foreign_key_check`; on PostgreSQL also `amcheck`'s `bt_index_check` of \
every index, when that extension is installed (PostgreSQL enforces foreign keys itself).

Runs in one read snapshot and writes nothing (it never migrates), so it may run beside \
`mnemo serve`. Prints a report and fails, listing every problem, when something is wrong.";

/// `mnemo db backup`. (Database URLs may carry a password: they are [`Secret`]s.)
#[derive(Debug, Args)]
#[command(long_about = BACKUP_ABOUT)]
pub(crate) struct Backup {
    /// The database to back up, as `mnemo serve` takes it: `sqlite://PATH` (or a
    /// `postgres://` URL, for the `pg_dump` commands). Defaults to serve's default database.
    #[arg(long, value_name = "URL", env = "MNEMO_DATABASE", hide_env_values = true)]
    database: Option<Secret>,

    /// Replace PATH if it exists.
    #[arg(long)]
    force: bool,

    /// Pages copied per step of the backup; the copy pauses briefly between steps so that the
    /// disk keeps serving the server (the copy is one snapshot whatever the step).
    #[arg(long, value_name = "N", default_value_t = BackupOptions::default().pages_per_step,
          value_parser = clap::value_parser!(u32).range(1..))]
    pages_per_step: u32,

    /// The backup file to write.
    #[arg(value_name = "PATH")]
    path: PathBuf,
}

/// `mnemo db check`.
#[derive(Debug, Args)]
#[command(long_about = CHECK_ABOUT)]
pub(crate) struct Check {
    /// The database to check, as `mnemo serve` takes it: `sqlite://PATH` or `postgres://…`. Defaults to serve's
    /// default database.
    #[arg(long, value_name = "URL", env = "MNEMO_DATABASE", hide_env_values = true)]
    database: Option<Secret>,
}

/// What a database URL names.
enum Target {
    Sqlite(PathBuf),
    Postgres(Box<PostgresSettings>),
}

fn target(database: Option<Secret>) -> anyhow::Result<Target> {
    let url = match database {
        Some(url) => url.into_exposed(),
        None => crate::command::serve::default_database()?,
    };
    match scheme(&url).map(str::to_ascii_lowercase).as_deref() {
        Some("sqlite") => {
            Ok(Target::Sqlite(SqliteSettings::from_url(&url).map_err(|e| anyhow::anyhow!("--database: {e}"))?.path))
        }
        Some("postgres" | "postgresql") => Ok(Target::Postgres(Box::new(
            PostgresSettings::from_url(&url).map_err(|e| anyhow::anyhow!("--database: {e}"))?,
        ))),
        Some(other) => anyhow::bail!("--database: unsupported database scheme `{other}:`; use {}", super::FORMS),
        None => anyhow::bail!("--database must be a database URL: {}", super::FORMS),
    }
}

impl Backup {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let source = match target(self.database)? {
            Target::Sqlite(path) => path,
            Target::Postgres(settings) => anyhow::bail!("{}", pg_guidance(&settings, &self.path)),
        };
        let started = Instant::now();
        let options =
            BackupOptions { force: self.force, pages_per_step: self.pages_per_step, ..BackupOptions::default() };
        let target = self.path.clone();
        let report = tokio::task::spawn_blocking(move || mnemo_store_sqlite::backup(&source, &target, &options))
            .await
            .context("run the backup")??;
        let seconds = started.elapsed().as_secs_f64();
        tracing::info!(
            from = %report.source.display(), to = %report.target.display(), pages = report.pages, steps = report.steps,
            elapsed_ms = started.elapsed().as_millis(), "backed up"
        );
        let mut out = format!(
            "backed up SQLite database {} to {} in {seconds:.2} s (one snapshot: {} pages in {} step{})\n",
            report.source.display(),
            report.target.display(),
            report.pages,
            report.steps,
            if report.steps == 1 { "" } else { "s" }
        );
        out.push_str(&contents(&report.check));
        let invariants = report.check.findings.checks.len().saturating_sub(3);
        writeln!(out, "{:<16}ok (integrity_check, foreign_key_check, schema, {invariants} invariants)", "check")
            .expect("writing to a String");
        print!("{out}");
        Ok(())
    }
}

impl Check {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let (shown, problems) = match target(self.database)? {
            Target::Sqlite(path) => {
                let shown = path.display().to_string();
                let report = tokio::task::spawn_blocking(move || mnemo_store_sqlite::check(&path))
                    .await
                    .context("run the check")??;
                print!("{}", check_summary(&report));
                (shown, report.findings.problems())
            }
            Target::Postgres(settings) => {
                let shown = postgres_name(&settings);
                let report = mnemo_store_postgres::check(&settings)
                    .await
                    .map_err(|e| anyhow::anyhow!("check {shown}: {}", e.chain()))?;
                print!("{}", pg_check_summary(&shown, &report));
                (shown, report.findings.problems())
            }
        };
        if !problems.is_empty() {
            anyhow::bail!(
                "{shown} has {} problem{}:\n  {}",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" },
                problems.join("\n  ")
            );
        }
        Ok(())
    }
}

/// Size, schema version and what the database holds, one `name  value` line each.
fn contents(report: &CheckReport) -> String {
    let size = format!("{} ({} pages of {} bytes)", bytes(report.size_bytes), report.pages, report.page_size);
    held(size, &report.findings)
}

/// The lines every backend's report shares.
fn held(size: String, findings: &Findings) -> String {
    let (version, known) = (findings.schema_version, findings.known_schema_version);
    let mut out = String::new();
    let mut line = |name: &str, value: String| writeln!(out, "{name:<16}{value}").expect("writing to a String");
    line("size", size);
    let version = match version.cmp(&known) {
        std::cmp::Ordering::Equal => format!("{version} (current)"),
        std::cmp::Ordering::Less => format!("{version} (mnemo serve migrates it to {known})"),
        std::cmp::Ordering::Greater => format!("{version} (newer than this mnemo's {known})"),
    };
    line("schema version", version);
    if let Some(counts) = findings.counts {
        line("memory stores", counts.memory_stores.to_string());
        line("memories", format!("{} ({} versions)", counts.memories, counts.memory_versions));
        line("sessions", counts.sessions.to_string());
    }
    out
}

/// `mnemo db check`'s report: the contents, then one line per check (problems indented below).
fn check_summary(report: &CheckReport) -> String {
    let verdict = if report.findings.is_ok() { "ok" } else { "PROBLEMS FOUND" };
    let mut out = format!("checked SQLite database {}: {verdict}\n", report.path.display());
    out.push_str(&contents(report));
    out.push_str(&check_lines(&report.findings.checks));
    out
}

/// The same for a PostgreSQL deployment (`name` says where, without a password).
fn pg_check_summary(name: &str, report: &PgCheckReport) -> String {
    let verdict = if report.findings.is_ok() { "ok" } else { "PROBLEMS FOUND" };
    let mut out = format!("checked {name}: {verdict}\n");
    writeln!(out, "{:<16}PostgreSQL {}", "server", report.server_version).expect("writing to a String");
    writeln!(out, "{:<16}{}", "schema", report.schema).expect("writing to a String");
    out.push_str(&held(format!("{} (tables and indexes)", bytes(report.size_bytes)), &report.findings));
    out.push_str(&check_lines(&report.findings.checks));
    out
}

fn check_lines(checks: &[mnemo_store::check::Check]) -> String {
    let mut out = String::new();
    for check in checks {
        match &check.outcome {
            Outcome::Ok => writeln!(out, "{:<20}ok", check.name),
            Outcome::Skipped(why) => writeln!(out, "{:<20}skipped: {why}", check.name),
            Outcome::Problems(lines) => writeln!(out, "{:<20}FAILED", check.name)
                .and_then(|()| lines.iter().try_for_each(|l| writeln!(out, "    {l}"))),
        }
        .expect("writing to a String");
    }
    out
}

/// `1536` → `1.5 KiB`.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// What to do instead for a PostgreSQL database: the `pg_dump` / `pg_restore` commands for it,
/// its password left out.
fn pg_guidance(settings: &PostgresSettings, path: &std::path::Path) -> String {
    let url = shell_quote(&url_without_password(settings));
    let file = shell_quote(&path.display().to_string());
    let schema = search_path(settings).map(|s| format!(" --schema={}", shell_quote(&s))).unwrap_or_default();
    format!(
        "mnemo db backup copies SQLite databases only; back up the {name} with pg_dump, which takes a \
         consistent snapshot while mnemo serve keeps running:\n\n  \
         pg_dump --format=custom{schema} --file={file} {url}\n\n\
         Give the password through PGPASSWORD or ~/.pgpass (it is left out here). To restore, stop every \
         mnemo serve on the database and load the dump into it (--clean replaces what is there):\n\n  \
         pg_restore --clean --if-exists --no-owner --dbname={url} {file}\n\n\
         Or move the deployment into an SQLite file, with the servers stopped, and back that up: \
         mnemo db copy --from URL --to sqlite://PATH. See docs/OPERATIONS.md",
        name = postgres_name(settings),
    )
}

/// `postgres://USER@HOST:PORT/DB`, with `sslmode=require` when the URL asked for TLS.
fn url_without_password(settings: &PostgresSettings) -> String {
    let config = &settings.config;
    let user = config.get_user().map(|u| format!("{}@", encode(u))).unwrap_or_default();
    let (host, socket) = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) if h.contains(':') => (format!("[{h}]"), None),
        Some(tokio_postgres::config::Host::Tcp(h)) => (h.clone(), None),
        Some(tokio_postgres::config::Host::Unix(p)) => (String::new(), Some(p.display().to_string())),
        None => ("localhost".into(), None),
    };
    let port = config.get_ports().first().map(|p| format!(":{p}")).unwrap_or_default();
    let mut url = format!("postgres://{user}{host}{port}/{}", encode(config.get_dbname().unwrap_or_default()));
    let mut query = Vec::new();
    if let Some(socket) = socket {
        query.push(format!("host={}", encode(&socket)));
    }
    if settings.tls() {
        query.push("sslmode=require".to_owned());
    }
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    url
}

/// The schema a `-c search_path=…` option picks, if any (the first one named).
fn search_path(settings: &PostgresSettings) -> Option<String> {
    let options = settings.config.get_options()?;
    let (_, rest) = options.split_once("search_path=")?;
    let first = rest.split([' ', ',']).next()?.trim_matches('"');
    (!first.is_empty()).then(|| first.to_owned())
}

/// Percent-encodes what would break a URL's user, database or query part.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `s` as one POSIX shell word.
fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:@=%+,".contains(&b)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_guidance_names_the_database_and_never_the_password() {
        let settings = PostgresSettings::from_url(
            "postgres://mnemo:hunter2@db.internal:6543/prod?options=-csearch_path%3Dtenant_a",
        )
        .unwrap();
        let text = pg_guidance(&settings, std::path::Path::new("/backups/mnemo 1.dump"));
        assert!(!text.contains("hunter2"), "{text}");
        assert!(
            text.contains(
                "pg_dump --format=custom --schema=tenant_a --file='/backups/mnemo 1.dump' \
                 postgres://mnemo@db.internal:6543/prod\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("pg_restore --clean --if-exists --no-owner --dbname=postgres://mnemo@db.internal:6543/prod"),
            "{text}"
        );
        assert!(text.contains("mnemo db copy --from URL --to sqlite://PATH"), "{text}");

        let tls = PostgresSettings::from_url("postgresql://u:p%40ss@[::1]/d?sslmode=require").unwrap();
        assert_eq!(url_without_password(&tls), "postgres://u@[::1]:5432/d?sslmode=require");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(bytes(812), "812 bytes");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
    }

    #[test]
    fn debug_shows_no_url() {
        let backup = Backup {
            database: Some("postgres://u:hunter2@h/db".into()),
            force: false,
            pages_per_step: 1,
            path: "x".into(),
        };
        assert!(!format!("{backup:?}").contains("hunter2"));
        let check = Check { database: Some("postgres://u:hunter2@h/db".into()) };
        assert!(!format!("{check:?}").contains("hunter2"));
    }
}
