//! One row per rule of the catalog.

use mnemo_api::{Access, AgentId, AgentSpec};
use serde_json::json;

use super::*;
use crate::{AgentRef, Attachment};

fn environment(archived: bool) -> Environment {
    serde_json::from_value(json!({
        "type": "environment", "id": "env_e", "name": "e", "description": null, "metadata": {"a": "1"},
        "config": {"type": "self_hosted"}, "scope": "organization",
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        "archived_at": if archived { json!("2026-01-02T00:00:00Z") } else { json!(null) },
    }))
    .unwrap()
}

fn store(id: &str, name: &str, archived: bool) -> MemoryStore {
    serde_json::from_value(json!({
        "type": "memory_store", "id": id, "name": name, "description": "", "metadata": {},
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        "archived_at": if archived { json!("2026-01-02T00:00:00Z") } else { json!(null) },
    }))
    .unwrap()
}

fn agent(archived: bool) -> Agent {
    let spec = AgentSpec::from_params(&AgentParams {
        name: Some("a".into()),
        model: Some(json!("claude-opus-4-6")),
        ..Default::default()
    })
    .unwrap();
    Agent {
        id: "agent_a".parse::<AgentId>().unwrap(),
        version: 2,
        spec,
        created_at: Default::default(),
        updated_at: Default::default(),
        archived_at: archived.then(Default::default),
    }
}

fn new_session(stores: &[&str]) -> NewSession {
    NewSession {
        agent: AgentRef { id: "agent_a".parse().unwrap(), version: None, overrides: None },
        environment: "env_e".parse().unwrap(),
        attachments: stores
            .iter()
            .map(|s| Attachment { store: s.parse().unwrap(), access: Access::ReadWrite, instructions: None })
            .collect(),
        title: None,
        metadata: BTreeMap::new(),
        budget: None,
        initial_events: vec![],
        poster: mnemo_api::EventPoster::ServerActor,
        mount_root: "/mnt/memory".into(),
    }
}

fn outcome<T>(r: Result<T, StoreError>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// A rule, the request, what its references resolve to, and the refusal.
type Refusal =
    (&'static str, NewSession, Option<Environment>, Result<Agent, StoreError>, Vec<Option<MemoryStore>>, &'static str);

#[test]
fn sessions_are_planned_from_what_their_references_resolve_to() {
    let env = environment(false);
    let two = [Some(store("memstore_a", "Notes", false)), Some(store("memstore_b", "notes", false))];
    #[rustfmt::skip]
    let refusals: Vec<Refusal> = vec![
        ("an unknown environment", new_session(&[]), None, Ok(agent(false)), vec![], "environment `env_e` not found"),
        ("an archived environment", new_session(&[]), Some(environment(true)), Ok(agent(false)), vec![],
            "environment `env_e` is archived; it takes no new sessions"),
        ("an unknown agent", new_session(&[]), Some(env.clone()), Err(StoreError::not_found("agent", &"agent_a")), vec![],
            "agent `agent_a` not found"),
        ("an archived agent", new_session(&[]), Some(env.clone()), Ok(agent(true)), vec![],
            "agent `agent_a` is archived; it takes no new sessions"),
        ("a store attached twice", new_session(&["memstore_a", "memstore_a"]), Some(env.clone()), Ok(agent(false)),
            vec![two[0].clone(), two[0].clone()], "memory store `memstore_a` is attached twice"),
        ("an unknown store", new_session(&["memstore_a"]), Some(env.clone()), Ok(agent(false)), vec![None],
            "memory store `memstore_a` not found"),
        ("an archived store", new_session(&["memstore_a"]), Some(env.clone()), Ok(agent(false)),
            vec![Some(store("memstore_a", "n", true))], "memory store `memstore_a` is archived and cannot be attached"),
    ];
    for (rule, new, env, agent, stores, expected) in refusals {
        let got = outcome(plan_session(&new, env.as_ref(), agent, &stores)).map(|_| ());
        assert_eq!(got, Err(expected.to_owned()), "rule: {rule}");
    }
    let plan = plan_session(&new_session(&["memstore_a", "memstore_b"]), Some(&env), Ok(agent(false)), &two).unwrap();
    let paths: Vec<_> = plan.resources.iter().map(|r| r.mount_path.clone().unwrap()).collect();
    assert_eq!(paths, ["/mnt/memory/notes", "/mnt/memory/notes-2"], "colliding names get distinct mount paths");
    assert_eq!(plan.agent["version"], 2);
    assert!(plan.enqueue_work, "a self-hosted environment queues work");
    assert!(plan.memory_prompt.unwrap().contains("/mnt/memory/notes-2"));
}

#[test]
fn environments_stores_agents_and_sessions_change_by_their_rules() {
    let env = environment(false);
    let patch = |config: Option<Value>, metadata: Option<BTreeMap<String, Option<String>>>| EnvironmentPatch {
        config,
        metadata,
        ..Default::default()
    };
    assert_eq!(
        outcome(update_environment(&environment(true), patch(None, None))).unwrap_err(),
        "environment `env_e` is archived and cannot be updated"
    );
    let err = update_environment(&env, patch(Some(json!({"type": "cloud"})), None)).unwrap_err();
    assert!(matches!(err, StoreError::Coded { code: ErrorCode::InvalidConfigTypeChange, .. }));
    let cleared = BTreeMap::from([("a".to_owned(), Some(String::new())), ("b".to_owned(), Some("2".to_owned()))]);
    let updated = update_environment(&env, patch(None, Some(cleared))).unwrap();
    assert_eq!(updated.metadata, BTreeMap::from([("b".to_owned(), "2".to_owned())]), "an empty value removes a key");
    let too_many: BTreeMap<String, Option<String>> = (0..17).map(|i| (format!("k{i}"), Some("v".into()))).collect();
    let err = update_environment(&env, patch(None, Some(too_many))).unwrap_err();
    assert!(matches!(err, StoreError::Coded { code: ErrorCode::InvalidMetadata, .. }));

    assert!(check_takes_keys(&env).is_ok());
    assert!(matches!(
        check_takes_keys(&environment(true)),
        Err(StoreError::Coded { code: ErrorCode::EnvironmentArchived, .. })
    ));
    let key: EnvironmentKey = serde_json::from_value(json!({
        "type": "environment_key", "id": "envkey_k", "environment_id": "env_e", "created_at": "t", "revoked_at": null,
    }))
    .unwrap();
    assert!(check_key_of(&key, &"env_e".parse().unwrap()).is_ok());
    assert_eq!(
        outcome(check_key_of(&key, &"env_other".parse().unwrap())).unwrap_err(),
        "environment key `envkey_k` not found"
    );

    let renamed = MemoryStorePatch { name: Some("new".into()), ..Default::default() };
    assert_eq!(update_store(&store("memstore_a", "old", false), renamed.clone()).unwrap().name, "new");
    assert!(matches!(update_store(&store("memstore_a", "old", true), renamed), Err(StoreError::Archived(_))));

    let params = AgentParams { name: Some("b".into()), ..Default::default() };
    assert!(update_agent(&agent(false), 2, &params).unwrap().is_some(), "a change makes a version");
    let same = AgentParams { name: Some("a".into()), ..Default::default() };
    assert!(update_agent(&agent(false), 2, &same).unwrap().is_none(), "no change, no version");
    assert!(matches!(update_agent(&agent(false), 1, &params), Err(StoreError::Conflict(_))), "a stale base");
    assert!(matches!(update_agent(&agent(true), 2, &params), Err(StoreError::Invalid(_))), "an archived agent");
}
