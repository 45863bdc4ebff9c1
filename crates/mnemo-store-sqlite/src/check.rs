//! `mnemo db check` on an SQLite file: SQLite's own checks, the schema version, and mnemo's
//! invariants ([`mnemo_store::check::INVARIANTS`]), all in one read snapshot, so a running
//! `mnemo serve` may keep writing meanwhile.
//!
//! What is wrong with the database is found [`Outcome::Problems`] in the report, never an
//! error: a damaged file, a foreign key to nowhere, a schema newer than this build, a broken
//! invariant. [`CheckError`] is for what stops the check itself (no such file, a locked
//! database).

use std::path::{Path, PathBuf};
use std::time::Duration;

use mnemo_store::check::{INVARIANTS, READABLE, Readable, Unreadable};
use mnemo_store::copy::TABLES;
use rusqlite::{Connection, ErrorCode, OpenFlags};

/// The most lines of `integrity_check` and `foreign_key_check` a report keeps.
const MAX_LINES: usize = 20;

/// What stops a check from running.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("there is no SQLite database at {}", .0.display())]
    NotFound(PathBuf),
    #[error("open {}: {source}", path.display())]
    Open { path: PathBuf, source: rusqlite::Error },
    #[error("{doing}: {source}")]
    Sqlite { doing: String, source: rusqlite::Error },
    #[error("{doing}: {source}")]
    Io { doing: String, source: std::io::Error },
}

pub use mnemo_store::check::{Check, Counts, Findings, Outcome};

/// What a check found.
#[derive(Debug, Clone)]
pub struct CheckReport {
    pub path: PathBuf,
    /// The size of the database file (a write-ahead log beside it not included).
    pub size_bytes: u64,
    pub page_size: u64,
    pub pages: u64,
    /// What the checks found; its schema version is `PRAGMA user_version`, how many migrations
    /// the file has had.
    pub findings: Findings,
}

/// Whether `e` says the file itself is damaged (a finding, not a failure of the check).
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase))
}

/// Opens an existing database without creating anything and without writing: read-write
/// where allowed (so a write-ahead-logging file opens whether or not a server has it open),
/// else read-only.
pub(crate) fn open_existing(path: &Path) -> Result<Connection, CheckError> {
    let base = OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, base | OpenFlags::SQLITE_OPEN_READ_WRITE)
        .or_else(|_| Connection::open_with_flags(path, base | OpenFlags::SQLITE_OPEN_READ_ONLY))
        .map_err(|source| CheckError::Open { path: path.to_owned(), source })?;
    conn.busy_timeout(Duration::from_secs(10))
        .and_then(|()| conn.execute_batch("PRAGMA query_only = ON"))
        .map_err(|source| CheckError::Open { path: path.to_owned(), source })?;
    Ok(conn)
}

/// Checks the database at `path`.
pub fn check(path: &Path) -> Result<CheckReport, CheckError> {
    if !path.is_file() {
        return Err(CheckError::NotFound(path.to_owned()));
    }
    let conn = open_existing(path)?;
    let size_bytes = std::fs::metadata(path)
        .map_err(|source| CheckError::Io { doing: format!("read {}", path.display()), source })?
        .len();
    let mut report = CheckReport {
        path: path.to_owned(),
        size_bytes,
        page_size: 0,
        pages: 0,
        findings: Findings::new(crate::schema::VERSION),
    };
    // One snapshot for every check: a server writing meanwhile changes nothing we read.
    match conn.execute_batch("BEGIN; SELECT count(*) FROM sqlite_schema;") {
        Ok(()) => {}
        Err(e) if is_damage(&e) => {
            report.findings.checks.push(Check { name: "open", outcome: Outcome::Problems(vec![damage(&e)]) });
            return Ok(report);
        }
        Err(source) => return Err(CheckError::Sqlite { doing: format!("read {}", path.display()), source }),
    }
    let pragma = |name: &str| conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0));
    report.page_size = pragma("page_size").map_or(0, |v| v.max(0) as u64);
    report.pages = pragma("page_count").map_or(0, |v| v.max(0) as u64);
    report.findings.schema_version = pragma("user_version").unwrap_or_default();

    report.findings.checks.push(Check { name: "integrity_check", outcome: attempt(|| integrity(&conn))? });
    report.findings.checks.push(Check { name: "foreign_key_check", outcome: attempt(|| foreign_keys(&conn))? });
    let schema = attempt(|| schema(&conn, report.findings.schema_version))?;
    let schema_ok = schema == Outcome::Ok;
    report.findings.checks.push(Check { name: "schema", outcome: schema });
    for invariant in INVARIANTS {
        let outcome = if schema_ok {
            attempt(|| {
                let count: i64 = conn.query_row(&invariant.count_sql(), [], |r| r.get(0))?;
                if count == 0 {
                    return Ok(Outcome::Ok);
                }
                let mut stmt = conn.prepare(&invariant.examples_sql())?;
                let examples = stmt.query_map([], |r| r.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(Outcome::Problems(vec![invariant.problem(count as u64, &examples)]))
            })?
        } else {
            Outcome::Skipped(mnemo_store::check::UNKNOWN_SCHEMA.into())
        };
        report.findings.checks.push(Check { name: invariant.name, outcome });
    }
    for readable in READABLE {
        let outcome = if schema_ok {
            attempt(|| unreadable_rows(&conn, readable))?
        } else {
            Outcome::Skipped("the schema is not the one this mnemo knows".into())
        };
        report.findings.checks.push(Check { name: readable.name, outcome });
    }
    if schema_ok {
        let count = |table: &str| -> u64 {
            conn.query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |r| r.get::<_, i64>(0))
                .map_or(0, |n| n.max(0) as u64)
        };
        report.findings.counts = Some(Counts {
            memory_stores: count("memory_stores"),
            memories: count("memories"),
            memory_versions: count("memory_versions"),
            sessions: count("sessions"),
        });
    }
    let _ = conn.execute_batch("COMMIT");
    Ok(report)
}

/// The words for a damaged file.
fn damage(e: &rusqlite::Error) -> String {
    if e.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
        format!("the file is not an SQLite database, or its header is damaged ({e})")
    } else {
        format!("the database file is damaged ({e})")
    }
}

/// Runs one check: damage it meets is its finding; any other failure stops the whole check.
fn attempt(f: impl FnOnce() -> rusqlite::Result<Outcome>) -> Result<Outcome, CheckError> {
    match f() {
        Ok(outcome) => Ok(outcome),
        Err(e) if is_damage(&e) => Ok(Outcome::Problems(vec![damage(&e)])),
        Err(source) => Err(CheckError::Sqlite { doing: "run the check".into(), source }),
    }
}

/// Reads every row of `readable`'s table in batches and decodes it as the server would.
fn unreadable_rows(conn: &Connection, readable: &Readable) -> rusqlite::Result<Outcome> {
    let mut found = Unreadable::default();
    let mut stmt = conn.prepare(readable.batch_sql)?;
    let mut after = i64::MIN;
    loop {
        let mut rows = stmt.query(rusqlite::params![after, Readable::BATCH])?;
        let mut read = 0;
        while let Some(row) = rows.next()? {
            read += 1;
            after = row.get(0)?;
            let columns =
                (1..row.as_ref().column_count()).map(|i| row.get(i)).collect::<rusqlite::Result<Vec<String>>>()?;
            found.note((readable.decode)(&columns));
        }
        if read < Readable::BATCH {
            return Ok(found.outcome());
        }
    }
}

fn integrity(conn: &Connection) -> rusqlite::Result<Outcome> {
    let mut stmt = conn.prepare(&format!("PRAGMA integrity_check({MAX_LINES})"))?;
    let lines = stmt.query_map([], |r| r.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(if lines == ["ok"] { Outcome::Ok } else { Outcome::Problems(lines) })
}

fn foreign_keys(conn: &Connection) -> rusqlite::Result<Outcome> {
    let mut stmt = conn.prepare("PRAGMA foreign_key_check")?;
    let mut rows = stmt.query([])?;
    let mut lines = Vec::new();
    let mut total = 0_u64;
    while let Some(row) = rows.next()? {
        total += 1;
        if lines.len() < MAX_LINES {
            let table: String = row.get(0)?;
            let rowid: Option<i64> = row.get(1)?;
            let parent: String = row.get(2)?;
            let row = rowid.map_or_else(|| "a row".to_owned(), |id| format!("row {id}"));
            lines.push(format!("`{table}` {row} refers to a missing `{parent}` row"));
        }
    }
    if total > lines.len() as u64 {
        lines.push(format!("and {} more", total - lines.len() as u64));
    }
    Ok(Outcome::of(lines))
}

/// The schema version is this build's, and every table has the columns `mnemo db copy` knows.
fn schema(conn: &Connection, version: i64) -> rusqlite::Result<Outcome> {
    let known = crate::schema::VERSION;
    if let Some(outcome) = mnemo_store::check::schema_version(version, known) {
        return Ok(outcome);
    }
    let mut problems = Vec::new();
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    for table in TABLES {
        let found = stmt.query_map([table.name], |r| r.get::<_, String>(0))?.collect::<rusqlite::Result<Vec<_>>>()?;
        problems.extend(mnemo_store::check::columns_problem(table, &found));
    }
    Ok(Outcome::of(problems))
}

#[cfg(test)]
pub(crate) mod tests {
    use mnemo_store::Operations;
    use std::collections::BTreeMap;

    use mnemo_api::{Actor, MemoryPath};
    use mnemo_store::{MemoryChange, NewMemoryStore, Store};

    use super::*;
    use crate::{Durability, SqliteSettings, SqliteStore};

    pub(crate) fn open(path: &Path) -> SqliteStore {
        let mut settings = SqliteSettings::from_url(&format!("sqlite://{}", path.display())).unwrap();
        settings.durability = Durability::Normal;
        SqliteStore::open(&settings).unwrap()
    }

    /// Two stores, `memories` memories with a few versions each (one renamed, one deleted,
    /// one old version redacted), and an agent with two versions.
    pub(crate) async fn fill(s: &SqliteStore, memories: usize) {
        let actor = Actor::UserActor { user_id: "u".into() };
        let new =
            |name: &str| NewMemoryStore { name: name.into(), description: String::new(), metadata: BTreeMap::new() };
        let a = s.create_memory_store(&s.default_workspace().await.unwrap(), new("a")).await.unwrap();
        let b = s.create_memory_store(&s.default_workspace().await.unwrap(), new("b")).await.unwrap();
        for i in 0..memories {
            let store = if i % 2 == 0 { &a } else { &b };
            let path = MemoryPath::parse(&format!("/notes/{i}.md")).unwrap();
            let m = s
                .create_memory(
                    &s.default_workspace().await.unwrap(),
                    &store.id,
                    path,
                    format!("v1 of {i} {}", "x".repeat(200)),
                    actor.clone(),
                )
                .await
                .unwrap();
            let change = MemoryChange { content: Some(format!("v2 of {i} é\0")), path: None, expected_sha256: None };
            s.update_memory(&s.default_workspace().await.unwrap(), &store.id, &m.id, change, actor.clone())
                .await
                .unwrap();
            match i % 5 {
                1 => s
                    .delete_memory(&s.default_workspace().await.unwrap(), &store.id, &m.id, None, actor.clone())
                    .await
                    .unwrap(),
                2 => {
                    let to = MemoryPath::parse(&format!("/moved/{i}.md")).unwrap();
                    let change = MemoryChange { content: None, path: Some(to), expected_sha256: None };
                    s.update_memory(&s.default_workspace().await.unwrap(), &store.id, &m.id, change, actor.clone())
                        .await
                        .unwrap();
                    let mut q = mnemo_store::ListMemoryVersions::newest(10);
                    q.memory_id = Some(m.id.clone());
                    let oldest = s
                        .list_memory_versions(&s.default_workspace().await.unwrap(), &store.id, q)
                        .await
                        .unwrap()
                        .items
                        .pop()
                        .unwrap();
                    s.redact_memory_version(
                        &s.default_workspace().await.unwrap(),
                        &store.id,
                        &oldest.id,
                        actor.clone(),
                    )
                    .await
                    .unwrap();
                }
                _ => {}
            }
        }
        let agent = new_agent(s).await;
        let update = mnemo_api::AgentParams { system: Some(Some("be brief".into())), ..Default::default() };
        s.update_agent(&s.default_workspace().await.unwrap(), &agent.id, 1, update).await.unwrap();
    }

    /// An agent `n` in the default workspace, as `fill` and `session_with_message` both need one.
    async fn new_agent(s: &SqliteStore) -> mnemo_api::Agent {
        let params: mnemo_api::AgentParams =
            serde_json::from_value(serde_json::json!({"name": "n", "model": "claude-opus-4-6"})).unwrap();
        s.create_agent(&s.default_workspace().await.unwrap(), mnemo_api::AgentSpec::from_params(&params).unwrap())
            .await
            .unwrap()
    }

    async fn filled(dir: &Path) -> PathBuf {
        let path = dir.join("db.sqlite");
        let store = open(&path);
        fill(&store, 20).await;
        store.close().await;
        path
    }

    fn problems_of(report: &CheckReport, name: &str) -> Vec<String> {
        match &report.findings.checks.iter().find(|c| c.name == name).unwrap().outcome {
            Outcome::Problems(lines) => lines.clone(),
            other => panic!("{name}: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_healthy_database_passes_every_check() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path()).await;
        let report = check(&path).unwrap();
        assert!(report.findings.is_ok(), "{:?}", report.findings.problems());
        assert!(report.findings.checks.iter().all(|c| c.outcome == Outcome::Ok), "{:?}", report.findings.checks);
        assert_eq!(report.findings.checks.len(), 3 + INVARIANTS.len() + READABLE.len());
        assert_eq!(report.findings.schema_version, crate::schema::VERSION);
        // 20 memories, 4 of them deleted; 2 versions each, plus a deletion or a rename for 8.
        let counts = report.findings.counts.unwrap();
        assert_eq!((counts.memory_stores, counts.memories, counts.memory_versions), (2, 16, 48));
        assert_eq!(report.size_bytes, report.pages * report.page_size);

        // A server holding the file open (WAL, a live log) is checked all the same.
        let store = open(&path);
        fill(&store, 3).await;
        let live = check(&path).unwrap();
        assert!(live.findings.is_ok(), "{:?}", live.findings.problems());
        assert_eq!(live.findings.counts.unwrap().memory_stores, 4);
        store.close().await;
    }

    #[tokio::test]
    async fn broken_invariants_are_each_named_with_their_subjects() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path()).await;
        let c = Connection::open(&path).unwrap();
        let (store, memory, version_seq): (String, String, i64) = c
            .query_row(
                "SELECT s.id, m.id, m.version_seq FROM memories m JOIN memory_stores s ON s.seq = m.store_seq \
                 ORDER BY m.seq LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        c.execute_batch(&format!(
            "UPDATE memory_stores SET memory_count = memory_count + 2 WHERE id = '{store}';
             UPDATE memory_versions SET content = 'tampered' WHERE seq = {version_seq};
             UPDATE agents SET latest_version = 3;"
        ))
        .unwrap();
        drop(c);
        let report = check(&path).unwrap();
        assert!(!report.findings.is_ok());
        let count = problems_of(&report, "memory_count");
        assert_eq!(count.len(), 1);
        assert!(count[0].starts_with("1 memory store breaks"), "{count:?}");
        assert!(count[0].contains(&format!("{store} (memory_count 10, live memories 8)")), "{count:?}");
        let content = problems_of(&report, "version_content");
        assert!(content[0].contains("1 memory version breaks"), "{content:?}");
        assert!(problems_of(&report, "agent_versions")[0].contains("1 agent breaks"));
        assert_eq!(report.findings.problems().len(), 3, "{:?}", report.findings.problems());
        assert!(!memory.is_empty());
        assert_eq!(report.findings.checks.iter().find(|c| c.name == "integrity_check").unwrap().outcome, Outcome::Ok);

        // The current version gone: the memory is named.
        let c = Connection::open(&path).unwrap();
        c.execute("DELETE FROM memory_versions WHERE seq = ?1", [version_seq]).unwrap();
        drop(c);
        let report = check(&path).unwrap();
        let current = problems_of(&report, "current_version");
        assert!(current[0].contains(&memory), "{current:?}");
    }

    /// A session with one message, written through the store; its id and the message's.
    pub(crate) async fn session_with_message(s: &SqliteStore) -> (String, String) {
        let env = s
            .create_environment(
                &s.default_workspace().await.unwrap(),
                mnemo_store::NewEnvironment {
                    name: "e".into(),
                    description: None,
                    metadata: BTreeMap::new(),
                    config: serde_json::json!({"type": "cloud"}),
                    scope: None,
                },
            )
            .await
            .unwrap();
        let agent = new_agent(s).await;
        let session = s
            .create_session(
                &s.default_workspace().await.unwrap(),
                mnemo_store::NewSession {
                    agent: mnemo_store::AgentRef { id: agent.id, version: None, overrides: None },
                    environment: env.id,
                    attachments: Vec::new(),
                    title: None,
                    metadata: BTreeMap::new(),
                    budget: None,
                    initial_events: vec![mnemo_api::Event::UserMessage(mnemo_api::Message {
                        content: vec![mnemo_api::ContentBlock::text("hi")],
                    })],
                    poster: mnemo_api::EventPoster::ServerActor,
                    mount_root: mnemo_api::DEFAULT_MEMORY_MOUNT_ROOT.into(),
                },
            )
            .await
            .unwrap();
        let events = s.events_after(&s.default_workspace().await.unwrap(), &session.id, 0).await.unwrap();
        (session.id.to_string(), events[0].event.id.to_string())
    }

    #[tokio::test]
    async fn a_row_that_cannot_be_read_back_is_a_finding_naming_table_row_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let store = open(&path);
        let (session, event) = session_with_message(&store).await;
        store.close().await;
        assert!(check(&path).unwrap().findings.is_ok());

        let c = Connection::open(&path).unwrap();
        c.execute("UPDATE session_events SET body = '{\"type\": \"user.message\"' WHERE id = ?1", [&event]).unwrap();
        c.execute("UPDATE sessions SET status = 'napping' WHERE id = ?1", [&session]).unwrap();
        drop(c);
        let report = check(&path).unwrap();
        let events = problems_of(&report, "readable_events");
        assert!(
            events[0].starts_with(&format!(
                "1 row cannot be read back: table `session_events`, row `{event}`, column `body` cannot be read: "
            )),
            "{events:?}"
        );
        let sessions = problems_of(&report, "readable_sessions");
        assert!(
            sessions[0].contains(&format!("table `sessions`, row `{session}`, column `status` cannot be read")),
            "{sessions:?}"
        );
        assert_eq!(report.findings.problems().len(), 2, "{:?}", report.findings.problems());
    }

    #[tokio::test]
    async fn a_damaged_file_fails_with_a_clear_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = filled(dir.path()).await;
        let (root, page_size): (i64, i64) = {
            let c = Connection::open(&path).unwrap();
            let root =
                c.query_row("SELECT rootpage FROM sqlite_schema WHERE name = 'memory_versions'", [], |r| r.get(0));
            (root.unwrap(), c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap())
        };
        // Scribble over the middle of the versions table's first page.
        let mut bytes = std::fs::read(&path).unwrap();
        let start = ((root - 1) * page_size) as usize;
        bytes[start..start + page_size as usize].fill(0x5A);
        std::fs::write(&path, &bytes).unwrap();
        let report = check(&path).unwrap();
        assert!(!report.findings.is_ok());
        let problems = report.findings.problems();
        assert!(
            problems.iter().any(|p| p.starts_with("integrity_check: ")),
            "integrity_check names the damage: {problems:#?}"
        );

        // Not a database at all.
        let junk = dir.path().join("junk.sqlite");
        std::fs::write(&junk, vec![0x42; 8192]).unwrap();
        let problems = check(&junk).unwrap().findings.problems();
        assert!(
            problems.iter().any(|p| p.contains("the file is not an SQLite database, or its header is damaged")),
            "{problems:?}"
        );

        // A schema from the future: invariants are not judged by this build's rules.
        let fresh = dir.path().join("future.sqlite");
        open(&fresh).close().await;
        Connection::open(&fresh).unwrap().execute_batch("PRAGMA user_version = 99").unwrap();
        let report = check(&fresh).unwrap();
        assert_eq!(
            report.findings.problems(),
            [format!(
                "schema: schema version 99 is newer than this mnemo knows ({}); check it with a newer mnemo",
                crate::schema::VERSION
            )]
        );
        assert!(matches!(report.findings.checks.last().unwrap().outcome, Outcome::Skipped(_)));

        let missing = check(&dir.path().join("missing.sqlite")).unwrap_err().to_string();
        assert!(missing.starts_with("there is no SQLite database at "), "{missing}");
        assert!(!dir.path().join("missing.sqlite").exists());
    }
}
