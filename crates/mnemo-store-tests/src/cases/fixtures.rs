//! Set-up shared by the cases: the objects every section needs, built the way the server
//! builds them, and listings followed to their end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use mnemo_api::{
    Actor, Agent, AgentParams, AgentSpec, DEFAULT_MEMORY_MOUNT_ROOT, Environment, Event, EventId, MemoryListItem,
    MemoryPath, MemoryStoreId, MemoryVersion, PathPrefix, Session, Timestamp, View, Work, WorkspaceId,
};
use mnemo_store::{
    AgentRef, CredentialHash, Cursor, ErrorCode, Limits, ListMemories, ListMemoryVersions, Listing, NewEnvironment,
    NewMemoryStore, NewSession, SessionEvent, Store, StoreError,
};
use serde_json::{Value, json};

use crate::{StoreFactory, TestStore};

/// A credential hash no other call in this process returns (and never `[n; 32]`).
pub fn fresh_hash() -> CredentialHash {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut hash = [0xA5; 32];
    hash[..8].copy_from_slice(&n.to_be_bytes());
    hash
}

pub(crate) fn path(p: &str) -> MemoryPath {
    MemoryPath::parse(p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

pub(crate) fn api_actor() -> Actor {
    Actor::ApiActor { api_key_id: "apikey_conformance".parse().unwrap() }
}

/// A metadata patch or map of `n` distinct keys.
pub(crate) fn many_keys<T: Clone>(n: usize, value: T) -> BTreeMap<String, T> {
    (0..n).map(|i| (format!("k{i:02}"), value.clone())).collect()
}

pub(crate) fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// Parses an event as the server does at the edge.
pub fn event(v: Value) -> Event {
    let shown = v.to_string();
    Event::parse(v).unwrap_or_else(|e| panic!("{shown}: {e}"))
}

/// A person's client: an API key (posts user input and, driving the agent side, agent events).
pub fn person() -> mnemo_store::EventAuthor {
    mnemo_store::EventAuthor::ApiKey("apikey_person".parse().unwrap())
}

pub fn user_message(text: &str) -> Event {
    event(json!({"type": "user.message", "content": [{"type": "text", "text": text}]}))
}

pub(crate) fn is_environment_not_found(e: &StoreError) -> bool {
    matches!(e, StoreError::Coded { code: ErrorCode::EnvironmentNotFound, .. })
}

/// A store of the Default workspace.
pub(crate) async fn memory_store(s: &dyn Store, name: &str) -> MemoryStoreId {
    let ws = s.default_workspace().await.unwrap();
    s.create_memory_store(
        &ws,
        NewMemoryStore { name: name.into(), description: String::new(), metadata: BTreeMap::new() },
    )
    .await
    .unwrap()
    .id
}

/// A `self_hosted` environment (a work queue), or a `cloud` one (no queue).
pub async fn environment(s: &dyn Store, self_hosted: bool) -> Environment {
    let ws = s.default_workspace().await.unwrap();
    let config = if self_hosted { json!({"type": "self_hosted"}) } else { json!({"type": "cloud"}) };
    s.create_environment(
        &ws,
        NewEnvironment {
            name: "conformance".into(),
            description: None,
            metadata: BTreeMap::new(),
            config,
            scope: None,
        },
    )
    .await
    .unwrap()
}

/// An agent whose toolset asks before `bash`, never runs `web_fetch` and allows every other
/// built-in tool, with one custom tool, `lookup`, in the Default workspace.
pub async fn agent(s: &dyn Store) -> Agent {
    let ws = s.default_workspace().await.unwrap();
    agent_in(s, &ws).await
}

/// [`agent`], in workspace `ws`.
pub async fn agent_in(s: &dyn Store, ws: &WorkspaceId) -> Agent {
    let params: AgentParams = serde_json::from_value(json!({
        "name": "conformance",
        "model": "claude-opus-4-6",
        "tools": [
            {"type": "agent_toolset_20260401", "configs": [
                {"name": "bash", "permission_policy": {"type": "always_ask"}},
                {"name": "web_fetch", "enabled": false},
            ]},
            {"type": "custom", "name": "lookup", "description": "looks a word up", "input_schema": {"type": "object"}},
        ],
    }))
    .unwrap();
    s.create_agent(ws, AgentSpec::from_params(&params).unwrap()).await.unwrap()
}

/// A session of `agent` on `env`, latest version, nothing attached.
pub fn new_session(agent: &Agent, env: &Environment) -> NewSession {
    NewSession {
        agent: AgentRef { id: agent.id.clone(), version: None, overrides: None },
        environment: env.id.clone(),
        attachments: Vec::new(),
        title: None,
        metadata: BTreeMap::new(),
        budget: None,
        initial_events: Vec::new(),
        poster: mnemo_api::EventPoster::ApiActor { api_key_id: "apikey_person".parse().unwrap() },
        mount_root: DEFAULT_MEMORY_MOUNT_ROOT.into(),
    }
}

/// A session of a fresh agent on `env`.
pub async fn session(s: &dyn Store, env: &Environment) -> Session {
    let ws = s.default_workspace().await.unwrap();
    let agent = agent(s).await;
    s.create_session(&ws, new_session(&agent, env)).await.unwrap()
}

/// A new store with `limits` and, in its Default workspace, an environment (`self_hosted`, or
/// cloud) with a session on it: where the event, lease and work cases start.
pub(crate) async fn with_session(
    factory: &impl StoreFactory,
    limits: Limits,
    self_hosted: bool,
) -> (TestStore, WorkspaceId, Environment, Session) {
    let s = factory.open(limits).await;
    let ws = s.default_workspace().await.unwrap();
    let env = environment(&*s, self_hosted).await;
    let session = session(&*s, &env).await;
    (s, ws, env, session)
}

/// The work item queued for `session` on `env`.
pub(crate) async fn work_of(s: &dyn Store, env: &Environment, session: &Session) -> Work {
    let ws = s.default_workspace().await.unwrap();
    let items = s.list_work(&ws, &env.id, 100, None).await.unwrap().items;
    let mut mine: Vec<Work> = items.into_iter().filter(|w| w.data.id == session.id.as_str()).collect();
    assert_eq!(mine.len(), 1, "one work item for session {}", session.id);
    mine.pop().unwrap()
}

/// A memory listing query.
pub(crate) fn memories(prefix: &str, depth: u32, limit: u32, view: View) -> ListMemories {
    ListMemories { prefix: PathPrefix::parse(prefix).unwrap(), depth, limit, view, after: None }
}

/// Every item of a listing, from the page after `first` on, following `next` to the end; each
/// page holds at most `limit` items. `page` answers the page after a cursor.
pub(crate) async fn follow<T>(
    limit: u32,
    first: Option<Cursor>,
    mut page: impl AsyncFnMut(Option<Cursor>) -> Listing<T>,
) -> Vec<T> {
    let mut out = Vec::new();
    let mut after = first;
    loop {
        let listing = page(after).await;
        assert!(listing.items.len() <= limit as usize, "a page holds at most `limit` items");
        out.extend(listing.items);
        match listing.next {
            Some(next) => after = Some(next),
            None => return out,
        }
    }
}

/// Every item of a memory listing, following `next` to the end.
pub(crate) async fn all_memories(s: &dyn Store, store: &MemoryStoreId, query: ListMemories) -> Vec<MemoryListItem> {
    let ws = s.default_workspace().await.unwrap();
    follow(query.limit, query.after.clone(), async |after| {
        s.list_memories(&ws, store, ListMemories { after, ..query.clone() }).await.unwrap()
    })
    .await
}

/// The paths of a listing's memories (`prefix:` + path for rolled-up prefixes).
pub(crate) fn listed_paths(items: &[MemoryListItem]) -> Vec<String> {
    items
        .iter()
        .map(|i| match i {
            MemoryListItem::Memory(m) => m.path.clone(),
            MemoryListItem::Prefix(p) => format!("prefix:{}", p.path),
        })
        .collect()
}

/// A version listing query without filters.
pub(crate) fn versions(limit: u32) -> ListMemoryVersions {
    ListMemoryVersions::newest(limit)
}

/// Every version a listing returns, following `next` to the end.
pub(crate) async fn all_versions(
    s: &dyn Store,
    store: &MemoryStoreId,
    query: ListMemoryVersions,
) -> Vec<MemoryVersion> {
    let ws = s.default_workspace().await.unwrap();
    follow(query.limit, query.after.clone(), async |after| {
        s.list_memory_versions(&ws, store, ListMemoryVersions { after, ..query.clone() }).await.unwrap()
    })
    .await
}

/// The `type` of each event.
pub(crate) fn types(events: &[SessionEvent]) -> Vec<&str> {
    events.iter().map(|e| e.event.event.kind()).collect()
}

/// The id the log gave an event.
pub(crate) fn id_of(event: &SessionEvent) -> EventId {
    event.event.id.clone()
}

/// When the log says an event was processed.
pub(crate) fn processed_at(event: &SessionEvent) -> Timestamp {
    let text = event.event.processed_at.as_deref().unwrap_or_else(|| panic!("no processed_at in {}", event.to_json()));
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

/// The seqs of events.
pub(crate) fn seqs(events: &[SessionEvent]) -> Vec<i64> {
    events.iter().map(|e| e.seq).collect()
}
