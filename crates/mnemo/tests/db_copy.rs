//! `mnemo db copy` end to end: a deployment with every kind of object, filled through the
//! `Store` trait, copied by the real binary SQLite → PostgreSQL → SQLite (and SQLite → SQLite),
//! then read back through the `Store` trait and row by row.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use mnemo_api::{
    Access, Actor, AgentParams, AgentSpec, DEFAULT_MEMORY_MOUNT_ROOT, Event, MemoryPath, PathPrefix, View,
};
use mnemo_store::{
    AgentRef, Attachment, CredentialHash, EventAuthor, HeartbeatOutcome, ListMemories, ListMemoryStores,
    ListMemoryVersions, ListSessions, MemoryChange, NewEnvironment, NewMemoryStore, NewSession, Store,
};
use mnemo_store_sqlite::{Durability, SqliteSettings, SqliteStore};
use serde_json::json;

/// Every table, with the order that lists its rows by primary key.
const TABLES: &[(&str, &str)] = &[
    ("api_keys", "seq"),
    ("console_sessions", "seq"),
    ("memory_stores", "seq"),
    ("memory_versions", "seq"),
    ("memories", "seq"),
    ("environments", "seq"),
    ("environment_keys", "seq"),
    ("agents", "seq"),
    ("agent_versions", "agent_seq, version"),
    ("sessions", "seq"),
    ("session_memory_stores", "session_seq, memory_store_id"),
    ("session_events", "seq"),
    ("work_items", "seq"),
    ("session_tokens", "seq"),
    ("worker_polls", "environment_seq, worker_id"),
    ("webhook_endpoints", "seq"),
    ("webhook_events", "seq"),
    ("webhook_deliveries", "seq"),
    ("organization", "id"),
    ("workspaces", "seq"),
    ("workspace_rate_limits", "workspace_id, entry_id, limiter"),
    ("rate_limit_buckets", "workspace_id, entry_id, limiter"),
    ("admin_keys", "seq"),
    ("users", "seq"),
    ("invites", "seq"),
    ("workspace_members", "seq"),
    ("setup_links", "seq"),
    ("person_sessions", "seq"),
    ("sso_identities", "seq"),
    ("audit_events", "seq"),
    ("dreams", "seq"),
];

fn hash(n: u8) -> CredentialHash {
    let mut h = [0x5A; 32];
    h[0] = n;
    h
}

const API_KEY: u8 = 1;
const REVOKED_ENV_KEY: u8 = 2;
const LIVE_ENV_KEY: u8 = 3;
const SESSION_TOKEN: u8 = 4;
const CONSOLE_SESSION: u8 = 5;
const SIGNED_OUT: u8 = 6;
const ADMIN_KEY: u8 = 7;
const TEAM_KEY: u8 = 8;
const SETUP_LINK: u8 = 12;
const ACCEPTED_INVITE: u8 = 13;
const PENDING_INVITE: u8 = 14;
const PERSON_SESSION: u8 = 15;
const PERSON_SIGNED_OUT: u8 = 16;
const HASHES: [u8; 7] = [API_KEY, REVOKED_ENV_KEY, LIVE_ENV_KEY, SESSION_TOKEN, ADMIN_KEY, TEAM_KEY, 9];

fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

fn open_sqlite(path: &Path) -> SqliteStore {
    let mut settings = SqliteSettings::from_url(&sqlite_url(path)).unwrap();
    settings.durability = Durability::Normal;
    SqliteStore::open(&settings).unwrap()
}

fn event(v: serde_json::Value) -> Event {
    Event::parse(v).unwrap()
}

fn path(p: &str) -> MemoryPath {
    MemoryPath::parse(p).unwrap()
}

/// A deployment with at least one row in every table.
async fn fill(s: &dyn Store) {
    let ws = s.default_workspace().await.unwrap();
    let api_key = s.ensure_api_key(hash(API_KEY), "admin").await.unwrap();
    s.create_console_session(hash(CONSOLE_SESSION), &api_key, 86_400).await.unwrap();
    s.create_console_session(hash(SIGNED_OUT), &api_key, 86_400).await.unwrap();
    s.revoke_console_session(hash(SIGNED_OUT)).await.unwrap();
    // Tenancy: an admin key, and a second workspace with its own key and store.
    s.ensure_admin_key(hash(ADMIN_KEY), "ops").await.unwrap();
    let team = s.create_workspace("Team B").await.unwrap();
    s.ensure_api_key_in(&team, hash(TEAM_KEY), "team").await.unwrap();
    let theirs = NewMemoryStore { name: "B's".into(), description: String::new(), metadata: BTreeMap::new() };
    s.create_memory_store(&team, theirs).await.unwrap();
    let entry = mnemo_store::rules::rate_limit::catalogue(&[]).remove(0);
    let limit = serde_json::from_value(json!({"limits": [{"type": "requests_per_minute", "value": 30}]})).unwrap();
    s.update_workspace_rate_limits(&team, entry, limit).await.unwrap();
    let rpm = mnemo_api::LimiterType::RequestsPerMinute;
    s.take_rate_limit(
        &team,
        mnemo_store::rules::rate_limit::MANAGED_AGENTS_ENTRY_ID,
        &rpm,
        30,
        mnemo_store::rules::rate_limit::Draw::One,
    )
    .await
    .unwrap();
    s.record_audit_event(mnemo_store::ops::NewAuditEvent {
        action: mnemo_store::rules::audit::AuditAction::WorkspaceCreate,
        workspace: None,
        actor: mnemo_api::AuditActor { kind: mnemo_api::AuditActorType::AdminKey, id: "admkey_x".into() },
        resource: Some(mnemo_api::AuditResource { kind: "workspace".into(), id: team.to_string() }),
        client_ip: Some("127.0.0.1".into()),
        outcome: mnemo_api::AuditOutcome::Success,
        details: json!({"name": "Team B"}),
    })
    .await
    .unwrap();
    // People: the first admin by a setup link, a developer by an accepted invite and a member of
    // Team B, and a pending invite.
    let joining =
        |name: &str| mnemo_store::ops::people::Joining { name: name.into(), password_hash: "$argon2id$x".into() };
    s.create_setup_link(hash(SETUP_LINK), 86_400).await.unwrap();
    s.use_setup_link(hash(SETUP_LINK), "root@example.com".into(), joining("Root")).await.unwrap();
    let dev = mnemo_api::NewInvite { email: "dev@example.com".into(), role: mnemo_api::OrgRole::Developer };
    s.create_invite(dev, hash(ACCEPTED_INVITE), 86_400).await.unwrap();
    let dev = s.accept_invite(hash(ACCEPTED_INVITE), joining("Dev")).await.unwrap();
    let member = mnemo_api::MemberAdd { user_id: dev.id.to_string(), workspace_role: "workspace_developer".into() };
    s.add_member(&team, member).await.unwrap();
    let pending = mnemo_api::NewInvite { email: "new@example.com".into(), role: mnemo_api::OrgRole::User };
    s.create_invite(pending, hash(PENDING_INVITE), 86_400).await.unwrap();
    // The developer signed in to the console twice and signed out of one.
    s.create_person_session(hash(PERSON_SESSION), &dev.id, 86_400).await.unwrap();
    s.create_person_session(hash(PERSON_SIGNED_OUT), &dev.id, 86_400).await.unwrap();
    s.revoke_person_session(hash(PERSON_SIGNED_OUT)).await.unwrap();
    // A person who signed in through the identity provider, a member of Team B by a group.
    let sso = mnemo_store::ops::sso::SsoIdentity {
        issuer: "https://idp.example.com".into(),
        subject: "sub-1".into(),
        email: Some("sso@example.com".into()),
        name: Some("Sso".into()),
    };
    let grants = mnemo_store::rules::sso::Grants {
        org_role: mnemo_api::OrgRole::User,
        workspaces: [(team.clone(), mnemo_api::WorkspaceRole::WorkspaceUser)].into(),
    };
    s.sso_sign_in(sso, grants).await.unwrap();
    let by_key = Actor::ApiActor { api_key_id: api_key };
    // Every change below is recorded for this endpoint (a delivery each).
    s.create_webhook_endpoint(
        &ws,
        mnemo_store::NewWebhookEndpoint {
            url: "https://hooks.example.com/mnemo".into(),
            event_types: None,
            description: Some("ops".into()),
            secret: mnemo_api::generate_webhook_secret().into(),
        },
    )
    .await
    .unwrap();

    let notes = s
        .create_memory_store(
            &ws,
            NewMemoryStore {
                name: "Team Notes".into(),
                description: "what the team knows".into(),
                metadata: [("team".to_owned(), "core".to_owned())].into(),
            },
        )
        .await
        .unwrap();
    let old = s
        .create_memory_store(
            &ws,
            NewMemoryStore { name: "Old".into(), description: String::new(), metadata: BTreeMap::new() },
        )
        .await
        .unwrap();
    s.create_memory(&ws, &old.id, path("/kept.md"), "from before".into(), by_key.clone()).await.unwrap();

    let env = s
        .create_environment(
            &ws,
            NewEnvironment {
                name: "hosts".into(),
                description: Some("our machines".into()),
                metadata: BTreeMap::new(),
                config: json!({"type": "self_hosted"}),
                scope: None,
            },
        )
        .await
        .unwrap();
    let revoked = s.create_environment_key(&ws, &env.id, hash(REVOKED_ENV_KEY)).await.unwrap();
    s.revoke_environment_key(&ws, &env.id, &revoked.id).await.unwrap();
    s.create_environment_key(&ws, &env.id, hash(LIVE_ENV_KEY)).await.unwrap();

    let params: AgentParams = serde_json::from_value(json!({
        "name": "copier",
        "model": "claude-opus-4-6",
        "tools": [{"type": "agent_toolset_20260401"}],
    }))
    .unwrap();
    let agent =
        s.create_agent(&s.default_workspace().await.unwrap(), AgentSpec::from_params(&params).unwrap()).await.unwrap();
    s.update_agent(
        &s.default_workspace().await.unwrap(),
        &agent.id,
        1,
        AgentParams { system: Some(Some("be brief".into())), ..Default::default() },
    )
    .await
    .unwrap();

    // One delivery attempted and delivered, the rest pending.
    let sent = s.claim_webhook_deliveries(1, std::time::Duration::from_secs(60)).await.unwrap().remove(0);
    let delivered = mnemo_store::WebhookAttempt {
        delivery: sent.id,
        attempt: sent.attempt,
        status_code: Some(204),
        error: None,
        next: mnemo_store::rules::webhook::Next::Delivered,
    };
    assert!(s.finish_webhook_attempt(delivered).await.unwrap());

    let session = s
        .create_session(
            &s.default_workspace().await.unwrap(),
            NewSession {
                agent: AgentRef { id: agent.id.clone(), version: Some(1), overrides: None },
                environment: env.id.clone(),
                attachments: vec![
                    Attachment {
                        store: notes.id.clone(),
                        access: Access::ReadWrite,
                        instructions: Some("tidy".into()),
                    },
                    Attachment { store: old.id.clone(), access: Access::ReadOnly, instructions: None },
                ],
                title: Some("copy me".into()),
                metadata: [("ticket".to_owned(), "42".to_owned())].into(),
                budget: None,
                initial_events: vec![event(
                    json!({"type": "user.message", "content": [{"type": "text", "text": "hello"}]}),
                )],
                poster: mnemo_api::EventPoster::ApiActor { api_key_id: "apikey_person".parse().unwrap() },
                mount_root: DEFAULT_MEMORY_MOUNT_ROOT.into(),
            },
        )
        .await
        .unwrap();
    s.archive_memory_store(&ws, &old.id).await.unwrap();

    // The worker takes the session's item, acknowledges it and beats once.
    let work = s.poll_work(&ws, &env.id, Some("host-1".into()), 60_000, hash(SESSION_TOKEN)).await.unwrap().unwrap();
    s.ack_work(&ws, &env.id, &work.id).await.unwrap();
    let HeartbeatOutcome::Beat(_) =
        s.heartbeat_work(&ws, &env.id, &work.id, mnemo_api::NO_HEARTBEAT, Some(600)).await.unwrap()
    else {
        panic!("the first heartbeat beats")
    };

    // A tool call, answered.
    let by_session = Actor::SessionActor { session_id: session.id.clone() };
    let call = s
        .append_events(
            &s.default_workspace().await.unwrap(),
            &session.id,
            vec![
                event(json!({"type": "agent.message", "content": [{"type": "text", "text": "let me look"}]})),
                event(
                    json!({"type": "agent.tool_use", "name": "read", "input": {"path": "/mnt/memory/team-notes/a.md"}}),
                ),
            ],
            EventAuthor::Server,
        )
        .await
        .unwrap();
    let call_id = call.recorded[1].event.id.clone();
    s.append_events(
        &ws,
        &session.id,
        vec![event(json!({
            "type": "user.tool_result", "tool_use_id": call_id, "content": [{"type": "text", "text": "v1"}], "is_error": false,
        }))],
        EventAuthor::ApiKey("apikey_person".parse().unwrap()),
    )
    .await
    .unwrap();

    // A memory with several versions (by the key and by the session, content the PostgreSQL
    // backend keeps as bytes), the first redacted; and a deleted memory.
    let memory = s.create_memory(&ws, &notes.id, path("/a.md"), "v1".into(), by_key.clone()).await.unwrap();
    let change = |content: &str, to: Option<&str>| MemoryChange {
        content: Some(content.into()),
        path: to.map(path),
        expected_sha256: None,
    };
    s.update_memory(&ws, &notes.id, &memory.id, change("v2 with a NUL \0 and é", None), by_session.clone())
        .await
        .unwrap();
    s.update_memory(&ws, &notes.id, &memory.id, change("v3", Some("/docs/a.md")), by_key.clone()).await.unwrap();
    let gone = s.create_memory(&ws, &notes.id, path("/scratch.md"), "tmp".into(), by_session.clone()).await.unwrap();
    s.delete_memory(&ws, &notes.id, &gone.id, None, by_session).await.unwrap();
    let mut query = versions_query();
    query.memory_id = Some(memory.id.clone());
    let first = s.list_memory_versions(&ws, &notes.id, query).await.unwrap().items.pop().unwrap();
    assert_eq!(first.operation, mnemo_api::Operation::Created);
    s.redact_memory_version(&ws, &notes.id, &first.id, by_key).await.unwrap();

    // A dream over the store and the session, claimed by a runner (its lease), then canceled.
    let request = mnemo_api::DreamRequest {
        store: notes.id.clone(),
        sessions: vec![session.id.clone()],
        model: "dreamer".into(),
        instructions: Some("merge é".into()),
        update_existing: false,
    };
    let dream = s.create_dream(&ws, request, Some(("key-1".into(), "sha".into())), 9).await.unwrap();
    s.claim_dream("runner", std::time::Duration::from_secs(3600), 2).await.unwrap().unwrap();
    s.cancel_dream(&ws, &dream.id).await.unwrap();
}

fn versions_query() -> ListMemoryVersions {
    ListMemoryVersions::newest(100)
}

/// Everything the `Store` trait shows of a deployment, one line per answer.
async fn snapshot(s: &dyn Store) -> Vec<String> {
    let ws = s.default_workspace().await.unwrap();
    let mut out = Vec::new();
    let mut line = |what: &str, value: &dyn std::fmt::Debug| out.push(format!("{what}: {value:?}"));
    line("api keys", &s.count_api_keys().await.unwrap());
    for n in HASHES {
        line("credential", &s.resolve_credential(hash(n)).await.unwrap());
    }
    for n in [CONSOLE_SESSION, SIGNED_OUT] {
        line("console session", &s.find_console_session(hash(n)).await.unwrap());
    }
    for n in [PERSON_SESSION, PERSON_SIGNED_OUT] {
        line("person session", &s.find_person_session(hash(n)).await.unwrap());
    }
    let page = || mnemo_api::AdminPageQuery { limit: 100, cursor: mnemo_api::AdminCursor::Start };
    let users = mnemo_store::ops::people::ListUsers { email: None, roles: vec![], page: page() };
    line("users", &s.list_users(users).await.unwrap().data);
    let statuses = mnemo_api::InviteStatus::ALL.to_vec();
    let invites = mnemo_store::ops::people::ListInvites { email: None, roles: vec![], statuses, page: page() };
    line("invites", &s.list_invites(invites).await.unwrap().data);
    line("sso person", &s.sso_person("https://idp.example.com".into(), "sub-1".into()).await.unwrap());
    for n in [SETUP_LINK, PENDING_INVITE] {
        line("link", &(s.setup_link_usable(hash(n)).await.unwrap(), s.invite_by_link(hash(n)).await.unwrap()));
    }
    let stores = s
        .list_memory_stores(
            &ws,
            ListMemoryStores {
                include_archived: true,
                created_at_gte: None,
                created_at_lte: None,
                limit: 100,
                after: None,
            },
        )
        .await
        .unwrap();
    assert!(stores.next.is_none());
    for store in &stores.items {
        line("store", store);
        line("change seq", &s.memory_change_seq(&ws, &store.id).await.unwrap());
        let memories = s
            .list_memories(
                &ws,
                &store.id,
                ListMemories { prefix: PathPrefix::root(), depth: 0, limit: 20, view: View::Full, after: None },
            )
            .await
            .unwrap();
        assert!(memories.next.is_none());
        line("memories", &memories.items);
        // The search index is derived data, rebuilt on the target as the memories are written.
        for item in &memories.items {
            let mnemo_api::MemoryListItem::Memory(m) = item else { continue };
            let request = mnemo_store::search::SearchMemories {
                scope: mnemo_store::search::SearchScope::Store(store.id.clone()),
                query: mnemo_store::rules::search::parse(&format!("\"{}\"", m.path)).unwrap(),
                path_prefix: None,
                limit: 100,
                after: None,
            };
            let mut found: Vec<String> = s
                .search_memories(&ws, request)
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|r| r.memory_id.to_string())
                .collect();
            found.sort();
            assert!(found.contains(&m.id.to_string()), "{} is not found by its path", m.path);
            line("found by its path", &found);
        }
        let versions = s.list_memory_versions(&ws, &store.id, versions_query()).await.unwrap();
        assert!(versions.next.is_none());
        for version in versions.items {
            line("version", &s.get_memory_version(&ws, &store.id, &version.id, View::Full).await.unwrap());
        }
    }
    for endpoint in s.list_webhook_endpoints(&ws, 100, None).await.unwrap().items {
        line("webhook endpoint", &s.get_webhook_endpoint(&ws, &endpoint.id, true).await.unwrap().secret);
        line("webhook endpoint", &endpoint);
        let query = mnemo_store::ListWebhookDeliveries { status: None, limit: 100, after: None };
        line("webhook deliveries", &s.list_webhook_deliveries(&ws, &endpoint.id, query).await.unwrap().items);
    }
    let environments = s.list_environments(&ws, true, 100, None).await.unwrap().items;
    for env in &environments {
        line("environment", env);
        line("keys", &s.list_environment_keys(&ws, &env.id).await.unwrap());
        line("work", &s.list_work(&ws, &env.id, 100, None).await.unwrap().items);
        line("work stats", &s.work_stats(&ws, &env.id).await.unwrap());
    }
    for agent in s.list_agents(&s.default_workspace().await.unwrap(), true, 100, None).await.unwrap().items {
        line("agent", &agent);
        line("agent v1", &s.get_agent(&s.default_workspace().await.unwrap(), &agent.id, Some(1)).await.unwrap());
    }
    for session in s
        .list_sessions(
            &s.default_workspace().await.unwrap(),
            ListSessions { include_archived: true, limit: 100, ..Default::default() },
        )
        .await
        .unwrap()
        .items
    {
        line("session", &session);
        line("events", &s.events_after(&s.default_workspace().await.unwrap(), &session.id, 0).await.unwrap());
        for store in &stores.items {
            line(
                "access",
                &s.session_store_access(&s.default_workspace().await.unwrap(), &session.id, &store.id).await.unwrap(),
            );
        }
    }
    let dreams = mnemo_store::ops::dreams::ListDreams { include_archived: true, limit: 100, ..Default::default() };
    line("dreams", &s.list_dreams(&s.default_workspace().await.unwrap(), dreams).await.unwrap().items);
    out
}

/// Every row of every table of an SQLite file, in key order, with SQLite's types.
fn sqlite_rows(path: &Path) -> BTreeMap<&'static str, Vec<Vec<rusqlite::types::Value>>> {
    let c = rusqlite::Connection::open(path).unwrap();
    TABLES
        .iter()
        .map(|(table, order)| {
            let mut stmt = c.prepare(&format!("SELECT * FROM {table} ORDER BY {order}")).unwrap();
            let width = stmt.column_count();
            let rows = stmt
                .query_map([], |r| (0..width).map(|i| r.get::<_, rusqlite::types::Value>(i)).collect())
                .unwrap()
                .collect::<Result<Vec<Vec<_>>, _>>()
                .unwrap();
            (*table, rows)
        })
        .collect()
}

/// Runs `mnemo db copy ARGS` to its end.
fn copy(args: &[&str]) -> Output {
    common::mnemo()
        .args(["db", "copy"])
        .args(args)
        .env_remove("MNEMO_COPY_FROM")
        .env_remove("MNEMO_COPY_TO")
        .output()
        .unwrap()
}

/// The per-table lines of a successful copy's summary: table → (rows, digest).
fn report(out: &Output) -> BTreeMap<String, (u64, String)> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the copy failed:\n{stdout}\n{stderr}");
    let mut lines = stdout.lines();
    let head = lines.next().unwrap();
    assert!(head.starts_with("copied "), "{stdout}");
    assert!(head.contains("verified: every table's row count and SHA-256 digest match"), "{stdout}");
    assert_eq!(lines.next().unwrap().split_whitespace().collect::<Vec<_>>(), ["table", "rows", "sha256"]);
    let tables: BTreeMap<_, _> = lines
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cols.len(), 3, "{l}");
            assert_eq!(cols[2].len(), 64, "{l}");
            (cols[0].to_owned(), (cols[1].parse().unwrap(), cols[2].to_owned()))
        })
        .collect();
    let total: u64 = tables.values().map(|(n, _)| n).sum();
    assert!(head.starts_with(&format!("copied {total} rows from ")), "{head}");
    tables
}

fn failure(out: &Output) -> String {
    assert!(!out.status.success(), "the copy should have failed:\n{}", String::from_utf8_lossy(&out.stdout));
    assert!(out.stdout.is_empty(), "a failed copy prints no summary");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Fills `path` and returns what the `Store` trait shows of it.
async fn filled(path: &Path) -> Vec<String> {
    let original = open_sqlite(path);
    fill(&original).await;
    let before = snapshot(&original).await;
    original.close().await;
    before
}

/// After a copy, new rows are numbered past the copied ones.
async fn still_writable(s: &dyn Store) {
    let ws = s.default_workspace().await.unwrap();
    let store = s
        .create_memory_store(
            &ws,
            NewMemoryStore { name: "after".into(), description: String::new(), metadata: BTreeMap::new() },
        )
        .await
        .unwrap();
    s.create_memory(&ws, &store.id, path("/new.md"), "new".into(), Actor::UserActor { user_id: "u".into() })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_moves_to_postgres_and_back_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original.sqlite");
    let before = filled(&original).await;
    let rows = sqlite_rows(&original);
    for (table, rows) in &rows {
        assert!(!rows.is_empty(), "the fixture leaves `{table}` empty");
    }

    let schema = mnemo_store_tests::Postgres::fresh_schema().await;
    let base = mnemo_store_tests::Postgres::url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let pg = format!("{base}{sep}options=-csearch_path%3D{schema}");

    let to_pg = report(&copy(&["--from", &sqlite_url(&original), "--to", &pg]));
    let expected: Vec<(&str, u64)> = rows.iter().map(|(t, r)| (*t, r.len() as u64)).collect();
    let found: Vec<(&str, u64)> = to_pg.iter().map(|(t, (n, _))| (t.as_str(), *n)).collect();
    assert_eq!(found, expected, "one line per table with its rows");

    // A second copy into the now filled schema is refused and changes nothing; --replace
    // empties it first.
    let refused = failure(&copy(&["--from", &sqlite_url(&original), "--to", &pg]));
    assert!(
        refused.contains("the target database is not empty (table `workspace_rate_limits` holds 1 rows)"),
        "{refused}"
    );
    assert!(refused.contains("pass --replace"), "{refused}");
    let replaced = report(&copy(&["--from", &sqlite_url(&original), "--to", &pg, "--replace"]));
    assert_eq!(replaced, to_pg, "the same rows, the same digests");

    // Back into a new SQLite file: the digests are the backend-neutral ones.
    let back = dir.path().join("back/copy.sqlite");
    let to_sqlite = report(&copy(&["--from", &pg, "--to", &sqlite_url(&back)]));
    assert_eq!(to_sqlite, to_pg);
    assert_eq!(sqlite_rows(&back), rows, "every row, column and type came back");

    // Through the Store trait: both copies show what the original showed, and take new rows.
    let copy = open_sqlite(&back);
    assert_eq!(snapshot(&copy).await, before);
    still_writable(&copy).await;
    copy.close().await;
    let mut settings = mnemo_store_postgres::PostgresSettings::from_url(&pg).unwrap();
    settings.pool_size = 2;
    let on_pg = mnemo_store_postgres::PostgresStore::open(&settings).await.unwrap();
    assert_eq!(snapshot(&on_pg).await, before);
    still_writable(&on_pg).await;
    on_pg.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_to_sqlite_and_what_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original.sqlite");
    let before = filled(&original).await;
    let target = dir.path().join("copy.sqlite");
    let copied = report(&copy(&["--from", &sqlite_url(&original), "--to", &sqlite_url(&target)]));
    assert_eq!(copied.len(), TABLES.len());
    // The copy is one self-contained file: nothing is left in a write-ahead log beside it.
    let wal = dir.path().join("copy.sqlite-wal");
    assert!(!wal.exists() || wal.metadata().unwrap().len() == 0, "the log was not checkpointed");
    assert_eq!(sqlite_rows(&target), sqlite_rows(&original));
    let store = open_sqlite(&target);
    assert_eq!(snapshot(&store).await, before);
    still_writable(&store).await;
    store.close().await;

    // The target now holds more than the source: refused, then replaced by the source's rows.
    let refused = failure(&copy(&["--from", &sqlite_url(&original), "--to", &sqlite_url(&target)]));
    assert!(refused.contains("is not empty"), "{refused}");
    assert_eq!(report(&copy(&["--from", &sqlite_url(&original), "--to", &sqlite_url(&target), "--replace"])), copied);
    assert_eq!(sqlite_rows(&target), sqlite_rows(&original));

    // One file under two names is one database, even with --replace.
    let alias = format!("sqlite://{}/./original.sqlite", dir.path().display());
    let same = failure(&copy(&["--from", &sqlite_url(&original), "--to", &alias, "--replace"]));
    assert!(same.contains("the source and the target are the same database"), "{same}");
    assert_eq!(sqlite_rows(&original).get("api_keys").map(Vec::len), Some(2), "the source is untouched");

    // A source that does not exist is not created (it would copy nothing).
    let missing = dir.path().join("missing.sqlite");
    let err = failure(&copy(&["--from", &sqlite_url(&missing), "--to", &sqlite_url(&dir.path().join("x.sqlite"))]));
    assert!(err.contains("--from: there is no SQLite database at"), "{err}");
    assert!(!missing.exists());
    // An empty source is refused too.
    let empty = dir.path().join("empty.sqlite");
    open_sqlite(&empty).close().await;
    let err = failure(&copy(&["--from", &sqlite_url(&empty), "--to", &sqlite_url(&dir.path().join("y.sqlite"))]));
    assert!(err.contains("the source database holds nothing but what a new database starts with"), "{err}");

    // Bad URLs are named by their option, never echoed with a password.
    let source = sqlite_url(&original);
    let cases = [
        (
            vec!["--from", "mysql://root:hunter2@db/mnemo", "--to", "sqlite://x"],
            "--from: unsupported database scheme `mysql:`",
        ),
        (vec!["--from", &source, "--to", "hunter2"], "--to must be a database URL"),
        (
            vec!["--from", "postgres://mnemo:hunter2@127.0.0.1:1/mnemo", "--to", "sqlite://x"],
            "--from: open PostgreSQL database `mnemo` on 127.0.0.1:1: the database is unavailable",
        ),
        (vec!["--from", &source, "--to", "postgres://mnemo:hunter2@[::1/mnemo"], "--to: "),
    ];
    for (args, expected) in cases {
        let err = failure(&copy(&args));
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("hunter2"), "a password leaked: {err}");
    }
}
