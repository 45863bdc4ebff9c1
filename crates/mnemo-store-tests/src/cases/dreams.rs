//! Dreams (issue 34): what a create checks, the lifecycle of cancel and archive, lists, the
//! runner's lease, the start with its session, the atomic copy of the input, the finish, and
//! the guards on what a running dream uses.

use std::time::Duration;

use mnemo_api::{Actor, DreamRequest, DreamStatus, MemoryStoreId, SessionId, WorkspaceId};
use mnemo_store::ops::dreams::{Copied, ListDreams};
use mnemo_store::rules::dream::{Outcome, code};
use mnemo_store::{Limits, Store, StoreError};

use super::fixtures::{agent, api_actor, environment, memory_store, new_session, path, session};
use crate::StoreFactory;

const TTL: Duration = Duration::from_secs(30);

fn request(store: &MemoryStoreId, sessions: Vec<SessionId>, update: bool) -> DreamRequest {
    DreamRequest { store: store.clone(), sessions, model: "m".into(), instructions: None, update_existing: update }
}

/// A store holding `files` and a session, in the Default workspace.
async fn inputs(s: &dyn Store, files: &[(&str, &str)]) -> (WorkspaceId, MemoryStoreId, SessionId) {
    let ws = s.default_workspace().await.unwrap();
    let store = memory_store(s, "notes").await;
    for (p, c) in files {
        s.create_memory(&ws, &store, path(p), (*c).into(), api_actor()).await.unwrap();
    }
    let env = environment(s, false).await;
    let session = session(s, &env).await.id;
    (ws, store, session)
}

fn list(limit: u32) -> ListDreams {
    ListDreams { limit, ..ListDreams::default() }
}

pub async fn a_create_checks_its_inputs_and_the_queue(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (ws, store, session) = inputs(&*s, &[("/a.md", "a")]).await;
    let dream = s.create_dream(&ws, request(&store, vec![session.clone()], false), None, 2).await.unwrap();
    assert_eq!(dream.status, DreamStatus::Pending);
    assert!(dream.outputs.is_empty() && dream.session_id.is_none() && dream.ended_at.is_none());
    assert_eq!(s.get_dream(&ws, &dream.id).await.unwrap(), dream);

    // Unknown ids, and another workspace's, are not found.
    let other = s.create_workspace("other").await.unwrap();
    assert!(matches!(s.get_dream(&other, &dream.id).await, Err(StoreError::NotFound { .. })));
    let unknown_store: MemoryStoreId = "memstore_000000000000000000000000".parse().unwrap();
    let unknown_session: SessionId = "sesn_000000000000000000000000".parse().unwrap();
    for bad in [request(&unknown_store, vec![session.clone()], false), request(&store, vec![unknown_session], false)] {
        assert!(matches!(s.create_dream(&ws, bad.clone(), None, 9).await, Err(StoreError::NotFound { .. })));
        assert!(matches!(s.create_dream(&other, bad, None, 9).await, Err(StoreError::NotFound { .. })));
    }
    // The queue: `max_pending` waiting.
    s.create_dream(&ws, request(&store, vec![session.clone()], false), None, 2).await.unwrap();
    let full = s.create_dream(&ws, request(&store, vec![session.clone()], false), None, 2).await;
    assert!(matches!(full, Err(StoreError::Limited(_))), "{full:?}");
    // One update_existing dream per store; a create_new one beside it is fine.
    s.create_dream(&ws, request(&store, vec![session.clone()], true), None, 9).await.unwrap();
    let second = s.create_dream(&ws, request(&store, vec![session.clone()], true), None, 9).await;
    assert!(matches!(second, Err(StoreError::Conflict(_))), "{second:?}");
    s.create_dream(&ws, request(&store, vec![session.clone()], false), None, 9).await.unwrap();
    // Archived inputs are refused.
    s.archive_session(&ws, &session).await.unwrap();
    assert!(matches!(
        s.create_dream(&ws, request(&store, vec![session], false), None, 9).await,
        Err(StoreError::Invalid(_))
    ));
    let (_, store2, session2) = inputs(&*s, &[]).await;
    s.archive_memory_store(&ws, &store2).await.unwrap();
    assert!(matches!(
        s.create_dream(&ws, request(&store2, vec![session2], false), None, 9).await,
        Err(StoreError::Invalid(_))
    ));
}

pub async fn an_idempotency_key_answers_the_same_dream(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (ws, store, session) = inputs(&*s, &[]).await;
    let key = Some(("k1".to_owned(), "sha-a".to_owned()));
    let first = s.create_dream(&ws, request(&store, vec![session.clone()], false), key.clone(), 9).await.unwrap();
    let again = s.create_dream(&ws, request(&store, vec![session.clone()], false), key, 9).await.unwrap();
    assert_eq!(first.id, again.id);
    let other =
        s.create_dream(&ws, request(&store, vec![session], false), Some(("k1".into(), "sha-b".into())), 9).await;
    assert!(matches!(other, Err(StoreError::Conflict(_))), "{other:?}");
    assert_eq!(s.list_dreams(&ws, list(10)).await.unwrap().items.len(), 1);
}

pub async fn cancel_and_archive_follow_the_lifecycle_and_lists_filter(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (ws, store, session) = inputs(&*s, &[]).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(s.create_dream(&ws, request(&store, vec![session.clone()], false), None, 9).await.unwrap().id);
    }
    // Archive needs a final dream; cancel is idempotent.
    assert!(matches!(s.archive_dream(&ws, &ids[0]).await, Err(StoreError::Invalid(_))));
    let canceled = s.cancel_dream(&ws, &ids[0]).await.unwrap();
    assert_eq!(canceled.status, DreamStatus::Canceled);
    assert!(canceled.ended_at.is_some());
    assert_eq!(s.cancel_dream(&ws, &ids[0]).await.unwrap(), canceled);
    let archived = s.archive_dream(&ws, &ids[0]).await.unwrap();
    assert!(archived.archived_at.is_some());
    assert_eq!(archived.status, DreamStatus::Canceled);
    assert_eq!(s.archive_dream(&ws, &ids[0]).await.unwrap(), archived);

    // Newest first, archived hidden unless asked, statuses filter, pages keyed.
    let shown = |l: mnemo_store::Listing<mnemo_api::Dream>| l.items.into_iter().map(|d| d.id).collect::<Vec<_>>();
    assert_eq!(shown(s.list_dreams(&ws, list(10)).await.unwrap()), [ids[2].clone(), ids[1].clone()]);
    let all = ListDreams { include_archived: true, ..list(10) };
    assert_eq!(shown(s.list_dreams(&ws, all.clone()).await.unwrap()), [ids[2].clone(), ids[1].clone(), ids[0].clone()]);
    let canceled_only = ListDreams { statuses: vec![DreamStatus::Canceled], ..all.clone() };
    assert_eq!(shown(s.list_dreams(&ws, canceled_only).await.unwrap()), [ids[0].clone()]);
    let first = s.list_dreams(&ws, ListDreams { limit: 2, ..all.clone() }).await.unwrap();
    let next = first.next.clone().expect("a second page");
    assert_eq!(shown(first), [ids[2].clone(), ids[1].clone()]);
    let second = s.list_dreams(&ws, ListDreams { limit: 2, after: Some(next), ..all }).await.unwrap();
    assert!(second.next.is_none());
    assert_eq!(shown(second), [ids[0].clone()]);
    let other = s.create_workspace("other").await.unwrap();
    assert!(s.list_dreams(&other, list(10)).await.unwrap().items.is_empty());
}

pub async fn a_dream_has_one_runner_until_its_lease_lapses(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (ws, store, session) = inputs(&*s, &[]).await;
    let dream = s.create_dream(&ws, request(&store, vec![session.clone()], false), None, 9).await.unwrap();
    let second = s.create_dream(&ws, request(&store, vec![session], false), None, 9).await.unwrap();
    // Oldest first; max_running bounds how many are held.
    let a = s.claim_dream("runner-a", TTL, 1).await.unwrap().expect("a claim");
    assert_eq!(a.dream.id, dream.id);
    assert!(s.claim_dream("runner-b", TTL, 1).await.unwrap().is_none(), "max_running");
    let b = s.claim_dream("runner-b", TTL, 2).await.unwrap().expect("the second dream");
    assert_eq!(b.dream.id, second.id);
    assert!(s.claim_dream("runner-c", TTL, 9).await.unwrap().is_none(), "both are held");
    assert!(s.renew_dream(&ws, &dream.id, "runner-a", TTL).await.unwrap().is_some());
    assert!(s.renew_dream(&ws, &dream.id, "runner-b", TTL).await.unwrap().is_none());
    // A short lease lapses; then another runner takes the dream on.
    assert!(s.renew_dream(&ws, &dream.id, "runner-a", Duration::from_millis(50)).await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(120)).await;
    let c = s.claim_dream("runner-c", TTL, 9).await.unwrap().expect("the lapsed dream");
    assert_eq!(c.dream.id, dream.id);
    assert!(s.renew_dream(&ws, &dream.id, "runner-a", TTL).await.unwrap().is_none());
}

pub async fn a_start_makes_the_session_and_the_copy_is_whole_and_once(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (ws, store, session) = inputs(&*s, &[("/a.md", "alpha"), ("/b/c.md", "gamma")]).await;
    let dream = s.create_dream(&ws, request(&store, vec![session], false), None, 9).await.unwrap();
    s.claim_dream("runner", TTL, 9).await.unwrap().unwrap();
    let env = environment(&*s, false).await;
    let mut new = new_session(&agent(&*s).await, &env);
    new.metadata.insert("mnemo_dream_id".into(), dream.id.to_string());
    // Only the holder may start it.
    assert!(matches!(s.start_dream(&ws, &dream.id, "intruder", new.clone()).await, Err(StoreError::Conflict(_))));
    let running = s.start_dream(&ws, &dream.id, "runner", new.clone()).await.unwrap();
    assert_eq!(running.status, DreamStatus::Running);
    let dream_session = running.session_id.clone().expect("the dream's session");
    s.get_session(&ws, &dream_session).await.unwrap();
    // A second start (a resumed run) changes nothing and makes no second session.
    assert_eq!(s.start_dream(&ws, &dream.id, "runner", new).await.unwrap().session_id, Some(dream_session.clone()));

    let actor = Actor::SessionActor { session_id: dream_session.clone() };
    // Over the size bound: refused, and no store made.
    let stores_before = s.list_memory_stores(&ws, stores()).await.unwrap().items.len();
    match s.copy_dream_input(&ws, &dream.id, "runner", actor.clone(), 5).await.unwrap() {
        Copied::Refused(e) => assert_eq!(e.kind, code::INPUT_TOO_LARGE),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.list_memory_stores(&ws, stores()).await.unwrap().items.len(), stores_before);
    let Copied::Done { dream: copied, memories } =
        s.copy_dream_input(&ws, &dream.id, "runner", actor.clone(), 1 << 20).await.unwrap()
    else {
        panic!("the copy was refused")
    };
    assert_eq!(memories, 2);
    let output = copied.output_store().unwrap().clone();
    assert_ne!(output, store);
    let out = s.get_memory_store(&ws, &output).await.unwrap();
    assert_eq!(out.name, "notes (dream)");
    assert_eq!(out.metadata.get("mnemo_dream_id"), Some(&dream.id.to_string()));
    let usage = s.memory_store_usage(&ws, std::slice::from_ref(&output)).await.unwrap();
    assert_eq!(usage.get(&output).map(|u| u.memories), Some(2));
    let versions = super::fixtures::all_versions(&*s, &output, super::fixtures::versions(10)).await;
    assert!(versions.iter().all(|v| v.created_by.as_ref() == Some(&actor)), "{versions:?}");
    // Once recorded, a resumed run does not copy again.
    let Copied::Done { dream: again, .. } = s.copy_dream_input(&ws, &dream.id, "runner", actor, 1 << 20).await.unwrap()
    else {
        panic!("refused")
    };
    assert_eq!(again.output_store(), Some(&output));
    assert_eq!(s.list_memory_stores(&ws, stores()).await.unwrap().items.len(), stores_before + 1);
    let facts = s.dream_verification(&ws, &dream.id, 2).await.unwrap();
    assert_eq!((facts.input_writes, facts.output_memories, facts.output_usable), (0, 2, true));

    // While it runs, its output store and its session are its own.
    assert!(matches!(s.archive_memory_store(&ws, &output).await, Err(StoreError::Invalid(_))));
    assert!(matches!(s.delete_memory_store(&ws, &output).await, Err(StoreError::Invalid(_))));
    assert!(matches!(s.archive_session(&ws, &dream_session).await, Err(StoreError::Invalid(_))));
    let posted = s
        .append_events(&ws, &dream_session, vec![super::fixtures::user_message("hi")], super::fixtures::person())
        .await;
    assert!(matches!(posted, Err(StoreError::Invalid(_))), "{posted:?}");

    // The finish: completed, the session archived, the lease let go; a finish by another is refused.
    assert!(matches!(
        s.finish_dream(&ws, &dream.id, "intruder", Outcome::Completed).await,
        Err(StoreError::Conflict(_))
    ));
    let done = s.finish_dream(&ws, &dream.id, "runner", Outcome::Completed).await.unwrap();
    assert_eq!(done.status, DreamStatus::Completed);
    assert!(done.ended_at.is_some() && done.error.is_none());
    assert!(s.get_session(&ws, &dream_session).await.unwrap().archived_at.is_some());
    assert!(s.renew_dream(&ws, &dream.id, "someone", TTL).await.unwrap().is_some(), "the lease was let go");
    s.archive_memory_store(&ws, &output).await.unwrap();
}

pub async fn a_finish_keeps_a_cancel_and_frees_the_store(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (ws, store, session) = inputs(&*s, &[("/a.md", "a")]).await;
    let dream = s.create_dream(&ws, request(&store, vec![session.clone()], true), None, 9).await.unwrap();
    s.claim_dream("runner", TTL, 9).await.unwrap().unwrap();
    s.cancel_dream(&ws, &dream.id).await.unwrap();
    // Canceled, but its runner still holds it: the store is not free yet.
    let blocked = s.create_dream(&ws, request(&store, vec![session.clone()], true), None, 9).await;
    assert!(matches!(blocked, Err(StoreError::Conflict(_))), "{blocked:?}");
    let error = mnemo_api::DreamError::new(code::MODEL_ERROR, "m");
    let done = s.finish_dream(&ws, &dream.id, "runner", Outcome::Failed(error)).await.unwrap();
    assert_eq!(done.status, DreamStatus::Canceled, "a cancel stays");
    assert!(done.error.is_none());
    s.create_dream(&ws, request(&store, vec![session], true), None, 9).await.unwrap();
}

fn stores() -> mnemo_store::ListMemoryStores {
    mnemo_store::ListMemoryStores {
        include_archived: true,
        created_at_gte: None,
        created_at_lte: None,
        limit: 100,
        after: None,
    }
}

pub async fn the_dreams_environment_is_mnemos_own(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let new = mnemo_store::NewEnvironment {
        name: "mnemo-dreams".into(),
        description: None,
        metadata: [("mnemo_role".to_owned(), "dreams".to_owned())].into_iter().collect(),
        config: serde_json::json!({"type": "cloud"}),
        scope: None,
    };
    let env = s.create_environment(&ws, new).await.unwrap();
    let patch = mnemo_store::EnvironmentPatch { description: Some(Some("mine".into())), ..Default::default() };
    assert!(matches!(s.update_environment(&ws, &env.id, patch).await, Err(StoreError::Invalid(_))));
    assert!(matches!(s.archive_environment(&ws, &env.id).await, Err(StoreError::Invalid(_))));
    assert!(matches!(s.delete_environment(&ws, &env.id).await, Err(StoreError::Invalid(_))));
    assert_eq!(s.get_environment(&ws, &env.id).await.unwrap().archived_at, None);
}
