//! The list of memory stores; creating, archiving and deleting one.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use mnemo_api::{MemoryStoreId, validate_store_description, validate_store_name};
use mnemo_http::{BadInput, FromQuery, Id, Params, Query};
use mnemo_store::{Cursor, ListMemoryStores, NewMemoryStore};
use serde::Deserialize;

use crate::Console;
use crate::audit_log::record;
use crate::auth::{NoFields, Posted, Signed, encode_component, safe_next};
use crate::page::{Chrome, PageError, Section, render, see_other};
use crate::text::{size, when};
use mnemo_store::rules::audit::AuditAction;
use mnemo_store::rules::scope::{Action, MemoryOp};

/// Stores per page of the list.
const PAGE: u32 = 50;

#[derive(Debug)]
pub(crate) struct StoreRow {
    id: String,
    name: String,
    description: String,
    memories: u64,
    size: String,
    created: String,
    archived: bool,
}

#[derive(Debug, Template)]
#[template(path = "stores.html")]
struct StoresPage {
    chrome: Chrome,
    rows: Vec<StoreRow>,
    archived: bool,
    first_page: bool,
    next: Option<String>,
}

/// The query of a list that hides archived items unless asked (stores, environments): its
/// toggle's `archived=true`, and the page link.
#[derive(Debug)]
pub(crate) struct ArchivedList {
    /// Show archived ones too. Only the toggle's `archived=true` asks for it; any other value
    /// leaves them hidden, as a missing one does.
    pub(crate) archived: bool,
    /// The page a previous page linked to (`page`).
    pub(crate) after: Option<Cursor>,
}

impl FromQuery for ArchivedList {
    const ONCE: &'static [&'static str] = &["archived", "page"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        Ok(Self { archived: q.one("archived") == Some("true"), after: mnemo_http::cursor(q.one("page"))? })
    }
}

impl ArchivedList {
    /// The link to the page at `next` of the list at `base`, keeping the toggle.
    pub(crate) fn next_link(&self, base: &str, next: Option<Cursor>) -> Option<String> {
        let archived = if self.archived { "&archived=true" } else { "" };
        next.map(|c| format!("{base}?page={}{archived}", encode_component(&c.encode())))
    }
}

pub(crate) async fn list(
    State(console): State<Console>,
    who: Signed,
    Query(mut q): Query<ArchivedList>,
) -> Result<Response, PageError> {
    let first_page = q.after.is_none();
    let listing = console
        .store
        .list_memory_stores(
            &who.workspace,
            ListMemoryStores {
                include_archived: q.archived,
                created_at_gte: None,
                created_at_lte: None,
                limit: PAGE,
                after: q.after.take(),
            },
        )
        .await?;
    let ids: Vec<MemoryStoreId> = listing.items.iter().map(|s| s.id.clone()).collect();
    let usage = console.store.memory_store_usage(&who.workspace, &ids).await?;
    let rows = listing
        .items
        .into_iter()
        .map(|s| {
            let used = usage.get(&s.id).copied().unwrap_or_default();
            StoreRow {
                id: s.id.to_string(),
                name: s.name,
                description: s.description,
                memories: used.memories,
                size: size(used.bytes),
                created: when(&s.created_at),
                archived: s.archived_at.is_some(),
            }
        })
        .collect();
    let next = q.next_link("/console", listing.next);
    Ok(render(&StoresPage { chrome: who.chrome(Section::Stores), rows, archived: q.archived, first_page, next }))
}

#[derive(Debug, Template)]
#[template(path = "store_new.html")]
struct NewStorePage {
    chrome: Chrome,
    name: String,
    description: String,
    message: Option<String>,
}

pub(crate) async fn new_form(who: Signed) -> Result<Response, PageError> {
    who.allow(Action::MemoryStores { create: true })?;
    Ok(render(&NewStorePage {
        chrome: who.chrome(Section::Stores),
        name: String::new(),
        description: String::new(),
        message: None,
    }))
}

#[derive(Debug, Deserialize)]
pub(crate) struct NewStoreForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
}

pub(crate) async fn create(
    State(console): State<Console>,
    posted: Posted<NewStoreForm>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::MemoryStores { create: true })?;
    let Posted { who, form } = posted;
    let name = form.name.trim().to_owned();
    let description = crate::text::from_form(form.description.trim(), false);
    let refused = validate_store_name(&name).and_then(|()| validate_store_description(&description)).err();
    if let Some(err) = refused {
        return Ok(crate::page::render_with(
            axum::http::StatusCode::BAD_REQUEST,
            &NewStorePage { chrome: who.chrome(Section::Stores), name, description, message: Some(err.0) },
        ));
    }
    let store = console
        .store
        .create_memory_store(&who.workspace, NewMemoryStore { name, description, metadata: Default::default() })
        .await?;
    tracing::info!(store.id = %store.id, by = %who.label(), "created memory store in the console");
    Ok(see_other(&format!("/console/stores/{}", store.id)))
}

#[derive(Debug, Template)]
#[template(path = "confirm.html")]
pub(crate) struct ConfirmPage {
    pub(crate) chrome: Chrome,
    pub(crate) title: String,
    pub(crate) message: String,
    pub(crate) detail: Option<String>,
    pub(crate) action: String,
    pub(crate) button: String,
    pub(crate) cancel: String,
}

pub(crate) async fn archive_confirm(
    State(console): State<Console>,
    who: Signed,
    Id(store): Id<MemoryStoreId>,
) -> Result<Response, PageError> {
    who.allow(Action::Memory { store: &store, op: MemoryOp::Administer, attached: None })?;
    let store = console.store.get_memory_store(&who.workspace, &store).await?;
    Ok(render(&ConfirmPage {
        chrome: who.chrome(Section::Stores),
        title: "Archive this store?".into(),
        message: format!(
            "Archive “{}”? Its memories stay readable, but nothing can change them any more, and new sessions cannot attach it.",
            store.name
        ),
        detail: Some("Archiving cannot be undone.".into()),
        action: format!("/console/stores/{}/archive", store.id),
        button: "Archive store".into(),
        cancel: format!("/console/stores/{}", store.id),
    }))
}

/// The archive form: its CSRF token, and the console page to return to (the store's own page
/// when not given, e.g. the comparison page its button is on).
#[derive(Debug, Deserialize)]
pub(crate) struct ArchiveForm {
    #[serde(default)]
    next: Option<String>,
}

pub(crate) async fn archive(
    State(console): State<Console>,
    Id(id): Id<MemoryStoreId>,
    posted: Posted<ArchiveForm>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Memory { store: &id, op: MemoryOp::Administer, attached: None })?;
    console.store.archive_memory_store(&posted.who.workspace, &id).await?;
    tracing::info!(store.id = %id, by = %posted.who.label(), "archived memory store in the console");
    let back = match posted.form.next.as_deref() {
        Some(next) => safe_next(Some(next)).to_owned(),
        None => format!("/console/stores/{id}"),
    };
    Ok(see_other(&back))
}

pub(crate) async fn delete_confirm(
    State(console): State<Console>,
    who: Signed,
    Id(store): Id<MemoryStoreId>,
) -> Result<Response, PageError> {
    who.allow(Action::Memory { store: &store, op: MemoryOp::Administer, attached: None })?;
    let store = console.store.get_memory_store(&who.workspace, &store).await?;
    let used = console
        .store
        .memory_store_usage(&who.workspace, std::slice::from_ref(&store.id))
        .await?
        .get(&store.id)
        .copied()
        .unwrap_or_default();
    Ok(render(&ConfirmPage {
        chrome: who.chrome(Section::Stores),
        title: "Delete this store?".into(),
        message: format!(
            "Delete “{}” with its {} and every version of them?",
            store.name,
            crate::text::count(used.memories, "memory", "memories")
        ),
        detail: Some("This cannot be undone: the history goes too.".into()),
        action: format!("/console/stores/{}/delete", store.id),
        button: "Delete store".into(),
        cancel: format!("/console/stores/{}", store.id),
    }))
}

pub(crate) async fn delete(
    State(console): State<Console>,
    Id(id): Id<MemoryStoreId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Memory { store: &id, op: MemoryOp::Administer, attached: None })?;
    console.store.delete_memory_store(&posted.who.workspace, &id).await?;
    record(&console, &posted.who, AuditAction::MemoryStoreDelete, id.as_str(), serde_json::json!({})).await;
    tracing::info!(store.id = %id, by = %posted.who.label(), "deleted memory store in the console");
    Ok(see_other("/console"))
}
