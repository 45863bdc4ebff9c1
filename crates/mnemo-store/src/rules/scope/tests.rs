//! One row per rule of the credential scope.

use super::*;

struct World {
    admin: Credential,
    api: Credential,
    env_key: Credential,
    other_env_key: Credential,
    token: Credential,
    healthcheck: Credential,
    env: EnvironmentId,
    other_env: EnvironmentId,
    session: SessionId,
    other_session: SessionId,
    item: WorkId,
    other_item: WorkId,
    store: MemoryStoreId,
}

fn world() -> World {
    let env: EnvironmentId = "env_a".parse().unwrap();
    let other_env: EnvironmentId = "env_b".parse().unwrap();
    let session: SessionId = "sesn_a".parse().unwrap();
    let item: WorkId = "work_a".parse().unwrap();
    World {
        admin: Credential::AdminKey("admkey_a".parse().unwrap()),
        api: Credential::ApiKey("apikey_a".parse().unwrap()),
        env_key: Credential::EnvironmentKey { id: "envkey_a".parse().unwrap(), environment: env.clone() },
        other_env_key: Credential::EnvironmentKey { id: "envkey_b".parse().unwrap(), environment: other_env.clone() },
        token: Credential::SessionToken {
            work: item.clone(),
            session: Some(session.clone()),
            environment: env.clone(),
        },
        healthcheck: Credential::SessionToken { work: item.clone(), session: None, environment: env.clone() },
        env,
        other_env,
        session,
        other_session: "sesn_b".parse().unwrap(),
        item,
        other_item: "work_b".parse().unwrap(),
        store: "memstore_a".parse().unwrap(),
    }
}

fn verdict(d: Decision) -> String {
    match d {
        Decision::Allow => "allow".into(),
        Decision::Unauthenticated(m) => format!("401 {m}"),
        Decision::Forbidden(m) => format!("403 {m}"),
    }
}

#[test]
fn the_scope_of_each_credential() {
    let w = world();
    let memory = |op, attached| Action::Memory { store: &w.store, op, attached };
    let work = |env, item, op| Action::Work { environment: env, item, op };
    let session = |s| Action::Session { session: s, environment: &w.env };
    #[rustfmt::skip]
    let rows: Vec<(&str, Option<&Credential>, Action<'_>, &str)> = vec![
        ("no credential is unauthenticated", None, Action::Administer,
            "401 missing credentials: send `Authorization: Bearer <key>` or `x-api-key: <key>`"),
        ("an API key administers", Some(&w.api), Action::Administer, "allow"),
        ("an admin key does not administer a workspace's resources", Some(&w.admin), Action::Administer,
            "403 an admin key reaches only the Admin API (`/v1/organizations/…`); use an API key of a workspace here"),
        ("nor reaches a session", Some(&w.admin), session(&w.session),
            "403 an admin key reaches only the Admin API (`/v1/organizations/…`); use an API key of a workspace here"),
        ("nor memory", Some(&w.admin), Action::MemoryStores { create: false },
            "403 an admin key reaches only the Admin API (`/v1/organizations/…`); use an API key of a workspace here"),
        ("an admin key reads the audit log", Some(&w.admin), Action::ReadAuditLog, "allow"),
        ("an API key does not", Some(&w.api), Action::ReadAuditLog, "403 the audit log is read with an admin key"),
        ("nor an environment key", Some(&w.env_key), Action::ReadAuditLog, "403 the audit log is read with an admin key"),
        ("nor a sessions token", Some(&w.token), Action::ReadAuditLog, "403 the audit log is read with an admin key"),
        ("nor a work queue", Some(&w.admin), work(&w.env, None, WorkOp::Inspect),
            "403 an admin key reaches only the Admin API (`/v1/organizations/…`); use an API key of a workspace here"),
        ("an environment key does not administer", Some(&w.env_key), Action::Administer,
            "403 this endpoint needs an API key; environment keys and sessions tokens are not accepted here"),
        ("a sessions token does not administer", Some(&w.token), Action::Administer,
            "403 this endpoint needs an API key; environment keys and sessions tokens are not accepted here"),
        ("an API key reaches every session", Some(&w.api), session(&w.other_session), "allow"),
        ("an environment key reaches its environment's sessions", Some(&w.env_key), session(&w.other_session), "allow"),
        ("but not another environment's", Some(&w.other_env_key), session(&w.session),
            "403 this credential does not reach session `sesn_a`"),
        ("a sessions token reaches its own session", Some(&w.token), session(&w.session), "allow"),
        ("but no other", Some(&w.token), session(&w.other_session), "403 this credential does not reach session `sesn_b`"),
        ("an API key lists stores", Some(&w.api), Action::MemoryStores { create: false }, "allow"),
        ("and creates them", Some(&w.api), Action::MemoryStores { create: true }, "allow"),
        ("an API key does anything to a store", Some(&w.api), memory(MemoryOp::Administer, None), "allow"),
        ("an environment key has no memory access", Some(&w.env_key), memory(MemoryOp::Read, None),
            "403 the memory endpoints do not accept an environment key; use an API key or the work item's sessions token"),
        ("a sessions token cannot list stores", Some(&w.token), Action::MemoryStores { create: false },
            "403 a sessions token cannot create or list memory stores"),
        ("an API key searches its workspace", Some(&w.api), Action::SearchMemories, "allow"),
        ("a sessions token searches (its session's stores)", Some(&w.token), Action::SearchMemories, "allow"),
        ("an environment key does not search", Some(&w.env_key), Action::SearchMemories,
            "403 the memory endpoints do not accept an environment key; use an API key or the work item's sessions token"),
        ("nor a healthcheck's token", Some(&w.healthcheck), Action::SearchMemories,
            "403 a healthcheck's sessions token reaches no memory store"),
        ("nor an admin key", Some(&w.admin), Action::SearchMemories,
            "403 an admin key reaches only the Admin API (`/v1/organizations/…`); use an API key of a workspace here"),
        ("a sessions token reads an attached store", Some(&w.token), memory(MemoryOp::Read, Some(Access::ReadOnly)), "allow"),
        ("and writes one attached read-write", Some(&w.token), memory(MemoryOp::WriteMemories, Some(Access::ReadWrite)), "allow"),
        ("but not one attached read-only", Some(&w.token), memory(MemoryOp::WriteMemories, Some(Access::ReadOnly)),
            "403 memory store `memstore_a` is attached read-only to session `sesn_a`; it cannot be written"),
        ("nor a store its session lacks", Some(&w.token), memory(MemoryOp::Read, None),
            "403 memory store `memstore_a` is not attached to session `sesn_a`, which this sessions token is scoped to"),
        ("nor administers a store", Some(&w.token), memory(MemoryOp::Administer, Some(Access::ReadWrite)),
            "403 a sessions token cannot change a memory store or redact its versions"),
        ("an environment key polls its queue", Some(&w.env_key), work(&w.env, None, WorkOp::Take), "allow"),
        ("not another's", Some(&w.env_key), work(&w.other_env, None, WorkOp::Take), "403 this call needs this environment's key"),
        ("an API key does not poll", Some(&w.api), work(&w.env, None, WorkOp::Take), "403 this call needs this environment's key"),
        ("a sessions token does not poll", Some(&w.token), work(&w.env, None, WorkOp::Take), "403 this call needs this environment's key"),
        ("a sessions token heartbeats its item", Some(&w.token), work(&w.env, Some(&w.item), WorkOp::Heartbeat), "allow"),
        ("not another item", Some(&w.token), work(&w.env, Some(&w.other_item), WorkOp::Heartbeat),
            "403 this call needs this environment's key or this work item's sessions token"),
        ("an environment key heartbeats its items", Some(&w.env_key), work(&w.env, Some(&w.other_item), WorkOp::Heartbeat), "allow"),
        ("an API key does not heartbeat", Some(&w.api), work(&w.env, Some(&w.item), WorkOp::Heartbeat),
            "403 this call needs this environment's key or this work item's sessions token"),
        ("a sessions token stops its item", Some(&w.token), work(&w.env, Some(&w.item), WorkOp::Stop), "allow"),
        ("an API key stops any item", Some(&w.api), work(&w.other_env, Some(&w.item), WorkOp::Stop), "allow"),
        ("a sessions token does not inspect the queue", Some(&w.token), work(&w.env, None, WorkOp::Inspect),
            "403 this call needs an API key, this environment's key or this work item's sessions token"),
        ("an environment key inspects its queue", Some(&w.env_key), work(&w.env, None, WorkOp::Inspect), "allow"),
        ("only an API key manages items", Some(&w.env_key), work(&w.env, Some(&w.item), WorkOp::Manage), "403 this call needs an API key"),
        ("an API key manages items", Some(&w.api), work(&w.env, Some(&w.item), WorkOp::Manage), "allow"),
        ("a healthcheck's token stops its item", Some(&w.healthcheck), work(&w.env, Some(&w.item), WorkOp::Stop), "allow"),
        ("but reaches no session", Some(&w.healthcheck), session(&w.session),
            "403 this credential does not reach session `sesn_a`"),
        ("nor any memory", Some(&w.healthcheck), memory(MemoryOp::Read, None),
            "403 a healthcheck's sessions token reaches no memory store"),
    ];
    for (rule, caller, action, expected) in rows {
        assert_eq!(verdict(decide(caller, action)), expected, "rule: {rule}");
    }
}

#[test]
fn who_posts_as_the_agent_and_who_needs_a_lookup() {
    let w = world();
    assert!(matches!(event_author(&w.api), Some(EventAuthor::ApiKey(_))));
    assert!(matches!(event_author(&w.env_key), Some(EventAuthor::EnvironmentKey(_))));
    assert_eq!(
        event_author(&w.token),
        Some(EventAuthor::SessionToken { session: w.session.clone(), work: w.item.clone() })
    );
    assert_eq!(event_author(&w.healthcheck), None, "a healthcheck's token posts to no session");
    assert_eq!(attachment_lookup(&w.token), Some(&w.session));
    assert_eq!(attachment_lookup(&w.api), None);
    assert_eq!(memory_actor(&w.token), Some(Actor::SessionActor { session_id: w.session.clone() }));
    assert!(matches!(memory_actor(&w.api), Some(Actor::ApiActor { .. })));
    assert_eq!(memory_actor(&w.env_key), None, "an environment key writes no memory");
    assert_eq!(memory_actor(&w.healthcheck), None, "nor does a healthcheck's token");
    assert_eq!(memory_actor(&w.admin), None, "nor an admin key");
    assert_eq!(event_author(&w.admin), None, "an admin key posts to no session");
}

#[test]
fn who_reaches_the_admin_api() {
    let w = world();
    let api_key_refused = format!("403 {ADMIN_API_NEEDS_ADMIN_KEY}");
    let worker_refused = "403 environment keys and sessions tokens do not reach the Admin API".to_owned();
    let ops =
        [OrgOp::ReadOrganization, OrgOp::Workspaces, OrgOp::ApiKeys, OrgOp::RateLimits, OrgOp::People, OrgOp::Members];
    // (credential kind, credential, what it gets for each op in `ops` order)
    #[rustfmt::skip]
    let rows: Vec<(&str, Option<&Credential>, [String; 6])> = vec![
        ("no credential", None, std::array::from_fn(|_| "401 missing credentials: send `Authorization: Bearer <key>` or `x-api-key: <key>`".to_owned())),
        ("admin key", Some(&w.admin), std::array::from_fn(|_| "allow".to_owned())),
        ("API key", Some(&w.api), std::array::from_fn(|i| if i == 0 { "allow".to_owned() } else { api_key_refused.clone() })),
        ("environment key", Some(&w.env_key), std::array::from_fn(|_| worker_refused.clone())),
        ("sessions token", Some(&w.token), std::array::from_fn(|_| worker_refused.clone())),
        ("healthcheck token", Some(&w.healthcheck), std::array::from_fn(|_| worker_refused.clone())),
    ];
    for (kind, caller, expected) in rows {
        for (op, want) in ops.iter().zip(expected) {
            assert_eq!(verdict(decide(caller, Action::Organization(*op))), want, "{kind} × {op:?}");
        }
    }
}

#[test]
fn an_admin_key_reaches_only_the_admin_api() {
    let w = world();
    let others = [&w.api, &w.env_key, &w.token, &w.healthcheck];
    for (caller, admin_api, allowed) in [(&w.admin, true, true), (&w.admin, false, false)]
        .into_iter()
        .chain(others.iter().flat_map(|c| [(*c, true, true), (*c, false, true)]))
    {
        let decision = reach(caller, admin_api);
        assert_eq!(matches!(decision, Decision::Allow), allowed, "{caller:?} admin_api={admin_api}: {decision:?}");
    }
    assert!(matches!(reach(&w.admin, false), Decision::Forbidden(m) if m == ADMIN_KEY_OUTSIDE_ADMIN_API));
}

fn person(org: OrgRole, workspace: WorkspaceRole) -> Credential {
    Credential::Person { user: "user_a".parse().unwrap(), role: PersonRole { org, workspace } }
}

/// The roles table of admin-api.md §8.6, one row per role, one column per action.
#[test]
fn what_each_role_of_a_person_may_do() {
    use OrgRole::*;
    use WorkspaceRole::*;
    let w = world();
    let actions: Vec<(&str, Action<'_>)> = vec![
        ("read org", Action::Organization(OrgOp::ReadOrganization)),
        ("list stores", Action::MemoryStores { create: false }),
        ("read memory", Action::Memory { store: &w.store, op: MemoryOp::Read, attached: None }),
        ("inspect", Action::Inspect),
        ("transcript", Action::Session { session: &w.session, environment: &w.env }),
        ("create store", Action::MemoryStores { create: true }),
        ("write memory", Action::Memory { store: &w.store, op: MemoryOp::WriteMemories, attached: None }),
        ("redact", Action::Memory { store: &w.store, op: MemoryOp::Administer, attached: None }),
        ("administer", Action::Administer),
        ("stop work", Action::Work { environment: &w.env, item: Some(&w.item), op: WorkOp::Stop }),
        ("api keys", Action::Workspace(WorkspaceOp::ApiKeys)),
        ("members", Action::Workspace(WorkspaceOp::Members)),
        ("settings", Action::Workspace(WorkspaceOp::Settings)),
        ("people", Action::Organization(OrgOp::People)),
        ("workspaces", Action::Organization(OrgOp::Workspaces)),
        ("org api keys", Action::Organization(OrgOp::ApiKeys)),
        ("audit log", Action::ReadAuditLog),
        ("poll", Action::Work { environment: &w.env, item: None, op: WorkOp::Take }),
    ];
    // 'y' allowed, '.' refused, in `actions` order.
    #[rustfmt::skip]
    let rows: &[(&str, OrgRole, WorkspaceRole, &str)] = &[
        ("workspace_user",          User,      WorkspaceUser,                "yyyy.............."),
        ("workspace_billing",       Billing,   WorkspaceBilling,             "yyyy.............."),
        ("restricted developer",    Developer, WorkspaceRestrictedDeveloper, "yyyy.yyyyyy......."),
        ("developer",               Developer, WorkspaceDeveloper,           "yyyyyyyyyyy......."),
        ("workspace_admin",         User,      WorkspaceAdmin,               "yyyyyyyyyyyyy....."),
        ("org admin",               Admin,     WorkspaceAdmin,               "yyyyyyyyyyyyyyyyy."),
        ("org admin, any row",      Admin,     WorkspaceUser,                "yyyyyyyyyyyyyyyyy."),
    ];
    for (rule, org, ws, want) in rows {
        let caller = person(*org, *ws);
        let got: String =
            actions.iter().map(|(_, a)| if decide(Some(&caller), *a) == Decision::Allow { 'y' } else { '.' }).collect();
        let named: Vec<_> = actions.iter().map(|(n, _)| *n).collect();
        assert_eq!(&got, want, "rule: {rule}; columns: {named:?}");
    }
}

#[test]
fn a_person_is_refused_in_words_naming_their_role() {
    let w = world();
    let user = person(OrgRole::User, WorkspaceRole::WorkspaceUser);
    let write = Action::Memory { store: &w.store, op: MemoryOp::WriteMemories, attached: None };
    assert_eq!(
        verdict(decide(Some(&user), write)),
        "403 your role in this workspace (workspace_user) does not let you change this workspace's memories, stores, agents, environments or sessions"
    );
    let dev = person(OrgRole::Developer, WorkspaceRole::WorkspaceDeveloper);
    assert_eq!(
        verdict(decide(Some(&dev), Action::Organization(OrgOp::People))),
        "403 your role does not let you manage the organization (workspaces, people, invites, admin keys); only an org admin may"
    );
    assert_eq!(
        verdict(decide(Some(&dev), Action::Work { environment: &w.env, item: None, op: WorkOp::Take })),
        "403 this call needs this environment's key or this work item's sessions token"
    );
    assert!(matches!(reach(&dev, false), Decision::Allow) && matches!(reach(&dev, true), Decision::Allow));
}

#[test]
fn a_person_writes_as_themselves() {
    let dev = person(OrgRole::Developer, WorkspaceRole::WorkspaceDeveloper);
    assert_eq!(memory_actor(&dev), Some(Actor::UserActor { user_id: "user_a".into() }));
    assert_eq!(attachment_lookup(&dev), None);
    assert_eq!(event_author(&dev), Some(EventAuthor::Person("user_a".parse().unwrap())));
}

#[test]
fn workspace_management_without_a_person() {
    let w = world();
    let rows: Vec<(&Credential, WorkspaceOp, &str)> = vec![
        (&w.api, WorkspaceOp::ApiKeys, "allow"),
        (&w.api, WorkspaceOp::Members, "403 an API key does not manage a workspace's members or settings"),
        (&w.api, WorkspaceOp::Settings, "403 an API key does not manage a workspace's members or settings"),
        (
            &w.admin,
            WorkspaceOp::ApiKeys,
            "403 an admin key reaches only the Admin API (`/v1/organizations/…`); use an API key of a workspace here",
        ),
        (&w.env_key, WorkspaceOp::ApiKeys, "403 environment keys and sessions tokens do not manage a workspace"),
        (&w.token, WorkspaceOp::Members, "403 environment keys and sessions tokens do not manage a workspace"),
    ];
    for (caller, op, want) in rows {
        assert_eq!(verdict(decide(Some(caller), Action::Workspace(op))), want, "{caller:?} × {op:?}");
    }
    // Inspecting is administering's reading half: the same callers, the same words.
    for caller in [&w.api, &w.env_key, &w.token, &w.admin] {
        assert_eq!(verdict(decide(Some(caller), Action::Inspect)), verdict(decide(Some(caller), Action::Administer)));
    }
}

/// On the Admin API a person who is not an org admin is judged by their role in the workspace
/// an operation is about, on the row of that workspace's table the operation falls under.
#[test]
fn who_is_judged_by_their_role_in_a_workspace_on_the_admin_api() {
    let w = world();
    let dev = person(OrgRole::Developer, WorkspaceRole::WorkspaceDeveloper);
    let admin = person(OrgRole::Admin, WorkspaceRole::WorkspaceAdmin);
    assert_eq!(judged_in_workspace(&dev).map(|u| u.to_string()), Some("user_a".to_owned()));
    for other in [&admin, &w.admin, &w.api, &w.env_key, &w.token] {
        assert_eq!(judged_in_workspace(other), None, "{other:?}");
    }
    let rows: &[(OrgOp, Option<WorkspaceOp>)] = &[
        (OrgOp::ApiKeys, Some(WorkspaceOp::ApiKeys)),
        (OrgOp::Members, Some(WorkspaceOp::Members)),
        (OrgOp::RateLimits, Some(WorkspaceOp::Settings)),
        (OrgOp::ReadOrganization, None),
        (OrgOp::Workspaces, None),
        (OrgOp::People, None),
    ];
    for (op, want) in rows {
        assert_eq!(workspace_row(*op), *want, "{op:?}");
    }
}
