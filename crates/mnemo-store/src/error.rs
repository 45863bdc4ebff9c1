//! What a store call can fail with.

use mnemo_api::MemoryId;

/// A store refusal or failure. Callers branch on the variant, never on the message.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The named object does not exist (or not in that store).
    #[error("{kind} `{id}` not found")]
    NotFound { kind: &'static str, id: String },
    /// Another memory holds the path, or a path overlapping it.
    #[error("{}", path_conflict_message(.requested, .conflicting_path))]
    PathConflict { requested: String, conflicting_memory_id: Option<MemoryId>, conflicting_path: String },
    /// The memory's stored `content_sha256` differs from the expected one.
    #[error("content_sha256 precondition failed: the memory's content is {actual}, not {expected}")]
    PreconditionFailed { expected: String, actual: String },
    /// The store is archived and refuses this write.
    #[error(
        "memory store `{0}` is archived; its memories can be read and deleted but not created or updated, and the store cannot be updated"
    )]
    Archived(String),
    /// Creating one more memory would exceed the per-store cap.
    #[error(
        "memory store `{store}` already holds {limit} memories, the most a store may hold; delete some before creating more"
    )]
    StoreFull { store: String, limit: u32 },
    /// The live version of a memory cannot be redacted.
    #[error(
        "memory version `{version}` holds the current content of memory `{memory}`; update or delete the memory first, then redact this version"
    )]
    RedactCurrentVersion { version: String, memory: String },
    /// The request breaks a rule that only the stored state reveals (e.g. a metadata patch
    /// that would leave more than 16 pairs).
    #[error("{0}")]
    Invalid(String),
    /// The request breaks a rule with a stable machine-readable code (`error.details.error_code`),
    /// such as `environment_archived` or `invalid_config_type_change`.
    #[error("{message}")]
    Coded { code: ErrorCode, message: String },
    /// A state conflict that retrying cannot fix (`409 conflict_error`), e.g. stopping a stopped
    /// work item or acknowledging one that is not pending.
    #[error("{0}")]
    Conflict(String),
    /// A queue the request would join is full (`429 rate_limit_error`), e.g. a workspace's
    /// pending dreams.
    #[error("{0}")]
    Limited(String),
    /// The caller's credential does not reach this object (`403 permission_error`).
    #[error("{0}")]
    Forbidden(String),
    /// The credential no longer stands for anyone who may act (a removed person): `401`.
    #[error("{0}")]
    Unauthenticated(String),
    /// A person in several workspaces named none to act in (`400`, naming the
    /// `anthropic-workspace-id` header that chooses one).
    #[error("you are a member of {count} workspaces; name the one to work in with the `anthropic-workspace-id` header")]
    WorkspaceUnspecified { count: usize },
    /// A `page` value that this server did not hand out.
    #[error("`page` is not a cursor returned by this list; pass the `next_page` value of the previous response")]
    InvalidCursor,
    /// A transient failure of the database (a serialization failure, a deadlock, a busy
    /// database): the same call may well succeed if made again.
    #[error("transient storage failure")]
    Retryable(#[source] BoxError),
    /// The database cannot be reached (restarting, unreachable, out of connections, a
    /// statement timed out): `503` with `retry-after`; the call may succeed later.
    #[error("the database is unavailable")]
    Unavailable(#[source] BoxError),
    /// The database's disk is full (SQLite's `SQLITE_FULL`, PostgreSQL's `disk_full`): the write
    /// was rolled back whole; reads still work, and writes succeed again once space is freed.
    #[error("the database's disk is full")]
    DiskFull(#[source] BoxError),
    /// The database failed; the cause is for logs only.
    #[error("storage failure")]
    Backend(#[source] BoxError),
}

/// The cause of a database failure.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A stored row that cannot be read back: the cause of a [`StoreError::Backend`] (a `500`
/// whose log line, with the request id, names the table, the row and the column). A row is
/// never read as a default in its place.
#[derive(Debug, thiserror::Error)]
#[error("table `{table}`, row `{row}`, column `{column}` cannot be read: {cause}")]
pub struct CorruptRow {
    pub table: &'static str,
    /// The row's id (or number, for rows without one).
    pub row: String,
    pub column: &'static str,
    pub cause: String,
}

/// The stable codes of [`StoreError::Coded`], sent as `error.details.error_code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    EnvironmentNotFound,
    EnvironmentArchived,
    InvalidConfigTypeChange,
    InvalidMetadata,
    /// A code of the Admin API's error table (`workspace_api_key_limit_exceeded`, …).
    Admin(mnemo_api::AdminErrorCode),
}

impl ErrorCode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EnvironmentNotFound => "environment_not_found",
            Self::EnvironmentArchived => "environment_archived",
            Self::InvalidConfigTypeChange => "invalid_config_type_change",
            Self::InvalidMetadata => "invalid_metadata",
            Self::Admin(code) => code.as_str(),
        }
    }

    /// Whether the code says that something does not exist (`404`) rather than that the
    /// request is invalid (`400`).
    pub fn is_not_found(self) -> bool {
        matches!(self, Self::EnvironmentNotFound)
    }
}

fn path_conflict_message(requested: &str, conflicting: &str) -> String {
    if requested == conflicting {
        format!("a memory already exists at {requested}")
    } else if conflicting.len() < requested.len() {
        format!("{requested} overlaps the memory at {conflicting}, which would have to be a directory")
    } else {
        format!("{requested} overlaps the memory at {conflicting}, which lies below it")
    }
}

impl From<crate::rules::refusal::Refusal> for StoreError {
    /// An organization rule's refusal: `400`, with its code as `error.details.error_code`.
    fn from(r: crate::rules::refusal::Refusal) -> Self {
        match r.code {
            Some(code) => Self::Coded { code: ErrorCode::Admin(code), message: r.message },
            None => Self::Invalid(r.message),
        }
    }
}

impl StoreError {
    /// A not-found error for an object kind and id.
    pub fn not_found(kind: &'static str, id: &impl ToString) -> Self {
        Self::NotFound { kind, id: id.to_string() }
    }

    /// A database failure with its cause.
    pub fn backend(cause: impl Into<BoxError>) -> Self {
        Self::Backend(cause.into())
    }

    /// A row of `table` whose `column` cannot be decoded ([`CorruptRow`]).
    #[expect(clippy::needless_pass_by_value, reason = "callers hand over the cause they hold, as `map_err` gives it")]
    pub fn corrupt(table: &'static str, row: &impl ToString, column: &'static str, cause: impl ToString) -> Self {
        Self::Backend(Box::new(CorruptRow { table, row: row.to_string(), column, cause: cause.to_string() }))
    }

    /// Whether making the same call again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable(_) | Self::Unavailable(_))
    }

    /// The message and every cause below it, `: `-separated, for logs.
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut next = std::error::Error::source(self);
        while let Some(cause) = next {
            out.push_str(": ");
            out.push_str(&cause.to_string());
            next = cause.source();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_failure_keeps_its_cause() {
        let io = std::io::Error::other("disk on fire");
        let e = StoreError::backend(io);
        assert_eq!(e.to_string(), "storage failure");
        assert_eq!(e.chain(), "storage failure: disk on fire");
        assert!(std::error::Error::source(&e).is_some());
        assert!(!e.is_retryable());
        assert!(StoreError::Retryable("deadlock".into()).is_retryable());
    }

    #[test]
    fn a_corrupt_row_is_a_failure_that_names_table_row_and_column() {
        let e = StoreError::corrupt("sessions", &"sesn_1", "body", "expected value at line 1 column 1");
        assert_eq!(e.to_string(), "storage failure", "the caller sees no detail");
        assert_eq!(
            e.chain(),
            "storage failure: table `sessions`, row `sesn_1`, column `body` cannot be read: \
             expected value at line 1 column 1"
        );
        assert!(!e.is_retryable());
    }
}
