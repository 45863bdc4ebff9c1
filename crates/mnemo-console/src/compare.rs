//! Two memory stores compared path by path (a dream's output with its input): what only the
//! first holds (added), what only the second holds (removed), what both hold with other content
//! (changed, with a line diff) and how many are the same; with the way to use the first store in
//! a session, and to archive it.
//!
//! Each store is read with [`mnemo_store::Store::export_memories`], one after the other (never
//! two reads held at once): the second store's paths and digests are kept, the first store is
//! matched against them as it streams, and only the changed memories whose diffs the page
//! shows keep their content, so a page costs a bounded amount of memory whatever the stores
//! hold.

use std::collections::HashMap;

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use mnemo_api::{Memory, MemoryId, MemoryStore, MemoryStoreId, WorkspaceId};
use mnemo_http::{BadInput, FromQuery, Id, Params, PathId, Query};
use mnemo_store::rules::dream::meta;
use mnemo_store::rules::scope::{Action, MemoryOp};
use mnemo_store::{ExportPart, StoreError};

use crate::Console;
use crate::auth::Signed;
use crate::memories::StoreHead;
use crate::page::{Chrome, PageError, Section, render};
use crate::text::{DiffLine, diff, size};

/// Changed memories shown with their line diff; the rest are listed by path.
const DIFFS_SHOWN: usize = 50;
/// Memories read per step of an export.
const CHUNK: u32 = mnemo_store::EXPORT_CHUNK;

/// The store the page's store is compared with (`?with=memstore_…`).
#[derive(Debug)]
pub(crate) struct CompareQuery {
    with: MemoryStoreId,
}

impl FromQuery for CompareQuery {
    const ONCE: &'static [&'static str] = &["with"];

    fn from_query(q: &Params) -> Result<Self, BadInput> {
        let raw = q.one("with").map(str::trim).unwrap_or_default();
        if raw.is_empty() {
            return Err(BadInput::Invalid(
                "name the store to compare with: `?with=memstore_…` (a dream's page links here)".into(),
            ));
        }
        Ok(Self { with: MemoryStoreId::from_path(raw)? })
    }
}

/// A store's live memories in path order, read chunk by chunk from one snapshot.
struct Snapshot {
    parts: tokio::sync::mpsc::Receiver<Result<ExportPart, StoreError>>,
    chunk: std::vec::IntoIter<Memory>,
    done: bool,
}

impl Snapshot {
    async fn open(console: &Console, ws: &WorkspaceId, store: &MemoryStoreId) -> Result<Self, StoreError> {
        let export = console.store.export_memories(ws, store, CHUNK).await?;
        Ok(Self { parts: export.parts, chunk: Vec::new().into_iter(), done: false })
    }

    /// The next memory, `None` after the last; a read cut short is an error, never an end.
    async fn next(&mut self) -> Result<Option<Memory>, StoreError> {
        loop {
            if let Some(m) = self.chunk.next() {
                return Ok(Some(m));
            }
            if self.done {
                return Ok(None);
            }
            match self.parts.recv().await {
                Some(Ok(ExportPart::Memories(ms))) => self.chunk = ms.into_iter(),
                Some(Ok(ExportPart::Done)) => self.done = true,
                Some(Err(err)) => return Err(err),
                None => return Err(StoreError::backend("a store's export ended before its last memory")),
            }
        }
    }
}

/// A memory only one of the stores holds.
#[derive(Debug)]
pub(crate) struct OnlyIn {
    path: String,
    href: String,
    size: String,
    /// The other store holds the same content at this path (a move).
    moved: Option<String>,
}

/// A path both stores hold with different content.
#[derive(Debug)]
pub(crate) struct Changed {
    path: String,
    /// The memory in the first store, and in the second.
    href: String,
    other_href: String,
    /// The line diff from the second store's content to the first's; `None` past
    /// [`DIFFS_SHOWN`].
    diff: Option<Diff>,
}

/// A line diff as `diff.html` shows it.
#[derive(Debug)]
pub(crate) struct Diff {
    changes: Vec<DiffLine>,
}

/// A memory of the second store as the comparison keeps it: no content.
struct Kept {
    id: MemoryId,
    sha256: String,
    size: u64,
}

/// What the two stores differ in.
#[derive(Debug, Default)]
struct Comparison {
    added: Vec<OnlyIn>,
    removed: Vec<OnlyIn>,
    changed: Vec<Changed>,
    unchanged: u64,
}

/// Compares `first` with `second`: `added` is what only `first` holds.
async fn compare(
    console: &Console,
    ws: &WorkspaceId,
    first: &MemoryStoreId,
    second: &MemoryStoreId,
) -> Result<Comparison, StoreError> {
    let mut theirs: HashMap<String, Kept> = HashMap::new();
    let mut read = Snapshot::open(console, ws, second).await?;
    while let Some(m) = read.next().await? {
        theirs.insert(m.path, Kept { id: m.id, sha256: m.content_sha256, size: m.content_size_bytes });
    }
    let memory_href = |store: &MemoryStoreId, id: &MemoryId| format!("/console/stores/{store}/memories/{id}");
    let mut out = Comparison::default();
    // Changed memories whose diffs are shown: their index in `out.changed`, the first store's
    // content, and the second store's memory to read once this export is over.
    let mut to_diff: Vec<(usize, String, MemoryId)> = Vec::new();
    let mut added_sha: Vec<String> = Vec::new();
    let mut read = Snapshot::open(console, ws, first).await?;
    while let Some(m) = read.next().await? {
        match theirs.remove(&m.path) {
            None => {
                out.added.push(OnlyIn {
                    href: memory_href(first, &m.id),
                    size: size(m.content_size_bytes),
                    path: m.path,
                    moved: None,
                });
                added_sha.push(m.content_sha256);
            }
            Some(kept) if kept.sha256 == m.content_sha256 => out.unchanged += 1,
            Some(kept) => {
                out.changed.push(Changed {
                    href: memory_href(first, &m.id),
                    other_href: memory_href(second, &kept.id),
                    path: m.path,
                    diff: None,
                });
                if to_diff.len() < DIFFS_SHOWN {
                    to_diff.push((out.changed.len() - 1, m.content.unwrap_or_default(), kept.id));
                }
            }
        }
    }
    drop(read);
    for (at, now, id) in to_diff {
        let before = match console.store.get_memory(ws, second, &id).await {
            Ok(m) => m.content.unwrap_or_default(),
            // Deleted since it was listed: compared with nothing.
            Err(StoreError::NotFound { .. }) => String::new(),
            Err(err) => return Err(err),
        };
        out.changed[at].diff = Some(Diff { changes: diff(&before, &now) });
    }
    // What is left of the second store is what the first does not hold; the same content at a
    // new path reads as a move.
    let mut removed: Vec<(String, Kept)> = theirs.into_iter().collect();
    removed.sort_by(|a, b| a.0.cmp(&b.0));
    let by_sha: HashMap<&str, &str> = removed.iter().map(|(p, k)| (k.sha256.as_str(), p.as_str())).collect();
    let added_paths: HashMap<&str, &str> =
        out.added.iter().zip(&added_sha).map(|(a, sha)| (sha.as_str(), a.path.as_str())).collect();
    let moved_from: Vec<Option<String>> =
        added_sha.iter().map(|sha| by_sha.get(sha.as_str()).map(|p| (*p).to_owned())).collect();
    let removed_rows: Vec<OnlyIn> = removed
        .iter()
        .map(|(path, kept)| OnlyIn {
            path: path.clone(),
            href: memory_href(second, &kept.id),
            size: size(kept.size),
            moved: added_paths.get(kept.sha256.as_str()).map(|p| (*p).to_owned()),
        })
        .collect();
    for (a, from) in out.added.iter_mut().zip(moved_from) {
        a.moved = from;
    }
    out.removed = removed_rows;
    Ok(out)
}

#[derive(Debug, Template)]
#[template(path = "compare.html")]
struct ComparePage {
    chrome: Chrome,
    output: StoreHead,
    input: StoreHead,
    /// The dream that wrote the first store, when its metadata names one.
    dream: Option<String>,
    added: Vec<OnlyIn>,
    removed: Vec<OnlyIn>,
    changed: Vec<Changed>,
    /// How many changed memories are listed without a diff.
    undiffed: usize,
    unchanged: u64,
    /// The session `resources` entry that attaches the first store.
    attach: String,
    /// Where the archive form returns to.
    back: String,
}

/// The dream a store's metadata says wrote it (an output store of `create_new`).
fn written_by(store: &MemoryStore) -> Option<String> {
    let id = store.metadata.get(meta::DREAM_ID)?;
    id.parse::<mnemo_api::DreamId>().ok().map(|d| d.to_string())
}

pub(crate) async fn page(
    State(console): State<Console>,
    who: Signed,
    Id(store_id): Id<MemoryStoreId>,
    Query(q): Query<CompareQuery>,
) -> Result<Response, PageError> {
    let ws = &who.workspace;
    for store in [&store_id, &q.with] {
        who.allow(Action::Memory { store, op: MemoryOp::Read, attached: None })?;
    }
    let (output, input) =
        tokio::try_join!(console.store.get_memory_store(ws, &store_id), console.store.get_memory_store(ws, &q.with))?;
    let found = compare(&console, ws, &store_id, &q.with).await?;
    // Keys in the order the API's documentation writes them; an id holds no character JSON
    // would escape.
    let attach = format!(r#"{{"type":"memory_store","memory_store_id":"{store_id}"}}"#);
    Ok(render(&ComparePage {
        chrome: who.chrome(Section::Stores),
        dream: written_by(&output),
        undiffed: found.changed.iter().filter(|c| c.diff.is_none()).count(),
        back: format!("/console/stores/{store_id}/compare?with={}", q.with),
        output: StoreHead::from(&output),
        input: StoreHead::from(&input),
        added: found.added,
        removed: found.removed,
        changed: found.changed,
        unchanged: found.unchanged,
        attach,
    }))
}
