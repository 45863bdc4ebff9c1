//! JSON shapes of the memory-stores API: objects, pages, request bodies and their validation.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ids::{ApiKeyId, MemoryId, MemoryStoreId, MemoryVersionId, SessionId};
use crate::limits::*;

/// A point in time, always rendered as RFC 3339 in UTC (`…Z`).
pub type Timestamp = DateTime<Utc>;

/// RFC 3339 in UTC with microseconds of a time in microseconds since the Unix epoch: the form
/// of the work API's string-typed timestamps (and of heartbeat values).
pub fn rfc3339_micros(micros: i64) -> String {
    DateTime::from_timestamp_micros(micros).unwrap_or_default().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// A server-side collection of memories (`type: "memory_store"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_store")]
pub struct MemoryStore {
    pub id: MemoryStoreId,
    pub name: String,
    /// Empty when unset, never null.
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub archived_at: Option<DateTime<Utc>>,
}

/// A text document at a path inside a store (`type: "memory"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory")]
pub struct Memory {
    pub id: MemoryId,
    pub memory_store_id: MemoryStoreId,
    pub path: String,
    /// Null under `view=basic`.
    pub content: Option<String>,
    pub content_sha256: String,
    pub content_size_bytes: u64,
    pub memory_version_id: MemoryVersionId,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The last line of a store's memory stream (`GET /v1/memory_stores/{store}/memories:stream`, a
/// mnemo extension; `type: "memory_stream_end"`): how many memory lines came before it and the
/// snapshot they were read from. A stream that ends without it was cut short and is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_stream_end")]
pub struct MemoryStreamEnd {
    /// How many memories the stream carried.
    pub memory_count: u64,
    /// The store's change position the snapshot was read at (the listing's `ETag` is
    /// `"m<change_seq>"`; the change feed's cursor counts the same way).
    pub change_seq: i64,
}

/// A directory marker in a depth-limited listing (`type: "memory_prefix"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_prefix")]
pub struct MemoryPrefix {
    /// The rolled-up prefix, trailing `/` included.
    pub path: String,
}

/// One item of a memory listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum MemoryListItem {
    Memory(Memory),
    Prefix(MemoryPrefix),
}

/// A store's version retention (`GET`/`POST /v1/memory_stores/{store}/version_retention`, a
/// mnemo extension; `type: "memory_store_version_retention"`): versions older than `effective`
/// are purged in the background, except each live memory's newest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_store_version_retention")]
pub struct VersionRetention {
    pub memory_store_id: MemoryStoreId,
    /// The store's own: a window (`30d`, `12h`, `90s`) or `forever`; null: the server's.
    pub retention: Option<String>,
    /// The server's `--version-retention` (`forever` when it keeps everything).
    pub server_default: String,
    /// What applies: `retention`, else `server_default`.
    pub effective: String,
}

/// Body of `POST /v1/memory_stores/{store}/version_retention`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SetVersionRetention {
    /// A window (`30d`, `12h`, `45m`, `90s`), `forever`, or null to follow the server's again.
    /// Required (an absent key is refused, so a typo never resets a store's retention).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub retention: Option<Option<String>>,
}

/// A key that is present, whatever its value (`null` included): `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// One result of a memory search (`GET /v1/memory_stores/{store}/memories:search` and
/// `GET /v1/memories:search`, mnemo extensions; `type: "memory_search_result"`), best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_search_result")]
pub struct MemorySearchResult {
    pub memory_id: MemoryId,
    pub memory_store_id: MemoryStoreId,
    pub path: String,
    /// The digest of the content the snippet was taken from (a precondition for an update).
    pub content_sha256: String,
    pub content_size_bytes: u64,
    pub memory_version_id: MemoryVersionId,
    pub updated_at: DateTime<Utc>,
    /// Up to 200 characters of the content around the first match, whitespace collapsed, each
    /// matched term between `«` and `»`, and `…` where text was cut.
    pub snippet: String,
    /// Relevance, higher first: comparable within one response, not across backends. In the
    /// `semantic` and `hybrid` modes, the fused reciprocal-rank score.
    pub score: f64,
}

/// How a memory search ranks (`mode`): `text` (full text, the default), `semantic` (by
/// meaning, when the server has an embeddings provider) or `hybrid` (both, fused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    #[default]
    Text,
    Semantic,
    Hybrid,
}

impl SearchMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Semantic => "semantic",
            Self::Hybrid => "hybrid",
        }
    }

    /// Reads a `mode` value; the error says which values there are.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Self::Text),
            "semantic" => Ok(Self::Semantic),
            "hybrid" => Ok(Self::Hybrid),
            other => Err(format!("`mode` is `text`, `semantic` or `hybrid` (got `{}`)", other.escape_debug())),
        }
    }
}

/// One page of a memory search: the results, best first, and how they were ranked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemorySearchPage {
    pub data: Vec<MemorySearchResult>,
    /// Pass back as `page` to get the next page; null on the last page.
    pub next_page: Option<String>,
    /// How these results were ranked: the `mode` asked for, or `text` when a `semantic` or
    /// `hybrid` search could not reach the embeddings provider (then `notice` says so).
    #[serde(default)]
    pub mode: SearchMode,
    /// Why the results are not ranked as asked; absent when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// The kind of change a version records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Created,
    Modified,
    Deleted,
}

impl Operation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Modified => "modified",
            Self::Deleted => "deleted",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "created" => Some(Self::Created),
            "modified" => Some(Self::Modified),
            "deleted" => Some(Self::Deleted),
            _ => None,
        }
    }
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Actor {
    /// An agent writing through a session (the worker's sync with a sessions token).
    SessionActor { session_id: SessionId },
    /// A direct API caller, identified by its key's id.
    ApiActor { api_key_id: ApiKeyId },
    /// A human, e.g. through a console.
    UserActor { user_id: String },
    /// A workload authenticated as a service account.
    ServiceAccountActor { service_account_id: String },
}

/// One immutable entry in a memory's history (`type: "memory_version"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_version")]
pub struct MemoryVersion {
    pub id: MemoryVersionId,
    pub memory_id: MemoryId,
    pub memory_store_id: MemoryStoreId,
    pub operation: Operation,
    /// Null if and only if redacted.
    pub path: Option<String>,
    /// Null under `view=basic`, for `deleted` versions and when redacted.
    pub content: Option<String>,
    pub content_sha256: Option<String>,
    pub content_size_bytes: Option<u64>,
    pub created_at: DateTime<Utc>,
    pub created_by: Option<Actor>,
    pub redacted_at: Option<DateTime<Utc>>,
    pub redacted_by: Option<Actor>,
}

/// One entry of a memory store's change feed (`GET /v1/memory_stores/{id}/changes`, a mnemo
/// extension): a memory version as the versions API shows it in `view=basic`; its content only
/// when the stream was asked for it (`content=inline`) and it is small. A redacted version has a
/// null path, digest and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemoryChangeEvent {
    pub memory_id: MemoryId,
    pub memory_store_id: MemoryStoreId,
    pub memory_version_id: MemoryVersionId,
    pub operation: Operation,
    pub path: Option<String>,
    pub content_sha256: Option<String>,
    pub content_size_bytes: Option<u64>,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<Actor>,
    /// The version's content, on an SSE stream opened with `content=inline`, for a created or
    /// modified version of at most [`crate::limits::MAX_INLINE_CHANGE_BYTES`] that the stream's
    /// own client did not write ([`crate::headers::WRITER_HEADER`]); absent otherwise (fetch the
    /// memory for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

impl MemoryChangeEvent {
    /// The feed's view of a version (its content, if loaded, is left out).
    pub fn of(version: &MemoryVersion) -> Self {
        Self {
            memory_id: version.memory_id.clone(),
            memory_store_id: version.memory_store_id.clone(),
            memory_version_id: version.id.clone(),
            operation: version.operation,
            path: version.path.clone(),
            content_sha256: version.content_sha256.clone(),
            content_size_bytes: version.content_size_bytes,
            created_at: version.created_at,
            created_by: version.created_by.clone(),
            content: None,
        }
    }

    /// The SSE event name: `memory.created`, `memory.modified` or `memory.deleted`.
    pub fn event_name(&self) -> &'static str {
        match self.operation {
            Operation::Created => "memory.created",
            Operation::Modified => "memory.modified",
            Operation::Deleted => "memory.deleted",
        }
    }
}

/// A page of the change feed's JSON long-poll form: the changes after the cursor asked for (in
/// commit order) and the cursor to ask with next (the one asked with when nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemoryChangePage {
    pub data: Vec<MemoryChangeEvent>,
    pub next_cursor: String,
}

/// Confirmation of a memory deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_deleted")]
pub struct MemoryDeleted {
    pub id: MemoryId,
}

/// Confirmation of a store deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_store_deleted")]
pub struct MemoryStoreDeleted {
    pub id: MemoryStoreId,
}

/// One page of a cursor-paginated list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Pass back as `page` to get the next page; null on the last page.
    pub next_page: Option<String>,
}

/// Whether memories and versions carry their content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum View {
    Basic,
    Full,
}

impl View {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Basic => "basic",
            Self::Full => "full",
        }
    }
}

/// A condition an update must meet to apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Precondition {
    /// The stored content must currently hash to this value.
    ContentSha256 { content_sha256: String },
}

/// Body of `POST /v1/memory_stores`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateMemoryStore {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// Body of `POST /v1/memory_stores/{id}`: only the given keys change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateMemoryStore {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A patch: a string upserts the key, `null` removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, Option<String>>>,
}

/// Body of `POST /v1/memory_stores/{id}/memories`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateMemory {
    pub path: String,
    /// Required; the reference client types it as nullable, so a null is refused explicitly.
    pub content: Option<String>,
}

/// Body of `POST /v1/memory_stores/{id}/memories/{memory_id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UpdateMemory {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precondition: Option<Precondition>,
}

/// One write of a memory batch: a create or an update, with the fields of its own endpoint's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MemoryWrite {
    /// What `POST /v1/memory_stores/{id}/memories` does with this body.
    Create(CreateMemory),
    /// What `POST /v1/memory_stores/{id}/memories/{memory_id}` does with this body.
    Update {
        memory_id: String,
        #[serde(flatten)]
        change: UpdateMemory,
    },
}

/// Body of `POST /v1/memory_stores/{id}/memories:batch` (a mnemo extension): 1 to
/// [`crate::limits::MAX_BATCH_WRITES`] writes, applied in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MemoryWriteBatch {
    pub writes: Vec<MemoryWrite>,
}

/// How one write of a batch ended: the status its own request would have been answered with,
/// and the memory (`view=basic`: no content) or the error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryWriteResult {
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::ErrorBody>,
}

/// The answer to a memory batch (`type: "memory_write_results"`): one result per write, in the
/// order of the writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename = "memory_write_results")]
pub struct MemoryWriteResults {
    pub results: Vec<MemoryWriteResult>,
}

/// A request field that breaks a documented rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// Checks a store name: 1–255 characters, no control characters.
pub fn validate_store_name(name: &str) -> Result<(), Invalid> {
    let n = name.chars().count();
    if n == 0 || n > MAX_STORE_NAME_CHARS {
        return Err(Invalid(format!("name must be 1 to {MAX_STORE_NAME_CHARS} characters long (got {n})")));
    }
    if has_control(name) {
        return Err(Invalid("name must not contain control characters".into()));
    }
    Ok(())
}

/// Checks a store description: at most 1,024 characters.
pub fn validate_store_description(description: &str) -> Result<(), Invalid> {
    let n = description.chars().count();
    if n > MAX_STORE_DESCRIPTION_CHARS {
        return Err(Invalid(format!(
            "description must be at most {MAX_STORE_DESCRIPTION_CHARS} characters long (got {n})"
        )));
    }
    Ok(())
}

/// Checks one metadata pair: key 1–64 characters, value at most 512.
pub fn validate_metadata_pair(key: &str, value: &str) -> Result<(), Invalid> {
    validate_pair("metadata", key, value, MAX_METADATA_KEY_CHARS, MAX_METADATA_VALUE_CHARS)
}

/// Checks one pair of a string map (`what` names it in the message: `metadata`, `tag`): key 1
/// to `max_key` characters, value at most `max_value`.
pub(crate) fn validate_pair(
    what: &str,
    key: &str,
    value: &str,
    max_key: usize,
    max_value: usize,
) -> Result<(), Invalid> {
    let k = key.chars().count();
    if k == 0 || k > max_key {
        return Err(Invalid(format!("{what} keys must be 1 to {max_key} characters long (got {k})")));
    }
    let v = value.chars().count();
    if v > max_value {
        return Err(Invalid(format!("{what} value for `{key}` must be at most {max_value} characters long (got {v})")));
    }
    Ok(())
}

/// Checks a whole metadata map: at most 16 valid pairs.
pub fn validate_metadata(metadata: &BTreeMap<String, String>) -> Result<(), Invalid> {
    if metadata.len() > MAX_METADATA_PAIRS {
        return Err(Invalid(format!("metadata may hold at most {MAX_METADATA_PAIRS} pairs (got {})", metadata.len())));
    }
    metadata.iter().try_for_each(|(k, v)| validate_metadata_pair(k, v))
}

/// Applies a metadata patch (`null` removes a key) and checks the result.
pub fn apply_metadata_patch(
    current: &BTreeMap<String, String>,
    patch: &BTreeMap<String, Option<String>>,
) -> Result<BTreeMap<String, String>, Invalid> {
    let mut out = current.clone();
    for (key, value) in patch {
        match value {
            Some(v) => {
                validate_metadata_pair(key, v)?;
                out.insert(key.clone(), v.clone());
            }
            None => {
                out.remove(key);
            }
        }
    }
    validate_metadata(&out)?;
    Ok(out)
}

/// Checks memory content against the size limit; the error carries the size.
pub fn validate_content_size(content: &str) -> Result<(), usize> {
    if content.len() > MAX_CONTENT_BYTES { Err(content.len()) } else { Ok(()) }
}

/// What a refusal of content `size` bytes long says (the API and the console use these words).
pub fn content_too_large_message(size: usize) -> String {
    format!("content is {size} bytes; a memory holds at most {MAX_CONTENT_BYTES} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_carry_their_type_tag() {
        let deleted = MemoryDeleted { id: MemoryId::generate() };
        let v = serde_json::to_value(&deleted).unwrap();
        assert_eq!(v["type"], "memory_deleted");
        let actor: Actor = serde_json::from_value(json!({"type":"api_actor","api_key_id":"apikey_x1"})).unwrap();
        assert!(matches!(actor, Actor::ApiActor { .. }));
        let p: Precondition = serde_json::from_value(json!({"type":"content_sha256","content_sha256":"ab"})).unwrap();
        assert_eq!(p, Precondition::ContentSha256 { content_sha256: "ab".into() });
    }

    #[test]
    fn list_items_are_told_apart_by_type() {
        let item: MemoryListItem = serde_json::from_value(json!({"type":"memory_prefix","path":"/a/"})).unwrap();
        assert_eq!(item, MemoryListItem::Prefix(MemoryPrefix { path: "/a/".into() }));
    }

    #[test]
    fn metadata_patch_removes_with_null_and_enforces_limits() {
        let current: BTreeMap<_, _> = [("a".to_owned(), "1".to_owned())].into();
        let patch: BTreeMap<_, _> = [("a".to_owned(), None), ("b".to_owned(), Some("2".to_owned()))].into();
        let out = apply_metadata_patch(&current, &patch).unwrap();
        assert_eq!(out, [("b".to_owned(), "2".to_owned())].into());

        let many: BTreeMap<_, _> = (0..17).map(|i| (format!("k{i}"), Some("v".to_owned()))).collect();
        assert!(apply_metadata_patch(&BTreeMap::new(), &many).is_err());
        let long_key: BTreeMap<_, _> = [("k".repeat(65), Some(String::new()))].into();
        assert!(apply_metadata_patch(&BTreeMap::new(), &long_key).is_err());
        let empty_key: BTreeMap<_, _> = [(String::new(), Some(String::new()))].into();
        assert!(apply_metadata_patch(&BTreeMap::new(), &empty_key).is_err());
        let long_value: BTreeMap<_, _> = [("k".into(), Some("v".repeat(513)))].into();
        assert!(apply_metadata_patch(&BTreeMap::new(), &long_value).is_err());
    }

    #[test]
    fn store_names() {
        assert!(validate_store_name("User Preferences").is_ok());
        assert!(validate_store_name("").is_err());
        assert!(validate_store_name(&"n".repeat(256)).is_err());
        assert!(validate_store_name(&"é".repeat(255)).is_ok());
        assert!(validate_store_name("a\tb").is_err());
        assert!(validate_store_description(&"d".repeat(1024)).is_ok());
        assert!(validate_store_description(&"d".repeat(1025)).is_err());
    }
}
