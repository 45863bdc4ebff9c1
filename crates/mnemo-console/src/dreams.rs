//! Dreams: the workspace's list (newest first, archived ones on request), a dream's page with
//! every field of the object — its inputs, output, instructions, usage, error and the session
//! that runs it — and its two actions, cancel and archive, asked of the same store operations
//! as `/v1/dreams/{id}/cancel` and `/archive`. A dream's output is reviewed against its input on
//! the store comparison page (`compare`).

use std::collections::HashMap;

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use mnemo_api::{Dream, DreamId, DreamUsage, MemoryStoreId, OutputBehavior, SessionId, WorkspaceId};
use mnemo_http::{Id, Query};
use mnemo_store::StoreError;
use mnemo_store::ops::dreams::ListDreams;
use mnemo_store::rules::scope::Action;

use crate::Console;
use crate::auth::{NoFields, Posted, Signed};
use crate::page::{Chrome, PageError, Section, refusal, render, see_other};
use crate::stores::ArchivedList;
use crate::text::when;
use crate::transcript::thousands;

/// Dreams per page of the list.
const PAGE: u32 = 50;

/// Whether `err` says the thing asked for is not there (deleted since it was named).
pub(crate) fn gone(err: &StoreError) -> bool {
    match err {
        StoreError::NotFound { .. } => true,
        StoreError::Coded { code, .. } => code.is_not_found(),
        _ => false,
    }
}

/// A memory store a dream names, as its pages link to it.
#[derive(Debug, Clone)]
pub(crate) struct StoreLink {
    pub(crate) id: String,
    /// Its name, or its id with "(deleted)" once it is gone.
    pub(crate) name: String,
    /// Its page; `None` once it is deleted.
    pub(crate) href: Option<String>,
    pub(crate) archived: bool,
}

/// Store names by id, each looked up once per page.
async fn store_links(
    console: &Console,
    ws: &WorkspaceId,
    ids: impl Iterator<Item = &MemoryStoreId>,
) -> Result<HashMap<MemoryStoreId, StoreLink>, PageError> {
    let mut links = HashMap::new();
    for id in ids {
        if links.contains_key(id) {
            continue;
        }
        let link = match console.store.get_memory_store(ws, id).await {
            Ok(s) => StoreLink {
                id: id.to_string(),
                name: s.name,
                href: Some(format!("/console/stores/{id}")),
                archived: s.archived_at.is_some(),
            },
            Err(err) if gone(&err) => {
                StoreLink { id: id.to_string(), name: format!("{id} (deleted)"), href: None, archived: false }
            }
            Err(err) => return Err(err.into()),
        };
        links.insert(id.clone(), link);
    }
    Ok(links)
}

/// Input tokens as a person counts them: fresh, written to and read from the cache.
fn tokens_in(usage: &DreamUsage) -> u64 {
    usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
}

/// One dream as a row of the list (and the head of its page).
#[derive(Debug)]
pub(crate) struct DreamRow {
    id: String,
    href: String,
    status: &'static str,
    archived: bool,
    model: String,
    input: Option<StoreLink>,
    output: Option<StoreLink>,
    /// The output is the input store itself (`update_existing`).
    in_place: bool,
    sessions: usize,
    tokens_in: String,
    tokens_out: String,
    created: String,
    ended: String,
}

fn dream_row(d: &Dream, stores: &HashMap<MemoryStoreId, StoreLink>) -> DreamRow {
    DreamRow {
        id: d.id.to_string(),
        href: format!("/console/dreams/{}", d.id),
        status: d.status.as_str(),
        archived: d.archived_at.is_some(),
        model: d.model.id.clone(),
        input: d.input_store().and_then(|s| stores.get(s)).cloned(),
        output: d.output_store().and_then(|s| stores.get(s)).cloned(),
        in_place: matches!(d.output_behavior, OutputBehavior::UpdateExisting { .. }),
        sessions: d.input_sessions().len(),
        tokens_in: thousands(tokens_in(&d.usage)),
        tokens_out: thousands(d.usage.output_tokens),
        created: when(&d.created_at),
        ended: d.ended_at.as_ref().map(when).unwrap_or_default(),
    }
}

#[derive(Debug, Template)]
#[template(path = "dreams.html")]
struct DreamsPage {
    chrome: Chrome,
    rows: Vec<DreamRow>,
    archived: bool,
    first_page: bool,
    next: Option<String>,
}

pub(crate) async fn list(
    State(console): State<Console>,
    who: Signed,
    Query(mut q): Query<ArchivedList>,
) -> Result<Response, PageError> {
    who.allow(Action::Inspect)?;
    let first_page = q.after.is_none();
    let listing = console
        .store
        .list_dreams(
            &who.workspace,
            ListDreams { include_archived: q.archived, limit: PAGE, after: q.after.take(), ..ListDreams::default() },
        )
        .await?;
    let named: Vec<MemoryStoreId> =
        listing.items.iter().flat_map(|d| d.input_store().into_iter().chain(d.output_store())).cloned().collect();
    let stores = store_links(&console, &who.workspace, named.iter()).await?;
    let rows = listing.items.iter().map(|d| dream_row(d, &stores)).collect();
    let next = q.next_link("/console/dreams", listing.next);
    Ok(render(&DreamsPage { chrome: who.chrome(Section::Dreams), rows, archived: q.archived, first_page, next }))
}

/// A session a dream names: its title (or id) and page.
#[derive(Debug)]
pub(crate) struct SessionLink {
    id: String,
    /// Its title, empty when it has none; "(deleted)" once it is gone.
    title: String,
    href: String,
    gone: bool,
}

async fn session_link(console: &Console, ws: &WorkspaceId, id: &SessionId) -> Result<SessionLink, PageError> {
    let (title, gone) = match console.store.get_session(ws, id).await {
        Ok(s) => (s.title.unwrap_or_default(), false),
        Err(err) if gone(&err) => ("(deleted)".to_owned(), true),
        Err(err) => return Err(err.into()),
    };
    Ok(SessionLink { id: id.to_string(), title, href: format!("/console/sessions/{id}"), gone })
}

#[derive(Debug, Template)]
#[template(path = "dream.html")]
struct DreamPage {
    chrome: Chrome,
    dream: DreamRow,
    speed: String,
    /// How the dream writes, in words.
    behavior: &'static str,
    inputs: Vec<SessionLink>,
    /// The session that runs the dream, once it started.
    session: Option<SessionLink>,
    instructions: Option<String>,
    usage: DreamUsage,
    /// Tokens as the session page words them (`1,200 tokens in (…), 35 out`).
    tokens: String,
    /// `(type, message)` of a failed dream.
    error: Option<(String, String)>,
    archived_at: String,
    /// The comparison of the output with the input, when they are two stores.
    compare: Option<String>,
    /// The output's versions the dream's session wrote.
    changes: Option<String>,
    /// Whether the status can still change: the page offers a cancel and says to reload.
    active: bool,
    /// Whether it ended and is not archived yet.
    can_archive: bool,
}

pub(crate) async fn dream_page(
    State(console): State<Console>,
    who: Signed,
    Id(dream_id): Id<DreamId>,
) -> Result<Response, PageError> {
    who.allow(Action::Inspect)?;
    let d = console.store.get_dream(&who.workspace, &dream_id).await?;
    let ws = &who.workspace;
    let named: Vec<MemoryStoreId> = d.input_store().into_iter().chain(d.output_store()).cloned().collect();
    let stores = store_links(&console, ws, named.iter()).await?;
    let mut inputs = Vec::with_capacity(d.input_sessions().len());
    for id in d.input_sessions() {
        inputs.push(session_link(&console, ws, id).await?);
    }
    let session = match &d.session_id {
        Some(id) => Some(session_link(&console, ws, id).await?),
        None => None,
    };
    let output = d.output_store();
    let compare = match (output, d.input_store()) {
        (Some(out), Some(input)) if out != input => Some(format!("/console/stores/{out}/compare?with={input}")),
        _ => None,
    };
    let changes = match (output, &d.session_id) {
        (Some(out), Some(session)) if stores.get(out).is_some_and(|s| s.href.is_some()) => {
            Some(format!("/console/stores/{out}/history?session={session}"))
        }
        _ => None,
    };
    let usage_value = serde_json::to_value(d.usage).unwrap_or_default();
    Ok(render(&DreamPage {
        chrome: who.chrome(Section::Dreams),
        speed: d.model.speed.clone().unwrap_or_default(),
        behavior: match d.output_behavior {
            OutputBehavior::CreateNew => "create_new: a new store that starts as a copy of the input",
            OutputBehavior::UpdateExisting { .. } => "update_existing: the input store itself is rewritten",
        },
        inputs,
        session,
        instructions: d.instructions.clone(),
        usage: d.usage,
        tokens: crate::transcript::tokens_text(&usage_value)
            .unwrap_or_else(|| if d.status.is_final() { "none" } else { "none yet" }.into()),
        error: d.error.as_ref().map(|e| (e.kind.clone(), e.message.clone())),
        archived_at: d.archived_at.as_ref().map(when).unwrap_or_default(),
        compare,
        changes,
        active: !d.status.is_final(),
        can_archive: d.status.is_final() && d.archived_at.is_none(),
        dream: dream_row(&d, &stores),
    }))
}

/// Cancels a pending or running dream (`POST /v1/dreams/{id}/cancel`): `canceled` at once, and
/// this process's runner of it stops at once (another replica's within a second). A dream that already ended is refused in the store's words.
pub(crate) async fn cancel(
    State(console): State<Console>,
    Id(dream_id): Id<DreamId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Administer)?;
    match console.store.cancel_dream(&posted.who.workspace, &dream_id).await {
        Ok(d) => {
            console.hooks.dream_canceled(&dream_id);
            tracing::info!(dream.id = %dream_id, status = %d.status, by = %posted.who.label(), "canceled a dream in the console");
            Ok(see_other(&format!("/console/dreams/{dream_id}")))
        }
        Err(err) => Err(PageError::Invalid(format!("the dream was not canceled: {}", refusal(err)?))),
    }
}

/// Archives a finished dream (`POST /v1/dreams/{id}/archive`): hidden from the list unless
/// archived ones are shown; its output store is left as it is.
pub(crate) async fn archive(
    State(console): State<Console>,
    Id(dream_id): Id<DreamId>,
    posted: Posted<NoFields>,
) -> Result<Response, PageError> {
    posted.who.allow(Action::Administer)?;
    match console.store.archive_dream(&posted.who.workspace, &dream_id).await {
        Ok(_) => {
            tracing::info!(dream.id = %dream_id, by = %posted.who.label(), "archived a dream in the console");
            Ok(see_other(&format!("/console/dreams/{dream_id}")))
        }
        Err(err) => Err(PageError::Invalid(format!("the dream was not archived: {}", refusal(err)?))),
    }
}
