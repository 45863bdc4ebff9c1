//! Workspace isolation of agents, sessions, their events and turn leases (admin-api.md §8.2):
//! every operation called with another workspace fails exactly as it does for an unknown id —
//! the same error, message included, but for the id it names — changes nothing, and listings
//! of another workspace show none of the rows. A session's body references (its agent, its
//! environment) are looked up in the session's workspace.
//!
//! The Default workspace is "A", the one a case creates with `create_workspace` is "B".

use std::fmt::Debug;
use std::time::Duration;

use mnemo_api::{Access, AgentId, AgentParams, EnvironmentId, SessionId, WorkspaceId};
use mnemo_store::{Attachment, Credential, EventAuthor, Limits, ListEvents, ListSessions, Result, Store};

use super::fixtures::{agent, agent_in, environment, fresh_hash, memory_store, new_session, person, user_message};
use crate::StoreFactory;

const LEASE: Duration = Duration::from_secs(60);

/// Asserts that `theirs` (a call naming another workspace's `their_id`) failed exactly as
/// `unknown` (the same call naming the never-seen `unknown_id`): the same variant and the same
/// message once each id is written as `<id>`.
#[track_caller]
fn same_refusal<T: Debug>(what: &str, theirs: Result<T>, their_id: &str, unknown: Result<T>, unknown_id: &str) {
    let theirs = theirs.expect_err(&format!("{what}: another workspace's id must be refused"));
    let unknown = unknown.expect_err(&format!("{what}: an unknown id must be refused"));
    assert_eq!(
        std::mem::discriminant(&theirs),
        std::mem::discriminant(&unknown),
        "{what}: {theirs:?} is not refused like {unknown:?}"
    );
    assert_eq!(
        theirs.to_string().replace(their_id, "<id>"),
        unknown.to_string().replace(unknown_id, "<id>"),
        "{what}: the refusal tells another workspace's id from an unknown one"
    );
}

async fn two_workspaces(s: &dyn Store) -> (WorkspaceId, WorkspaceId) {
    let a = s.default_workspace().await.unwrap();
    let b = s.create_workspace("B").await.unwrap();
    assert_ne!(a, b);
    (a, b)
}

pub async fn agents_are_invisible_to_other_workspaces(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (a, b) = two_workspaces(&*s).await;
    let theirs = agent(&*s).await;
    let (id, unknown) = (theirs.id.clone(), AgentId::generate());
    let (their_id, unknown_id) = (id.to_string(), unknown.to_string());
    // `same_refusal` for this case's `their_id` and `unknown_id`.
    macro_rules! same {
        ($what:expr, $theirs:expr, $unknown:expr $(,)?) => {
            same_refusal($what, $theirs, &their_id, $unknown, &unknown_id)
        };
    }

    same!("get_agent", s.get_agent(&b, &id, None).await, s.get_agent(&b, &unknown, None).await);
    same!("get_agent version", s.get_agent(&b, &id, Some(1)).await, s.get_agent(&b, &unknown, Some(1)).await);
    let params: AgentParams = serde_json::from_value(serde_json::json!({"name": "renamed"})).unwrap();
    same!(
        "update_agent",
        s.update_agent(&b, &id, 1, params.clone()).await,
        s.update_agent(&b, &unknown, 1, params.clone()).await,
    );
    same!("archive_agent", s.archive_agent(&b, &id).await, s.archive_agent(&b, &unknown).await);

    let listed = s.list_agents(&b, true, 100, None).await.unwrap();
    assert!(listed.items.is_empty(), "another workspace lists none of A's agents: {:?}", listed.items);
    // Nothing B tried changed A's agent.
    let still = s.get_agent(&a, &id, None).await.unwrap();
    assert_eq!((still.version, still.archived_at), (1, None));

    // B's own agent is B's alone, and B's calls reach it.
    let own = agent_in(&*s, &b).await;
    let ids = |l: mnemo_store::Listing<mnemo_api::Agent>| l.items.into_iter().map(|a| a.id).collect::<Vec<_>>();
    assert_eq!(ids(s.list_agents(&b, true, 100, None).await.unwrap()), vec![own.id.clone()]);
    assert_eq!(ids(s.list_agents(&a, true, 100, None).await.unwrap()), vec![id.clone()]);
    assert_eq!(s.update_agent(&b, &own.id, 1, params).await.unwrap().version, 2);
    assert!(s.archive_agent(&b, &own.id).await.unwrap().archived_at.is_some());
    let own_id = own.id.to_string();
    same_refusal(
        "get_agent from A",
        s.get_agent(&a, &own.id, None).await,
        &own_id,
        s.get_agent(&a, &unknown, None).await,
        &unknown_id,
    );
}

pub async fn sessions_and_their_events_are_invisible_to_other_workspaces(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (a, b) = two_workspaces(&*s).await;
    let env = environment(&*s, true).await;
    let their_agent = agent(&*s).await;
    let store = memory_store(&*s, "notes").await;
    let mut new = new_session(&their_agent, &env);
    new.attachments.push(Attachment { store: store.clone(), access: Access::ReadWrite, instructions: None });
    let session = s.create_session(&a, new).await.unwrap();
    s.append_events(&a, &session.id, vec![user_message("hello")], person()).await.unwrap();
    let (id, unknown) = (session.id.clone(), SessionId::generate());
    let (their_id, unknown_id) = (id.to_string(), unknown.to_string());
    // `same_refusal` for this case's `their_id` and `unknown_id`.
    macro_rules! same {
        ($what:expr, $theirs:expr, $unknown:expr $(,)?) => {
            same_refusal($what, $theirs, &their_id, $unknown, &unknown_id)
        };
    }

    same!("get_session", s.get_session(&b, &id).await, s.get_session(&b, &unknown).await);
    let title = || Some(Some("mine now".to_owned()));
    same!(
        "update_session",
        s.update_session(&b, &id, title(), None).await,
        s.update_session(&b, &unknown, title(), None).await,
    );
    same!(
        "list_events",
        s.list_events(&b, &id, ListEvents { limit: 10, ..ListEvents::default() }).await,
        s.list_events(&b, &unknown, ListEvents { limit: 10, ..ListEvents::default() }).await,
    );
    same!("events_after", s.events_after(&b, &id, 0).await, s.events_after(&b, &unknown, 0).await);
    same!(
        "append_events",
        s.append_events(&b, &id, vec![user_message("from B")], person()).await,
        s.append_events(&b, &unknown, vec![user_message("from B")], person()).await,
    );
    same!(
        "append_events as the server",
        s.append_events(&b, &id, vec![user_message("from B")], EventAuthor::Server).await,
        s.append_events(&b, &unknown, vec![user_message("from B")], EventAuthor::Server).await,
    );
    same!("claim_turn", s.claim_turn(&b, &id, "b", LEASE).await, s.claim_turn(&b, &unknown, "b", LEASE).await);
    same!("release_turn", s.release_turn(&b, &id, "b").await, s.release_turn(&b, &unknown, "b").await);
    same!("archive_session", s.archive_session(&b, &id).await, s.archive_session(&b, &unknown).await);
    same!("delete_session", s.delete_session(&b, &id).await, s.delete_session(&b, &unknown).await);
    assert_eq!(s.session_store_access(&b, &id, &store).await.unwrap(), None, "B reaches no store through A's session");
    assert_eq!(s.session_store_access(&a, &id, &store).await.unwrap(), Some(Access::ReadWrite));

    let everything = ListSessions { include_archived: true, limit: 100, ..ListSessions::default() };
    assert!(s.list_sessions(&b, everything.clone()).await.unwrap().items.is_empty(), "B lists none of A's sessions");
    let by_agent = ListSessions { agent_id: Some(their_agent.id.clone()), ..everything.clone() };
    assert!(s.list_sessions(&b, by_agent).await.unwrap().items.is_empty(), "nor through A's agent");
    let by_store = ListSessions { memory_store_id: Some(store.clone()), ..everything.clone() };
    assert!(s.list_sessions(&b, by_store).await.unwrap().items.is_empty(), "nor through A's store");

    // Nothing B tried changed A's session: same title, not archived, one message, lease free.
    let still = s.get_session(&a, &id).await.unwrap();
    assert_eq!((still.title, still.archived_at), (None, None));
    let log = s.events_after(&a, &id, 0).await.unwrap();
    assert_eq!(log.iter().filter(|e| e.event.event.kind() == "user.message").count(), 1, "B appended nothing");
    assert!(s.claim_turn(&a, &id, "a", LEASE).await.unwrap(), "B took no turn lease");
    assert_eq!(s.list_sessions(&a, everything).await.unwrap().items.len(), 1);

    // The agent loop's background reads see every workspace, each session with its own.
    assert_eq!(s.session_workspace(&id).await.unwrap(), Some(a.clone()));
    assert_eq!(s.session_workspace(&unknown).await.unwrap(), None);
    let owed = s.list_turn_sessions(vec!["idle".into(), "running".into()], 100, None).await.unwrap();
    assert_eq!(owed.items, vec![(a, id)]);
}

pub async fn session_bodies_reference_only_their_workspace(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (a, b) = two_workspaces(&*s).await;
    let env = environment(&*s, false).await;
    let agent_of_b = agent_in(&*s, &b).await;
    let unknown_agent = AgentId::generate();
    let unknown_env = EnvironmentId::generate();

    // A session of A naming B's agent is refused as one naming an unknown agent.
    let theirs = s.create_session(&a, new_session(&agent_of_b, &env)).await;
    let mut unknown = new_session(&agent_of_b, &env);
    unknown.agent.id = unknown_agent.clone();
    let unknown = s.create_session(&a, unknown).await;
    same_refusal("agent of another workspace", theirs, agent_of_b.id.as_str(), unknown, unknown_agent.as_str());

    // A session of B naming A's environment is refused as one naming an unknown environment.
    let theirs = s.create_session(&b, new_session(&agent_of_b, &env)).await;
    let mut unknown = new_session(&agent_of_b, &env);
    unknown.environment = unknown_env.clone();
    let unknown = s.create_session(&b, unknown).await;
    same_refusal("environment of another workspace", theirs, env.id.as_str(), unknown, unknown_env.as_str());

    let everything = ListSessions { include_archived: true, limit: 100, ..ListSessions::default() };
    assert!(s.list_sessions(&a, everything.clone()).await.unwrap().items.is_empty(), "no session was made");
    assert!(s.list_sessions(&b, everything).await.unwrap().items.is_empty(), "no session was made");
}

pub async fn api_keys_are_minted_in_their_workspace(factory: &impl StoreFactory) {
    let s = factory.open(Limits::default()).await;
    let (a, b) = two_workspaces(&*s).await;
    let hash = fresh_hash();
    let key = s.ensure_api_key_in(&b, hash, "of B").await.unwrap();
    let principal = s.resolve_credential(hash).await.unwrap().expect("the key resolves");
    assert_eq!(principal.credential, Credential::ApiKey(key.clone()));
    assert_eq!(principal.workspace, Some(b.clone()));
    // A known secret stays the key it is, in its own workspace.
    assert_eq!(s.ensure_api_key_in(&a, hash, "again").await.unwrap(), key);
    assert_eq!(s.resolve_credential(hash).await.unwrap().unwrap().workspace, Some(b));
}
