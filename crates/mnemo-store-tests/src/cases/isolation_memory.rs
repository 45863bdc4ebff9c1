//! Workspace isolation of the memory domain (admin-api.md §8.2): every memory store operation
//! called with another workspace than the store's fails exactly as for an unknown id, changes
//! nothing, and listings and usage of that workspace never show the store.

use std::collections::BTreeMap;

use mnemo_api::{MemoryId, MemoryStoreId, MemoryVersionId, View, WorkspaceId};
use mnemo_store::{
    Credential, Limits, ListMemories, ListMemoryStores, ListMemoryVersions, MemoryChange, MemoryStorePatch,
    MemoryWriteOp, NewMemoryStore, Store, StoreError,
};

use super::fixtures::{api_actor, fresh_hash, path};
use crate::StoreFactory;

fn new_store(name: &str) -> NewMemoryStore {
    NewMemoryStore { name: name.into(), description: String::new(), metadata: BTreeMap::new() }
}

fn all_stores() -> ListMemoryStores {
    ListMemoryStores { include_archived: true, created_at_gte: None, created_at_lte: None, limit: 100, after: None }
}

fn change(text: &str) -> MemoryChange {
    MemoryChange { content: Some(text.into()), path: None, expected_sha256: None }
}

/// The message of `err`, which must be a not-found (whatever its id).
fn not_found(what: &str, err: &StoreError) -> String {
    assert!(matches!(err, StoreError::NotFound { .. }), "{what}: {err:?}");
    err.to_string()
}

/// What every call made on `store` through workspace `ws` answers, in call order: the error's
/// message, or `ok` for a call that succeeded.
async fn outcomes(
    s: &dyn Store,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    memory: &MemoryId,
    version: &MemoryVersionId,
) -> Vec<String> {
    fn text<T>(r: Result<T, StoreError>) -> String {
        r.map_or_else(|e| not_found("call", &e), |_| "ok".into())
    }
    let actor = api_actor();
    let patch = MemoryStorePatch { name: Some("stolen".into()), ..MemoryStorePatch::default() };
    let listing =
        ListMemories { prefix: mnemo_api::PathPrefix::root(), depth: 0, limit: 10, view: View::Full, after: None };
    let search = mnemo_store::search::SearchMemories {
        scope: mnemo_store::search::SearchScope::Store(store.clone()),
        query: mnemo_store::rules::search::parse("one").expect("a valid query"),
        path_prefix: None,
        limit: 10,
        after: None,
    };
    let batch = vec![
        MemoryWriteOp::Create { path: path("/batch.md"), content: "b".into() },
        MemoryWriteOp::Update { id: memory.clone(), change: change("batched") },
    ];
    let written = match s.write_memories(ws, store, batch, actor.clone()).await {
        Ok(each) => each.into_iter().map(text).collect::<Vec<_>>().join(" / "),
        Err(e) => not_found("write_memories", &e),
    };
    vec![
        text(s.get_memory_store(ws, store).await),
        text(s.update_memory_store(ws, store, patch).await),
        text(s.create_memory(ws, store, path("/new.md"), "n".into(), actor.clone()).await),
        text(s.get_memory(ws, store, memory).await),
        text(s.update_memory(ws, store, memory, change("changed"), actor.clone()).await),
        written,
        text(s.memory_change_seq(ws, store).await),
        text(s.list_memories(ws, store, listing).await),
        text(s.search_memories(ws, search).await),
        text(s.export_memories(ws, store, 10).await),
        text(s.memory_changes_after(ws, store, 0, 10, false).await),
        text(s.get_memory_version(ws, store, version, View::Full).await),
        text(s.list_memory_versions(ws, store, ListMemoryVersions::newest(10)).await),
        text(s.redact_memory_version(ws, store, version, actor.clone()).await),
        text(s.delete_memory(ws, store, memory, None, actor.clone()).await),
        text(s.archive_memory_store(ws, store).await),
        text(s.delete_memory_store(ws, store).await),
    ]
}

pub async fn memory_operations_on_another_workspaces_store_answer_as_for_an_unknown_one(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let a = s.default_workspace().await.unwrap();
    let b = s.create_workspace("B").await.unwrap();
    let store = s.create_memory_store(&a, new_store("a's")).await.unwrap();
    let memory = s.create_memory(&a, &store.id, path("/a.md"), "one".into(), api_actor()).await.unwrap();
    let old = memory.memory_version_id.clone();
    let memory = s.update_memory(&a, &store.id, &memory.id, change("two"), api_actor()).await.unwrap();
    let versions_before = s.list_memory_versions(&a, &store.id, ListMemoryVersions::newest(10)).await.unwrap().items;

    // Every call of workspace B on A's store fails with the message an unknown store gives.
    let through_b = outcomes(&*s, &b, &store.id, &memory.id, &old).await;
    let gone = StoreError::not_found("memory store", &store.id).to_string();
    for (i, got) in through_b.iter().enumerate() {
        let expected = if i == 5 { [gone.as_str(); 2].join(" / ") } else { gone.clone() };
        assert_eq!(got, &expected, "call {i} of B on A's store");
    }
    // And an unknown store answers B with the same message, naming the id asked for.
    let unknown = MemoryStoreId::generate();
    let through_b_unknown = outcomes(&*s, &b, &unknown, &memory.id, &old).await;
    let never = StoreError::not_found("memory store", &unknown).to_string();
    assert_eq!(
        through_b_unknown,
        through_b.iter().map(|m| m.replace(store.id.as_str(), unknown.as_str())).collect::<Vec<_>>()
    );
    assert!(through_b_unknown.iter().all(|m| m.starts_with(&never)), "{through_b_unknown:?}");

    // Nothing changed in A.
    assert_eq!(s.get_memory_store(&a, &store.id).await.unwrap(), store);
    assert_eq!(s.get_memory(&a, &store.id, &memory.id).await.unwrap(), memory);
    let versions_after = s.list_memory_versions(&a, &store.id, ListMemoryVersions::newest(10)).await.unwrap().items;
    assert_eq!(versions_after, versions_before);
    let old_version = s.get_memory_version(&a, &store.id, &old, View::Full).await.unwrap();
    assert_eq!((old_version.redacted_at, old_version.content.as_deref()), (None, Some("one")));
}

pub async fn a_workspaces_listings_and_usage_show_only_its_stores(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let a = s.default_workspace().await.unwrap();
    let b = s.create_workspace("B").await.unwrap();
    let in_a = s.create_memory_store(&a, new_store("a")).await.unwrap().id;
    let memory = s.create_memory(&a, &in_a, path("/x.md"), "xyz".into(), api_actor()).await.unwrap();
    let archived_in_a = s.create_memory_store(&a, new_store("a, archived")).await.unwrap().id;
    s.archive_memory_store(&a, &archived_in_a).await.unwrap();
    let in_b = s.create_memory_store(&b, new_store("b")).await.unwrap().id;

    let listed = |ws: WorkspaceId| {
        let s = &s;
        async move {
            s.list_memory_stores(&ws, all_stores()).await.unwrap().items.into_iter().map(|m| m.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(a.clone()).await, vec![archived_in_a.clone(), in_a.clone()]);
    assert_eq!(listed(b.clone()).await, vec![in_b.clone()]);

    let asked = [in_a.clone(), in_b.clone()];
    let usage_a = s.memory_store_usage(&a, &asked).await.unwrap();
    assert_eq!(usage_a.keys().collect::<Vec<_>>(), vec![&in_a], "B's store is absent from A's usage");
    assert_eq!((usage_a[&in_a].memories, usage_a[&in_a].bytes), (1, 3));
    let usage_b = s.memory_store_usage(&b, &asked).await.unwrap();
    assert_eq!(usage_b.keys().collect::<Vec<_>>(), vec![&in_b], "A's store is absent from B's usage");

    // A store's id is looked up in its own workspace only: B's own store with A's memory or
    // version ids finds nothing, as for ids never made.
    let foreign = not_found("memory", &s.get_memory(&b, &in_b, &memory.id).await.unwrap_err());
    assert_eq!(foreign, StoreError::not_found("memory", &memory.id).to_string());
    let foreign = not_found(
        "version",
        &s.get_memory_version(&b, &in_b, &memory.memory_version_id, View::Full).await.unwrap_err(),
    );
    assert_eq!(foreign, StoreError::not_found("memory version", &memory.memory_version_id).to_string());
}

pub async fn an_api_key_made_in_a_workspace_resolves_to_it(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let b = s.create_workspace("B").await.unwrap();
    let hash = fresh_hash();
    let key = s.ensure_api_key_in(&b, hash, "b's key").await.unwrap();
    let principal = s.resolve_credential(hash).await.unwrap().unwrap();
    assert_eq!((principal.credential, principal.workspace), (Credential::ApiKey(key.clone()), Some(b)));
    // A known secret keeps its key and its workspace.
    let default = s.default_workspace().await.unwrap();
    assert_eq!(s.ensure_api_key_in(&default, hash, "again").await.unwrap(), key);
    assert_ne!(s.resolve_credential(hash).await.unwrap().unwrap().workspace, Some(default));
}
