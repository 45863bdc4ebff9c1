//! Recreating a file's live memories in a store.
//!
//! The store is listed once (content-free), [`plan`] decides per memory, the creates and
//! overwrites run [`IMPORT_CONCURRENCY`](crate::IMPORT_CONCURRENCY) at a time, and the store is
//! listed again to check that every memory the file holds is there with the file's digest.
//!
//! - *Idempotent and resumable:* a memory already at its path with the same digest is skipped,
//!   so running an import again — after it finished, or after it was interrupted — writes only
//!   what is missing. A create that meets a memory the listing did not show (a `409` path
//!   conflict: the previous run's create landed late, or a retried create's first attempt did)
//!   is looked at, and skipped if it holds the same bytes.
//! - *Conflicts are reported, not overwritten:* a path holding other bytes, or a memory above or
//!   below a path, is left alone and listed in the report; `overwrite` updates the first kind,
//!   on the condition that it still holds what the listing showed.
//! - *The cap:* when the server says the store is full (mnemo's `memory_store_full` code), no
//!   more creates are sent; the report says how many were left out.
//!
//! Versions cannot be replayed: a server creates them itself, one per write, with the caller
//! as actor. An import writes one `created` (or `modified`) version per memory it writes; the
//! history in the file stays there, for audit.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures::stream::BoxStream;
use futures::{StreamExt, future};
use mnemo_api::{
    CreateMemoryStore, ErrorType, MemoryId, MemoryStore, MemoryStoreId, Precondition, UpdateMemory, View,
    validate_metadata, validate_store_description, validate_store_name,
};
use mnemo_client::{Client, ClientError, PathConflict};

use crate::format::{ExportFile, FileError, MemoryEntry};
use crate::plan::{Action, Conflict, Existing, plan, short};
use crate::{Error, plain};

/// Where an import goes.
#[derive(Debug, Clone)]
pub enum Target {
    /// An existing store; its name, description and metadata stay as they are.
    Into(MemoryStoreId),
    /// A new store with the file's description and metadata, and the file's name unless given.
    New { name: Option<String> },
}

/// How to import.
#[derive(Debug, Clone, Copy)]
pub struct ImportOptions {
    /// Update memories whose path holds other bytes instead of reporting them.
    pub overwrite: bool,
    /// Writes in flight at once.
    pub concurrency: usize,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self { overwrite: false, concurrency: crate::IMPORT_CONCURRENCY }
    }
}

/// What an import did, memory by memory (in the file's order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub created: usize,
    /// Already in the store with the same bytes.
    pub skipped: usize,
    pub overwritten: usize,
    /// Left alone: (path, why).
    pub conflicts: Vec<(String, Conflict)>,
    /// Not written: (path, why in plain words).
    pub failures: Vec<(String, String)>,
    /// When the store filled up: how many memories were left out, and the server's words.
    pub store_full: Option<(usize, String)>,
    /// Memories of the store that the file does not hold (left as they are).
    pub others: usize,
}

impl ImportReport {
    /// Every memory of the file is in the store with the file's bytes.
    pub fn is_complete(&self) -> bool {
        self.conflicts.is_empty() && self.failures.is_empty() && self.store_full.is_none()
    }
}

/// Opens the store an import goes into: checks an existing one (it must exist and not be
/// archived), or creates a new one. Answers the store and whether it was created.
pub async fn open_target(client: &Client, file: &ExportFile, target: &Target) -> Result<(MemoryStore, bool), Error> {
    match target {
        Target::Into(id) => {
            let store = client.get_memory_store(id).await.map_err(|e| match e.is_not_found() {
                true => Error::StoreNotFound(id.clone()),
                false => Error::call(format!("read memory store {id}"))(e),
            })?;
            if store.archived_at.is_some() {
                return Err(Error::Archived(id.clone()));
            }
            Ok((store, false))
        }
        Target::New { name } => {
            let fields = &file.header.store;
            let name = name.clone().unwrap_or_else(|| fields.name.clone());
            validate_store_name(&name).map_err(|e| Error::Invalid(format!("the store's name: {e}")))?;
            validate_store_description(&fields.description)
                .and_then(|()| validate_metadata(&fields.metadata))
                .map_err(|e| Error::Invalid(format!("the file's store fields: {e}")))?;
            let body = CreateMemoryStore {
                name,
                description: Some(fields.description.clone()).filter(|d| !d.is_empty()),
                metadata: Some(fields.metadata.clone()).filter(|m| !m.is_empty()),
            };
            let retention = fields
                .version_retention
                .as_deref()
                .map(|r| {
                    r.parse::<mnemo_api::Retention>()
                        .map(|r| r.to_string())
                        .map_err(|e| Error::Invalid(format!("the file's store fields: version_retention: {e}")))
                })
                .transpose()?;
            let store = client.create_memory_store(&body).await.map_err(Error::call("create the memory store"))?;
            if let Some(retention) = retention {
                // A server without the extension keeps every version: nothing to carry over.
                match client.set_version_retention(&store.id, Some(&retention)).await {
                    Err(e) if e.is_not_found() => {}
                    other => drop(other.map_err(Error::call("set the new store's version retention"))?),
                }
            }
            Ok((store, true))
        }
    }
}

/// What became of one memory.
#[derive(Debug)]
enum Outcome {
    Created,
    Skipped,
    Overwritten,
    Conflict(Conflict),
    Failed(String),
    /// Refused because the store is full (the server's words), or not sent once it was.
    Full(Option<String>),
}

impl Outcome {
    fn landed(&self) -> bool {
        matches!(self, Self::Created | Self::Skipped | Self::Overwritten)
    }
}

/// Imports the memories of `file` into `store` (see the module documentation). `contents` is the
/// file read again ([`ExportFile::contents`], through [`crate::read_contents`]): its memories in
/// file order, each dropped once written, so an import holds only the contents in flight.
/// `progress` is told how many memories are done, after each.
pub async fn import(
    client: &Client,
    store: &MemoryStoreId,
    file: &ExportFile,
    contents: BoxStream<'_, Result<MemoryEntry, FileError>>,
    options: ImportOptions,
    progress: &(dyn Fn(usize) + Sync),
) -> Result<ImportReport, Error> {
    let existing = listing(client, store).await?;
    let wanted = file.memories.iter().map(|m| (m.path.as_str(), m.content_sha256.as_str()));
    let actions = plan(wanted, &existing, options.overwrite);
    let in_file: HashSet<&str> = file.memories.iter().map(|m| m.path.as_str()).collect();
    let others = existing.keys().filter(|p| !in_file.contains(p.as_str())).count();

    let run = Run { client, store, overwrite: options.overwrite, full: AtomicBool::new(false) };
    let done = AtomicUsize::new(0);
    let tick = || progress(done.fetch_add(1, Ordering::Relaxed) + 1);
    let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(actions.len());
    // The writes to make, by the memory's index in the file.
    let mut writes: Vec<Option<Action>> = Vec::with_capacity(actions.len());
    for action in actions {
        let settled = match action {
            Action::Skip => Some(Outcome::Skipped),
            Action::Conflict(c) => Some(Outcome::Conflict(c)),
            write => {
                writes.push(Some(write));
                outcomes.push(None);
                continue;
            }
        };
        tick();
        writes.push(None);
        outcomes.push(settled);
    }
    // The file's memories as they are read again; those to write go out `concurrency` at a
    // time, the others are dropped at once.
    let mut results = contents
        .enumerate()
        .filter_map(|(i, item)| {
            future::ready(match item {
                Err(e) => Some(Err(e)),
                Ok(entry) => writes.get_mut(i).and_then(Option::take).map(|action| Ok((i, entry, action))),
            })
        })
        .map(|item| {
            let (run, tick) = (&run, &tick);
            async move {
                let (i, entry, action) = item?;
                let outcome = run.write(&entry, action).await;
                tick();
                Ok::<_, FileError>((i, outcome))
            }
        })
        .buffer_unordered(options.concurrency.max(1));
    while let Some(result) = results.next().await {
        let (i, outcome) = result.map_err(Error::File)?;
        outcomes[i] = Some(outcome);
    }
    drop(results);
    let mut outcomes: Vec<Outcome> = outcomes
        .into_iter()
        .enumerate()
        .map(|(i, o)| o.ok_or(i))
        .collect::<Result<_, _>>()
        .map_err(|i| Error::File(FileError::Changed { line: file.memories[i].line }))?;

    // Check the result against a fresh listing: what landed must be there with the file's bytes.
    let after = listing(client, store).await?;
    for (entry, outcome) in file.memories.iter().zip(&mut outcomes) {
        if outcome.landed() && after.get(&entry.path).map(|e| e.content_sha256.as_str()) != Some(&entry.content_sha256)
        {
            *outcome = Outcome::Failed(
                "written, but the store no longer holds these bytes: it changed during the import".to_owned(),
            );
        }
    }
    Ok(report(file, outcomes, others))
}

/// The store's memories by path, content-free.
async fn listing(client: &Client, store: &MemoryStoreId) -> Result<BTreeMap<String, Existing>, Error> {
    let memories = client
        .list_all_memories(store, View::Basic)
        .await
        .map_err(Error::call(format!("list the memories of {store}")))?;
    Ok(memories.into_iter().map(|m| (m.path, Existing { id: m.id, content_sha256: m.content_sha256 })).collect())
}

fn report(file: &ExportFile, outcomes: Vec<Outcome>, others: usize) -> ImportReport {
    let mut report = ImportReport { others, ..ImportReport::default() };
    let mut full = (0, None);
    for (entry, outcome) in file.memories.iter().zip(outcomes) {
        match outcome {
            Outcome::Created => report.created += 1,
            Outcome::Skipped => report.skipped += 1,
            Outcome::Overwritten => report.overwritten += 1,
            Outcome::Conflict(c) => report.conflicts.push((entry.path.clone(), c)),
            Outcome::Failed(why) => report.failures.push((entry.path.clone(), why)),
            Outcome::Full(message) => {
                full.0 += 1;
                full.1 = full.1.or(message);
            }
        }
    }
    if full.0 > 0 {
        report.store_full = Some((full.0, full.1.unwrap_or_default()));
    }
    report
}

/// The writes of one import.
struct Run<'a> {
    client: &'a Client,
    store: &'a MemoryStoreId,
    overwrite: bool,
    /// The server said the store is full: no more creates.
    full: AtomicBool,
}

impl Run<'_> {
    async fn write(&self, entry: &MemoryEntry, action: Action) -> Outcome {
        match action {
            Action::Create => self.create(entry).await,
            Action::Overwrite { id, expected_sha256 } => self.overwrite(entry, &id, expected_sha256).await,
            Action::Skip => Outcome::Skipped,
            Action::Conflict(c) => Outcome::Conflict(c),
        }
    }

    async fn create(&self, entry: &MemoryEntry) -> Outcome {
        if self.full.load(Ordering::Relaxed) {
            return Outcome::Full(None);
        }
        match self.client.create_memory(self.store, &entry.path, &entry.content, None).await {
            Ok(m) => self.stored(entry, &m.content_sha256, Outcome::Created),
            Err(e) if e.is_store_full() => {
                self.full.store(true, Ordering::Relaxed);
                Outcome::Full(Some(message(&e)))
            }
            Err(e) => match e.path_conflict() {
                Some(conflict) => self.taken(entry, conflict).await,
                None => Outcome::Failed(plain(&e)),
            },
        }
    }

    /// A create met a memory the listing did not show: skip it if it holds the same bytes.
    async fn taken(&self, entry: &MemoryEntry, conflict: PathConflict) -> Outcome {
        if let Some(path) = conflict.path.filter(|p| *p != entry.path) {
            return Outcome::Conflict(Conflict::Overlaps { path });
        }
        let found = match conflict.memory_id {
            Some(id) => match self.client.get_memory(self.store, &id, Some(View::Basic)).await {
                Ok(m) => Ok(Some(m)),
                Err(e) if e.is_not_found() => Ok(None),
                Err(e) => Err(e),
            },
            // Servers that do not name the memory: look in its folder.
            None => self
                .client
                .list_folder(self.store, parent_folder(&entry.path))
                .await
                .map(|ms| ms.into_iter().find(|m| m.path == entry.path)),
        };
        match found {
            Ok(Some(m)) if m.path == entry.path && m.content_sha256 == entry.content_sha256 => Outcome::Skipped,
            Ok(Some(m)) if m.path == entry.path && self.overwrite => {
                self.overwrite(entry, &m.id, m.content_sha256).await
            }
            Ok(Some(m)) if m.path == entry.path => {
                Outcome::Conflict(Conflict::Differs { store_sha256: Some(m.content_sha256) })
            }
            Ok(_) => Outcome::Failed(
                "another memory took this path during the import and left again; run the command again".to_owned(),
            ),
            Err(e) => Outcome::Failed(plain(&e)),
        }
    }

    async fn overwrite(&self, entry: &MemoryEntry, id: &MemoryId, expected_sha256: String) -> Outcome {
        let body = UpdateMemory {
            content: Some(entry.content.clone()),
            path: None,
            precondition: Some(Precondition::ContentSha256 { content_sha256: expected_sha256 }),
        };
        match self.client.update_memory(self.store, id, &body, None).await {
            Ok(m) => self.stored(entry, &m.content_sha256, Outcome::Overwritten),
            Err(e) if e.error_type() == Some(ErrorType::MemoryPreconditionFailed.as_str()) => {
                // It changed after the listing: someone else is writing there; leave it to them.
                Outcome::Conflict(Conflict::Differs { store_sha256: None })
            }
            Err(e) if e.is_not_found() => Outcome::Failed(
                "the memory it would overwrite was deleted during the import; run the command again to create it"
                    .to_owned(),
            ),
            Err(e) => Outcome::Failed(plain(&e)),
        }
    }

    /// `done`, if the server reports the file's digest for what it stored.
    fn stored(&self, entry: &MemoryEntry, stored_sha256: &str, done: Outcome) -> Outcome {
        if stored_sha256 == entry.content_sha256 {
            done
        } else {
            Outcome::Failed(format!(
                "the server stored other bytes (sha256 {}, the file's is {})",
                short(stored_sha256),
                short(&entry.content_sha256)
            ))
        }
    }
}

/// The server's own words of a refusal.
fn message(e: &ClientError) -> String {
    match e {
        ClientError::Api { error, .. } => error.message.clone(),
        other => other.to_string(),
    }
}

/// The folder holding `path`, as a listing prefix: `/a/` for `/a/b.md`, `/` for `/x`.
fn parent_folder(path: &str) -> &str {
    path.rfind('/').map_or("/", |i| &path[..=i])
}

#[cfg(test)]
mod tests {
    use super::parent_folder;

    #[test]
    fn the_parent_folder_is_a_listing_prefix() {
        assert_eq!(parent_folder("/a/b.md"), "/a/");
        assert_eq!(parent_folder("/x"), "/");
        assert_eq!(parent_folder("/a/b/c"), "/a/b/");
    }
}
