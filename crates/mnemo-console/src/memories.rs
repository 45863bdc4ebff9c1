//! A store's page (its memories as a folder tree) and a memory's pages: view, create, edit (with
//! the conflict path), rename, delete.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use mnemo_api::{
    Memory, MemoryId, MemoryListItem, MemoryPath, MemoryStore, MemoryStoreId, PathPrefix, View, WorkspaceId,
    content_too_large_message, validate_content_size,
};
use mnemo_http::{BadInput, FromQuery, Id, Params, Query};
use mnemo_store::{Cursor, ListMemories, MemoryChange, StoreError};
use serde::Deserialize;

use crate::Console;
use crate::auth::{Posted, Signed, encode_component};
use crate::page::{Chrome, PageError, Section, refusal, render, render_with, see_other};
use crate::stores::ConfirmPage;
use crate::text::{DiffLine, Line, diff, from_form, lines, size, when};
use mnemo_store::rules::audit::AuditAction;
use mnemo_store::rules::retention::{self, Retention};
use mnemo_store::rules::scope::{Action, MemoryOp};

/// Entries per page of a folder.
const PAGE: u32 = 100;

/// A store as its pages show it.
#[derive(Debug, Clone)]
pub(crate) struct StoreHead {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) archived: bool,
}

impl From<&MemoryStore> for StoreHead {
    fn from(s: &MemoryStore) -> Self {
        Self {
            id: s.id.to_string(),
            name: s.name.clone(),
            description: s.description.clone(),
            archived: s.archived_at.is_some(),
        }
    }
}

/// A link in the breadcrumb trail of folders.
#[derive(Debug)]
pub(crate) struct Crumb {
    label: String,
    href: String,
}

/// One entry of a folder: a sub-folder or a memory.
#[derive(Debug)]
pub(crate) struct Entry {
    folder: bool,
    label: String,
    path: String,
    href: String,
    size: String,
    updated: String,
}

#[derive(Debug, Template)]
#[template(path = "store.html")]
struct StorePage {
    chrome: Chrome,
    kept: RetentionView,
    store: StoreHead,
    memories: u64,
    bytes: String,
    prefix: String,
    filter: String,
    crumbs: Vec<Crumb>,
    entries: Vec<Entry>,
    next: Option<String>,
    first_page: bool,
    message: Option<String>,
}

/// How long a store keeps versions, as its page says it.
#[derive(Debug)]
struct RetentionView {
    /// The form's field: the store's own window, or blank when it follows the server.
    field: String,
    /// `forever`, or `for 30d`.
    effective: String,
    /// Whose window that is.
    whose: &'static str,
    /// The server's `--version-retention`.
    server: String,
}

/// What a store's page lists: a folder (`prefix`, `/` when not given), or, when `filter` is
/// filled in, the memories whose path starts with it; and the page link.
#[derive(Debug)]
pub(crate) struct StoreQuery {
    /// The filter as typed, trimmed; `None` when blank.
    filter: Option<String>,
    /// The folder shown when there is no filter.
    folder: PathPrefix,
    after: Option<Cursor>,
}

impl FromQuery for StoreQuery {
    const ONCE: &'static [&'static str] = &["prefix", "filter", "page"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let filter = q.one("filter").map(str::trim).filter(|f| !f.is_empty()).map(str::to_owned);
        // A filter searches its own folder: `prefix` is not looked at then.
        let folder = match q.one("prefix").filter(|_| filter.is_none()) {
            None => PathPrefix::root(),
            Some(raw) => {
                let raw = if raw.ends_with('/') { raw.to_owned() } else { format!("{raw}/") };
                PathPrefix::parse(&raw).map_err(|e| BadInput::Invalid(format!("`{raw}` is not a folder: {e}")))?
            }
        };
        Ok(Self { filter, folder, after: mnemo_http::cursor(q.one("page"))? })
    }
}

fn store_url(store: &str, prefix: &str) -> String {
    if prefix == "/" {
        format!("/console/stores/{store}")
    } else {
        format!("/console/stores/{store}?prefix={}", encode_component(prefix))
    }
}

fn crumbs(store: &str, prefix: &str) -> Vec<Crumb> {
    let mut out = vec![Crumb { label: "/".into(), href: store_url(store, "/") }];
    let mut at = 1;
    for (i, _) in prefix.match_indices('/').skip(1) {
        out.push(Crumb { label: prefix[at..=i].to_owned(), href: store_url(store, &prefix[..=i]) });
        at = i + 1;
    }
    out
}

/// The folder a path filter searches in: everything up to its last `/`.
fn folder_of(filter: &str) -> &str {
    filter.rfind('/').map_or("/", |i| &filter[..=i])
}

pub(crate) async fn store_page(
    State(console): State<Console>,
    who: Signed,
    Id(store_id): Id<MemoryStoreId>,
    Query(q): Query<StoreQuery>,
) -> Result<Response, PageError> {
    store_view(&console, &who, &store_id, q, None, None).await
}

/// The form that sets a store's version retention.
#[derive(Debug, Deserialize)]
pub(crate) struct RetentionForm {
    #[serde(default)]
    retention: String,
}

/// Sets the store's own version retention (blank: the server's), as
/// `POST /v1/memory_stores/{id}/version_retention` does; a malformed window re-shows the page
/// with the form as typed and what to write.
pub(crate) async fn set_retention(
    State(console): State<Console>,
    Id(store_id): Id<MemoryStoreId>,
    posted: Posted<RetentionForm>,
) -> Result<Response, PageError> {
    let who = &posted.who;
    who.allow(Action::Memory { store: &store_id, op: MemoryOp::Administer, attached: None })?;
    let typed = posted.form.retention.trim();
    let own = match typed {
        "" => None,
        raw => match raw.parse::<Retention>() {
            Ok(r) => Some(r),
            Err(e) => {
                let q = StoreQuery { filter: None, folder: PathPrefix::root(), after: None };
                return store_view(&console, who, &store_id, q, Some(e.to_string()), Some(typed.to_owned())).await;
            }
        },
    };
    let own = console.store.set_store_retention(&who.workspace, &store_id, own).await?;
    let effective = retention::effective(console.config.version_retention, own);
    crate::audit_log::record(
        &console,
        who,
        AuditAction::MemoryStoreRetentionUpdate,
        store_id.as_str(),
        serde_json::json!({ "retention": own.map(|r| r.to_string()), "effective": effective.to_string() }),
    )
    .await;
    tracing::info!(store.id = %store_id, by = %who.label(), "set a store's version retention in the console");
    Ok(see_other(&format!("/console/stores/{store_id}")))
}

/// A store's page: a folder or a filter's memories, its retention, and `message` (a refusal to
/// show) with `typed` (the retention as typed, when that was refused).
async fn store_view(
    console: &Console,
    who: &Signed,
    store_id: &MemoryStoreId,
    q: StoreQuery,
    mut message: Option<String>,
    typed: Option<String>,
) -> Result<Response, PageError> {
    let store_id = store_id.clone();
    let store = console.store.get_memory_store(&who.workspace, &store_id).await?;
    let head = StoreHead::from(&store);
    let StoreQuery { filter, folder, after } = q;
    let first_page = after.is_none();
    let own = console.store.store_retention(&who.workspace, &store_id).await?;
    let server = console.config.version_retention;
    let kept = RetentionView {
        field: typed.unwrap_or_else(|| own.map(|r| r.to_string()).unwrap_or_default()),
        effective: match retention::effective(server, own) {
            Retention::Forever => "forever".to_owned(),
            window => format!("for {window}"),
        },
        whose: if own.is_some() { "this store's own" } else { "this server's default" },
        server: server.to_string(),
    };
    // A filter lists every memory whose path starts with it, below its folder, in path order.
    let (prefix, depth, after) = match &filter {
        Some(f) => {
            let f = if f.starts_with('/') { f.clone() } else { format!("/{f}") };
            match PathPrefix::parse(folder_of(&f)) {
                Ok(p) => (p, 0, Some(after.unwrap_or(Cursor::FromPath(f)))),
                Err(e) => {
                    message = Some(format!("`{f}` cannot start a memory path: {e}"));
                    (PathPrefix::root(), 1, None)
                }
            }
        }
        None => (folder, 1, after),
    };
    let listing = console
        .store
        .list_memories(
            &who.workspace,
            &store_id,
            ListMemories { prefix: prefix.clone(), depth, limit: PAGE, view: View::Basic, after },
        )
        .await?;
    let wanted = filter
        .as_deref()
        .filter(|_| message.is_none())
        .map(|f| if f.starts_with('/') { f.to_owned() } else { format!("/{f}") });
    let mut entries = Vec::new();
    let mut past_filter = false;
    for item in listing.items {
        let path = match &item {
            MemoryListItem::Memory(m) => m.path.as_str(),
            MemoryListItem::Prefix(p) => p.path.as_str(),
        };
        if let Some(w) = &wanted
            && !path.starts_with(w.as_str())
        {
            past_filter = true;
            break;
        }
        let label = if wanted.is_some() { path.to_owned() } else { path[prefix.as_str().len()..].to_owned() };
        entries.push(match item {
            MemoryListItem::Memory(m) => Entry {
                folder: false,
                href: format!("/console/stores/{}/memories/{}", head.id, m.id),
                label,
                path: m.path,
                size: size(m.content_size_bytes),
                updated: when(&m.updated_at),
            },
            MemoryListItem::Prefix(p) => Entry {
                folder: true,
                href: store_url(&head.id, &p.path),
                label,
                path: p.path,
                size: String::new(),
                updated: String::new(),
            },
        });
    }
    let next = listing.next.filter(|_| !past_filter).map(|c| {
        let page = encode_component(&c.encode());
        match &filter {
            Some(f) => format!("/console/stores/{}?filter={}&page={page}", head.id, encode_component(f)),
            None => format!(
                "{}{}page={page}",
                store_url(&head.id, prefix.as_str()),
                if prefix.as_str() == "/" { "?" } else { "&" }
            ),
        }
    });
    let used = console
        .store
        .memory_store_usage(&who.workspace, std::slice::from_ref(&store_id))
        .await?
        .get(&store_id)
        .copied()
        .unwrap_or_default();
    Ok(render(&StorePage {
        chrome: who.chrome(Section::Stores),
        kept,
        crumbs: crumbs(&head.id, prefix.as_str()),
        store: head,
        memories: used.memories,
        bytes: size(used.bytes),
        prefix: prefix.as_str().to_owned(),
        filter: filter.unwrap_or_default(),
        entries,
        next,
        first_page,
        message,
    }))
}

#[derive(Debug, Template)]
#[template(path = "memory_new.html")]
struct NewMemoryPage {
    chrome: Chrome,
    store: StoreHead,
    path: String,
    content: String,
    message: Option<String>,
}

/// The folder a new memory's form starts in: `prefix` when it is a folder's path, else `/`.
#[derive(Debug)]
pub(crate) struct NewQuery {
    folder: String,
}

impl FromQuery for NewQuery {
    const ONCE: &'static [&'static str] = &["prefix"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let folder = q.one("prefix").filter(|p| p.starts_with('/') && p.ends_with('/')).unwrap_or("/");
        Ok(Self { folder: folder.to_owned() })
    }
}

pub(crate) async fn new_form(
    State(console): State<Console>,
    who: Signed,
    Id(store): Id<MemoryStoreId>,
    Query(q): Query<NewQuery>,
) -> Result<Response, PageError> {
    who.allow(Action::Memory { store: &store, op: MemoryOp::WriteMemories, attached: None })?;
    let store = console.store.get_memory_store(&who.workspace, &store).await?;
    Ok(render(&NewMemoryPage {
        chrome: who.chrome(Section::Stores),
        store: StoreHead::from(&store),
        path: q.folder,
        content: String::new(),
        message: None,
    }))
}

#[derive(Debug, Deserialize)]
pub(crate) struct NewMemoryForm {
    #[serde(default)]
    path: String,
    #[serde(default)]
    content: String,
}

pub(crate) async fn create(
    State(console): State<Console>,
    Id(store_id): Id<MemoryStoreId>,
    posted: Posted<NewMemoryForm>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Memory { store: &store_id, op: MemoryOp::WriteMemories, attached: None })?;
    let Posted { who, form } = posted;
    let content = from_form(&form.content, false);
    let raw = form.path.trim().to_owned();
    let outcome = match (MemoryPath::parse_request(&raw), validate_content_size(&content)) {
        (Err(message), _) => Err(message),
        (_, Err(len)) => Err(content_too_large_message(len)),
        (Ok(path), Ok(())) => {
            match console.store.create_memory(&who.workspace, &store_id, path, content.clone(), who.actor()).await {
                Ok(memory) => Ok(memory),
                Err(err) => Err(refusal(err)?),
            }
        }
    };
    match outcome {
        Ok(memory) => Ok(see_other(&format!("/console/stores/{store_id}/memories/{}", memory.id))),
        Err(message) => {
            let store = console.store.get_memory_store(&who.workspace, &store_id).await?;
            Ok(render_with(
                StatusCode::BAD_REQUEST,
                &NewMemoryPage {
                    chrome: who.chrome(Section::Stores),
                    store: StoreHead::from(&store),
                    path: raw,
                    content,
                    message: Some(message),
                },
            ))
        }
    }
}

/// A memory as its pages show it.
#[derive(Debug)]
pub(crate) struct MemoryHead {
    id: String,
    path: String,
    folder: String,
    sha256: String,
    size: String,
    updated: String,
    created: String,
    version: String,
}

impl From<&Memory> for MemoryHead {
    fn from(m: &Memory) -> Self {
        Self {
            id: m.id.to_string(),
            path: m.path.clone(),
            folder: folder_of(&m.path).to_owned(),
            sha256: m.content_sha256.clone(),
            size: size(m.content_size_bytes),
            updated: when(&m.updated_at),
            created: when(&m.created_at),
            version: m.memory_version_id.to_string(),
        }
    }
}

#[derive(Debug, Template)]
#[template(path = "memory.html")]
struct MemoryPage {
    chrome: Chrome,
    store: StoreHead,
    memory: MemoryHead,
    folder_href: String,
    lines: Vec<Line>,
}

async fn load(
    console: &Console,
    ws: &WorkspaceId,
    store: &MemoryStoreId,
    memory: &MemoryId,
) -> Result<(MemoryStore, Memory), PageError> {
    let (store, memory) =
        tokio::try_join!(console.store.get_memory_store(ws, store), console.store.get_memory(ws, store, memory))?;
    Ok((store, memory))
}

pub(crate) async fn memory_page(
    State(console): State<Console>,
    who: Signed,
    Id(store): Id<MemoryStoreId>,
    Id(memory): Id<MemoryId>,
) -> Result<Response, PageError> {
    let (store, memory) = load(&console, &who.workspace, &store, &memory).await?;
    let head = StoreHead::from(&store);
    Ok(render(&MemoryPage {
        chrome: who.chrome(Section::Stores),
        folder_href: store_url(&head.id, folder_of(&memory.path)),
        store: head,
        lines: lines(memory.content.as_deref().unwrap_or_default()),
        memory: MemoryHead::from(&memory),
    }))
}

#[derive(Debug, Template)]
#[template(path = "memory_edit.html")]
struct EditPage {
    chrome: Chrome,
    store: StoreHead,
    memory: MemoryHead,
    /// What the textarea holds.
    content: String,
    /// The digest the save is guarded by.
    expected: String,
    crlf: bool,
    /// Set when the memory changed since the form was loaded: what it holds now.
    conflict: Option<Conflict>,
    message: Option<String>,
}

impl EditPage {
    /// The form over `memory` as it is stored: what the edit link shows, and what a refused
    /// save (with what was typed) and a conflict (with the diff) start from.
    fn of(who: &Signed, store: &MemoryStore, memory: &Memory) -> Self {
        let content = memory.content.clone().unwrap_or_default();
        Self {
            chrome: who.chrome(Section::Stores),
            store: StoreHead::from(store),
            memory: MemoryHead::from(memory),
            expected: memory.content_sha256.clone(),
            crlf: content.contains("\r\n"),
            content,
            conflict: None,
            message: None,
        }
    }
}

#[derive(Debug)]
struct Conflict {
    theirs: Vec<Line>,
    changes: Vec<DiffLine>,
}

pub(crate) async fn edit_form(
    State(console): State<Console>,
    who: Signed,
    Id(store): Id<MemoryStoreId>,
    Id(memory): Id<MemoryId>,
) -> Result<Response, PageError> {
    who.allow(Action::Memory { store: &store, op: MemoryOp::WriteMemories, attached: None })?;
    let (store, memory) = load(&console, &who.workspace, &store, &memory).await?;
    Ok(render(&EditPage::of(&who, &store, &memory)))
}

#[derive(Debug, Deserialize)]
pub(crate) struct EditForm {
    #[serde(default)]
    content: String,
    #[serde(default)]
    expected: String,
    #[serde(default)]
    crlf: String,
}

pub(crate) async fn save(
    State(console): State<Console>,
    Id(store_id): Id<MemoryStoreId>,
    Id(memory_id): Id<MemoryId>,
    posted: Posted<EditForm>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Memory { store: &store_id, op: MemoryOp::WriteMemories, attached: None })?;
    let Posted { who, form } = posted;
    let mine = from_form(&form.content, form.crlf == "1");
    if !mnemo_api::is_sha256_hex(&form.expected) {
        return Err(PageError::Invalid("the edit form lost its version; open the memory and edit it again".into()));
    }
    let refused = match validate_content_size(&mine) {
        Err(len) => Some(content_too_large_message(len)),
        Ok(()) => {
            let change =
                MemoryChange { content: Some(mine.clone()), path: None, expected_sha256: Some(form.expected.clone()) };
            match console.store.update_memory(&who.workspace, &store_id, &memory_id, change, who.actor()).await {
                Ok(_) => None,
                Err(StoreError::PreconditionFailed { .. }) => {
                    return conflict(&console, &who, &store_id, &memory_id, mine).await;
                }
                Err(err) => Some(refusal(err)?),
            }
        }
    };
    match refused {
        None => {
            tracing::info!(store.id = %store_id, memory.id = %memory_id, by = %who.label(), "saved memory in the console");
            Ok(see_other(&format!("/console/stores/{store_id}/memories/{memory_id}")))
        }
        Some(message) => {
            let (store, memory) = load(&console, &who.workspace, &store_id, &memory_id).await?;
            Ok(render_with(
                StatusCode::BAD_REQUEST,
                &EditPage {
                    content: mine,
                    expected: form.expected,
                    crlf: form.crlf == "1",
                    message: Some(message),
                    ..EditPage::of(&who, &store, &memory)
                },
            ))
        }
    }
}

/// The memory changed after the form was loaded: show what it holds now beside what the person
/// typed, and let them save theirs over it (knowingly) or keep the saved one.
async fn conflict(
    console: &Console,
    who: &Signed,
    store_id: &MemoryStoreId,
    memory_id: &MemoryId,
    mine: String,
) -> Result<Response, PageError> {
    let (store, memory) = load(console, &who.workspace, store_id, memory_id).await?;
    let theirs = EditPage::of(who, &store, &memory);
    let conflict = Conflict { theirs: lines(&theirs.content), changes: diff(&theirs.content, &mine) };
    Ok(render_with(StatusCode::CONFLICT, &EditPage { conflict: Some(conflict), content: mine, ..theirs }))
}

#[derive(Debug, Template)]
#[template(path = "memory_rename.html")]
struct RenamePage {
    chrome: Chrome,
    store: StoreHead,
    memory: MemoryHead,
    path: String,
    message: Option<String>,
}

impl RenamePage {
    /// The form over `memory` as it is stored, its path in the field.
    fn of(who: &Signed, store: &MemoryStore, memory: &Memory) -> Self {
        Self {
            chrome: who.chrome(Section::Stores),
            store: StoreHead::from(store),
            memory: MemoryHead::from(memory),
            path: memory.path.clone(),
            message: None,
        }
    }
}

pub(crate) async fn rename_form(
    State(console): State<Console>,
    who: Signed,
    Id(store): Id<MemoryStoreId>,
    Id(memory): Id<MemoryId>,
) -> Result<Response, PageError> {
    who.allow(Action::Memory { store: &store, op: MemoryOp::WriteMemories, attached: None })?;
    let (store, memory) = load(&console, &who.workspace, &store, &memory).await?;
    Ok(render(&RenamePage::of(&who, &store, &memory)))
}

#[derive(Debug, Deserialize)]
pub(crate) struct RenameForm {
    #[serde(default)]
    path: String,
}

pub(crate) async fn rename(
    State(console): State<Console>,
    Id(store_id): Id<MemoryStoreId>,
    Id(memory_id): Id<MemoryId>,
    posted: Posted<RenameForm>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Memory { store: &store_id, op: MemoryOp::WriteMemories, attached: None })?;
    let Posted { who, form } = posted;
    let raw = form.path.trim().to_owned();
    let refused = match MemoryPath::parse_request(&raw) {
        Err(message) => Some(message),
        Ok(path) => {
            let change = MemoryChange { content: None, path: Some(path), expected_sha256: None };
            match console.store.update_memory(&who.workspace, &store_id, &memory_id, change, who.actor()).await {
                Ok(_) => None,
                Err(err) => Some(refusal(err)?),
            }
        }
    };
    if let Some(message) = refused {
        let (store, memory) = load(&console, &who.workspace, &store_id, &memory_id).await?;
        let page = RenamePage { path: raw, message: Some(message), ..RenamePage::of(&who, &store, &memory) };
        return Ok(render_with(StatusCode::BAD_REQUEST, &page));
    }
    tracing::info!(store.id = %store_id, memory.id = %memory_id, by = %who.label(), "renamed memory in the console");
    Ok(see_other(&format!("/console/stores/{store_id}/memories/{memory_id}")))
}

pub(crate) async fn delete_confirm(
    State(console): State<Console>,
    who: Signed,
    Id(store): Id<MemoryStoreId>,
    Id(memory): Id<MemoryId>,
) -> Result<Response, PageError> {
    who.allow(Action::Memory { store: &store, op: MemoryOp::WriteMemories, attached: None })?;
    let (store, memory) = load(&console, &who.workspace, &store, &memory).await?;
    Ok(render(&ConfirmPage {
        chrome: who.chrome(Section::Stores),
        title: "Delete this memory?".into(),
        message: format!("Delete {} from “{}”?", memory.path, store.name),
        detail: Some(
            "Its history stays: a deleted version is recorded, and an earlier version can be restored.".into(),
        ),
        action: format!(
            "/console/stores/{}/memories/{}/delete?expected={}",
            store.id, memory.id, memory.content_sha256
        ),
        button: "Delete memory".into(),
        cancel: format!("/console/stores/{}/memories/{}", store.id, memory.id),
    }))
}

/// The content digest the deletion was confirmed against (`expected`, when it is one): a
/// memory changed since is kept.
#[derive(Debug)]
pub(crate) struct DeleteQuery {
    expected: Option<String>,
}

impl FromQuery for DeleteQuery {
    const ONCE: &'static [&'static str] = &["expected"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        Ok(Self { expected: q.one("expected").filter(|s| mnemo_api::is_sha256_hex(s)).map(str::to_owned) })
    }
}

pub(crate) async fn delete(
    State(console): State<Console>,
    Id(store_id): Id<MemoryStoreId>,
    Id(memory_id): Id<MemoryId>,
    Query(q): Query<DeleteQuery>,
    posted: Posted<crate::auth::NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Memory { store: &store_id, op: MemoryOp::WriteMemories, attached: None })?;
    let memory = console.store.get_memory(&posted.who.workspace, &store_id, &memory_id).await?;
    match console
        .store
        .delete_memory(&posted.who.workspace, &store_id, &memory_id, q.expected, posted.who.actor())
        .await
    {
        Ok(()) => {}
        Err(StoreError::PreconditionFailed { .. }) => {
            return Err(PageError::Invalid(
                "the memory changed after you asked to delete it, so it was kept; look at it again before deleting"
                    .into(),
            ));
        }
        Err(err) => return Err(err.into()),
    }
    tracing::info!(store.id = %store_id, memory.id = %memory_id, by = %posted.who.label(), "deleted memory in the console");
    Ok(see_other(&store_url(store_id.as_str(), folder_of(&memory.path))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breadcrumbs_name_each_folder_level() {
        let c = crumbs("memstore_1", "/a/b/");
        let labels: Vec<_> = c.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["/", "a/", "b/"]);
        assert_eq!(c[2].href, "/console/stores/memstore_1?prefix=%2Fa%2Fb%2F");
        assert_eq!(crumbs("memstore_1", "/").len(), 1);
    }

    #[test]
    fn a_filter_searches_in_its_folder() {
        assert_eq!(folder_of("/notes/st"), "/notes/");
        assert_eq!(folder_of("/st"), "/");
        assert_eq!(folder_of("st"), "/");
    }
}
