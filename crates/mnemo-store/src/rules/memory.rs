//! The rules of writing memories: archived stores, the per-store cap, `content_sha256`
//! preconditions, retried updates, path overlaps, and which version may be redacted.
//!
//! A backend runs these inside the transaction that writes, after locking the store (a row
//! lock, or the single writer of an embedded database), so that the state they judge is the
//! state the write lands on: two creates racing for one path, or for the last slot under the
//! cap, cannot both pass.

pub use mnemo_api::Overlap;
use mnemo_api::{Actor, Memory, MemoryPath, MemoryStore, MemoryVersion, MemoryVersionId, Timestamp, content_sha256};

use crate::{MemoryChange, StoreError};

/// The memory (id, path) that blocks a path, as a backend found it ([`Overlap`]).
pub type Blocker = (String, String);

/// A store takes new content only while it is not archived.
pub fn check_writable(store: &MemoryStore) -> Result<(), StoreError> {
    match store.archived_at {
        Some(_) => Err(StoreError::Archived(store.id.to_string())),
        None => Ok(()),
    }
}

/// One more memory fits under the cap.
pub fn check_capacity(store: &MemoryStore, live_memories: u64, limit: u32) -> Result<(), StoreError> {
    if live_memories >= u64::from(limit) {
        return Err(StoreError::StoreFull { store: store.id.to_string(), limit });
    }
    Ok(())
}

/// A `content_sha256` precondition holds.
pub fn check_precondition(expected: Option<&str>, actual: &str) -> Result<(), StoreError> {
    match expected {
        Some(expected) if expected != actual => {
            Err(StoreError::PreconditionFailed { expected: expected.to_owned(), actual: actual.to_owned() })
        }
        _ => Ok(()),
    }
}

/// The path is free: `blocker` is the memory (id, path) that overlaps it ([`Overlap`]), as the
/// backend found it (excluding the memory being moved).
pub fn check_path_free(path: &MemoryPath, blocker: Option<Blocker>) -> Result<(), StoreError> {
    match blocker {
        None => Ok(()),
        Some((id, conflicting_path)) => Err(StoreError::PathConflict {
            requested: path.to_string(),
            conflicting_memory_id: id.parse().ok(),
            conflicting_path,
        }),
    }
}

/// What a create is judged on, read under the store's lock.
#[derive(Debug, Clone)]
pub struct CreateFacts<'a> {
    pub store: &'a MemoryStore,
    /// The memory overlapping the new path, if one does.
    pub blocker: Option<Blocker>,
    /// Live memories of the store.
    pub live_memories: u64,
    /// The per-store cap.
    pub limit: u32,
}

/// A create may proceed. When several checks fail, the first in this order wins: the store is
/// writable (an archived store is `Archived` whatever else is wrong), the path is free (a taken
/// path in a full store is a `PathConflict`, which names what to move), then the cap.
pub fn check_create(path: &MemoryPath, facts: CreateFacts<'_>) -> Result<(), StoreError> {
    check_writable(facts.store)?;
    check_path_free(path, facts.blocker)?;
    check_capacity(facts.store, facts.live_memories, facts.limit)
}

/// What an update writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// The memory already holds the requested state (a retry of an applied update): answer
    /// with it as it is (this is its content), whatever the precondition says, and write no
    /// version.
    Unchanged { content: String },
    /// Write a `modified` version with this content; `moved_to`: check this path is free first.
    Write { content: String, sha256: String, moved_to: Option<MemoryPath> },
}

/// Plans an update of `current`. Its content is read only when the change brings none (a move):
/// a change that brings content is judged by digests, so the store need not load the old bytes.
pub fn plan_update(current: &Memory, change: MemoryChange) -> Result<Update, StoreError> {
    let content = match change.content {
        Some(content) => content,
        None => current.content.clone().unwrap_or_default(),
    };
    let sha256 = content_sha256(content.as_bytes());
    let moved_to = change.path.filter(|p| p.as_str() != current.path);
    if sha256 == current.content_sha256 && moved_to.is_none() {
        return Ok(Update::Unchanged { content });
    }
    check_precondition(change.expected_sha256.as_deref(), &current.content_sha256)?;
    Ok(Update::Write { content, sha256, moved_to })
}

/// A version may be redacted unless it holds its memory's current content. `current`: the
/// version the memory holds now, if the memory still exists.
pub fn check_redactable(version: &MemoryVersion, current: Option<&MemoryVersionId>) -> Result<(), StoreError> {
    if current == Some(&version.id) {
        return Err(StoreError::RedactCurrentVersion {
            version: version.id.to_string(),
            memory: version.memory_id.to_string(),
        });
    }
    Ok(())
}

/// `version` as redaction leaves it: its path and content (with their digest and size) are
/// cleared, and who redacted it and when is recorded. Its id, memory, operation and author stay.
pub fn redacted(version: MemoryVersion, by: &Actor, at: Timestamp) -> MemoryVersion {
    MemoryVersion {
        path: None,
        content: None,
        content_sha256: None,
        content_size_bytes: None,
        redacted_at: Some(at),
        redacted_by: Some(by.clone()),
        ..version
    }
}

/// A change feed's entry for `version` at position `seq`. Under `inline` (`content=inline`) it
/// carries the version's content when the version is a create or change of at most
/// [`mnemo_api::limits::MAX_INLINE_CHANGE_BYTES`] that is not redacted (`version.content` as
/// the backend read it; a backend may leave out what this would drop).
pub fn feed_entry(mut version: MemoryVersion, seq: i64, inline: bool) -> crate::MemoryFeedEntry {
    let content = version.content.take();
    let mut change = mnemo_api::MemoryChangeEvent::of(&version);
    let small = version.content_size_bytes.is_some_and(|n| n <= mnemo_api::limits::MAX_INLINE_CHANGE_BYTES);
    if inline && small && version.operation != mnemo_api::Operation::Deleted && version.content_sha256.is_some() {
        change.content = content;
    }
    crate::MemoryFeedEntry { seq, change }
}

#[cfg(test)]
mod tests {
    use mnemo_api::{MemoryId, MemoryStoreId};

    use super::*;

    /// The store `memstore_s`, open (not archived).
    fn open_store() -> MemoryStore {
        MemoryStore {
            id: "memstore_s".parse().unwrap(),
            name: "s".into(),
            description: String::new(),
            metadata: Default::default(),
            created_at: Default::default(),
            updated_at: Default::default(),
            archived_at: None,
        }
    }

    fn memory(path: &str, content: &str) -> Memory {
        Memory {
            id: "mem_m".parse::<MemoryId>().unwrap(),
            memory_store_id: "memstore_s".parse::<MemoryStoreId>().unwrap(),
            path: path.into(),
            content_sha256: content_sha256(content.as_bytes()),
            content_size_bytes: content.len() as u64,
            content: Some(content.into()),
            memory_version_id: "memver_v".parse().unwrap(),
            created_at: Default::default(),
            updated_at: Default::default(),
        }
    }

    fn change(content: Option<&str>, path: Option<&str>, expected: Option<&str>) -> MemoryChange {
        MemoryChange {
            content: content.map(str::to_owned),
            path: path.map(|p| MemoryPath::parse(p).unwrap()),
            expected_sha256: expected.map(|e| content_sha256(e.as_bytes())),
        }
    }

    #[test]
    fn updates() {
        let current = memory("/a.md", "old");
        #[rustfmt::skip]
        let rows: Vec<(&str, MemoryChange, Result<&str, &str>)> = vec![
            ("the same content is unchanged", change(Some("old"), None, None), Ok("unchanged")),
            ("the same content and path are unchanged", change(Some("old"), Some("/a.md"), None), Ok("unchanged")),
            ("a retry is unchanged whatever its precondition says", change(Some("old"), None, Some("stale")), Ok("unchanged")),
            ("new content is written", change(Some("new"), None, None), Ok("write new")),
            ("with a matching precondition", change(Some("new"), None, Some("old")), Ok("write new")),
            ("a stale precondition fails", change(Some("new"), None, Some("stale")), Err("precondition")),
            ("a move keeps the content and checks the new path", change(None, Some("/b.md"), None), Ok("write old to /b.md")),
            ("a move with a stale precondition fails", change(None, Some("/b.md"), Some("stale")), Err("precondition")),
        ];
        // A change that brings content is judged the same on a memory loaded without its own.
        let bare = Memory { content: None, ..current.clone() };
        let rows = rows.into_iter().flat_map(|(rule, c, expected)| {
            let again = c.content.is_some().then(|| (rule, &bare, c.clone(), expected));
            std::iter::once((rule, &current, c, expected)).chain(again)
        });
        for (rule, current, c, expected) in rows {
            let got = match plan_update(current, c) {
                Ok(Update::Unchanged { content }) => {
                    assert_eq!(content, "old", "rule: {rule}: the memory's content, as it holds it");
                    Ok("unchanged".to_owned())
                }
                Ok(Update::Write { content, moved_to: None, .. }) => Ok(format!("write {content}")),
                Ok(Update::Write { content, moved_to: Some(p), .. }) => Ok(format!("write {content} to {p}")),
                Err(StoreError::PreconditionFailed { .. }) => Err("precondition"),
                Err(other) => panic!("{rule}: {other:?}"),
            };
            assert_eq!(got, expected.map(str::to_owned), "rule: {rule}");
        }
    }

    #[test]
    fn store_and_path_checks() {
        let mut store = open_store();
        assert!(check_writable(&store).is_ok());
        assert!(check_capacity(&store, 9, 10).is_ok());
        assert!(matches!(check_capacity(&store, 10, 10), Err(StoreError::StoreFull { limit: 10, .. })));
        store.archived_at = Some(Default::default());
        assert!(matches!(check_writable(&store), Err(StoreError::Archived(id)) if id == "memstore_s"));

        let path = MemoryPath::parse("/a/b.md").unwrap();
        assert!(check_path_free(&path, None).is_ok());
        let err = check_path_free(&path, Some(("mem_x".into(), "/a".into()))).unwrap_err();
        assert_eq!(err.to_string(), "/a/b.md overlaps the memory at /a, which would have to be a directory");

        assert!(check_precondition(None, "x").is_ok());
        assert!(check_precondition(Some("x"), "x").is_ok());
        assert!(check_precondition(Some("y"), "x").is_err());

        let version: MemoryVersion = serde_json::from_value(serde_json::json!({
            "type": "memory_version", "id": "memver_v", "memory_id": "mem_m", "memory_store_id": "memstore_s",
            "operation": "modified", "path": "/a.md", "created_at": "2026-01-01T00:00:00Z",
        }))
        .unwrap();
        assert!(check_redactable(&version, None).is_ok(), "the memory is gone");
        assert!(check_redactable(&version, Some(&"memver_new".parse().unwrap())).is_ok(), "an older version");
        let live = check_redactable(&version, Some(&version.id)).unwrap_err();
        assert!(matches!(live, StoreError::RedactCurrentVersion { memory, .. } if memory == "mem_m"));
    }

    #[test]
    fn the_first_failing_check_of_a_create_wins() {
        let mut archived = open_store();
        let open = archived.clone();
        archived.archived_at = Some(Default::default());
        let taken = || Some(("mem_x".to_owned(), "/a".to_owned()));
        let path = MemoryPath::parse("/a/b.md").unwrap();
        #[rustfmt::skip]
        let rows: Vec<(&str, &MemoryStore, Option<Blocker>, u64, &str)> = vec![
            ("all pass", &open, None, 9, "ok"),
            ("archived wins over a taken path and a full store", &archived, taken(), 10, "archived"),
            ("archived alone", &archived, None, 0, "archived"),
            ("a taken path wins over a full store", &open, taken(), 10, "path"),
            ("a taken path alone", &open, taken(), 0, "path"),
            ("a full store alone", &open, None, 10, "full"),
        ];
        for (rule, store, blocker, live_memories, want) in rows {
            let got = match check_create(&path, CreateFacts { store, blocker, live_memories, limit: 10 }) {
                Ok(()) => "ok",
                Err(StoreError::Archived(_)) => "archived",
                Err(StoreError::PathConflict { .. }) => "path",
                Err(StoreError::StoreFull { .. }) => "full",
                Err(other) => panic!("{rule}: {other:?}"),
            };
            assert_eq!(got, want, "rule: {rule}");
        }
    }

    #[test]
    fn redaction_clears_path_and_content_and_records_who_and_when() {
        let version: MemoryVersion = serde_json::from_value(serde_json::json!({
            "type": "memory_version", "id": "memver_v", "memory_id": "mem_m", "memory_store_id": "memstore_s",
            "operation": "modified", "path": "/a.md", "content": "secret", "content_sha256": "ab",
            "content_size_bytes": 6, "created_at": "2026-01-01T00:00:00Z",
            "created_by": {"type": "api_actor", "api_key_id": "apikey_a"},
        }))
        .unwrap();
        let by = Actor::ApiActor { api_key_id: "apikey_r".parse().unwrap() };
        let at: Timestamp = "2026-02-01T00:00:00Z".parse().unwrap();
        let out = redacted(version.clone(), &by, at);
        #[rustfmt::skip]
        let rows: Vec<(&str, bool)> = vec![
            ("the path is cleared", out.path.is_none()),
            ("the content is cleared", out.content.is_none()),
            ("the digest is cleared", out.content_sha256.is_none()),
            ("the size is cleared", out.content_size_bytes.is_none()),
            ("when is recorded", out.redacted_at == Some(at)),
            ("who is recorded", out.redacted_by.as_ref() == Some(&by)),
            ("the id stays", out.id == version.id),
            ("the memory stays", out.memory_id == version.memory_id),
            ("the operation stays", out.operation == version.operation),
            ("the author and time stay", out.created_by == version.created_by && out.created_at == version.created_at),
        ];
        for (rule, holds) in rows {
            assert!(holds, "rule: {rule}");
        }
    }

    #[test]
    fn a_feed_entry_carries_small_created_or_modified_content_only_when_inline() {
        let max = mnemo_api::limits::MAX_INLINE_CHANGE_BYTES;
        let version = |operation: &str, size: Option<u64>, redacted: bool| -> MemoryVersion {
            let mut v: MemoryVersion = serde_json::from_value(serde_json::json!({
                "type": "memory_version", "id": "memver_v", "memory_id": "mem_m", "memory_store_id": "memstore_s",
                "operation": operation, "path": "/a.md", "content": "body", "content_sha256": "ab",
                "content_size_bytes": size, "created_at": "2026-01-01T00:00:00Z",
                "created_by": {"type": "api_actor", "api_key_id": "apikey_a"},
            }))
            .unwrap();
            if redacted {
                let at = v.created_at;
                v = super::redacted(v, &Actor::ApiActor { api_key_id: "apikey_r".parse().unwrap() }, at);
            }
            v
        };
        #[rustfmt::skip]
        let rows: Vec<(&str, MemoryVersion, bool, bool)> = vec![
            ("a small create, inline",                version("created", Some(4), false), true, true),
            ("a small change, inline",                version("modified", Some(4), false), true, true),
            ("at the limit",                          version("modified", Some(max), false), true, true),
            ("over the limit",                        version("modified", Some(max + 1), false), true, false),
            ("a deletion",                            version("deleted", None, false), true, false),
            ("a redacted version",                    version("modified", Some(4), true), true, false),
            ("a small create, without inline",        version("created", Some(4), false), false, false),
        ];
        for (case, v, inline, carries) in rows {
            let entry = feed_entry(v.clone(), 7, inline);
            assert_eq!(entry.seq, 7, "{case}");
            assert_eq!(entry.change.content.is_some(), carries, "{case}");
            assert_eq!(entry.change.memory_version_id, v.id, "{case}");
        }
    }
}
