//! Reading a store into export lines.
//!
//! The memories are read through `mnemo serve`'s memory stream (one answer, one snapshot) when
//! the server offers it, else with the full listing (`view=full`, 20 per page, following
//! `next_page`), so every memory is exported once with the content its digest was computed
//! from; every digest is checked again here. With `versions`, the store's whole version history
//! is read first (the versions listing, `view=full`) and attached to the memories it belongs to;
//! the history of deleted memories follows as history lines. A store that changes during an
//! export through pages is not caught at one instant: each memory is as the page that carried
//! it saw it.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;

use mnemo_api::limits::MAX_FULL_VIEW_PAGE_LIMIT;
use mnemo_api::{Memory, MemoryId, MemoryListItem, MemoryStoreId, View, content_sha256};
use mnemo_client::{Client, ListMemoriesParams, ListMemoryVersionsParams};

use crate::Error;
use crate::format::{
    FORMAT, FORMAT_VERSION, Header, History, Line, MemoryEntry, Source, StoreFields, Trailer, VersionEntry,
};

/// How to export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// Also write every memory's version history, and that of deleted memories.
    pub versions: bool,
    /// Written into the header (`mnemo --version`'s text).
    pub mnemo_version: String,
}

/// What an export wrote: the trailer's counts.
pub type ExportSummary = Trailer;

/// What an export is doing, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The store's history is read: this many versions.
    Versions(u64),
    /// Memories written so far.
    Memories(u64),
}

/// Writes the export of `store` to `out`, line by line, and answers the counts it wrote in
/// the trailer. `out` is flushed at the end; on an error it holds a file without a trailer,
/// which an import refuses.
pub async fn export(
    client: &Client,
    store: &MemoryStoreId,
    options: &ExportOptions,
    out: &mut impl Write,
    progress: &(dyn Fn(Step) + Sync),
) -> Result<ExportSummary, Error> {
    let fields = client.get_memory_store(store).await.map_err(|e| match e.is_not_found() {
        true => Error::StoreNotFound(store.clone()),
        false => Error::call(format!("read memory store {store}"))(e),
    })?;
    let retention = client
        .get_version_retention(store)
        .await
        .map_err(Error::call(format!("read the version retention of memory store {store}")))?
        .and_then(|view| view.retention);
    let mut histories = match options.versions {
        true => read_versions(client, store, progress).await?,
        false => BTreeMap::new(),
    };
    let header = Header {
        format: FORMAT.to_owned(),
        format_version: FORMAT_VERSION,
        mnemo_version: options.mnemo_version.clone(),
        exported_at: chrono::Utc::now(),
        source: Source { base_url: client.public_base_url(), memory_store_id: store.clone() },
        store: StoreFields {
            name: fields.name,
            description: fields.description,
            metadata: fields.metadata,
            created_at: fields.created_at,
            archived_at: fields.archived_at,
            version_retention: retention,
        },
        versions: options.versions,
    };
    write_line(out, &Line::Header(header))?;

    let mut trailer = Trailer::default();
    let mut seen = HashSet::new();
    let mut source = Memories::open(client, store).await?;
    while let Some(batch) = source.next(client, store).await? {
        for memory in batch {
            let content = memory.content.ok_or_else(|| {
                Error::Inconsistent(format!("memory {} came without its content in a full listing", memory.path))
            })?;
            if content_sha256(content.as_bytes()) != memory.content_sha256 {
                return Err(Error::Inconsistent(format!(
                    "the content of memory {} does not match its content_sha256",
                    memory.path
                )));
            }
            if !seen.insert(memory.path.clone()) {
                return Err(Error::Inconsistent(format!("memory {} was listed twice", memory.path)));
            }
            let entry = MemoryEntry {
                size: content.len() as u64,
                path: memory.path,
                content,
                content_sha256: memory.content_sha256,
                versions: options.versions.then(|| histories.remove(&memory.id).unwrap_or_default()),
                memory_id: Some(memory.id),
                created_at: Some(memory.created_at),
                updated_at: Some(memory.updated_at),
            };
            trailer.count_memory(&entry);
            write_line(out, &Line::Memory(entry))?;
        }
        progress(Step::Memories(trailer.memories));
    }
    // What is left belongs to memories that no longer exist (in id order, which is creation order).
    for (memory_id, versions) in histories {
        let history = History { memory_id, versions };
        trailer.count_history(&history);
        write_line(out, &Line::History(history))?;
    }
    write_line(out, &Line::Trailer(trailer))?;
    out.flush().map_err(Error::Write)?;
    Ok(trailer)
}

/// Every version of the store, by memory, oldest first.
async fn read_versions(
    client: &Client,
    store: &MemoryStoreId,
    progress: &(dyn Fn(Step) + Sync),
) -> Result<BTreeMap<MemoryId, Vec<VersionEntry>>, Error> {
    let params = ListMemoryVersionsParams { view: Some(View::Full), ..Default::default() };
    let versions = client
        .list_all_memory_versions(store, params)
        .await
        .map_err(Error::call(format!("list the memory versions of {store}")))?;
    progress(Step::Versions(versions.len() as u64));
    let mut by_memory: BTreeMap<MemoryId, Vec<VersionEntry>> = BTreeMap::new();
    for version in versions {
        by_memory.entry(version.memory_id.clone()).or_default().push(version.into());
    }
    for versions in by_memory.values_mut() {
        // Listed newest first: reversed, then ordered by time (stable, so equal times keep
        // the server's order).
        versions.reverse();
        versions.sort_by_key(|v| v.created_at);
    }
    Ok(by_memory)
}

/// Where the memories are read from: `mnemo serve`'s memory stream when the server offers it
/// (one answer, one snapshot unless it had to be resumed), else the full listing's pages.
enum Memories {
    Stream(Box<mnemo_client::MemoryStream>),
    /// The next page's query; `None` after the last page.
    Pages(Option<ListMemoriesParams>),
}

impl Memories {
    async fn open(client: &Client, store: &MemoryStoreId) -> Result<Self, Error> {
        let stream =
            client.open_memory_stream(store).await.map_err(Error::call(format!("read the memories of {store}")))?;
        Ok(match stream {
            Some(stream) => Self::Stream(Box::new(stream)),
            None => Self::Pages(Some(ListMemoriesParams {
                limit: Some(MAX_FULL_VIEW_PAGE_LIMIT),
                view: Some(View::Full),
                ..Default::default()
            })),
        })
    }

    async fn next(&mut self, client: &Client, store: &MemoryStoreId) -> Result<Option<Vec<Memory>>, Error> {
        match self {
            Self::Stream(stream) => {
                stream.next_batch().await.map_err(Error::call(format!("read the memories of {store}")))
            }
            Self::Pages(params) => {
                let Some(query) = params.as_mut() else { return Ok(None) };
                let page = client
                    .list_memories(store, query)
                    .await
                    .map_err(Error::call(format!("list the memories of {store}")))?;
                match page.next_page.filter(|p| !p.is_empty()) {
                    Some(next) => query.page = Some(next),
                    None => *params = None,
                }
                Ok(Some(
                    page.data
                        .into_iter()
                        .filter_map(|item| match item {
                            MemoryListItem::Memory(m) => Some(m),
                            MemoryListItem::Prefix(_) => None,
                        })
                        .collect(),
                ))
            }
        }
    }
}

fn write_line(out: &mut impl Write, line: &Line) -> Result<(), Error> {
    let mut text = serde_json::to_vec(line).expect("export lines serialise");
    text.push(b'\n');
    out.write_all(&text).map_err(Error::Write)
}
