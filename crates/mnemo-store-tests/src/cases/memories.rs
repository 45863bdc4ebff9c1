//! Memory stores and memories: CRUD, archived stores, preconditions, paths, the cap,
//! listings, the change sequence and cursors.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use mnemo_api::{MemoryId, MemoryListItem, MemoryStore, MemoryStoreId, View, content_sha256};
use mnemo_store::{
    Cursor, ExportPart, Limits, ListEvents, ListMemoryStores, MemoryChange, MemoryStorePatch, MemoryStoreUsage,
    MemoryWriteOp, NewMemoryStore, StoreError,
};

use super::fixtures::{
    all_memories, all_versions, api_actor, environment, listed_paths, many_keys, map, memories, memory_store, path,
    session, user_message, versions,
};
use crate::StoreFactory;

fn stores(limit: u32) -> ListMemoryStores {
    ListMemoryStores { include_archived: false, created_at_gte: None, created_at_lte: None, limit, after: None }
}

fn ids(stores: &[MemoryStore]) -> Vec<&MemoryStoreId> {
    stores.iter().map(|s| &s.id).collect()
}

fn named(name: &str) -> NewMemoryStore {
    NewMemoryStore { name: name.into(), description: String::new(), metadata: BTreeMap::new() }
}

/// Whether two paths cannot both hold a memory: equal, or one below the other.
pub(crate) fn overlap(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}/")) || b.starts_with(&format!("{a}/"))
}

fn content(text: &str) -> MemoryChange {
    MemoryChange { content: Some(text.into()), path: None, expected_sha256: None }
}

fn rename(to: &str) -> MemoryChange {
    MemoryChange { content: None, path: Some(path(to)), expected_sha256: None }
}

pub async fn memory_stores_are_created_updated_listed_archived_and_deleted(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let new = NewMemoryStore { name: "notes".into(), description: "about".into(), metadata: map(&[("a", "1")]) };
    let first = s.create_memory_store(&ws, new).await.unwrap();
    assert_eq!(
        (first.name.as_str(), first.description.as_str(), &first.metadata),
        ("notes", "about", &map(&[("a", "1")]))
    );
    assert_eq!(first.archived_at, None);
    assert_eq!(s.get_memory_store(&ws, &first.id).await.unwrap(), first);

    let patch = MemoryStorePatch {
        name: Some("renamed".into()),
        description: None,
        metadata: Some([("a".to_owned(), None), ("b".to_owned(), Some("2".to_owned()))].into()),
    };
    let updated = s.update_memory_store(&ws, &first.id, patch).await.unwrap();
    assert_eq!((updated.name.as_str(), updated.description.as_str()), ("renamed", "about"));
    assert_eq!(updated.metadata, map(&[("b", "2")]));
    assert_eq!(s.get_memory_store(&ws, &first.id).await.unwrap(), updated);
    let crowded = MemoryStorePatch { metadata: Some(many_keys(17, Some("v".to_owned()))), ..Default::default() };
    assert_err!(s.update_memory_store(&ws, &first.id, crowded).await, StoreError::Invalid(_));
    assert_eq!(s.get_memory_store(&ws, &first.id).await.unwrap().metadata, map(&[("b", "2")]));

    tokio::time::sleep(Duration::from_millis(5)).await;
    let second = s.create_memory_store(&ws, named("second")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let third = s.create_memory_store(&ws, named("third")).await.unwrap();
    let page = s.list_memory_stores(&ws, stores(2)).await.unwrap();
    assert_eq!(ids(&page.items), [&third.id, &second.id], "newest first");
    let rest = s.list_memory_stores(&ws, ListMemoryStores { after: page.next, ..stores(2) }).await.unwrap();
    assert_eq!((ids(&rest.items), rest.next), (vec![&first.id], None));
    let since = ListMemoryStores { created_at_gte: Some(second.created_at), ..stores(10) };
    assert_eq!(ids(&s.list_memory_stores(&ws, since).await.unwrap().items), [&third.id, &second.id]);
    let until = ListMemoryStores { created_at_lte: Some(second.created_at), ..stores(10) };
    assert_eq!(ids(&s.list_memory_stores(&ws, until).await.unwrap().items), [&second.id, &first.id]);

    let archived = s.archive_memory_store(&ws, &second.id).await.unwrap();
    assert!(archived.archived_at.is_some());
    assert_eq!(s.archive_memory_store(&ws, &second.id).await.unwrap(), archived, "archiving twice changes nothing");
    assert_eq!(ids(&s.list_memory_stores(&ws, stores(10)).await.unwrap().items), [&third.id, &first.id]);
    let with_archived = ListMemoryStores { include_archived: true, ..stores(10) };
    assert_eq!(ids(&s.list_memory_stores(&ws, with_archived).await.unwrap().items), [&third.id, &second.id, &first.id]);
    let rename = MemoryStorePatch { name: Some("late".into()), ..Default::default() };
    assert_err!(s.update_memory_store(&ws, &second.id, rename).await, StoreError::Archived(id) if id == second.id.as_str());

    // Deleting a store takes its memories and versions with it; an archived store may go too.
    let memory = s.create_memory(&ws, &first.id, path("/a.md"), "x".into(), api_actor()).await.unwrap();
    s.delete_memory_store(&ws, &first.id).await.unwrap();
    assert_err!(s.get_memory_store(&ws, &first.id).await, StoreError::NotFound { .. });
    assert_err!(s.get_memory(&ws, &first.id, &memory.id).await, StoreError::NotFound { .. });
    assert_err!(s.list_memory_versions(&ws, &first.id, versions(10)).await, StoreError::NotFound { .. });
    assert_err!(s.delete_memory_store(&ws, &first.id).await, StoreError::NotFound { .. });
    s.delete_memory_store(&ws, &second.id).await.unwrap();
    let with_archived = ListMemoryStores { include_archived: true, ..stores(10) };
    assert_eq!(ids(&s.list_memory_stores(&ws, with_archived).await.unwrap().items), [&third.id]);
    let unknown = MemoryStoreId::generate();
    assert_err!(s.update_memory_store(&ws, &unknown, MemoryStorePatch::default()).await, StoreError::NotFound { .. });
    assert_err!(s.archive_memory_store(&ws, &unknown).await, StoreError::NotFound { .. });
}

pub async fn an_archived_store_is_read_and_emptied_but_not_written(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "old").await;
    let keep = s.create_memory(&ws, &store, path("/keep.md"), "kept".into(), api_actor()).await.unwrap();
    let gone = s.create_memory(&ws, &store, path("/drop.md"), "dropped".into(), api_actor()).await.unwrap();
    s.archive_memory_store(&ws, &store).await.unwrap();
    let seq = s.memory_change_seq(&ws, &store).await.unwrap();

    // Reads work.
    assert_eq!(s.get_memory(&ws, &store, &keep.id).await.unwrap().content.as_deref(), Some("kept"));
    let listed = all_memories(&*s, &store, memories("/", 0, 10, View::Basic)).await;
    assert_eq!(listed_paths(&listed), ["/drop.md", "/keep.md"]);
    assert_eq!(
        s.get_memory_version(&ws, &store, &keep.memory_version_id, View::Full).await.unwrap().content.as_deref(),
        Some("kept")
    );
    assert_eq!(all_versions(&*s, &store, versions(10)).await.len(), 2);

    // Writes are refused, and change nothing.
    let refused = s.create_memory(&ws, &store, path("/new.md"), "x".into(), api_actor()).await;
    assert_err!(refused, StoreError::Archived(id) if id == store.as_str());
    assert_err!(s.update_memory(&ws, &store, &keep.id, content("changed"), api_actor()).await, StoreError::Archived(_));
    assert_err!(
        s.update_memory(&ws, &store, &keep.id, rename("/moved.md"), api_actor()).await,
        StoreError::Archived(_)
    );
    assert_eq!(s.get_memory(&ws, &store, &keep.id).await.unwrap(), keep);
    assert_eq!(s.memory_change_seq(&ws, &store).await.unwrap(), seq);

    // Deletes work.
    s.delete_memory(&ws, &store, &gone.id, Some(gone.content_sha256.clone()), api_actor()).await.unwrap();
    assert_err!(s.get_memory(&ws, &store, &gone.id).await, StoreError::NotFound { .. });
    assert_ne!(s.memory_change_seq(&ws, &store).await.unwrap(), seq);
}

pub async fn memories_are_created_read_updated_and_deleted(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "notes").await;
    let created = s.create_memory(&ws, &store, path("/notes/todo.md"), "buy milk".into(), api_actor()).await.unwrap();
    assert_eq!((created.path.as_str(), created.content.as_deref()), ("/notes/todo.md", Some("buy milk")));
    assert_eq!((created.content_sha256.clone(), created.content_size_bytes), (content_sha256(b"buy milk"), 8));
    assert_eq!(created.memory_store_id, store);
    assert_eq!(s.get_memory(&ws, &store, &created.id).await.unwrap(), created);
    let empty = s.create_memory(&ws, &store, path("/empty"), String::new(), api_actor()).await.unwrap();
    assert_eq!((empty.content_size_bytes, empty.content.as_deref()), (0, Some("")));
    let unicode = s.create_memory(&ws, &store, path("/ü.md"), "é".into(), api_actor()).await.unwrap();
    assert_eq!(unicode.content_size_bytes, 2, "sizes are in bytes");
    // Content is kept byte for byte, whatever characters it holds (U+0000 included, which
    // some databases' text columns refuse).
    let odd = "nul\u{0}tab\tcrlf\r\n🦀 \u{7f}";
    let kept = s.create_memory(&ws, &store, path("/odd.bin"), odd.into(), api_actor()).await.unwrap();
    assert_eq!(s.get_memory(&ws, &store, &kept.id).await.unwrap().content.as_deref(), Some(odd));
    let version = s.get_memory_version(&ws, &store, &kept.memory_version_id, View::Full).await.unwrap();
    assert_eq!(version.content.as_deref(), Some(odd));

    // Content changes write a new version.
    let changed = s.update_memory(&ws, &store, &created.id, content("buy oat milk"), api_actor()).await.unwrap();
    assert_eq!((&changed.id, changed.path.as_str()), (&created.id, "/notes/todo.md"));
    assert_eq!(
        (changed.content.as_deref(), changed.content_sha256.clone()),
        (Some("buy oat milk"), content_sha256(b"buy oat milk"))
    );
    assert_ne!(changed.memory_version_id, created.memory_version_id);
    assert_eq!(changed.created_at, created.created_at);
    assert_eq!(s.get_memory(&ws, &store, &created.id).await.unwrap(), changed);

    // A rename keeps the content.
    let moved = s.update_memory(&ws, &store, &created.id, rename("/done/todo.md"), api_actor()).await.unwrap();
    assert_eq!((moved.path.as_str(), moved.content.as_deref()), ("/done/todo.md", Some("buy oat milk")));
    assert_eq!(moved.content_sha256, changed.content_sha256);
    assert_ne!(moved.memory_version_id, changed.memory_version_id);
    // Both at once.
    let both = MemoryChange {
        content: Some("done".into()),
        path: Some(path("/done.md")),
        expected_sha256: Some(moved.content_sha256.clone()),
    };
    let both = s.update_memory(&ws, &store, &created.id, both, api_actor()).await.unwrap();
    assert_eq!((both.path.as_str(), both.content.as_deref()), ("/done.md", Some("done")));

    // Preconditions.
    let stale = MemoryChange { expected_sha256: Some(content_sha256(b"buy milk")), ..content("again") };
    assert_err!(
        s.update_memory(&ws, &store, &created.id, stale, api_actor()).await,
        StoreError::PreconditionFailed { expected, actual }
            if expected == content_sha256(b"buy milk") && actual == both.content_sha256
    );
    let stale_move = MemoryChange { expected_sha256: Some(content_sha256(b"old")), ..rename("/elsewhere.md") };
    assert_err!(
        s.update_memory(&ws, &store, &created.id, stale_move, api_actor()).await,
        StoreError::PreconditionFailed { .. }
    );
    assert_eq!(s.get_memory(&ws, &store, &created.id).await.unwrap(), both, "a refused update changes nothing");
    let fresh = MemoryChange { expected_sha256: Some(both.content_sha256.clone()), ..content("fresh") };
    let fresh = s.update_memory(&ws, &store, &created.id, fresh, api_actor()).await.unwrap();
    assert_eq!(fresh.content.as_deref(), Some("fresh"));

    // A retry of an applied update succeeds whatever its precondition says, and writes nothing.
    let retry = MemoryChange { expected_sha256: Some(both.content_sha256.clone()), ..content("fresh") };
    let retried = s.update_memory(&ws, &store, &created.id, retry, api_actor()).await.unwrap();
    assert_eq!(retried, fresh);
    let retry_move = MemoryChange { path: Some(path("/done.md")), ..content("fresh") };
    assert_eq!(s.update_memory(&ws, &store, &created.id, retry_move, api_actor()).await.unwrap(), fresh);
    let history = mnemo_store::ListMemoryVersions { memory_id: Some(created.id.clone()), ..versions(100) };
    assert_eq!(all_versions(&*s, &store, history).await.len(), 5, "created, changed, moved, both, fresh");

    // Deletes, with and without a precondition.
    let stale = Some(content_sha256(b"stale"));
    assert_err!(
        s.delete_memory(&ws, &store, &created.id, stale, api_actor()).await,
        StoreError::PreconditionFailed { .. }
    );
    assert_eq!(s.get_memory(&ws, &store, &created.id).await.unwrap(), fresh);
    s.delete_memory(&ws, &store, &created.id, Some(fresh.content_sha256.clone()), api_actor()).await.unwrap();
    assert_err!(s.get_memory(&ws, &store, &created.id).await, StoreError::NotFound { .. });
    assert_err!(s.delete_memory(&ws, &store, &created.id, None, api_actor()).await, StoreError::NotFound { .. });
    assert_err!(
        s.update_memory(&ws, &store, &created.id, content("x"), api_actor()).await,
        StoreError::NotFound { .. }
    );
    s.delete_memory(&ws, &store, &empty.id, None, api_actor()).await.unwrap();
    let again = s.create_memory(&ws, &store, path("/done.md"), "reborn".into(), api_actor()).await.unwrap();
    assert_ne!(again.id, created.id, "a path freed by a delete takes a new memory");

    // A memory belongs to one store.
    let other = memory_store(&*s, "other").await;
    assert_err!(s.get_memory(&ws, &other, &unicode.id).await, StoreError::NotFound { .. });
    assert_err!(
        s.update_memory(&ws, &other, &unicode.id, content("x"), api_actor()).await,
        StoreError::NotFound { .. }
    );
    assert_err!(s.delete_memory(&ws, &other, &unicode.id, None, api_actor()).await, StoreError::NotFound { .. });
    assert_eq!(s.get_memory(&ws, &store, &unicode.id).await.unwrap(), unicode);
    let unknown = MemoryStoreId::generate();
    assert_err!(s.create_memory(&ws, &unknown, path("/a"), "x".into(), api_actor()).await, StoreError::NotFound { .. });
    assert_err!(s.get_memory(&ws, &store, &MemoryId::generate()).await, StoreError::NotFound { .. });
}

pub async fn paths_never_overlap(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "paths").await;
    let file = s.create_memory(&ws, &store, path("/a/b"), "x".into(), api_actor()).await.unwrap();
    let blocked_by = |requested: &str, by: &str| {
        let (requested, by, id) = (requested.to_owned(), by.to_owned(), file.id.clone());
        move |e: &StoreError| {
            matches!(e, StoreError::PathConflict { requested: r, conflicting_memory_id: Some(i), conflicting_path: p }
                if *r == requested && *p == by && *i == id)
        }
    };
    for (candidate, why) in [("/a/b", "the same path"), ("/a/b/c", "below a memory"), ("/a", "above a memory")] {
        let got = s.create_memory(&ws, &store, path(candidate), "y".into(), api_actor()).await;
        let is = blocked_by(candidate, "/a/b");
        assert!(matches!(&got, Err(e) if is(e)), "create {candidate} ({why}): {got:?}");
    }
    for free in ["/a/c", "/a/bb", "/a/b.md", "/ab"] {
        s.create_memory(&ws, &store, path(free), "free".into(), api_actor())
            .await
            .unwrap_or_else(|e| panic!("{free}: {e:?}"));
    }

    // Renames are judged the same way, except against the memory being moved.
    let other = s.create_memory(&ws, &store, path("/x"), "x".into(), api_actor()).await.unwrap();
    for target in ["/a/b", "/a/b/c", "/a"] {
        let got = s.update_memory(&ws, &store, &other.id, rename(target), api_actor()).await;
        assert!(
            matches!(&got, Err(StoreError::PathConflict { requested, conflicting_path, .. })
                if requested == target && overlap(target, conflicting_path) && conflicting_path != "/x"),
            "rename to {target}: {got:?}"
        );
    }
    assert_eq!(s.get_memory(&ws, &store, &other.id).await.unwrap().path, "/x");
    let deeper = s.update_memory(&ws, &store, &other.id, rename("/x/y"), api_actor()).await.unwrap();
    assert_eq!(deeper.path, "/x/y", "a memory may move below its own old path");
    let back = s.update_memory(&ws, &store, &other.id, rename("/x"), api_actor()).await.unwrap();
    assert_eq!(back.path, "/x");
    let listed = all_memories(&*s, &store, memories("/", 0, 100, View::Basic)).await;
    assert_eq!(listed_paths(&listed), ["/a/b", "/a/b.md", "/a/bb", "/a/c", "/ab", "/x"], "byte order of path");
}

pub async fn the_store_cap_counts_live_memories(factory: &impl StoreFactory) {
    let s = factory.open(Limits { max_memories_per_store: 3, ..Limits::default() }).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "small").await;
    let mut made = Vec::new();
    for i in 0..3 {
        made.push(s.create_memory(&ws, &store, path(&format!("/{i}")), "x".into(), api_actor()).await.unwrap());
    }
    let full = s.create_memory(&ws, &store, path("/3"), "x".into(), api_actor()).await;
    assert_err!(full, StoreError::StoreFull { store: id, limit: 3 } if id == store.as_str());
    // Changes and renames are not creations.
    s.update_memory(&ws, &store, &made[0].id, rename("/moved"), api_actor()).await.unwrap();
    s.update_memory(&ws, &store, &made[1].id, content("y"), api_actor()).await.unwrap();
    // Each store has its own cap.
    let other = memory_store(&*s, "other").await;
    s.create_memory(&ws, &other, path("/0"), "x".into(), api_actor()).await.unwrap();
    // A delete frees a slot.
    s.delete_memory(&ws, &store, &made[2].id, None, api_actor()).await.unwrap();
    s.create_memory(&ws, &store, path("/3"), "x".into(), api_actor()).await.unwrap();
    assert_err!(s.create_memory(&ws, &store, path("/4"), "x".into(), api_actor()).await, StoreError::StoreFull { .. });
    assert_eq!(all_memories(&*s, &store, memories("/", 0, 100, View::Basic)).await.len(), 3);
}

/// When several checks of a write fail, the same one wins on every backend: for a create, the
/// archived store, then the taken path, then the cap; for an update, the archived store, then
/// the unknown memory, then the stale precondition, then the taken path; a delete ignores the
/// archive and checks the memory, then its precondition.
pub async fn the_first_failing_check_wins(factory: &impl StoreFactory) {
    let s = factory.open(Limits { max_memories_per_store: 2, ..Limits::default() }).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "full").await;
    let dir = s.create_memory(&ws, &store, path("/dir"), "a file".into(), api_actor()).await.unwrap();
    let other = s.create_memory(&ws, &store, path("/other"), "x".into(), api_actor()).await.unwrap();
    let stale = || Some(content_sha256(b"not what it holds"));

    // Full, and the path is taken: the path conflict names what to move.
    let taken = s.create_memory(&ws, &store, path("/dir/x"), "x".into(), api_actor()).await;
    assert_err!(taken, StoreError::PathConflict { conflicting_path, .. } if conflicting_path == "/dir");
    assert_err!(
        s.create_memory(&ws, &store, path("/dir"), "x".into(), api_actor()).await,
        StoreError::PathConflict { .. }
    );
    assert_err!(
        s.create_memory(&ws, &store, path("/free"), "x".into(), api_actor()).await,
        StoreError::StoreFull { .. }
    );
    // A stale precondition wins over a taken path.
    let moved = MemoryChange { content: Some("y".into()), path: Some(path("/dir")), expected_sha256: stale() };
    assert_err!(
        s.update_memory(&ws, &store, &other.id, moved, api_actor()).await,
        StoreError::PreconditionFailed { .. }
    );

    s.archive_memory_store(&ws, &store).await.unwrap();
    // Archived wins over all of them.
    let seq = s.memory_change_seq(&ws, &store).await.unwrap();
    let taken = s.create_memory(&ws, &store, path("/dir/x"), "x".into(), api_actor()).await;
    assert_err!(taken, StoreError::Archived(id) if id == store.as_str());
    let moved = MemoryChange { content: Some("y".into()), path: Some(path("/dir")), expected_sha256: stale() };
    assert_err!(s.update_memory(&ws, &store, &other.id, moved, api_actor()).await, StoreError::Archived(_));
    assert_err!(
        s.update_memory(&ws, &store, &MemoryId::generate(), content("y"), api_actor()).await,
        StoreError::Archived(_)
    );
    assert_eq!(s.memory_change_seq(&ws, &store).await.unwrap(), seq, "no refused write wrote a version");
    // A delete is not a write of new content: it checks the memory, then its precondition.
    assert_err!(
        s.delete_memory(&ws, &store, &MemoryId::generate(), stale(), api_actor()).await,
        StoreError::NotFound { .. }
    );
    assert_err!(
        s.delete_memory(&ws, &store, &dir.id, stale(), api_actor()).await,
        StoreError::PreconditionFailed { .. }
    );
    s.delete_memory(&ws, &store, &dir.id, Some(dir.content_sha256.clone()), api_actor()).await.unwrap();
}

pub async fn memory_listings_roll_up_prefixes_and_paginate(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "tree").await;
    // Byte order of UTF-8, not a locale's collation: `Z` before `a`, `-` before `/`, `é` last.
    let files = ["/a.md", "/b/c.md", "/b/d/e.md", "/b/d/f.md", "/ba.md", "/c/x/y/z.md", "/b-c.md", "/Z.md", "/é.md"];
    let mut contents = BTreeMap::new();
    for f in files {
        let text = format!("content of {f}");
        s.create_memory(&ws, &store, path(f), text.clone(), api_actor()).await.unwrap();
        contents.insert(f.to_owned(), text);
    }
    let everything =
        vec!["/Z.md", "/a.md", "/b-c.md", "/b/c.md", "/b/d/e.md", "/b/d/f.md", "/ba.md", "/c/x/y/z.md", "/é.md"];
    #[rustfmt::skip]
    let cases: Vec<(&str, u32, Vec<&str>)> = vec![
        ("/", 0, everything.clone()),
        ("/", 1, vec!["/Z.md", "/a.md", "/b-c.md", "prefix:/b/", "/ba.md", "prefix:/c/", "/é.md"]),
        ("/", 2, vec!["/Z.md", "/a.md", "/b-c.md", "/b/c.md", "prefix:/b/d/", "/ba.md", "prefix:/c/x/", "/é.md"]),
        ("/", 9, everything),
        ("/b/", 0, vec!["/b/c.md", "/b/d/e.md", "/b/d/f.md"]),
        ("/b/", 1, vec!["/b/c.md", "prefix:/b/d/"]),
        ("/b/d/", 1, vec!["/b/d/e.md", "/b/d/f.md"]),
        ("/c/", 1, vec!["prefix:/c/x/"]),
        ("/c/x/", 1, vec!["prefix:/c/x/y/"]),
        ("/nothing/", 0, vec![]),
        ("/a.md/", 0, vec![]),
    ];
    for (prefix, depth, expected) in cases {
        for limit in [1, 2, 3, 100] {
            for view in [View::Basic, View::Full] {
                let items = all_memories(&*s, &store, memories(prefix, depth, limit, view)).await;
                assert_eq!(listed_paths(&items), expected, "prefix {prefix} depth {depth} limit {limit} {view:?}");
                for item in &items {
                    if let MemoryListItem::Memory(m) = item {
                        let expected = (view == View::Full).then(|| contents[&m.path].clone());
                        assert_eq!(m.content, expected, "{} under {view:?}", m.path);
                        assert_eq!(m.content_sha256, content_sha256(contents[&m.path].as_bytes()));
                    }
                }
            }
        }
    }
    let first = s.list_memories(&ws, &store, memories("/", 1, 2, View::Basic)).await.unwrap();
    assert_eq!(listed_paths(&first.items), ["/Z.md", "/a.md"]);
    assert!(first.next.is_some());
    let empty = memory_store(&*s, "empty").await;
    let nothing = s.list_memories(&ws, &empty, memories("/", 0, 10, View::Basic)).await.unwrap();
    assert!(nothing.items.is_empty() && nothing.next.is_none());
    assert_err!(
        s.list_memories(&ws, &MemoryStoreId::generate(), memories("/", 0, 10, View::Basic)).await,
        StoreError::NotFound { .. }
    );
}

pub async fn memory_change_seq_moves_on_every_change(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "etag").await;
    let other = memory_store(&*s, "other").await;
    let mut seen = vec![s.memory_change_seq(&ws, &store).await.unwrap()];
    let mut expect = async |changed: bool, what: &str| {
        let now = s.memory_change_seq(&ws, &store).await.unwrap();
        if changed {
            assert!(!seen.contains(&now), "{what}: the sequence moves to a new value ({now} in {seen:?})");
            seen.push(now);
        } else {
            assert_eq!(Some(&now), seen.last(), "{what}: the sequence stays");
        }
    };
    let m = s.create_memory(&ws, &store, path("/a"), "1".into(), api_actor()).await.unwrap();
    expect(true, "create").await;
    s.update_memory(&ws, &store, &m.id, content("2"), api_actor()).await.unwrap();
    expect(true, "update").await;
    s.update_memory(&ws, &store, &m.id, content("2"), api_actor()).await.unwrap();
    expect(false, "an update that changes nothing").await;
    let stale = MemoryChange { expected_sha256: Some(content_sha256(b"1")), ..content("3") };
    assert!(s.update_memory(&ws, &store, &m.id, stale, api_actor()).await.is_err());
    expect(false, "a refused update").await;
    assert!(s.create_memory(&ws, &store, path("/a"), "x".into(), api_actor()).await.is_err());
    expect(false, "a refused create").await;
    s.update_memory(&ws, &store, &m.id, rename("/b"), api_actor()).await.unwrap();
    expect(true, "rename").await;
    s.create_memory(&ws, &other, path("/a"), "x".into(), api_actor()).await.unwrap();
    expect(false, "a change to another store").await;
    s.update_memory_store(&ws, &store, MemoryStorePatch { name: Some("renamed".into()), ..Default::default() })
        .await
        .unwrap();
    expect(false, "a change to the store itself").await;
    s.delete_memory(&ws, &store, &m.id, None, api_actor()).await.unwrap();
    expect(true, "delete").await;
    assert_err!(s.memory_change_seq(&ws, &MemoryStoreId::generate()).await, StoreError::NotFound { .. });
}

/// A batch applies in order, each write judged on what the writes before it left, each with its
/// own outcome: a refused write changes nothing and the next one still applies. The versions
/// are those of the same writes made one by one, in the same order; the change position moves
/// as for them, and a batch of only refusals moves nothing.
pub async fn a_batch_of_writes_applies_in_order_each_with_its_own_outcome(factory: &impl StoreFactory) {
    let s = factory.open(Limits { max_memories_per_store: 4, ..Limits::default() }).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "batch").await;
    let a = s.create_memory(&ws, &store, path("/a"), "a1".into(), api_actor()).await.unwrap();
    let create = |p: &str, text: &str| MemoryWriteOp::Create { path: path(p), content: text.into() };
    let update = |id: &MemoryId, text: &str, expected: Option<&str>| MemoryWriteOp::Update {
        id: id.clone(),
        change: MemoryChange { expected_sha256: expected.map(|t| content_sha256(t.as_bytes())), ..content(text) },
    };
    let before = s.memory_change_seq(&ws, &store).await.unwrap();
    let outcomes = s
        .write_memories(
            &ws,
            &store,
            vec![
                update(&a.id, "a2", Some("a1")),          // applies
                update(&a.id, "a3", Some("a1")),          // judged after the first: stale
                create("/b", "b1"),                       // applies
                create("/b/c", "c"),                      // overlaps the memory the write before made
                update(&a.id, "a3", Some("a2")),          // applies on the first one's content
                update(&MemoryId::generate(), "x", None), // no such memory
                create("/c", "c1"),                       // applies: 3 live of 4
                create("/d", "d1"),                       // applies: 4 of 4
                create("/e", "e1"),                       // the cap, counting this batch's creates
            ],
            api_actor(),
        )
        .await
        .unwrap();
    assert_eq!(outcomes.len(), 9, "one outcome per write");
    let applied: Vec<bool> = outcomes.iter().map(Result::is_ok).collect();
    assert_eq!(applied, [true, false, true, false, true, false, true, true, false]);
    assert_err!(&outcomes[1], StoreError::PreconditionFailed { .. });
    assert_err!(&outcomes[3], StoreError::PathConflict { .. });
    assert_err!(&outcomes[5], StoreError::NotFound { .. });
    assert_err!(&outcomes[8], StoreError::StoreFull { .. });
    let a3 = outcomes[4].as_ref().unwrap();
    assert_eq!((a3.id.clone(), a3.content_sha256.clone()), (a.id.clone(), content_sha256(b"a3")));

    let live: Vec<(String, Option<String>)> = all_memories(&*s, &store, memories("/", 0, 20, View::Full))
        .await
        .into_iter()
        .filter_map(|item| match item {
            MemoryListItem::Memory(m) => Some((m.path, m.content)),
            MemoryListItem::Prefix(_) => None,
        })
        .collect();
    let expect = |p: &str, t: &str| (p.to_owned(), Some(t.to_owned()));
    assert_eq!(live, [expect("/a", "a3"), expect("/b", "b1"), expect("/c", "c1"), expect("/d", "d1")]);
    // The versions, oldest first: the first create, then the batch's applied writes in order.
    let written: Vec<(String, String)> = all_versions(&*s, &store, versions(100))
        .await
        .into_iter()
        .rev()
        .map(|v| (v.path.unwrap_or_default(), v.content_sha256.unwrap_or_default()))
        .collect();
    let version = |p: &str, t: &str| (p.to_owned(), content_sha256(t.as_bytes()));
    assert_eq!(
        written,
        [
            version("/a", "a1"),
            version("/a", "a2"),
            version("/b", "b1"),
            version("/a", "a3"),
            version("/c", "c1"),
            version("/d", "d1")
        ]
    );
    let after = s.memory_change_seq(&ws, &store).await.unwrap();
    assert_ne!(after, before, "the applied writes moved the change position");

    // Nothing but refusals: nothing changes.
    let refused =
        s.write_memories(&ws, &store, vec![create("/a", "again"), create("/f", "f")], api_actor()).await.unwrap();
    assert!(refused.iter().all(Result::is_err), "{refused:?}");
    assert_eq!(s.memory_change_seq(&ws, &store).await.unwrap(), after, "a batch of refusals changes nothing");
    // An unknown store: each write is refused as its own call would be.
    let unknown =
        s.write_memories(&ws, &MemoryStoreId::generate(), vec![create("/a", "x")], api_actor()).await.unwrap();
    assert_err!(&unknown[0], StoreError::NotFound { .. });
}

fn usage(memories: u64, bytes: u64) -> MemoryStoreUsage {
    MemoryStoreUsage { memories, bytes }
}

pub async fn memory_store_usage_counts_live_memories_and_their_bytes(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let a = memory_store(&*s, "a").await;
    let b = memory_store(&*s, "b").await;
    let empty = memory_store(&*s, "empty").await;
    let unknown = MemoryStoreId::generate();
    let asked = [a.clone(), b.clone(), empty.clone(), unknown.clone()];
    let answer = |pairs: &[(&MemoryStoreId, MemoryStoreUsage)]| -> HashMap<MemoryStoreId, MemoryStoreUsage> {
        pairs.iter().map(|(id, u)| ((*id).clone(), *u)).collect()
    };

    assert_eq!(s.memory_store_usage(&ws, &[]).await.unwrap(), HashMap::new(), "nothing asked, nothing answered");
    assert_eq!(
        s.memory_store_usage(&ws, &asked).await.unwrap(),
        answer(&[(&a, usage(0, 0)), (&b, usage(0, 0)), (&empty, usage(0, 0))]),
        "a store without memories is answered as 0 and 0; an unknown one is absent"
    );

    // Sizes are the content's UTF-8 bytes ("é" is 2, "🦀" is 4, U+0000 is 1), not characters.
    let todo = s.create_memory(&ws, &a, path("/notes/todo.md"), "buy milk".into(), api_actor()).await.unwrap();
    let accent = s.create_memory(&ws, &a, path("/é.md"), "café".into(), api_actor()).await.unwrap();
    let blank = s.create_memory(&ws, &a, path("/blank"), String::new(), api_actor()).await.unwrap();
    let crab = s.create_memory(&ws, &b, path("/crab"), "🦀\u{0}".into(), api_actor()).await.unwrap();
    let expected = answer(&[(&a, usage(3, 8 + 5)), (&b, usage(1, 5)), (&empty, usage(0, 0))]);
    assert_eq!(s.memory_store_usage(&ws, &asked).await.unwrap(), expected);

    // A content change counts the new content only; a rename changes nothing; both at once
    // count the new content; a no-op retry and a refused update change nothing.
    s.update_memory(&ws, &a, &todo.id, content("buy oat milk"), api_actor()).await.unwrap();
    let expected = answer(&[(&a, usage(3, 12 + 5)), (&b, usage(1, 5)), (&empty, usage(0, 0))]);
    assert_eq!(s.memory_store_usage(&ws, &asked).await.unwrap(), expected, "after a content change");
    s.update_memory(&ws, &a, &accent.id, rename("/moved/é.md"), api_actor()).await.unwrap();
    assert_eq!(s.memory_store_usage(&ws, &asked).await.unwrap(), expected, "after a rename");
    let both = MemoryChange { content: Some("x".into()), path: Some(path("/x")), expected_sha256: None };
    s.update_memory(&ws, &b, &crab.id, both, api_actor()).await.unwrap();
    s.update_memory(&ws, &b, &crab.id, content("x"), api_actor()).await.unwrap();
    let stale = MemoryChange { expected_sha256: Some(content_sha256(b"stale")), ..content("much longer now") };
    assert_err!(s.update_memory(&ws, &b, &crab.id, stale, api_actor()).await, StoreError::PreconditionFailed { .. });
    let expected = answer(&[(&a, usage(3, 12 + 5)), (&b, usage(1, 1)), (&empty, usage(0, 0))]);
    assert_eq!(s.memory_store_usage(&ws, &asked).await.unwrap(), expected, "after a move with new content");

    // Redacting an old version leaves the live memory (and so the usage) alone.
    s.redact_memory_version(&ws, &a, &todo.memory_version_id, api_actor()).await.unwrap();
    assert_eq!(s.memory_store_usage(&ws, &asked).await.unwrap(), expected, "after a redaction");

    // Deleted memories do not count, empty ones do until deleted; a store emptied by deletes
    // is 0 and 0 again.
    s.delete_memory(&ws, &a, &accent.id, None, api_actor()).await.unwrap();
    let expected = answer(&[(&a, usage(2, 12)), (&b, usage(1, 1)), (&empty, usage(0, 0))]);
    assert_eq!(s.memory_store_usage(&ws, &asked).await.unwrap(), expected, "after deleting a memory");
    s.delete_memory(&ws, &a, &blank.id, None, api_actor()).await.unwrap();
    s.delete_memory(&ws, &b, &crab.id, None, api_actor()).await.unwrap();
    let expected = answer(&[(&a, usage(1, 12)), (&b, usage(0, 0)), (&empty, usage(0, 0))]);
    assert_eq!(s.memory_store_usage(&ws, &asked).await.unwrap(), expected, "after deleting every memory of b");
    let reborn = s.create_memory(&ws, &b, path("/crab"), "back".into(), api_actor()).await.unwrap();
    assert_eq!(s.memory_store_usage(&ws, std::slice::from_ref(&b)).await.unwrap(), answer(&[(&b, usage(1, 4))]));

    // The answer agrees with the memories as listed.
    for store in [&a, &b] {
        let listed = all_memories(&*s, store, memories("/", 0, 100, View::Basic)).await;
        let (count, bytes) = listed.iter().fold((0, 0), |(n, total), item| match item {
            MemoryListItem::Memory(m) => (n + 1, total + m.content_size_bytes),
            MemoryListItem::Prefix(_) => (n, total),
        });
        assert_eq!(s.memory_store_usage(&ws, std::slice::from_ref(store)).await.unwrap()[store], usage(count, bytes));
    }

    // Only the stores asked for are answered, each once however often it is asked for; an
    // archived store still holds what it holds, a deleted one is gone.
    let twice = [b.clone(), unknown.clone(), b.clone()];
    assert_eq!(s.memory_store_usage(&ws, &twice).await.unwrap(), answer(&[(&b, usage(1, 4))]));
    s.archive_memory_store(&ws, &b).await.unwrap();
    assert_eq!(s.memory_store_usage(&ws, std::slice::from_ref(&b)).await.unwrap(), answer(&[(&b, usage(1, 4))]));
    s.delete_memory_store(&ws, &a).await.unwrap();
    let expected = answer(&[(&b, usage(1, 4)), (&empty, usage(0, 0))]);
    assert_eq!(s.memory_store_usage(&ws, &asked).await.unwrap(), expected, "a deleted store is absent");
    assert_eq!(s.get_memory(&ws, &b, &reborn.id).await.unwrap().content_size_bytes, 4);
}

pub async fn cursors_of_another_list_are_refused(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "cursors").await;
    for p in ["/a", "/b", "/c"] {
        s.create_memory(&ws, &store, path(p), "x".into(), api_actor()).await.unwrap();
    }
    let path_cursor = s.list_memories(&ws, &store, memories("/", 0, 1, View::Basic)).await.unwrap().next.unwrap();
    assert!(matches!(path_cursor, Cursor::AfterPath(_) | Cursor::FromPath(_)), "{path_cursor:?}");
    let version_cursor = s.list_memory_versions(&ws, &store, versions(1)).await.unwrap().next.unwrap();
    let store_cursor = {
        memory_store(&*s, "another").await;
        s.list_memory_stores(&ws, stores(1)).await.unwrap().next.unwrap()
    };
    let env = environment(&*s, true).await;
    let session = session(&*s, &env).await;
    for i in 0..3 {
        s.append_events(&ws, &session.id, vec![user_message(&i.to_string())], super::fixtures::person()).await.unwrap();
    }
    let ascending =
        s.list_events(&ws, &session.id, ListEvents { limit: 1, ..Default::default() }).await.unwrap().next.unwrap();
    let descending = s
        .list_events(&ws, &session.id, ListEvents { limit: 1, descending: true, ..Default::default() })
        .await
        .unwrap()
        .next
        .unwrap();

    // A path cursor in a newest-first list, a newest-first cursor in a path-ordered list, and
    // an event cursor in the other direction.
    let q = mnemo_store::ListMemories { after: Some(version_cursor.clone()), ..memories("/", 0, 10, View::Basic) };
    assert_err!(s.list_memories(&ws, &store, q).await, StoreError::InvalidCursor);
    let q = mnemo_store::ListMemories { after: Some(ascending.clone()), ..memories("/", 0, 10, View::Basic) };
    assert_err!(s.list_memories(&ws, &store, q).await, StoreError::InvalidCursor);
    for cursor in [&path_cursor, &ascending] {
        let q = mnemo_store::ListMemoryVersions { after: Some(cursor.clone()), ..versions(10) };
        assert_err!(s.list_memory_versions(&ws, &store, q).await, StoreError::InvalidCursor);
        let q = ListMemoryStores { after: Some(cursor.clone()), ..stores(10) };
        assert_err!(s.list_memory_stores(&ws, q).await, StoreError::InvalidCursor);
        assert_err!(s.list_environments(&ws, true, 10, Some(cursor.clone())).await, StoreError::InvalidCursor);
        assert_err!(s.list_agents(&ws, true, 10, Some(cursor.clone())).await, StoreError::InvalidCursor);
        assert_err!(s.list_work(&ws, &env.id, 10, Some(cursor.clone())).await, StoreError::InvalidCursor);
        let q = mnemo_store::ListSessions { limit: 10, after: Some(cursor.clone()), ..Default::default() };
        assert_err!(s.list_sessions(&ws, q).await, StoreError::InvalidCursor);
    }
    let q = ListEvents { limit: 10, descending: true, after: Some(ascending), ..Default::default() };
    assert_err!(s.list_events(&ws, &session.id, q).await, StoreError::InvalidCursor);
    for cursor in [descending, path_cursor, store_cursor] {
        let q = ListEvents { limit: 10, after: Some(cursor), ..Default::default() };
        assert_err!(s.list_events(&ws, &session.id, q).await, StoreError::InvalidCursor);
    }
}

/// Every part of an export until `Done` (which must come, and come last).
async fn read_export(export: &mut mnemo_store::MemoryExport, chunk: usize) -> Vec<mnemo_api::Memory> {
    let mut out = Vec::new();
    loop {
        match export.parts.recv().await {
            Some(Ok(ExportPart::Memories(batch))) => {
                assert!(!batch.is_empty() && batch.len() <= chunk, "a chunk holds 1..={chunk} memories");
                out.extend(batch);
            }
            Some(Ok(ExportPart::Done)) => break,
            Some(Err(e)) => panic!("the export failed: {e}"),
            None => panic!("the export ended without `Done`"),
        }
    }
    assert!(export.parts.recv().await.is_none(), "nothing follows `Done`");
    out
}

pub async fn an_export_reads_every_live_memory_from_one_snapshot(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    assert_err!(s.export_memories(&ws, &MemoryStoreId::generate(), 4).await, StoreError::NotFound { .. });
    let store = memory_store(&*s, "export").await;
    let other = memory_store(&*s, "other").await;
    s.create_memory(&ws, &other, path("/a"), "another store's".into(), api_actor()).await.unwrap();

    let mut empty = s.export_memories(&ws, &store, 4).await.unwrap();
    assert_eq!(empty.seq, s.memory_change_seq(&ws, &store).await.unwrap());
    assert!(read_export(&mut empty, 4).await.is_empty());

    // Byte order of path (upper case, `-` and `.` before `/`, multi-byte last), a deleted memory,
    // a renamed one; 11 live memories in chunks of 4.
    let names = ["/b", "/Z", "/a-b", "/a/x", "/a/y.md", "/a.md", "/é", "/c/d/e", "/c0", "/gone", "/m", "/n"];
    let mut made = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        let m = s.create_memory(&ws, &store, path(name), format!("content {i}\u{0}"), api_actor()).await.unwrap();
        made.insert(*name, m.id);
    }
    s.delete_memory(&ws, &store, &made["/gone"], None, api_actor()).await.unwrap();
    s.update_memory(&ws, &store, &made["/n"], rename("/k"), api_actor()).await.unwrap();
    let listed: Vec<mnemo_api::Memory> = all_memories(&*s, &store, memories("/", 0, 20, View::Full))
        .await
        .into_iter()
        .map(|item| match item {
            MemoryListItem::Memory(m) => m,
            MemoryListItem::Prefix(p) => panic!("no prefixes at depth 0: {p:?}"),
        })
        .collect();
    assert_eq!(listed.len(), 11);

    let mut export = s.export_memories(&ws, &store, 4).await.unwrap();
    let before = s.memory_change_seq(&ws, &store).await.unwrap();
    assert_eq!(export.seq, before, "the snapshot's position is the listing's ETag");
    // Writes after the export began (behind and ahead of its cursor) are not part of it.
    let first = match export.parts.recv().await {
        Some(Ok(ExportPart::Memories(batch))) => batch,
        other => panic!("expected a first chunk, got {other:?}"),
    };
    s.create_memory(&ws, &store, path("/zz"), "late".into(), api_actor()).await.unwrap();
    s.create_memory(&ws, &store, path("/0"), "late, before the cursor".into(), api_actor()).await.unwrap();
    s.delete_memory(&ws, &store, &made["/m"], None, api_actor()).await.unwrap();
    s.update_memory(&ws, &store, &made["/n"], content("changed"), api_actor()).await.unwrap();
    let mut exported = first;
    exported.extend(read_export(&mut export, 4).await);
    assert_eq!(exported, listed, "the export is the listing as it stood when the export began");
    assert!(exported.windows(2).all(|w| w[0].path.as_bytes() < w[1].path.as_bytes()), "in byte order of path");
    assert!(exported.iter().all(|m| m.content.as_deref().is_some_and(|c| c.ends_with('\u{0}'))));

    // A reader that stops early ends the read; the store carries on, and a new export sees now.
    let mut abandoned = s.export_memories(&ws, &store, 1).await.unwrap();
    assert!(matches!(abandoned.parts.recv().await, Some(Ok(ExportPart::Memories(_)))));
    drop(abandoned);
    s.create_memory(&ws, &store, path("/after"), "x".into(), api_actor()).await.unwrap();
    let mut now = s.export_memories(&ws, &store, 100).await.unwrap();
    assert_eq!(now.seq, s.memory_change_seq(&ws, &store).await.unwrap());
    let paths: Vec<String> = read_export(&mut now, 100).await.into_iter().map(|m| m.path).collect();
    assert!(
        paths.contains(&"/zz".to_owned()) && paths.contains(&"/after".to_owned()) && !paths.contains(&"/m".to_owned())
    );
    assert_eq!(paths.len(), 13);
}
