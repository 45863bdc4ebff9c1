//! Semantic search's storage: the embedder's work list follows each memory's current version;
//! a vector is kept only for the version it was made from; ranking by meaning keeps to the
//! workspace, the named stores, the path prefix and the query's narrowing terms; and
//! [`mnemo_store::search::by_meaning`] fuses it with full text.

use mnemo_api::{MemoryId, MemoryStoreId, WorkspaceId};
use mnemo_store::ops::embeddings::{MeaningQuery, MeaningRanking};
use mnemo_store::rules::search::parse;
use mnemo_store::rules::semantic::{SearchMode, encode};
use mnemo_store::search::{ByMeaning, SearchMemories, SearchScope, by_meaning};
use mnemo_store::{Limits, MemoryChange, Store, StoreError};

use super::fixtures::{api_actor, memory_store, path};
use crate::StoreFactory;

const MODEL: &str = "test-embed";

/// A toy embedding over three concepts (databases, editors, food), unit length; a text naming
/// none of them points a fourth way.
fn meaning(text: &str) -> Vec<f32> {
    let mut v = [0f32; 4];
    for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let at = match w.to_lowercase().as_str() {
            "database" | "postgres" | "sqlite" | "db" => 0,
            "editor" | "vim" | "emacs" => 1,
            "lunch" | "pizza" | "food" => 2,
            _ => continue,
        };
        v[at] += 1.0;
    }
    if v == [0.0; 4] {
        v[3] = 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

/// Embeds every pending memory as the server's embedder would (a text holding `refuse` is
/// refused); how many were stored.
async fn embed_all(s: &dyn Store) -> usize {
    let pending = s.pending_embeddings(MODEL, 0, 1000).await.unwrap();
    let made = pending
        .into_iter()
        .map(|p| {
            let vector =
                (!p.content.contains("refuse")).then(|| encode(&meaning(&format!("{} {}", p.path, p.content))));
            (p.memory, p.version, vector)
        })
        .collect();
    s.put_embeddings(MODEL, made).await.unwrap()
}

fn query(scope: SearchScope, q: &str) -> MeaningQuery {
    let query = parse(q).unwrap();
    let vector = meaning(&query.meaning());
    MeaningQuery { scope, query, path_prefix: None, model: MODEL.into(), vector, depth: 100 }
}

async fn rank(s: &dyn Store, ws: &WorkspaceId, q: MeaningQuery) -> MeaningRanking {
    s.rank_by_meaning(ws, q).await.unwrap()
}

fn paths(r: &MeaningRanking) -> Vec<&str> {
    r.ranked.iter().map(|c| c.memory.path.as_str()).collect()
}

pub async fn embeddings_follow_each_memorys_current_version(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "notes").await;
    let actor = api_actor();
    let db = s.create_memory(&ws, &store, path("/db.md"), "we run postgres".into(), actor.clone()).await.unwrap();
    let ed = s.create_memory(&ws, &store, path("/ed.md"), "my editor is vim".into(), actor.clone()).await.unwrap();
    s.create_memory(&ws, &store, path("/no.md"), "please refuse this".into(), actor.clone()).await.unwrap();

    let pending = s.pending_embeddings(MODEL, 0, 10).await.unwrap();
    assert_eq!(pending.iter().map(|p| p.path.as_str()).collect::<Vec<_>>(), vec!["/db.md", "/ed.md", "/no.md"]);
    assert_eq!(pending[0].content, "we run postgres");
    assert!(pending.windows(2).all(|w| w[0].memory < w[1].memory), "row-number order");
    let after_first = s.pending_embeddings(MODEL, pending[0].memory, 10).await.unwrap();
    assert_eq!(after_first.len(), 2, "a cursor skips what came before");
    assert_eq!(s.pending_embeddings(MODEL, 0, 1).await.unwrap().len(), 1, "the limit holds");

    assert_eq!(embed_all(&*s).await, 3, "two vectors and one refusal stored");
    assert!(s.pending_embeddings(MODEL, 0, 10).await.unwrap().is_empty(), "a refusal is not retried");
    assert_eq!(s.pending_embeddings("another-model", 0, 10).await.unwrap().len(), 3, "rows are per model");

    let r = rank(&*s, &ws, query(SearchScope::Store(store.clone()), "database")).await;
    assert_eq!(paths(&r), vec!["/db.md", "/ed.md"], "best first; the refused memory has no vector");
    assert!(r.ranked[0].score > 0.5 && r.ranked[1].score < 0.5, "{:?}", r.ranked);
    assert_eq!(r.ranked[0].memory.content.as_deref(), Some("we run postgres"));
    assert_eq!(r.ranked[0].memory.memory_store_id, store);
    assert_eq!(r.unembedded.len(), 1, "the refused memory waits for full text");

    // A vector made from a version the memory has left is not kept, and the new version is
    // pending at once (the old vector no longer counts).
    let stale = s.pending_embeddings("stale-model", 0, 10).await.unwrap();
    let change = MemoryChange { content: Some("pizza for lunch".into()), path: None, expected_sha256: None };
    s.update_memory(&ws, &store, &db.id, change, actor.clone()).await.unwrap();
    let pending = s.pending_embeddings(MODEL, 0, 10).await.unwrap();
    assert_eq!(pending.iter().map(|p| p.content.as_str()).collect::<Vec<_>>(), vec!["pizza for lunch"]);
    let old = stale.iter().find(|p| p.path == "/db.md").unwrap();
    let kept = s.put_embeddings(MODEL, vec![(old.memory, old.version, Some(encode(&meaning("postgres"))))]);
    assert_eq!(kept.await.unwrap(), 0, "a vector of the old text is refused");
    let r = rank(&*s, &ws, query(SearchScope::Store(store.clone()), "database")).await;
    assert_eq!(paths(&r), vec!["/ed.md"], "the changed memory has no current vector");
    assert_eq!(r.unembedded.len(), 2);

    // A move re-embeds too (the path is part of the text); a deletion leaves nothing to rank.
    embed_all(&*s).await;
    let moved = MemoryChange { content: None, path: Some(path("/food/lunch.md")), expected_sha256: None };
    s.update_memory(&ws, &store, &db.id, moved, actor.clone()).await.unwrap();
    assert_eq!(s.pending_embeddings(MODEL, 0, 10).await.unwrap().len(), 1);
    embed_all(&*s).await;
    s.delete_memory(&ws, &store, &ed.id, None, actor.clone()).await.unwrap();
    let r = rank(&*s, &ws, query(SearchScope::Store(store.clone()), "vim editor")).await;
    assert!(!paths(&r).contains(&"/ed.md"), "{:?}", paths(&r));
    assert!(s.pending_embeddings(MODEL, 0, 10).await.unwrap().is_empty());
    // A deleted store's memories are neither pending nor ranked.
    let other = memory_store(&*s, "other").await;
    s.create_memory(&ws, &other, path("/x.md"), "sqlite notes".into(), actor).await.unwrap();
    embed_all(&*s).await;
    s.delete_memory_store(&ws, &other).await.unwrap();
    let r = rank(&*s, &ws, query(SearchScope::Workspace(None), "sqlite")).await;
    assert!(r.ranked.iter().all(|c| c.memory.memory_store_id != other));
}

pub async fn ranking_by_meaning_keeps_to_its_scope_and_narrowing_terms(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let a = s.default_workspace().await.unwrap();
    let b = s.create_workspace("B").await.unwrap();
    let one = memory_store(&*s, "one").await;
    let two = memory_store(&*s, "two").await;
    let new =
        mnemo_store::NewMemoryStore { name: "b".into(), description: String::new(), metadata: Default::default() };
    let bs = s.create_memory_store(&b, new).await.unwrap().id;
    let writes: [(&WorkspaceId, &MemoryStoreId, &str, &str); 6] = [
        (&a, &one, "/ops/db.md", "postgres on host 2"),
        (&a, &one, "/ops/old/db.md", "legacy sqlite db"),
        (&a, &one, "/notes/db.md", "a database note, legacy"),
        (&a, &two, "/db.md", "sqlite everywhere"),
        (&a, &two, "/lunch.md", "pizza"),
        (&b, &bs, "/db.md", "their postgres"),
    ];
    for (ws, store, p, text) in writes {
        s.create_memory(ws, store, path(p), text.into(), api_actor()).await.unwrap();
    }
    embed_all(&*s).await;

    let everywhere = rank(&*s, &a, query(SearchScope::Workspace(None), "database")).await;
    assert_eq!(everywhere.ranked.len(), 5, "every memory of the workspace, ranked");
    assert!(everywhere.ranked.iter().all(|c| c.memory.memory_store_id != bs), "never another workspace's");
    assert_eq!(everywhere.ranked.last().unwrap().memory.path, "/lunch.md");
    assert!(everywhere.ranked.windows(2).all(|w| w[0].score >= w[1].score));

    let named = rank(&*s, &a, query(SearchScope::Workspace(Some(vec![two.clone(), bs.clone()])), "database")).await;
    assert_eq!(paths(&named), vec!["/db.md", "/lunch.md"]);
    let err = s.rank_by_meaning(&a, query(SearchScope::Store(bs.clone()), "database")).await.unwrap_err();
    assert_eq!(err.to_string(), StoreError::not_found("memory store", &bs).to_string());

    let in_one = |q: &str| query(SearchScope::Store(one.clone()), q);
    let prefixed = MeaningQuery { path_prefix: Some("/ops/".into()), ..in_one("database") };
    let mut got = paths(&rank(&*s, &a, prefixed).await).into_iter().map(str::to_owned).collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, vec!["/ops/db.md", "/ops/old/db.md"]);
    let r = rank(&*s, &a, in_one("database path:ops/ -path:ops/old/")).await;
    assert_eq!(paths(&r), vec!["/ops/db.md"]);
    let r = rank(&*s, &a, in_one("database -legacy")).await;
    assert_eq!(paths(&r), vec!["/ops/db.md"], "an exclusion drops by content");
    let shallow = MeaningQuery { depth: 1, ..in_one("database") };
    assert_eq!(rank(&*s, &a, shallow).await.ranked.len(), 1, "depth bounds the ranking");
}

pub async fn by_meaning_fuses_full_text_and_meaning(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(&*s, "notes").await;
    let actor = api_actor();
    for (p, text) in [
        ("/pg.md", "we run postgres in staging"), // meaning only (no `database`)
        ("/word.md", "the word database, and lunch lunch lunch"), // text, weaker meaning
        ("/lunch.md", "pizza"),
    ] {
        s.create_memory(&ws, &store, path(p), text.into(), actor.clone()).await.unwrap();
    }
    embed_all(&*s).await;
    // Written after the embedder's pass: found by full text meanwhile.
    s.create_memory(&ws, &store, path("/late.md"), "database migration plan".into(), actor).await.unwrap();

    let request = |q: &str, limit: u32| SearchMemories {
        scope: SearchScope::Store(store.clone()),
        query: parse(q).unwrap(),
        path_prefix: None,
        limit,
        after: None,
    };
    let run = |mode: SearchMode, q: &str, limit: u32| {
        let r = request(q, limit);
        let vector = meaning(&r.query.meaning());
        let s = &s;
        let ws = &ws;
        async move { by_meaning(&**s, ws, r, ByMeaning { mode, model: MODEL.into(), vector }).await.unwrap() }
    };
    let paths_of = |l: &mnemo_store::Listing<mnemo_api::MemorySearchResult>| {
        l.items.iter().map(|h| h.path.clone()).collect::<Vec<_>>()
    };

    let semantic = run(SearchMode::Semantic, "database", 20).await;
    let found = paths_of(&semantic);
    assert_eq!(found[0], "/pg.md", "closest in meaning first: {found:?}");
    assert!(found.contains(&"/late.md".to_owned()), "a memory not yet embedded is found by full text: {found:?}");
    assert!(semantic.items.windows(2).all(|w| w[0].score >= w[1].score));
    let late = semantic.items.iter().find(|h| h.path == "/late.md").unwrap();
    assert_eq!(late.snippet, "«database» migration plan", "the full-text snippet");
    let pg = &semantic.items[0];
    assert_eq!(pg.snippet, "we run postgres in staging", "a meaning-only result shows its start");

    let hybrid = run(SearchMode::Hybrid, "database", 20).await;
    let found = paths_of(&hybrid);
    assert_eq!(found.len(), 4, "{found:?}");
    let rank_of = |p: &str| found.iter().position(|f| f == p).unwrap();
    assert!(rank_of("/word.md") < rank_of("/lunch.md"), "found by both beats found by neither well: {found:?}");

    // Pages: each result once, in the order of one long page.
    let all: Vec<MemoryId> = hybrid.items.iter().map(|h| h.memory_id.clone()).collect();
    let mut r = request("database", 1);
    let mut seen = Vec::new();
    loop {
        let vector = meaning(&r.query.meaning());
        let page = by_meaning(&*s, &ws, r.clone(), ByMeaning { mode: SearchMode::Hybrid, model: MODEL.into(), vector });
        let page = page.await.unwrap();
        seen.extend(page.items.iter().map(|h| h.memory_id.clone()));
        match page.next {
            Some(next) => r.after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, all);
}
