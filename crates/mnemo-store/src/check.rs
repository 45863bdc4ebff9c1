//! mnemo's own invariants, as SQL every backend can run (`mnemo db check`).
//!
//! Both backends keep the same tables with the same columns (see [`crate::copy::TABLES`]), so
//! one query per promise serves both: each [`Invariant::sql`] selects one text column, the
//! subject (an id, with what is wrong where that helps), of every row that breaks the promise.
//! A backend runs [`Invariant::count_sql`] and [`Invariant::examples_sql`] in one snapshot and
//! words what it found with [`Invariant::problem`]. The queries use only what SQLite and
//! PostgreSQL share (`CAST`, `octet_length`, correlated subqueries); only promises every write
//! path keeps are listed, so a violation means damage, a bug or a hand-edited database.

use crate::copy::Table;

/// How one check came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// What is wrong, one line each.
    Problems(Vec<String>),
    /// Not run, and why.
    Skipped(String),
}

impl Outcome {
    /// `Ok` when a check found no problem, else what it found.
    pub fn of(problems: Vec<String>) -> Self {
        if problems.is_empty() { Self::Ok } else { Self::Problems(problems) }
    }
}

/// One check and its outcome.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    pub outcome: Outcome,
}

/// How much a database holds (when its tables are there to count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub memory_stores: u64,
    pub memories: u64,
    pub memory_versions: u64,
    pub sessions: u64,
}

/// What a check of any backend found: the schema version against this build's, what the
/// database holds, and each check's outcome. A backend's report holds these beside what is its
/// own (a file's pages, a server's version), so `mnemo db check` reads both backends alike.
#[derive(Debug, Clone)]
pub struct Findings {
    /// The schema version the database records (0: none).
    pub schema_version: i64,
    /// The newest schema version this build knows.
    pub known_schema_version: i64,
    /// What the database holds; `None` when its tables were not there to count.
    pub counts: Option<Counts>,
    pub checks: Vec<Check>,
}

impl Findings {
    /// Nothing found yet, by a build whose newest schema version is `known_schema_version`.
    pub fn new(known_schema_version: i64) -> Self {
        Self { schema_version: 0, known_schema_version, counts: None, checks: Vec::new() }
    }

    /// Every problem found, prefixed by its check.
    pub fn problems(&self) -> Vec<String> {
        self.checks
            .iter()
            .flat_map(|c| match &c.outcome {
                Outcome::Problems(lines) => lines.iter().map(|l| format!("{}: {l}", c.name)).collect(),
                Outcome::Ok | Outcome::Skipped(_) => Vec::new(),
            })
            .collect()
    }

    /// Whether no check found a problem.
    pub fn is_ok(&self) -> bool {
        self.checks.iter().all(|c| !matches!(c.outcome, Outcome::Problems(_)))
    }
}

/// The invariants' outcome under a schema that is not the one this build knows.
pub fn skipped_invariants(why: &str) -> Vec<Check> {
    INVARIANTS.iter().map(|i| Check { name: i.name, outcome: Outcome::Skipped(why.to_owned()) }).collect()
}

/// Why the invariants are not checked under a schema this build does not know.
pub const UNKNOWN_SCHEMA: &str = "the schema is not the one this mnemo knows";

/// How a database's schema version `version` compares with `known`, the newest this build
/// knows, worded the same for every backend: `None` when they are the same (the tables are
/// checked next); version 0 (no mnemo tables) and a newer version are problems; an older one
/// is skipped, since `mnemo serve` migrates it.
pub fn schema_version(version: i64, known: i64) -> Option<Outcome> {
    match version {
        0 => Some(Outcome::Problems(vec![
            "schema version 0: no mnemo tables here (mnemo serve has never opened it)".into(),
        ])),
        v if v > known => Some(Outcome::Problems(vec![format!(
            "schema version {v} is newer than this mnemo knows ({known}); check it with a newer mnemo"
        )])),
        v if v < known => Some(Outcome::Skipped(format!(
            "schema version {v} is older than this mnemo's ({known}); mnemo serve migrates it on start"
        ))),
        _ => None,
    }
}

/// Why `mnemo serve` refuses a database whose schema version `version` is newer than `known`,
/// the newest this build knows.
pub fn newer_schema(version: impl std::fmt::Display, known: impl std::fmt::Display) -> String {
    format!("the database has schema version {version}, newer than this mnemo knows ({known}); upgrade mnemo")
}

/// One promise the tables keep.
#[derive(Debug)]
pub struct Invariant {
    /// A short name, for the report.
    pub name: &'static str,
    /// What holds, in words.
    pub promise: &'static str,
    /// What a subject is ("memory store", "memory", …).
    pub subject: &'static str,
    /// `SELECT subject FROM …` over every violating row.
    pub sql: &'static str,
}

/// How many subjects a problem names.
pub const EXAMPLES: usize = 5;

impl Invariant {
    /// How many rows break the promise: one row, one integer column.
    pub fn count_sql(&self) -> String {
        format!("SELECT count(*) FROM ({}) AS broken", self.sql)
    }

    /// The first [`EXAMPLES`] subjects, in order.
    pub fn examples_sql(&self) -> String {
        format!("SELECT subject FROM ({}) AS broken ORDER BY subject LIMIT {EXAMPLES}", self.sql)
    }

    /// The problem `count` violations (with their first subjects) make, in words (the report
    /// names the check).
    pub fn problem(&self, count: u64, examples: &[String]) -> String {
        let more = if count > examples.len() as u64 {
            format!(", and {} more", count - examples.len() as u64)
        } else {
            String::new()
        };
        let (plural, verb) = if count == 1 { ("", "breaks") } else { ("s", "break") };
        format!("{count} {}{plural} {verb} \"{}\": {}{more}", self.subject, self.promise, examples.join(", "))
    }
}

/// Every invariant, cheapest first.
pub static INVARIANTS: &[Invariant] = &[
    Invariant {
        name: "memory_count",
        promise: "a store's memory_count is the number of its live memories",
        subject: "memory store",
        sql: "SELECT s.id || ' (memory_count ' || CAST(s.memory_count AS TEXT) || ', live memories ' || \
              CAST((SELECT count(*) FROM memories m WHERE m.store_seq = s.seq) AS TEXT) || ')' AS subject \
              FROM memory_stores s \
              WHERE s.memory_count <> (SELECT count(*) FROM memories m WHERE m.store_seq = s.seq)",
    },
    Invariant {
        name: "current_version",
        promise: "a memory's current version exists, is its own, in its store, neither a deletion nor redacted, \
                  and has the memory's path, content_sha256 and size",
        subject: "memory",
        sql: "SELECT m.id AS subject FROM memories m LEFT JOIN memory_versions v ON v.seq = m.version_seq \
              WHERE v.seq IS NULL OR v.id <> m.version_id OR v.memory_id <> m.id OR v.store_seq <> m.store_seq \
                 OR v.operation = 'deleted' OR v.redacted_at IS NOT NULL \
                 OR v.path IS NULL OR v.path <> m.path \
                 OR v.content_sha256 IS NULL OR v.content_sha256 <> m.content_sha256 \
                 OR v.content_size_bytes IS NULL OR v.content_size_bytes <> m.content_size_bytes",
    },
    Invariant {
        name: "newest_version",
        promise: "a live memory's current version is its newest",
        subject: "memory",
        sql: "SELECT m.id AS subject FROM memories m \
              WHERE m.version_seq <> (SELECT max(v.seq) FROM memory_versions v WHERE v.memory_id = m.id)",
    },
    Invariant {
        name: "created_first",
        promise: "a memory's oldest version is its one creation",
        subject: "memory",
        sql: "SELECT v.memory_id AS subject FROM memory_versions v \
              WHERE (v.operation = 'created') <> (v.seq = (SELECT min(w.seq) FROM memory_versions w \
                                                           WHERE w.memory_id = v.memory_id))",
    },
    Invariant {
        name: "deleted_last",
        promise: "nothing follows a memory's deletion, and a memory without a row ends with one",
        subject: "memory",
        sql: "SELECT v.memory_id AS subject FROM memory_versions v \
              WHERE v.seq = (SELECT max(w.seq) FROM memory_versions w WHERE w.memory_id = v.memory_id) \
                AND v.operation <> 'deleted' AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = v.memory_id) \
              UNION \
              SELECT v.memory_id FROM memory_versions v WHERE v.operation = 'deleted' \
                AND EXISTS (SELECT 1 FROM memory_versions w WHERE w.memory_id = v.memory_id AND w.seq > v.seq)",
    },
    Invariant {
        name: "one_store",
        promise: "all versions of a memory are in one store",
        subject: "memory",
        sql: "SELECT memory_id AS subject FROM memory_versions GROUP BY memory_id \
              HAVING count(DISTINCT store_seq) > 1",
    },
    Invariant {
        name: "version_content",
        promise: "a version that is neither a deletion nor redacted has its path, content and content_sha256, \
                  and its size is its content's; deletions and redacted versions hold no content",
        subject: "memory version",
        sql: "SELECT id AS subject FROM memory_versions \
              WHERE (operation <> 'deleted' AND redacted_at IS NULL \
                     AND (path IS NULL OR content IS NULL OR content_sha256 IS NULL \
                          OR content_size_bytes IS NULL OR content_size_bytes <> octet_length(content))) \
                 OR ((operation = 'deleted' OR redacted_at IS NOT NULL) AND content IS NOT NULL)",
    },
    Invariant {
        name: "agent_versions",
        promise: "an agent's versions are 1 to its latest_version",
        subject: "agent",
        sql: "SELECT a.id AS subject FROM agents a \
              WHERE a.latest_version <> (SELECT count(*) FROM agent_versions v WHERE v.agent_seq = a.seq) \
                 OR 1 <> (SELECT min(v.version) FROM agent_versions v WHERE v.agent_seq = a.seq) \
                 OR a.latest_version <> (SELECT max(v.version) FROM agent_versions v WHERE v.agent_seq = a.seq)",
    },
];

/// Rows of one table whose columns must read back into their typed form: a backend reads
/// [`Readable::batch_sql`] in batches of [`Readable::BATCH`] rows after the last row number it
/// saw (the first column), hands each row's other columns, as text, to [`Readable::decode`],
/// and words what failed with [`Readable::problem`].
#[derive(Debug)]
pub struct Readable {
    pub name: &'static str,
    /// `SELECT seq, <text columns> FROM … WHERE seq > $1 ORDER BY seq LIMIT $2`.
    pub batch_sql: &'static str,
    /// Why the row cannot be read (a [`crate::CorruptRow`] naming table, row and column).
    pub decode: fn(&[String]) -> Option<String>,
}

impl Readable {
    /// Rows read per batch.
    pub const BATCH: i64 = 1_000;

    /// The problem `count` unreadable rows (with the first reasons) make, in words.
    pub fn problem(count: u64, examples: &[String]) -> String {
        let more = if count > examples.len() as u64 {
            format!("; and {} more", count - examples.len() as u64)
        } else {
            String::new()
        };
        let plural = if count == 1 { "" } else { "s" };
        format!("{count} row{plural} cannot be read back: {}{more}", examples.join("; "))
    }
}

/// The cause under a store error, for a finding (the caller-facing text says nothing).
fn cause_of(e: &crate::StoreError) -> String {
    std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string)
}

/// Every table whose stored JSON and states the server reads back typed: every session, event
/// and work item must decode, or the API answers `500` where it meets the row.
pub static READABLE: &[Readable] = &[
    Readable {
        name: "readable_sessions",
        batch_sql: "SELECT seq, id, environment_id, status, body FROM sessions WHERE seq > $1 ORDER BY seq LIMIT $2",
        decode: |row| {
            let [id, environment_id, status, body] = row else { return Some(format!("unexpected row {row:?}")) };
            let columns = crate::row::SessionColumns {
                id: id.clone(),
                environment_id: environment_id.clone(),
                status: status.clone(),
                created_at: 0,
                updated_at: 0,
                archived_at: None,
            };
            crate::row::SessionBody::parse(id, body).and_then(|b| b.into_session(&columns)).err().map(|e| cause_of(&e))
        },
    },
    Readable {
        name: "readable_events",
        batch_sql: "SELECT seq, id, body FROM session_events WHERE seq > $1 ORDER BY seq LIMIT $2",
        decode: |row| {
            let [id, body] = row else { return Some(format!("unexpected row {row:?}")) };
            crate::SessionEvent::decode(0, id, body).err().map(|e| cause_of(&e))
        },
    },
    Readable {
        name: "readable_work",
        batch_sql: "SELECT seq, id, state, data, metadata, CAST(ttl_seconds AS TEXT) FROM work_items \
                    WHERE seq > $1 ORDER BY seq LIMIT $2",
        decode: |row| {
            let [id, state, data, metadata, ttl] = row else { return Some(format!("unexpected row {row:?}")) };
            // Text that is no integer reads as out of range: a finding, like a negative one.
            let ttl = ttl.parse().unwrap_or(i64::MIN);
            crate::row::work_typed(id, state, data, metadata, ttl).err().map(|e| cause_of(&e))
        },
    },
];

/// Gathers what [`Readable::decode`] found over a table into an outcome.
#[derive(Debug, Default)]
pub struct Unreadable {
    count: u64,
    examples: Vec<String>,
}

impl Unreadable {
    /// Notes one row's finding, if any.
    pub fn note(&mut self, finding: Option<String>) {
        if let Some(finding) = finding {
            self.count += 1;
            if self.examples.len() < EXAMPLES {
                self.examples.push(finding);
            }
        }
    }

    /// The check's outcome.
    pub fn outcome(self) -> Outcome {
        if self.count == 0 {
            Outcome::Ok
        } else {
            Outcome::Problems(vec![Readable::problem(self.count, &self.examples)])
        }
    }
}

/// What is wrong with `table`'s columns, worded the same for every backend: `found` is what the
/// database lists for it, in order (none: the table is missing). `None` when they are the
/// columns this build knows (and `mnemo db copy` moves).
pub fn columns_problem(table: &Table, found: &[String]) -> Option<String> {
    let expected: Vec<&str> = table.columns.iter().map(|c| c.name).collect();
    if found.is_empty() {
        Some(format!("table `{}` is missing", table.name))
    } else if found != expected {
        Some(format!("table `{}` has columns {found:?}, expected {expected:?}", table.name))
    } else {
        None
    }
}

/// The outcome of every readable check under a schema this build does not know.
pub fn skipped_readable(why: &str) -> Vec<Check> {
    READABLE.iter().map(|r| Check { name: r.name, outcome: Outcome::Skipped(why.to_owned()) }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_judged_against_the_known_table() {
        let polls = crate::copy::TABLES.iter().find(|t| t.name == "worker_polls").unwrap();
        let names = |list: &[&str]| list.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        for (found, problem) in [
            (names(&["environment_seq", "worker_id", "last_poll_at"]), None),
            (names(&[]), Some("table `worker_polls` is missing")),
            (
                names(&["environment_seq", "worker_id"]),
                Some(
                    "table `worker_polls` has columns [\"environment_seq\", \"worker_id\"], \
                     expected [\"environment_seq\", \"worker_id\", \"last_poll_at\"]",
                ),
            ),
        ] {
            assert_eq!(columns_problem(polls, &found).as_deref(), problem, "{found:?}");
        }
        assert_eq!(Outcome::of(Vec::new()), Outcome::Ok);
        assert_eq!(Outcome::of(vec!["x".into()]), Outcome::Problems(vec!["x".into()]));
    }

    #[test]
    fn names_are_unique_and_problems_read_well() {
        let mut names: Vec<&str> = INVARIANTS.iter().map(|i| i.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), INVARIANTS.len());
        let inv = &INVARIANTS[0];
        assert_eq!(
            inv.problem(1, &["memstore_a (memory_count 2, live memories 1)".into()]),
            "1 memory store breaks \"a store's memory_count is the number of its live memories\": \
             memstore_a (memory_count 2, live memories 1)"
        );
        let examples: Vec<String> = (0..EXAMPLES).map(|i| format!("m{i}")).collect();
        assert!(inv.problem(7, &examples).ends_with("m4, and 2 more"));
    }

    #[test]
    fn an_unreadable_row_is_named_by_table_row_and_column() {
        let sessions = &READABLE[0];
        let row =
            |status: &str, body: &str| -> Vec<String> { ["sesn_1", "env_1", status, body].map(str::to_owned).to_vec() };
        let body = r#"{"title":null,"metadata":{},"agent":{},"resources":[],"budget":null,"stop_reason":null,"memory_prompt":null}"#;
        assert_eq!((sessions.decode)(&row("idle", body)), None);
        let bad_status = (sessions.decode)(&row("napping", body)).unwrap();
        assert!(
            bad_status.starts_with("table `sessions`, row `sesn_1`, column `status` cannot be read"),
            "{bad_status}"
        );
        let bad_body = (sessions.decode)(&row("idle", "{")).unwrap();
        assert!(bad_body.starts_with("table `sessions`, row `sesn_1`, column `body` cannot be read"), "{bad_body}");

        let events = &READABLE[1];
        let id = mnemo_api::EventId::generate();
        let ok = format!(r#"{{"type":"session.status_running","id":"{id}","processed_at":null,"posted_by":null}}"#);
        assert_eq!((events.decode)(&[id.to_string(), ok]), None);
        let unknown = format!(r#"{{"type":"agent.thinking","id":"{id}"}}"#);
        assert_eq!((events.decode)(&[id.to_string(), unknown]), None, "a type this build does not know reads back");
        let bad = (events.decode)(&[id.to_string(), r#"{"type":"user.message"}"#.into()]).unwrap();
        assert!(bad.starts_with(&format!("table `session_events`, row `{id}`, column `body` cannot be read")), "{bad}");

        let work = &READABLE[2];
        let row = |state: &str, data: &str, ttl: &str| -> Vec<String> {
            ["work_1", state, data, "{}", ttl].map(str::to_owned).to_vec()
        };
        let data = r#"{"type":"session","id":"sesn_1"}"#;
        assert_eq!((work.decode)(&row("queued", data, "60")), None);
        for (state, data, ttl, column) in
            [("dozing", data, "60", "state"), ("queued", "[", "60", "data"), ("queued", data, "-1", "ttl_seconds")]
        {
            let bad = (work.decode)(&row(state, data, ttl)).unwrap();
            let named = format!("table `work_items`, row `work_1`, column `{column}` cannot be read");
            assert!(bad.starts_with(&named), "{bad}");
        }

        let mut found = Unreadable::default();
        found.note(None);
        assert_eq!(Unreadable::default().outcome(), Outcome::Ok);
        for i in 0..7 {
            found.note(Some(format!("r{i}")));
        }
        assert_eq!(
            found.outcome(),
            Outcome::Problems(vec!["7 rows cannot be read back: r0; r1; r2; r3; r4; and 2 more".into()])
        );
    }

    #[test]
    fn schema_versions_are_judged_and_worded_once_for_every_backend() {
        let table: &[(i64, Option<Outcome>)] = &[
            (
                0,
                Some(Outcome::Problems(vec![
                    "schema version 0: no mnemo tables here (mnemo serve has never opened it)".into(),
                ])),
            ),
            (
                5,
                Some(Outcome::Problems(vec![
                    "schema version 5 is newer than this mnemo knows (4); check it with a newer mnemo".into(),
                ])),
            ),
            (
                3,
                Some(Outcome::Skipped(
                    "schema version 3 is older than this mnemo's (4); mnemo serve migrates it on start".into(),
                )),
            ),
            (4, None),
        ];
        for (version, want) in table {
            assert_eq!(schema_version(*version, 4), *want, "{version}");
        }
        assert_eq!(
            newer_schema(99, 4),
            "the database has schema version 99, newer than this mnemo knows (4); upgrade mnemo"
        );
    }
}
