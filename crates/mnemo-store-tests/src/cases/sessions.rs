//! Sessions: creation (snapshots, attachments, work), updates, listings, archive, delete.

use std::collections::BTreeMap;
use std::time::Duration;

use mnemo_api::{Access, AgentParams, MemoryStoreId, Session, SessionId, SessionStatus, WorkState};
use mnemo_store::{Attachment, Limits, ListSessions, NewMemoryStore, NewSession, StoreError};
use serde_json::json;

use super::fixtures::{
    agent, environment, fresh_hash, many_keys, map, memory_store, new_session, session, types, user_message, work_of,
};
use crate::StoreFactory;

fn attach(store: &MemoryStoreId, access: Access) -> Attachment {
    Attachment { store: store.clone(), access, instructions: None }
}

fn list(limit: u32) -> ListSessions {
    ListSessions { limit, ..Default::default() }
}

fn ids(sessions: &[Session]) -> Vec<&SessionId> {
    sessions.iter().map(|s| &s.id).collect()
}

pub async fn sessions_snapshot_their_agent_and_stores(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, true).await;
    let agent = agent(&*s).await;
    let prefs = memory_store(&*s, "User Preferences").await;
    let notes = s
        .create_memory_store(
            &ws,
            NewMemoryStore {
                name: "Team Notes".into(),
                description: "what the team knows".into(),
                metadata: BTreeMap::new(),
            },
        )
        .await
        .unwrap()
        .id;
    let unattached = memory_store(&*s, "Elsewhere").await;

    let mut new = new_session(&agent, &env);
    new.agent.version = Some(1);
    new.agent.overrides = Some(AgentParams { model: Some(json!("claude-sonnet-4-5")), ..Default::default() });
    new.attachments = vec![
        Attachment { instructions: Some("keep it tidy".into()), ..attach(&prefs, Access::ReadWrite) },
        attach(&notes, Access::ReadOnly),
    ];
    new.title = Some("first".into());
    new.metadata = map(&[("ticket", "42")]);
    new.initial_events = vec![user_message("hello")];
    let session = s.create_session(&ws, new).await.unwrap();

    assert_eq!(session.status, SessionStatus::Idle);
    assert_eq!(session.environment_id, env.id);
    assert_eq!(session.title.as_deref(), Some("first"));
    assert_eq!(session.metadata, map(&[("ticket", "42")]));
    assert_eq!(session.archived_at, None);
    assert_eq!(session.agent["id"], json!(agent.id));
    assert_eq!(session.agent["version"], 1);
    assert_eq!(session.agent["model"]["id"], "claude-sonnet-4-5", "overrides replace the agent's values");
    assert_eq!(session.agent["name"], "conformance");
    let resources: Vec<_> = session
        .resources
        .iter()
        .map(|r| (&r.memory_store_id, r.access, r.name.as_deref(), r.mount_path.as_deref(), r.instructions.as_deref()))
        .collect();
    assert_eq!(
        resources,
        [
            (
                &prefs,
                Access::ReadWrite,
                Some("User Preferences"),
                Some("/mnt/memory/user-preferences"),
                Some("keep it tidy")
            ),
            (&notes, Access::ReadOnly, Some("Team Notes"), Some("/mnt/memory/team-notes"), None),
        ]
    );
    assert_eq!(session.resources[1].description.as_deref(), Some("what the team knows"));
    assert_eq!(s.get_session(&ws, &session.id).await.unwrap(), session);

    assert_eq!(s.session_store_access(&ws, &session.id, &prefs).await.unwrap(), Some(Access::ReadWrite));
    assert_eq!(s.session_store_access(&ws, &session.id, &notes).await.unwrap(), Some(Access::ReadOnly));
    assert_eq!(s.session_store_access(&ws, &session.id, &unattached).await.unwrap(), None);

    let log = s.events_after(&ws, &session.id, 0).await.unwrap();
    assert_eq!(types(&log), ["user.message"], "initial events are recorded first");
    assert_eq!(log[0].to_json()["content"][0]["text"], "hello");

    let work = work_of(&*s, &env, &session).await;
    assert_eq!(
        (work.data.kind.as_str(), work.state),
        ("session", WorkState::Queued),
        "a self-hosted session queues work"
    );

    // The snapshot does not follow later versions of the agent.
    s.update_agent(&ws, &agent.id, 1, AgentParams { system: Some(Some("new".into())), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(s.get_session(&ws, &session.id).await.unwrap().agent["version"], 1);
    let latest = s.create_session(&ws, new_session(&agent, &env)).await.unwrap();
    assert_eq!((latest.agent["version"].as_u64(), latest.agent["system"].as_str()), (Some(2), Some("new")));
}

pub async fn sessions_refuse_what_they_cannot_run(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, true).await;
    let agent = agent(&*s).await;
    let store = memory_store(&*s, "notes").await;
    let create = |change: &dyn Fn(&mut NewSession)| {
        let mut new = new_session(&agent, &env);
        change(&mut new);
        new
    };

    let cases: Vec<(&str, NewSession)> = vec![
        ("an unknown environment", create(&|n| n.environment = mnemo_api::EnvironmentId::generate())),
        ("an unknown agent", create(&|n| n.agent.id = mnemo_api::AgentId::generate())),
        ("an unknown agent version", create(&|n| n.agent.version = Some(9))),
        ("an unknown store", create(&|n| n.attachments = vec![attach(&MemoryStoreId::generate(), Access::ReadWrite)])),
        (
            "a store attached twice",
            create(&|n| n.attachments = vec![attach(&store, Access::ReadWrite), attach(&store, Access::ReadOnly)]),
        ),
    ];
    for (what, new) in cases {
        let got = s.create_session(&ws, new).await;
        assert!(matches!(got, Err(StoreError::Invalid(_))), "{what}: {got:?}");
    }

    let archived_store = memory_store(&*s, "old").await;
    s.archive_memory_store(&ws, &archived_store).await.unwrap();
    let mut new = new_session(&agent, &env);
    new.attachments = vec![attach(&archived_store, Access::ReadOnly)];
    assert_err!(s.create_session(&ws, new).await, StoreError::Invalid(_));

    let archived_agent = super::fixtures::agent(&*s).await;
    s.archive_agent(&ws, &archived_agent.id).await.unwrap();
    assert_err!(s.create_session(&ws, new_session(&archived_agent, &env)).await, StoreError::Invalid(_));

    let archived_env = environment(&*s, true).await;
    s.archive_environment(&ws, &archived_env.id).await.unwrap();
    assert_err!(s.create_session(&ws, new_session(&agent, &archived_env)).await, StoreError::Invalid(_));

    let sessions = s.list_sessions(&ws, ListSessions { include_archived: true, ..list(10) }).await.unwrap();
    assert!(sessions.items.is_empty(), "a refused session leaves nothing behind");
}

pub async fn sessions_are_updated_listed_archived_and_deleted(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, false).await;
    let (a1, a2) = (agent(&*s).await, agent(&*s).await);
    let store = memory_store(&*s, "notes").await;
    let mut with_store = new_session(&a1, &env);
    with_store.attachments = vec![attach(&store, Access::ReadWrite)];
    let s1 = s.create_session(&ws, with_store).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let s2 = s.create_session(&ws, new_session(&a2, &env)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let s3 = s.create_session(&ws, new_session(&a1, &env)).await.unwrap();

    // Updates patch the title and the metadata.
    let patch = [("k".to_owned(), Some("v".to_owned()))].into();
    let titled = s.update_session(&ws, &s1.id, Some(Some("t".into())), Some(patch)).await.unwrap();
    assert_eq!((titled.title.as_deref(), &titled.metadata), (Some("t"), &map(&[("k", "v")])));
    let kept = s.update_session(&ws, &s1.id, None, None).await.unwrap();
    assert_eq!((kept.title.as_deref(), &kept.metadata), (Some("t"), &map(&[("k", "v")])));
    let cleared = s.update_session(&ws, &s1.id, Some(None), Some([("k".to_owned(), None)].into())).await.unwrap();
    assert_eq!((cleared.title, cleared.metadata), (None, BTreeMap::new()));
    assert_err!(
        s.update_session(&ws, &s1.id, None, Some(many_keys(17, Some("v".into())))).await,
        StoreError::Invalid(_)
    );

    // Listings: newest first, filtered, paginated.
    let all = s.list_sessions(&ws, list(10)).await.unwrap();
    assert_eq!(ids(&all.items), [&s3.id, &s2.id, &s1.id]);
    let by_agent = s.list_sessions(&ws, ListSessions { agent_id: Some(a1.id.clone()), ..list(10) }).await.unwrap();
    assert_eq!(ids(&by_agent.items), [&s3.id, &s1.id]);
    let by_store =
        s.list_sessions(&ws, ListSessions { memory_store_id: Some(store.clone()), ..list(10) }).await.unwrap();
    assert_eq!(ids(&by_store.items), [&s1.id]);
    let idle = s.list_sessions(&ws, ListSessions { statuses: vec!["idle".into()], ..list(10) }).await.unwrap();
    assert_eq!(idle.items.len(), 3);
    let running = s.list_sessions(&ws, ListSessions { statuses: vec!["running".into()], ..list(10) }).await.unwrap();
    assert!(running.items.is_empty());
    let since = s.list_sessions(&ws, ListSessions { created_at_gte: Some(s2.created_at), ..list(10) }).await.unwrap();
    assert_eq!(ids(&since.items), [&s3.id, &s2.id], "created_at bounds are inclusive");
    let until = s.list_sessions(&ws, ListSessions { created_at_lte: Some(s2.created_at), ..list(10) }).await.unwrap();
    assert_eq!(ids(&until.items), [&s2.id, &s1.id]);
    let first = s.list_sessions(&ws, list(2)).await.unwrap();
    assert_eq!(ids(&first.items), [&s3.id, &s2.id]);
    let rest = s.list_sessions(&ws, ListSessions { after: first.next, ..list(2) }).await.unwrap();
    assert_eq!(ids(&rest.items), [&s1.id]);
    assert!(rest.next.is_none());

    // Archiving terminates.
    let archived = s.archive_session(&ws, &s2.id).await.unwrap();
    assert_eq!(archived.status, SessionStatus::Terminated);
    assert!(archived.archived_at.is_some());
    let again = s.archive_session(&ws, &s2.id).await.unwrap();
    assert_eq!(again.archived_at, archived.archived_at, "archiving twice keeps the first archival");
    let log = s.events_after(&ws, &s2.id, 0).await.unwrap();
    assert_eq!(types(&log), ["session.status_terminated"], "one terminated event, however often archived");
    assert_eq!(ids(&s.list_sessions(&ws, list(10)).await.unwrap().items), [&s3.id, &s1.id]);
    let with_archived = s.list_sessions(&ws, ListSessions { include_archived: true, ..list(10) }).await.unwrap();
    assert_eq!(ids(&with_archived.items), [&s3.id, &s2.id, &s1.id]);
    let terminated = ListSessions { include_archived: true, statuses: vec!["terminated".into()], ..list(10) };
    assert_eq!(ids(&s.list_sessions(&ws, terminated).await.unwrap().items), [&s2.id]);
    assert_err!(s.update_session(&ws, &s2.id, Some(Some("late".into())), None).await, StoreError::Invalid(_));

    // Deletion.
    s.delete_session(&ws, &s3.id).await.unwrap();
    assert_err!(s.get_session(&ws, &s3.id).await, StoreError::NotFound { .. });
    assert_err!(s.delete_session(&ws, &s3.id).await, StoreError::NotFound { .. });
    assert_err!(s.events_after(&ws, &s3.id, 0).await, StoreError::NotFound { .. });
    assert_eq!(
        ids(&s.list_sessions(&ws, ListSessions { include_archived: true, ..list(10) }).await.unwrap().items),
        [&s2.id, &s1.id]
    );

    let unknown = SessionId::generate();
    assert_err!(s.get_session(&ws, &unknown).await, StoreError::NotFound { .. });
    assert_err!(s.archive_session(&ws, &unknown).await, StoreError::NotFound { .. });
    assert_err!(s.update_session(&ws, &unknown, Some(None), None).await, StoreError::NotFound { .. });
}

pub async fn archiving_or_deleting_a_session_stops_its_work(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, true).await;
    let archived = session(&*s, &env).await;
    let deleted = session(&*s, &env).await;
    let token = fresh_hash();
    let item = s.poll_work(&ws, &env.id, None, 60_000, token).await.unwrap().expect("the oldest item");
    assert_eq!(item.data.id, archived.id.as_str());
    s.ack_work(&ws, &env.id, &item.id).await.unwrap();
    assert!(s.resolve_credential(token).await.unwrap().is_some());

    s.archive_session(&ws, &archived.id).await.unwrap();
    assert_eq!(s.get_work(&ws, &env.id, &item.id).await.unwrap().state, WorkState::Stopped);
    assert_eq!(s.resolve_credential(token).await.unwrap(), None, "the stopped item's token dies");

    let queued = work_of(&*s, &env, &deleted).await;
    s.delete_session(&ws, &deleted.id).await.unwrap();
    match s.get_work(&ws, &env.id, &queued.id).await {
        Ok(work) => assert_eq!(work.state, WorkState::Stopped, "a deleted session's item is stopped"),
        Err(e) => assert!(matches!(e, StoreError::NotFound { .. }), "{e:?}"),
    }
    assert!(s.poll_work(&ws, &env.id, None, 60_000, fresh_hash()).await.unwrap().is_none(), "nothing left to deliver");
}
