//! Moving a deployment between databases, row for row (`mnemo db copy`).
//!
//! Every backend keeps the same tables with the same columns, listed in [`TABLES`] parents
//! first, so a copy needs to know nothing about what the rows mean: it reads each table of the
//! source in key order, a page at a time, and writes the rows unchanged — ids, `seq` values,
//! hashes and all — into the same table of the target. A backend takes part by implementing
//! [`RowAccess`] on its own connections; values cross as [`Cell`]s (a boolean as `Int` 0 or 1,
//! whatever the backend stores).
//!
//! A copy is verified, not trusted. [`run`] digests every table of the source while it copies
//! it, then reads both sides back: per table, the row counts and [`Digest`]s (SHA-256 over a
//! canonical encoding of every row in key order) must all agree. A source that changed during
//! the copy (a server still running on it) and a target that differs from the source are each
//! named, with the table, in the error.
//!
//! Before anything is written, [`run`] refuses: a source and target that are one database, a
//! table whose columns differ from [`TABLES`] on either side (so a column added by a later
//! migration can never be dropped silently), an empty source (most likely a wrong URL), and a
//! non-empty target unless [`Options::replace`] asks to empty it first.

use async_trait::async_trait;
use sha2::{Digest as _, Sha256};

use crate::StoreError;

/// One value of one column.
///
/// The derived order (within one variant) is the key order both backends sort by: integers by
/// value, text and bytes by their bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cell {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

/// The cells of one row, in the order of its [`Table::columns`].
pub type Row = Vec<Cell>;

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A 64-bit integer (`INTEGER`, `BIGINT`).
    Int,
    /// A truth value, carried as `Int` 0 or 1 (`INTEGER` in SQLite, `BOOLEAN` in PostgreSQL).
    Bool,
    /// UTF-8 text (`TEXT`; or `BYTEA` holding its UTF-8, where the database's text type
    /// cannot hold every character: PostgreSQL's `TEXT` refuses U+0000, which memory content
    /// may contain).
    Text,
    /// Bytes (`BLOB`, `BYTEA`).
    Bytes,
}

/// One column of a [`Table`].
#[derive(Debug)]
pub struct Column {
    pub name: &'static str,
    pub kind: Kind,
    pub nullable: bool,
}

/// One table, as every backend has it.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    pub columns: &'static [Column],
    /// The columns of the primary key, which orders the rows (`["seq"]` where there is one).
    pub key: &'static [&'static str],
}

const fn col(name: &'static str, kind: Kind) -> Column {
    Column { name, kind, nullable: false }
}

const fn opt(name: &'static str, kind: Kind) -> Column {
    Column { name, kind, nullable: true }
}

use Kind::{Bool, Bytes, Int, Text};

/// Every table of the schema, parents before children (the order rows are written in).
pub static TABLES: &[Table] = &[
    Table {
        name: "organization",
        columns: &[col("id", Text), col("name", Text), col("created_at", Int)],
        key: &["id"],
    },
    Table {
        name: "workspaces",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("name", Text),
            col("display_color", Text),
            col("tags", Text),
            col("data_residency", Text),
            col("is_default", Bool),
            col("created_at", Int),
            opt("archived_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "workspace_rate_limits",
        columns: &[col("workspace_id", Text), col("entry_id", Text), col("limiter", Text), col("value", Int)],
        key: &["workspace_id", "entry_id", "limiter"],
    },
    Table {
        name: "rate_limit_buckets",
        columns: &[
            col("workspace_id", Text),
            col("entry_id", Text),
            col("limiter", Text),
            col("tokens", Int),
            col("updated_at", Int),
        ],
        key: &["workspace_id", "entry_id", "limiter"],
    },
    Table {
        name: "admin_keys",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("secret_hash", Bytes),
            col("name", Text),
            opt("partial_key_hint", Text),
            col("created_at", Int),
            opt("revoked_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "api_keys",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("secret_hash", Bytes),
            col("label", Text),
            col("created_at", Int),
            opt("revoked_at", Int),
            col("workspace_id", Text),
            col("status", Text),
            opt("expires_at", Int),
            opt("created_by", Text),
            opt("partial_key_hint", Text),
        ],
        key: &["seq"],
    },
    Table {
        name: "console_sessions",
        columns: &[
            col("seq", Int),
            col("secret_hash", Bytes),
            col("api_key_seq", Int),
            col("created_at", Int),
            col("expires_at", Int),
            opt("revoked_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "memory_stores",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("name", Text),
            col("description", Text),
            col("metadata", Text),
            col("created_at", Int),
            col("updated_at", Int),
            opt("archived_at", Int),
            col("memory_count", Int),
            col("workspace_id", Text),
            opt("version_retention", Text),
        ],
        key: &["seq"],
    },
    Table {
        name: "memory_versions",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("store_seq", Int),
            col("memory_id", Text),
            col("operation", Text),
            opt("path", Text),
            opt("content_sha256", Text),
            opt("content_size_bytes", Int),
            col("created_at", Int),
            opt("actor_kind", Text),
            opt("actor_id", Text),
            opt("redacted_at", Int),
            opt("redactor_kind", Text),
            opt("redactor_id", Text),
            opt("content", Text),
        ],
        key: &["seq"],
    },
    Table {
        name: "memories",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("store_seq", Int),
            col("path", Text),
            col("content_sha256", Text),
            col("content_size_bytes", Int),
            col("version_seq", Int),
            col("version_id", Text),
            col("created_at", Int),
            col("updated_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "environments",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("name", Text),
            opt("description", Text),
            col("metadata", Text),
            col("config", Text),
            opt("scope", Text),
            col("created_at", Int),
            col("updated_at", Int),
            opt("archived_at", Int),
            col("workspace_id", Text),
        ],
        key: &["seq"],
    },
    Table {
        name: "environment_keys",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("environment_seq", Int),
            col("secret_hash", Bytes),
            col("created_at", Int),
            opt("revoked_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "agents",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("latest_version", Int),
            col("created_at", Int),
            col("updated_at", Int),
            opt("archived_at", Int),
            col("workspace_id", Text),
        ],
        key: &["seq"],
    },
    Table {
        name: "agent_versions",
        columns: &[col("agent_seq", Int), col("version", Int), col("spec", Text), col("created_at", Int)],
        key: &["agent_seq", "version"],
    },
    Table {
        name: "sessions",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("environment_id", Text),
            col("agent_id", Text),
            col("body", Text),
            col("status", Text),
            col("created_at", Int),
            col("updated_at", Int),
            opt("archived_at", Int),
            opt("turn_holder", Text),
            opt("turn_expires_at", Int),
            col("workspace_id", Text),
        ],
        key: &["seq"],
    },
    Table {
        name: "session_memory_stores",
        columns: &[col("session_seq", Int), col("memory_store_id", Text), col("read_only", Bool)],
        key: &["session_seq", "memory_store_id"],
    },
    Table {
        name: "session_events",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("session_seq", Int),
            col("type", Text),
            col("body", Text),
            opt("processed_at", Int),
            col("answered", Bool),
        ],
        key: &["seq"],
    },
    Table {
        name: "work_items",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("environment_seq", Int),
            opt("session_id", Text),
            col("data", Text),
            col("state", Text),
            col("metadata", Text),
            col("created_at", Int),
            opt("acknowledged_at", Int),
            opt("started_at", Int),
            opt("latest_heartbeat_at", Int),
            opt("stop_requested_at", Int),
            opt("stopped_at", Int),
            opt("pending_until", Int),
            opt("lease_expires_at", Int),
            opt("last_heartbeat", Text),
            col("ttl_seconds", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "session_tokens",
        columns: &[
            col("seq", Int),
            col("secret_hash", Bytes),
            col("work_seq", Int),
            col("session_id", Text),
            col("created_at", Int),
            opt("revoked_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "worker_polls",
        columns: &[col("environment_seq", Int), col("worker_id", Text), col("last_poll_at", Int)],
        key: &["environment_seq", "worker_id"],
    },
    Table {
        name: "webhook_endpoints",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("url", Text),
            col("secret", Text),
            opt("event_types", Text),
            opt("description", Text),
            opt("previous_secret", Text),
            opt("previous_secret_expires_at", Int),
            col("created_at", Int),
            col("updated_at", Int),
            col("workspace_id", Text),
        ],
        key: &["seq"],
    },
    Table {
        name: "webhook_events",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("type", Text),
            col("resource_id", Text),
            col("created_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "webhook_deliveries",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("endpoint_seq", Int),
            col("event_seq", Int),
            col("status", Text),
            col("attempts", Int),
            opt("next_attempt_at", Int),
            opt("last_attempt_at", Int),
            opt("last_status_code", Int),
            opt("last_error", Text),
            col("created_at", Int),
            opt("finished_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "users",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("email", Text),
            col("name", Text),
            col("role", Text),
            opt("password_hash", Text),
            col("added_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "invites",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("email", Text),
            col("role", Text),
            col("secret_hash", Bytes),
            col("invited_at", Int),
            col("expires_at", Int),
            opt("accepted_at", Int),
            opt("deleted_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "workspace_members",
        columns: &[
            col("seq", Int),
            col("workspace_id", Text),
            col("user_id", Text),
            col("workspace_role", Text),
            col("added_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "setup_links",
        columns: &[
            col("seq", Int),
            col("secret_hash", Bytes),
            col("created_at", Int),
            col("expires_at", Int),
            opt("used_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "person_sessions",
        columns: &[
            col("seq", Int),
            col("secret_hash", Bytes),
            col("user_id", Text),
            col("created_at", Int),
            col("expires_at", Int),
            opt("revoked_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "sso_identities",
        columns: &[
            col("seq", Int),
            col("issuer", Text),
            col("subject", Text),
            col("user_id", Text),
            col("linked_at", Int),
        ],
        key: &["seq"],
    },
    Table {
        name: "audit_events",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("created_at", Int),
            opt("workspace_id", Text),
            col("actor_type", Text),
            col("actor_id", Text),
            col("action", Text),
            opt("resource_type", Text),
            opt("resource_id", Text),
            opt("client_ip", Text),
            col("outcome", Text),
            col("details", Text),
        ],
        key: &["seq"],
    },
    Table {
        name: "dreams",
        columns: &[
            col("seq", Int),
            col("id", Text),
            col("workspace_id", Text),
            col("status", Text),
            col("input_store_id", Text),
            col("update_existing", Bool),
            opt("output_store_id", Text),
            opt("session_id", Text),
            col("created_at", Int),
            opt("archived_at", Int),
            opt("lease_holder", Text),
            opt("lease_expires_at", Int),
            opt("idempotency_key", Text),
            opt("request_sha256", Text),
            col("body", Text),
        ],
        key: &["seq"],
    },
];

/// The tables a new database is born with rows in (its migrations make the organization and
/// the Default workspace). A copy replaces them: they do not make a target "not empty", nor a
/// source worth copying.
pub const SEEDED: &[&str] = &["organization", "workspaces"];

impl Table {
    /// Whether a new database already has rows in this table (see [`SEEDED`]).
    pub fn is_seeded(&self) -> bool {
        SEEDED.contains(&self.name)
    }

    /// Whether the table's key is a `seq` column the database numbers (a sequence to move
    /// past the copied rows, in backends that keep one).
    pub fn has_seq(&self) -> bool {
        self.key == ["seq"]
    }

    /// The positions of the key's columns in a row.
    pub fn key_positions(&self) -> Vec<usize> {
        self.key
            .iter()
            .map(|k| self.columns.iter().position(|c| c.name == *k).expect("every key column is a column"))
            .collect()
    }

    /// The key's columns, in key order.
    pub fn key_columns(&self) -> Vec<&'static Column> {
        self.key_positions().into_iter().map(|i| &self.columns[i]).collect()
    }

    /// The key of `row`.
    pub fn key_of(&self, row: &[Cell]) -> Vec<Cell> {
        self.key_positions().into_iter().map(|i| row[i].clone()).collect()
    }

    /// Whether `row` fits the table: one cell per column, each of the column's kind.
    pub fn check(&self, row: &[Cell]) -> Result<(), String> {
        if row.len() != self.columns.len() {
            return Err(format!("{} values for {} columns", row.len(), self.columns.len()));
        }
        for (column, cell) in self.columns.iter().zip(row) {
            let fits = match (cell, column.kind) {
                (Cell::Null, _) => column.nullable,
                (Cell::Int(v), Kind::Bool) => *v == 0 || *v == 1,
                (Cell::Int(_), Kind::Int) | (Cell::Text(_), Kind::Text) | (Cell::Bytes(_), Kind::Bytes) => true,
                _ => false,
            };
            if !fits {
                return Err(format!("column `{}` ({:?}) holds {}", column.name, column.kind, describe(cell)));
            }
        }
        Ok(())
    }

    /// Whether a database's columns of this table (name and kind, `None` for a type this copy
    /// does not know) are exactly this table's.
    pub fn check_columns(&self, actual: &[(String, Option<Kind>)]) -> Result<(), String> {
        if actual.is_empty() {
            return Err("the table does not exist".into());
        }
        let mut problems = Vec::new();
        for column in self.columns {
            match actual.iter().find(|(name, _)| name == column.name) {
                None => problems.push(format!("column `{}` is missing", column.name)),
                // A boolean is an integer where the database has no boolean type; text may be
                // kept as its UTF-8 bytes (the backend converts).
                Some((_, Some(kind)))
                    if *kind == column.kind
                        || (column.kind == Kind::Bool && *kind == Kind::Int)
                        || (column.kind == Kind::Text && *kind == Kind::Bytes) => {}
                Some((_, kind)) => problems.push(format!(
                    "column `{}` is {}, not {:?}",
                    column.name,
                    kind.map_or_else(|| "of an unknown type".to_owned(), |k| format!("{k:?}")),
                    column.kind
                )),
            }
        }
        for (name, _) in actual {
            if !self.columns.iter().any(|c| c.name == name) {
                problems.push(format!("column `{name}` is unknown to this mnemo (it would not be copied)"));
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    }
}

fn describe(cell: &Cell) -> String {
    match cell {
        Cell::Null => "NULL".into(),
        Cell::Int(v) => format!("the integer {v}"),
        Cell::Text(s) => format!("text of {} bytes", s.len()),
        Cell::Bytes(b) => format!("{} bytes", b.len()),
    }
}

/// Row-level access to one database, for copies. Each backend implements it on its own
/// connections; none of it applies the rules of [`crate::rules`] — rows move as they are.
#[async_trait]
pub trait RowAccess: Send + Sync {
    /// The backend's name (`sqlite`, `postgres`).
    fn backend_name(&self) -> &'static str;

    /// Something that differs between any two databases and is equal for one database
    /// reached twice (under two paths or two host names).
    async fn database_identity(&self) -> Result<String, StoreError>;

    /// The columns `table` has in this database, with the kinds of their types (`None`: a
    /// type this copy does not know); empty when the table does not exist.
    async fn table_columns(&self, table: &'static Table) -> Result<Vec<(String, Option<Kind>)>, StoreError>;

    /// How many rows `table` holds.
    async fn count_rows(&self, table: &'static Table) -> Result<u64, StoreError>;

    /// Up to `limit` rows of `table` in key order, starting after the row whose key is `after`
    /// (from the first row when `None`). Keys compare as [`Cell`]s do: text by its bytes.
    /// Each cell is of its column's [`Kind`], whatever type stores it (text kept as bytes is
    /// decoded; bytes that are not UTF-8 are an error).
    async fn read_rows(
        &self,
        table: &'static Table,
        after: Option<Vec<Cell>>,
        limit: usize,
    ) -> Result<Vec<Row>, StoreError>;

    /// Inserts `rows` into `table` as they are (keys included), in one transaction.
    async fn write_rows(&self, table: &'static Table, rows: Vec<Row>) -> Result<(), StoreError>;

    /// Deletes every row of every table, in one transaction.
    async fn empty_tables(&self) -> Result<(), StoreError>;

    /// Makes what was written usable: a database that numbers `seq` columns from a sequence
    /// moves it past the largest copied value.
    async fn finish_copy(&self) -> Result<(), StoreError>;
}

/// Which side of a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Source,
    Target,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Source => "source",
            Self::Target => "target",
        })
    }
}

/// The row count and SHA-256 digest of one table's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub rows: u64,
    pub sha256: [u8; 32],
}

impl Summary {
    /// The digest in lowercase hex.
    pub fn hex(&self) -> String {
        hex::encode(self.sha256)
    }
}

/// What a table of the copy came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableReport {
    pub table: &'static str,
    pub summary: Summary,
}

/// What a verified copy moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Every table of [`TABLES`], in that order.
    pub tables: Vec<TableReport>,
}

impl Report {
    /// Rows copied, every table together.
    pub fn total_rows(&self) -> u64 {
        self.tables.iter().map(|t| t.summary.rows).sum()
    }
}

/// Why a copy stopped.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("the {side} database failed while {action}")]
    Store {
        side: Side,
        action: String,
        #[source]
        cause: StoreError,
    },
    #[error("the source and the target are the same database")]
    SameDatabase,
    #[error("table `{table}` of the {side} database is not the table this mnemo copies: {detail}")]
    Schema { side: Side, table: &'static str, detail: String },
    #[error(
        "the source database holds nothing but what a new database starts with: nothing to copy (is it the right database?)"
    )]
    EmptySource,
    #[error(
        "the target database is not empty (table `{table}` holds {rows} rows); pass --replace to empty it \
         before copying"
    )]
    TargetNotEmpty { table: &'static str, rows: u64 },
    #[error("the {side} database returned a malformed row of table `{table}`: {detail}")]
    BadRow { side: Side, table: &'static str, detail: String },
    #[error(
        "table `{table}` of the source changed during the copy ({} rows, sha256 {}, then {} rows, sha256 {}); \
         stop every server using the source and copy again with --replace",
        .copied.rows, .copied.hex(), .now.rows, .now.hex()
    )]
    SourceChanged { table: &'static str, copied: Summary, now: Summary },
    #[error(
        "verification failed: table `{table}` differs between the source ({} rows, sha256 {}) and the target \
         ({} rows, sha256 {})",
        .expected.rows, .expected.hex(), .found.rows, .found.hex()
    )]
    Mismatch { table: &'static str, expected: Summary, found: Summary },
}

/// SHA-256 over a canonical encoding of one table's rows, fed in key order.
///
/// The encoding is `mnemo-copy-v1`, a zero byte, the table's name and a zero byte, then every
/// cell of every row in column order: `0x00` for NULL; `0x01` and the 8-byte big-endian
/// two's complement of an integer (a boolean is the integer 0 or 1); `0x02`, the 8-byte
/// big-endian byte length and the UTF-8 bytes of text; `0x03`, the length and the bytes of a
/// byte string. Every cell says its own length, so no two different tables of rows share an
/// encoding. A row that does not fit the table, or whose key is not greater than the previous
/// row's, is refused: two sides that agree on the digest agree on every row and its order.
#[derive(Debug, Clone)]
pub struct Digest {
    table: &'static Table,
    hasher: Sha256,
    rows: u64,
    last_key: Option<Vec<Cell>>,
}

impl Digest {
    pub fn new(table: &'static Table) -> Self {
        let mut hasher = Sha256::new();
        hasher.update(b"mnemo-copy-v1\0");
        hasher.update(table.name.as_bytes());
        hasher.update([0]);
        Self { table, hasher, rows: 0, last_key: None }
    }

    /// Adds the next row.
    pub fn add(&mut self, row: &[Cell]) -> Result<(), String> {
        self.table.check(row)?;
        let key = self.table.key_of(row);
        if let Some(last) = &self.last_key
            && key <= *last
        {
            return Err(format!("rows out of key order: {key:?} after {last:?}"));
        }
        for cell in row {
            match cell {
                Cell::Null => self.hasher.update([0]),
                Cell::Int(v) => {
                    self.hasher.update([1]);
                    self.hasher.update(v.to_be_bytes());
                }
                Cell::Text(s) => self.bytes(2, s.as_bytes()),
                Cell::Bytes(b) => self.bytes(3, b),
            }
        }
        self.last_key = Some(key);
        self.rows += 1;
        Ok(())
    }

    fn bytes(&mut self, tag: u8, bytes: &[u8]) {
        self.hasher.update([tag]);
        self.hasher.update((bytes.len() as u64).to_be_bytes());
        self.hasher.update(bytes);
    }

    pub fn finish(self) -> Summary {
        Summary { rows: self.rows, sha256: self.hasher.finalize().into() }
    }
}

/// How to copy.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Empty the target first instead of refusing a target that holds rows.
    pub replace: bool,
    /// Rows read and written at a time.
    pub page_rows: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self { replace: false, page_rows: 256 }
    }
}

/// What a copy is doing, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the source and writing the target.
    Copy,
    /// Reading both sides back.
    Verify,
}

/// Hears how a copy advances. Every method defaults to doing nothing.
pub trait Progress: Send + Sync {
    /// A phase starts; `rows` rows will be read (both sides together while verifying).
    fn phase(&self, _phase: Phase, _rows: u64) {}
    /// The phase moves to `table`.
    fn table(&self, _table: &'static str) {}
    /// `rows` more rows were done.
    fn advance(&self, _rows: u64) {}
}

impl Progress for () {}

/// Copies every table of `from` into `to` and verifies the result (see the [module
/// documentation](self)). The source must not change meanwhile.
pub async fn run(
    from: &dyn RowAccess,
    to: &dyn RowAccess,
    options: Options,
    progress: &dyn Progress,
) -> Result<Report, CopyError> {
    let page = options.page_rows.max(1);
    if identity(from, Side::Source).await? == identity(to, Side::Target).await? {
        return Err(CopyError::SameDatabase);
    }
    check_schema(from, Side::Source).await?;
    check_schema(to, Side::Target).await?;

    let (mut total, mut made) = (0, 0);
    for table in TABLES {
        let rows = count(from, Side::Source, table).await?;
        total += rows;
        if !table.is_seeded() {
            made += rows;
        }
    }
    if made == 0 {
        return Err(CopyError::EmptySource);
    }
    if !options.replace {
        for table in TABLES.iter().filter(|t| !t.is_seeded()) {
            let rows = count(to, Side::Target, table).await?;
            if rows > 0 {
                return Err(CopyError::TargetNotEmpty { table: table.name, rows });
            }
        }
    }
    // Also when not replacing: the target's own organization and Default workspace give way to
    // the source's.
    to.empty_tables().await.map_err(store(Side::Target, "emptying its tables"))?;

    progress.phase(Phase::Copy, total);
    let mut copied = Vec::with_capacity(TABLES.len());
    for table in TABLES {
        progress.table(table.name);
        copied.push(copy_table(from, to, table, page, progress).await?);
    }
    to.finish_copy().await.map_err(store(Side::Target, "finishing the copy"))?;

    let copied_rows: u64 = copied.iter().map(|s| s.rows).sum();
    progress.phase(Phase::Verify, 2 * copied_rows);
    let mut tables = Vec::with_capacity(TABLES.len());
    for (table, copied) in TABLES.iter().zip(copied) {
        progress.table(table.name);
        let (now, found) = tokio::try_join!(
            digest(from, Side::Source, table, page, progress),
            digest(to, Side::Target, table, page, progress),
        )?;
        if now != copied {
            return Err(CopyError::SourceChanged { table: table.name, copied, now });
        }
        if found != copied {
            return Err(CopyError::Mismatch { table: table.name, expected: copied, found });
        }
        // A row the key order cannot reach (it should not exist) still shows in a count.
        let counted = count(to, Side::Target, table).await?;
        if counted != found.rows {
            let found = Summary { rows: counted, ..found };
            return Err(CopyError::Mismatch { table: table.name, expected: copied, found });
        }
        tables.push(TableReport { table: table.name, summary: copied });
    }
    Ok(Report { tables })
}

/// Whether every table of `access` has exactly the columns of [`TABLES`].
pub async fn check_schema(access: &dyn RowAccess, side: Side) -> Result<(), CopyError> {
    for table in TABLES {
        let columns = access
            .table_columns(table)
            .await
            .map_err(store(side, format!("reading table `{}`'s columns", table.name)))?;
        table.check_columns(&columns).map_err(|detail| CopyError::Schema { side, table: table.name, detail })?;
    }
    Ok(())
}

async fn identity(access: &dyn RowAccess, side: Side) -> Result<String, CopyError> {
    access.database_identity().await.map_err(store(side, "identifying the database"))
}

async fn count(access: &dyn RowAccess, side: Side, table: &'static Table) -> Result<u64, CopyError> {
    access.count_rows(table).await.map_err(store(side, format!("counting the rows of `{}`", table.name)))
}

fn store(side: Side, action: impl Into<String>) -> impl FnOnce(StoreError) -> CopyError {
    move |cause| CopyError::Store { side, action: action.into(), cause }
}

/// Copies one table, digesting what it reads.
async fn copy_table(
    from: &dyn RowAccess,
    to: &dyn RowAccess,
    table: &'static Table,
    page: usize,
    progress: &dyn Progress,
) -> Result<Summary, CopyError> {
    let mut digest = Digest::new(table);
    let mut after = None;
    loop {
        let rows = read(from, Side::Source, table, after.take(), page).await?;
        let Some(last) = rows.last() else { break };
        for row in &rows {
            digest.add(row).map_err(|detail| CopyError::BadRow { side: Side::Source, table: table.name, detail })?;
        }
        after = Some(table.key_of(last));
        let n = rows.len();
        to.write_rows(table, rows).await.map_err(store(Side::Target, format!("writing rows of `{}`", table.name)))?;
        progress.advance(n as u64);
        if n < page {
            break;
        }
    }
    Ok(digest.finish())
}

/// Reads one table of one side through, digesting it.
async fn digest(
    access: &dyn RowAccess,
    side: Side,
    table: &'static Table,
    page: usize,
    progress: &dyn Progress,
) -> Result<Summary, CopyError> {
    let mut digest = Digest::new(table);
    let mut after = None;
    loop {
        let rows = read(access, side, table, after.take(), page).await?;
        let Some(last) = rows.last() else { break };
        for row in &rows {
            digest.add(row).map_err(|detail| CopyError::BadRow { side, table: table.name, detail })?;
        }
        after = Some(table.key_of(last));
        progress.advance(rows.len() as u64);
        if rows.len() < page {
            break;
        }
    }
    Ok(digest.finish())
}

async fn read(
    access: &dyn RowAccess,
    side: Side,
    table: &'static Table,
    after: Option<Vec<Cell>>,
    page: usize,
) -> Result<Vec<Row>, CopyError> {
    access.read_rows(table, after, page).await.map_err(store(side, format!("reading rows of `{}`", table.name)))
}

#[cfg(test)]
mod tests;
