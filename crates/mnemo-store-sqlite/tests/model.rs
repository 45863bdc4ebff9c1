//! Property test: the SQLite store behaves like a simple in-memory model of a memory store
//! under random sequences of creates, updates (with and without preconditions, with renames),
//! deletes and listings (any prefix, depth and page size).

use std::collections::BTreeMap;

use mnemo_api::{Actor, MemoryId, MemoryListItem, MemoryPath, MemoryStoreId, PathPrefix, View, content_sha256};
use mnemo_store::{ListMemories, Listing, MemoryChange, NewMemoryStore, Store, StoreError, rollup};
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Create(String, String),
    Update { pick: usize, content: Option<String>, rename: Option<String>, fresh_sha: Option<bool> },
    Delete { pick: usize, fresh_sha: Option<bool> },
    List { prefix: String, depth: u32, limit: u32, full: bool },
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "b.md"]), 1..4)
        .prop_map(|s| format!("/{}", s.join("/")))
}

fn prefix() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!["a", "b"]), 0..3)
        .prop_map(|s| if s.is_empty() { "/".to_owned() } else { format!("/{}/", s.join("/")) })
}

fn op() -> impl Strategy<Value = Op> {
    let content = prop::sample::select(vec!["", "x", "y", "hello"]).prop_map(str::to_owned);
    prop_oneof![
        3 => (path(), content.clone()).prop_map(|(p, c)| Op::Create(p, c)),
        2 => (any::<usize>(), prop::option::of(content), prop::option::of(path()), prop::option::of(any::<bool>()))
            .prop_map(|(pick, content, rename, fresh_sha)| Op::Update { pick, content, rename, fresh_sha }),
        1 => (any::<usize>(), prop::option::of(any::<bool>())).prop_map(|(pick, fresh_sha)| Op::Delete { pick, fresh_sha }),
        2 => (prefix(), 0..3u32, 1..4u32, any::<bool>()).prop_map(|(prefix, depth, limit, full)| Op::List { prefix, depth, limit, full }),
    ]
}

/// The model: path → (id, content).
#[derive(Default)]
struct Model {
    by_path: BTreeMap<String, (MemoryId, String)>,
}

impl Model {
    fn blocker(&self, path: &str, except: Option<&MemoryId>) -> Option<String> {
        self.by_path
            .iter()
            .filter(|(_, (id, _))| Some(id) != except)
            .map(|(p, _)| p)
            .find(|p| *p == path || path.starts_with(&format!("{p}/")) || p.starts_with(&format!("{path}/")))
            .cloned()
    }

    fn pick(&self, i: usize) -> Option<(String, MemoryId, String)> {
        let n = self.by_path.len();
        (n > 0).then(|| {
            let (p, (id, c)) = self.by_path.iter().nth(i % n).unwrap();
            (p.clone(), id.clone(), c.clone())
        })
    }

    fn listing(&self, prefix: &PathPrefix, depth: u32) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in self.by_path.keys().filter(|p| prefix.matches(p)) {
            let item = match rollup(prefix, depth, p) {
                None => p.clone(),
                Some(dir) => format!("prefix:{dir}"),
            };
            if out.last() != Some(&item) {
                out.push(item);
            }
        }
        out
    }
}

fn actor() -> Actor {
    Actor::ApiActor { api_key_id: "apikey_model".parse().unwrap() }
}

async fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = SqliteSettings::from_url(&format!("sqlite://{}/m.sqlite", dir.path().display())).unwrap();
    settings.durability = Durability::Normal;
    let db = SqliteStore::open(&settings).unwrap();
    let store: MemoryStoreId = db
        .create_memory_store(NewMemoryStore {
            name: "m".into(),
            description: String::new(),
            metadata: Default::default(),
        })
        .await
        .unwrap()
        .id;
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Create(path, content) => {
                let got = db.create_memory(&store, MemoryPath::parse(&path).unwrap(), content.clone(), actor()).await;
                match model.blocker(&path, None) {
                    Some(b) => match got {
                        Err(StoreError::PathConflict { conflicting_path, .. }) => assert_eq!(conflicting_path, b),
                        other => {
                            panic!("create {path}: expected a conflict with {b}, got {other:?}")
                        }
                    },
                    None => {
                        let m = got.unwrap();
                        assert_eq!(m.content_sha256, content_sha256(content.as_bytes()));
                        model.by_path.insert(path, (m.id, content));
                    }
                }
            }
            Op::Update { pick, content, rename, fresh_sha } => {
                let Some((old_path, id, old_content)) = model.pick(pick) else {
                    continue;
                };
                let expected = fresh_sha
                    .map(|fresh| if fresh { content_sha256(old_content.as_bytes()) } else { content_sha256(b"stale") });
                let change = MemoryChange {
                    content: content.clone(),
                    path: rename.as_deref().map(|p| MemoryPath::parse(p).unwrap()),
                    expected_sha256: expected.clone(),
                };
                let got = db.update_memory(&store, &id, change, actor()).await;
                let new_content = content.unwrap_or_else(|| old_content.clone());
                let new_path = rename.unwrap_or_else(|| old_path.clone());
                let noop = new_content == old_content && new_path == old_path;
                let stale = expected.is_some_and(|e| e != content_sha256(old_content.as_bytes()));
                if noop {
                    got.unwrap();
                } else if stale {
                    assert!(matches!(got, Err(StoreError::PreconditionFailed { .. })), "{got:?}");
                } else if new_path != old_path && model.blocker(&new_path, Some(&id)).is_some() {
                    assert!(matches!(got, Err(StoreError::PathConflict { .. })), "{got:?}");
                } else {
                    let m = got.unwrap();
                    assert_eq!(
                        (m.path.as_str(), m.content.as_deref()),
                        (new_path.as_str(), Some(new_content.as_str()))
                    );
                    model.by_path.remove(&old_path);
                    model.by_path.insert(new_path, (id, new_content));
                }
            }
            Op::Delete { pick, fresh_sha } => {
                let Some((path, id, content)) = model.pick(pick) else {
                    continue;
                };
                let expected = fresh_sha
                    .map(|fresh| if fresh { content_sha256(content.as_bytes()) } else { content_sha256(b"stale") });
                let stale = fresh_sha == Some(false);
                let got = db.delete_memory(&store, &id, expected, actor()).await;
                if stale {
                    assert!(matches!(got, Err(StoreError::PreconditionFailed { .. })), "{got:?}");
                } else {
                    got.unwrap();
                    model.by_path.remove(&path);
                }
            }
            Op::List { prefix, depth, limit, full } => {
                let prefix = PathPrefix::parse(&prefix).unwrap();
                let view = if full { View::Full } else { View::Basic };
                let mut after = None;
                let mut got = Vec::new();
                loop {
                    let q = ListMemories { prefix: prefix.clone(), depth, limit, view, after: after.take() };
                    let Listing { items, next } = db.list_memories(&store, q).await.unwrap();
                    assert!(items.len() <= limit as usize);
                    for item in items {
                        got.push(match item {
                            MemoryListItem::Memory(m) => {
                                let (_, content) = &model.by_path[&m.path];
                                assert_eq!(m.content.is_some(), full);
                                if full {
                                    assert_eq!(m.content.as_ref(), Some(content));
                                }
                                m.path
                            }
                            MemoryListItem::Prefix(p) => format!("prefix:{}", p.path),
                        });
                    }
                    match next {
                        Some(c) => after = Some(c),
                        None => break,
                    }
                }
                assert_eq!(got, model.listing(&prefix, depth), "prefix {prefix} depth {depth} limit {limit}");
            }
        }
    }
    db.close().await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_store_matches_the_model(ops in prop::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(ops));
    }
}
