//! Searching memories: a memory is found from its write's acknowledgement and never after its
//! deletion (or once its content moved on); every form of the query language; ranking; the
//! workspace and named-store scopes; paging and snippets.

use mnemo_api::{MemorySearchResult, MemoryStoreId, WorkspaceId};
use mnemo_store::rules::search::parse;
use mnemo_store::search::{SearchMemories, SearchScope};
use mnemo_store::{Cursor, Limits, MemoryChange, Store, StoreError};

use super::fixtures::{api_actor, memory_store, path};
use crate::StoreFactory;

fn request(scope: SearchScope, q: &str) -> SearchMemories {
    SearchMemories { scope, query: parse(q).expect("a valid query"), path_prefix: None, limit: 100, after: None }
}

fn in_store(store: &MemoryStoreId, q: &str) -> SearchMemories {
    request(SearchScope::Store(store.clone()), q)
}

async fn hits(s: &dyn Store, ws: &WorkspaceId, r: SearchMemories) -> Vec<MemorySearchResult> {
    s.search_memories(ws, r).await.unwrap().items
}

async fn paths(s: &dyn Store, ws: &WorkspaceId, r: SearchMemories) -> Vec<String> {
    let mut found: Vec<String> = hits(s, ws, r).await.into_iter().map(|h| h.path).collect();
    found.sort();
    found
}

/// Takes every waiting memory into the index, as the backend's indexer does behind writes.
async fn indexed(s: &dyn Store) {
    s.catch_up_search_index().await.expect("the index catches up");
}

fn content(text: &str) -> MemoryChange {
    MemoryChange { content: Some(text.into()), path: None, expected_sha256: None }
}

pub async fn a_memory_is_found_from_its_write_and_never_after_its_deletion(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "notes").await;
    let actor = api_actor();

    let created = s.create_memory(&ws, &store, path("/ops/db.md"), "staging-db-02 is the host".into(), actor.clone());
    let created = created.await.unwrap();
    let found = hits(&*s, &ws, in_store(&store, "staging-db-02")).await;
    assert_eq!(found.len(), 1);
    let hit = &found[0];
    assert_eq!(
        (&hit.memory_id, &hit.memory_store_id, hit.path.as_str(), &hit.content_sha256, &hit.memory_version_id),
        (&created.id, &store, "/ops/db.md", &created.content_sha256, &created.memory_version_id)
    );
    assert_eq!(hit.snippet, "«staging-db-02» is the host");
    indexed(&*s).await;
    let again = hits(&*s, &ws, in_store(&store, "staging-db-02")).await;
    let seen =
        |h: &[MemorySearchResult]| h.iter().map(|h| (h.memory_id.clone(), h.snippet.clone())).collect::<Vec<_>>();
    assert_eq!(seen(&again), seen(&found), "the same once indexed");

    // A new content replaces the old one in the index; the old version is never searched,
    // neither before the index takes the change in (it still holds the old text) nor after.
    let updated = s.update_memory(&ws, &store, &created.id, content("prod-db-07 now"), actor.clone()).await.unwrap();
    for _ in 0..2 {
        assert!(hits(&*s, &ws, in_store(&store, "staging")).await.is_empty());
        let found = hits(&*s, &ws, in_store(&store, "prod-db")).await;
        assert_eq!(found.iter().map(|h| &h.content_sha256).collect::<Vec<_>>(), vec![&updated.content_sha256]);
        indexed(&*s).await;
    }

    // A move is found at its new path.
    let moved = MemoryChange { content: None, path: Some(path("/archive/old.md")), expected_sha256: None };
    s.update_memory(&ws, &store, &created.id, moved, actor.clone()).await.unwrap();
    for _ in 0..2 {
        assert_eq!(paths(&*s, &ws, in_store(&store, "archive")).await, vec!["/archive/old.md"]);
        assert!(hits(&*s, &ws, in_store(&store, "ops/db")).await.is_empty());
        indexed(&*s).await;
    }

    // Redacting an old version changes nothing; deleting the memory removes it.
    s.redact_memory_version(&ws, &store, &created.memory_version_id, actor.clone()).await.unwrap();
    assert_eq!(hits(&*s, &ws, in_store(&store, "prod")).await.len(), 1);
    s.delete_memory(&ws, &store, &created.id, None, actor.clone()).await.unwrap();
    for _ in 0..2 {
        assert!(hits(&*s, &ws, in_store(&store, "prod")).await.is_empty());
        assert!(hits(&*s, &ws, in_store(&store, "staging")).await.is_empty());
        indexed(&*s).await;
    }

    // A batch's writes are found as each commits; a deleted store's memories are gone.
    let other = memory_store(&*s, "other").await;
    s.create_memory(&ws, &other, path("/x.md"), "findme once".into(), actor.clone()).await.unwrap();
    assert_eq!(hits(&*s, &ws, request(SearchScope::Workspace(None), "findme")).await.len(), 1);
    indexed(&*s).await;
    s.delete_memory_store(&ws, &other).await.unwrap();
    for _ in 0..2 {
        assert!(hits(&*s, &ws, request(SearchScope::Workspace(None), "findme")).await.is_empty());
        indexed(&*s).await;
    }
    // A path freed by a deletion can be taken again, and is found with its new content.
    s.create_memory(&ws, &store, path("/ops/db.md"), "fresh text".into(), actor).await.unwrap();
    for _ in 0..2 {
        assert_eq!(paths(&*s, &ws, in_store(&store, "fresh")).await, vec!["/ops/db.md"]);
        assert!(hits(&*s, &ws, in_store(&store, "prod")).await.is_empty());
        indexed(&*s).await;
    }
    assert_eq!(s.catch_up_search_index().await.unwrap(), 0, "nothing waits once caught up");
}

pub async fn every_query_form_finds_what_it_should(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "notes").await;
    let docs = [
        ("/notes/db.md", "The staging database is staging-db-02.\nIt runs Postgres."),
        ("/notes/cache.md", "The cache runs redis_cluster_v2 next to the database."),
        ("/notes/old/db.md", "Old notes: the staging   database moved."),
        ("/code/snake.rs", "fn snake_case_name() { let db = 1; }"),
        ("/people/ünïcode.md", "Zoë wrote about the Backup schedule; backups run nightly."),
    ];
    for (p, text) in docs {
        s.create_memory(&ws, &store, path(p), text.into(), api_actor()).await.unwrap();
    }
    let table: &[(&str, &[&str])] = &[
        // Words: all must match, anywhere, case-insensitively, in content or path.
        ("staging", &["/notes/db.md", "/notes/old/db.md"]),
        ("STAGING database", &["/notes/db.md", "/notes/old/db.md"]),
        ("staging redis", &[]),
        ("cache", &["/notes/cache.md"]),
        ("ünïcode", &["/people/ünïcode.md"]),
        ("ZOË", &["/people/ünïcode.md"]),
        // Identifiers and code match as substrings, short terms too.
        ("staging-db-02", &["/notes/db.md"]),
        ("db-0", &["/notes/db.md"]),
        ("snake_case", &["/code/snake.rs"]),
        ("ake_ca", &["/code/snake.rs"]),
        ("redis_cluster_v2", &["/notes/cache.md"]),
        ("db", &["/code/snake.rs", "/notes/db.md", "/notes/old/db.md"]),
        ("v2", &["/notes/cache.md"]),
        // Phrases: in order, any whitespace between.
        ("\"staging database\"", &["/notes/db.md", "/notes/old/db.md"]),
        ("\"database staging\"", &[]),
        ("\"it runs postgres\"", &["/notes/db.md"]),
        // Prefixes: the start of a word.
        ("back*", &["/people/ünïcode.md"]),
        ("ackup*", &[]),
        ("post*", &["/notes/db.md"]),
        // Exclusions.
        ("staging -moved", &["/notes/db.md"]),
        ("database -\"staging database\"", &["/notes/cache.md"]),
        ("database -stag*", &["/notes/cache.md"]),
        ("database -old", &["/notes/cache.md", "/notes/db.md"]),
        // …beside short terms that no index holds, and short exclusions; a phrase excluded whole
        // (`old/db.md` holds it with three spaces).
        ("db -staging", &["/code/snake.rs"]),
        ("db -\"staging database\"", &["/code/snake.rs"]),
        ("v2 -REDIS", &[]),
        ("database -db", &["/notes/cache.md"]),
        // Path terms narrow; several are alternatives; `-path:` excludes.
        ("database path:notes/old/", &["/notes/old/db.md"]),
        ("db path:code path:notes/old", &["/code/snake.rs", "/notes/old/db.md"]),
        ("database -path:notes/old/", &["/notes/cache.md", "/notes/db.md"]),
        ("database path:nowhere/", &[]),
    ];
    // The same answers while the memories wait for the index and once it holds them.
    for state in ["waiting", "indexed"] {
        for (q, want) in table {
            assert_eq!(paths(&*s, &ws, in_store(&store, q)).await, *want, "{q} ({state})");
        }
        // The `path_prefix` parameter narrows as `path:` does.
        let narrowed = SearchMemories { path_prefix: Some("/notes/".into()), ..in_store(&store, "db") };
        assert_eq!(paths(&*s, &ws, narrowed).await, vec!["/notes/db.md", "/notes/old/db.md"], "{state}");
        indexed(&*s).await;
    }
}

pub async fn a_short_memory_naming_a_term_often_outranks_one_mention_in_a_long_one(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "notes").await;
    let filler = "unrelated words about lunch and weather and meetings. ".repeat(60);
    let long = format!("{filler} the kubernetes cluster was mentioned once. {filler}");
    s.create_memory(&ws, &store, path("/long.md"), long, api_actor()).await.unwrap();
    let short = "kubernetes: kubernetes upgrade, kubernetes nodes, kubernetes pods, kubernetes dns";
    s.create_memory(&ws, &store, path("/short.md"), short.into(), api_actor()).await.unwrap();
    // Ranked by the index (a memory still waiting for it leads, unranked).
    indexed(&*s).await;
    let found = hits(&*s, &ws, in_store(&store, "kubernetes")).await;
    assert_eq!(found.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(), vec!["/short.md", "/long.md"]);
    assert!(found[0].score > found[1].score, "{found:?}");
    assert!(found[1].snippet.contains("«kubernetes» cluster"), "{}", found[1].snippet);
    assert!(found[1].snippet.starts_with('…') && found[1].snippet.ends_with('…'), "{}", found[1].snippet);
}

pub async fn search_keeps_to_its_workspace_and_the_named_stores(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let a = s.default_workspace().await.unwrap();
    let b = s.create_workspace("B").await.unwrap();
    let one = memory_store(&*s, "one").await;
    let two = memory_store(&*s, "two").await;
    let bs = s.create_memory_store(
        &b,
        mnemo_store::NewMemoryStore { name: "b".into(), description: String::new(), metadata: Default::default() },
    );
    let bs = bs.await.unwrap().id;
    for (store, ws, p) in [(&one, &a, "/one.md"), (&two, &a, "/two.md"), (&bs, &b, "/b.md")] {
        s.create_memory(ws, store, path(p), "shared secret words".into(), api_actor()).await.unwrap();
    }
    let everywhere = |ws_stores: Option<Vec<MemoryStoreId>>| request(SearchScope::Workspace(ws_stores), "secret");
    assert_eq!(paths(&*s, &a, everywhere(None)).await, vec!["/one.md", "/two.md"]);
    assert_eq!(paths(&*s, &b, everywhere(None)).await, vec!["/b.md"]);
    // Only the stores named (a session's attached stores); another workspace's are skipped.
    assert_eq!(paths(&*s, &a, everywhere(Some(vec![two.clone(), bs.clone()]))).await, vec!["/two.md"]);
    assert!(paths(&*s, &a, everywhere(Some(vec![]))).await.is_empty());
    // One store: another workspace's answers as an unknown one.
    let err = s.search_memories(&a, in_store(&bs, "secret")).await.unwrap_err();
    assert!(matches!(&err, StoreError::NotFound { .. }), "{err:?}");
    assert_eq!(err.to_string(), StoreError::not_found("memory store", &bs).to_string());
    let results = hits(&*s, &a, request(SearchScope::Workspace(None), "secret")).await;
    assert!(results.iter().all(|h| h.memory_store_id == one || h.memory_store_id == two));
}

pub async fn search_results_page_by_cursor(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "notes").await;
    for i in 0..25 {
        let text = format!("entry {i}: {}", "needle ".repeat(1 + i % 4));
        s.create_memory(&ws, &store, path(&format!("/m/{i:02}.md")), text, api_actor()).await.unwrap();
    }
    s.create_memory(&ws, &store, path("/other.md"), "no match here".into(), api_actor()).await.unwrap();
    // Pages of one ranking: the index's (a memory that waits for it leads until taken in).
    indexed(&*s).await;
    let mut r = SearchMemories { limit: 10, ..in_store(&store, "needle") };
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = s.search_memories(&ws, r.clone()).await.unwrap();
        pages += 1;
        assert!(page.items.windows(2).all(|w| w[0].score >= w[1].score));
        seen.extend(page.items.into_iter().map(|h| h.path));
        match page.next {
            Some(next) => r.after = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    seen.sort();
    let want: Vec<String> = (0..25).map(|i| format!("/m/{i:02}.md")).collect();
    assert_eq!(seen, want, "every result once");
    let wrong = SearchMemories { after: Some(Cursor::AfterPath("/m".into())), ..in_store(&store, "needle") };
    assert!(matches!(s.search_memories(&ws, wrong).await, Err(StoreError::InvalidCursor)));
}
