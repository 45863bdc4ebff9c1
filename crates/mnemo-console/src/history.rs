//! History: a store's (or one memory's) versions, one version with its diff, restoring an old
//! version's content, and redaction.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use mnemo_api::{
    ApiKeyId, MemoryId, MemoryStoreId, MemoryVersion, MemoryVersionId, Operation, SessionId, View, WorkspaceId,
};
use mnemo_http::{BadInput, FromQuery, Id, Params, Query};
use mnemo_store::{Cursor, ListMemoryVersions, MemoryChange, StoreError};

use crate::Console;
use crate::audit_log::record;
use crate::auth::{NoFields, Posted, Signed, encode_component};
use crate::memories::StoreHead;
use crate::page::{Chrome, PageError, Section, refusal, render, see_other};
use crate::stores::ConfirmPage;
use crate::text::{ActorView, DiffLine, Line, actor, diff, lines, size, when};
use mnemo_store::rules::audit::AuditAction;
use mnemo_store::rules::scope::{Action, MemoryOp};

/// Versions per page of a history.
const PAGE: u32 = 50;

#[derive(Debug)]
pub(crate) struct VersionRow {
    id: String,
    operation: &'static str,
    path: Option<String>,
    memory_href: String,
    actor: ActorView,
    created: String,
    size: String,
    redacted: bool,
}

fn row(store: &str, v: &MemoryVersion) -> VersionRow {
    VersionRow {
        id: v.id.to_string(),
        operation: v.operation.as_str(),
        path: v.path.clone(),
        memory_href: format!("/console/stores/{store}/history?memory={}", v.memory_id),
        actor: actor(v.created_by.as_ref()),
        created: when(&v.created_at),
        size: v.content_size_bytes.map(size).unwrap_or_default(),
        redacted: v.redacted_at.is_some(),
    }
}

#[derive(Debug, Template)]
#[template(path = "history.html")]
struct HistoryPage {
    chrome: Chrome,
    store: StoreHead,
    /// Set when the history is one memory's: its path (or last known path) and page.
    memory: Option<(String, Option<String>)>,
    memory_id: String,
    session: String,
    api_key: String,
    operation: String,
    rows: Vec<VersionRow>,
    next: Option<String>,
    first_page: bool,
}

/// A history's filters as its form sends them (a blank field filters nothing), and the page
/// link.
#[derive(Debug)]
pub(crate) struct HistoryQuery {
    memory: Option<MemoryId>,
    session: Option<SessionId>,
    api_key: Option<ApiKeyId>,
    operation: Option<Operation>,
    after: Option<Cursor>,
}

fn filled(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

fn filter_id<T: std::str::FromStr>(what: &str, raw: Option<&str>) -> Result<Option<T>, BadInput> {
    filled(raw).map(|s| s.parse().map_err(|_| BadInput::Invalid(format!("`{s}` is not {what} id")))).transpose()
}

impl FromQuery for HistoryQuery {
    const ONCE: &'static [&'static str] = &["memory", "session", "api_key", "operation", "page"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let memory = filter_id("a memory", q.one("memory"))?;
        let session = filter_id("a session", q.one("session"))?;
        let api_key = filter_id("an API key", q.one("api_key"))?;
        let operation = filled(q.one("operation")).map(|op| {
            Operation::parse(op)
                .ok_or_else(|| BadInput::Invalid(format!("`{op}` is not an operation (created, modified or deleted)")))
        });
        Ok(Self {
            memory,
            session,
            api_key,
            operation: operation.transpose()?,
            after: mnemo_http::cursor(q.one("page"))?,
        })
    }
}

impl HistoryQuery {
    /// The filters as a query string, each followed by `&` (the next page's link adds `page`).
    fn filters(&self) -> String {
        let mut query = String::new();
        for (k, v) in [
            ("memory", self.memory.as_ref().map(ToString::to_string)),
            ("session", self.session.as_ref().map(ToString::to_string)),
            ("api_key", self.api_key.as_ref().map(ToString::to_string)),
            ("operation", self.operation.map(|o| o.as_str().to_owned())),
        ] {
            if let Some(v) = v {
                query.push_str(&format!("{k}={}&", encode_component(&v)));
            }
        }
        query
    }
}

pub(crate) async fn list(
    State(console): State<Console>,
    who: Signed,
    Id(store_id): Id<MemoryStoreId>,
    Query(mut q): Query<HistoryQuery>,
) -> Result<Response, PageError> {
    let store = console.store.get_memory_store(&who.workspace, &store_id).await?;
    let first_page = q.after.is_none();
    let listing = console
        .store
        .list_memory_versions(
            &who.workspace,
            &store_id,
            ListMemoryVersions {
                memory_id: q.memory.clone(),
                operation: q.operation,
                session_id: q.session.clone(),
                api_key_id: q.api_key.clone(),
                after: q.after.take(),
                ..ListMemoryVersions::newest(PAGE)
            },
        )
        .await?;
    let memory = match &q.memory {
        None => None,
        Some(m) => {
            let live = match console.store.get_memory(&who.workspace, &store_id, m).await {
                Ok(memory) => Some((memory.path, Some(format!("/console/stores/{store_id}/memories/{m}")))),
                Err(StoreError::NotFound { .. }) => None,
                Err(err) => return Err(err.into()),
            };
            live.or_else(|| {
                let last = listing.items.iter().find_map(|v| v.path.clone());
                Some((last.unwrap_or_else(|| m.to_string()), None))
            })
        }
    };
    let next = listing
        .next
        .map(|c| format!("/console/stores/{store_id}/history?{}page={}", q.filters(), encode_component(&c.encode())));
    let mut rows: Vec<VersionRow> = listing.items.iter().map(|v| row(store_id.as_str(), v)).collect();
    crate::text::name_people(&console, rows.iter_mut().map(|r| &mut r.actor).collect()).await?;
    Ok(render(&HistoryPage {
        chrome: who.chrome(Section::Stores),
        store: StoreHead::from(&store),
        memory,
        memory_id: q.memory.map(|m| m.to_string()).unwrap_or_default(),
        session: q.session.map(|s| s.to_string()).unwrap_or_default(),
        api_key: q.api_key.map(|k| k.to_string()).unwrap_or_default(),
        operation: q.operation.map(|o| o.as_str().to_owned()).unwrap_or_default(),
        rows,
        next,
        first_page,
    }))
}

#[derive(Debug)]
struct Changes {
    changes: Vec<DiffLine>,
}

#[derive(Debug, Template)]
#[template(path = "version.html")]
struct VersionPage {
    chrome: Chrome,
    store: StoreHead,
    version: VersionRow,
    memory_id: String,
    sha256: String,
    /// The memory as it is now, if it still exists: its page.
    memory_href: Option<String>,
    /// Whether this version holds the memory's current content.
    current: bool,
    redacted_by: Option<ActorView>,
    redacted_at: String,
    content: Option<Vec<Line>>,
    /// The version before this one, and what changed since it.
    previous: Option<String>,
    /// The version before was redacted: nothing to compare with.
    previous_redacted: bool,
    c: Option<Changes>,
}

/// The version of the same memory just before `version`, if any (histories are newest first).
async fn previous_version(
    console: &Console,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    version: &MemoryVersion,
) -> Result<Option<MemoryVersion>, StoreError> {
    let mut after: Option<Cursor> = None;
    let mut seen = false;
    loop {
        let page = console
            .store
            .list_memory_versions(
                ws,
                store,
                ListMemoryVersions {
                    memory_id: Some(version.memory_id.clone()),
                    after,
                    ..ListMemoryVersions::newest(100)
                },
            )
            .await?;
        for v in page.items {
            if seen {
                return console.store.get_memory_version(ws, store, &v.id, View::Full).await.map(Some);
            }
            seen = v.id == version.id;
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(None),
        }
    }
}

/// Whether `version` holds the current content of a live memory (such a version cannot be
/// redacted).
async fn live_memory(
    console: &Console,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    memory: &MemoryId,
) -> Result<Option<mnemo_api::Memory>, StoreError> {
    match console.store.get_memory(ws, store, memory).await {
        Ok(m) => Ok(Some(m)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

pub(crate) async fn version_page(
    State(console): State<Console>,
    who: Signed,
    Id(store_id): Id<MemoryStoreId>,
    Id(version_id): Id<MemoryVersionId>,
) -> Result<Response, PageError> {
    let (store, version) = tokio::try_join!(
        console.store.get_memory_store(&who.workspace, &store_id),
        console.store.get_memory_version(&who.workspace, &store_id, &version_id, View::Full)
    )?;
    let (memory, previous) = tokio::try_join!(
        live_memory(&console, &who.workspace, &store_id, &version.memory_id),
        previous_version(&console, &who.workspace, &store_id, &version)
    )?;
    let body = version.content.as_deref();
    let c = match (body, &previous) {
        (Some(now), Some(before)) if before.redacted_at.is_none() => {
            Some(Changes { changes: diff(before.content.as_deref().unwrap_or_default(), now) })
        }
        (Some(now), None) => Some(Changes { changes: diff("", now) }),
        _ => None,
    };
    let mut version_row = row(store_id.as_str(), &version);
    let mut redacted_by = version.redacted_at.map(|_| actor(version.redacted_by.as_ref()));
    crate::text::name_people(&console, std::iter::once(&mut version_row.actor).chain(redacted_by.as_mut()).collect())
        .await?;
    Ok(render(&VersionPage {
        chrome: who.chrome(Section::Stores),
        store: StoreHead::from(&store),
        memory_id: version.memory_id.to_string(),
        sha256: version.content_sha256.clone().unwrap_or_default(),
        memory_href: memory.as_ref().map(|m| format!("/console/stores/{store_id}/memories/{}", m.id)),
        current: memory.as_ref().is_some_and(|m| m.memory_version_id == version.id),
        redacted_by,
        redacted_at: version.redacted_at.as_ref().map(when).unwrap_or_default(),
        content: body.map(lines),
        previous_redacted: previous.as_ref().is_some_and(|p| p.redacted_at.is_some()),
        previous: previous.map(|p| format!("/console/stores/{store_id}/versions/{}", p.id)),
        c,
        version: version_row,
    }))
}

/// Writes an old version's content as a new version: over the memory if it still exists (at its
/// current path), or as the memory anew at the version's path if it was deleted.
pub(crate) async fn restore(
    State(console): State<Console>,
    Id(store_id): Id<MemoryStoreId>,
    Id(version_id): Id<MemoryVersionId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Memory { store: &store_id, op: MemoryOp::WriteMemories, attached: None })?;
    let who = posted.who;
    let version = console.store.get_memory_version(&who.workspace, &store_id, &version_id, View::Full).await?;
    let (Some(content), Some(path)) = (version.content.clone(), version.path.clone()) else {
        return Err(PageError::Invalid(if version.redacted_at.is_some() {
            "this version was redacted: it holds no content to restore".into()
        } else {
            "a deleted version holds no content; restore the version before it".into()
        }));
    };
    let restored = match live_memory(&console, &who.workspace, &store_id, &version.memory_id).await? {
        Some(memory) => {
            let change =
                MemoryChange { content: Some(content), path: None, expected_sha256: Some(memory.content_sha256) };
            console.store.update_memory(&who.workspace, &store_id, &memory.id, change, who.actor()).await
        }
        None => {
            let path = mnemo_api::MemoryPath::parse_request(&path).map_err(PageError::Invalid)?;
            console.store.create_memory(&who.workspace, &store_id, path, content, who.actor()).await
        }
    };
    match restored {
        Ok(memory) => {
            tracing::info!(store.id = %store_id, memory_version.id = %version_id, by = %who.label(), "restored memory version in the console");
            Ok(see_other(&format!("/console/stores/{store_id}/memories/{}", memory.id)))
        }
        Err(err) => Err(PageError::Invalid(format!("the version was not restored: {}", refusal(err)?))),
    }
}

pub(crate) async fn redact_confirm(
    State(console): State<Console>,
    who: Signed,
    Id(store_id): Id<MemoryStoreId>,
    Id(version_id): Id<MemoryVersionId>,
) -> Result<Response, PageError> {
    who.allow(Action::Memory { store: &store_id, op: MemoryOp::Administer, attached: None })?;
    let version = console.store.get_memory_version(&who.workspace, &store_id, &version_id, View::Basic).await?;
    let back = format!("/console/stores/{store_id}/versions/{version_id}");
    let memory = live_memory(&console, &who.workspace, &store_id, &version.memory_id).await?;
    if memory.is_some_and(|m| m.memory_version_id == version.id) {
        return Err(PageError::Invalid(
            "this version holds the memory's current content, so it cannot be redacted: edit or delete the memory first; then this version is history and can be redacted".into(),
        ));
    }
    Ok(render(&ConfirmPage {
        chrome: who.chrome(Section::Stores),
        title: "Redact this version?".into(),
        message: format!(
            "Redact the {} version of {}? Its content, path, digest and size are erased for good; the history keeps only that a version existed and who redacted it.",
            version.operation.as_str(),
            version.path.as_deref().unwrap_or("this memory")
        ),
        detail: Some("Redaction cannot be undone.".into()),
        action: format!("{back}/redact"),
        button: "Redact version".into(),
        cancel: back,
    }))
}

pub(crate) async fn redact(
    State(console): State<Console>,
    Id(store_id): Id<MemoryStoreId>,
    Id(version_id): Id<MemoryVersionId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Memory { store: &store_id, op: MemoryOp::Administer, attached: None })?;
    match console.store.redact_memory_version(&posted.who.workspace, &store_id, &version_id, posted.who.actor()).await {
        Ok(version) => {
            let details = serde_json::json!({ "memory_id": version.memory_id.as_str() });
            record(&console, &posted.who, AuditAction::MemoryVersionRedact, version_id.as_str(), details).await;
            tracing::info!(store.id = %store_id, memory_version.id = %version_id, by = %posted.who.label(), "redacted memory version in the console");
            Ok(see_other(&format!("/console/stores/{store_id}/versions/{version_id}")))
        }
        Err(err) => Err(PageError::Invalid(refusal(err)?)),
    }
}
