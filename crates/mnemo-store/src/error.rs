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
    Coded { code: &'static str, message: String },
    /// A state conflict that retrying cannot fix (`409 conflict_error`), e.g. stopping a stopped
    /// work item or acknowledging one that is not pending.
    #[error("{0}")]
    Conflict(String),
    /// The caller's credential does not reach this object (`403 permission_error`).
    #[error("{0}")]
    Forbidden(String),
    /// A `page` value that this server did not hand out.
    #[error("`page` is not a cursor returned by this list; pass the `next_page` value of the previous response")]
    InvalidCursor,
    /// The database failed; the message is for logs only.
    #[error("storage failure: {0}")]
    Backend(String),
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

impl StoreError {
    /// A not-found error for an object kind and id.
    pub fn not_found(kind: &'static str, id: &impl ToString) -> Self {
        Self::NotFound { kind, id: id.to_string() }
    }
}
