//! One caller's view of its memory stores: the credential its calls are made with, the stores
//! it is served, and the digest of each file as its model last saw it. Every tool's work is
//! done here; [`crate::MemoryServer`] only finds the caller of a request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mnemo_api::{Memory, MemoryPath, Precondition, UpdateMemory, View};
use mnemo_client::{Client, ClientError, ListMemoriesParams, ListMemoryVersionsParams, SearchMemoriesParams};

use crate::paths::{self, Mount, ROOT, Target};
use crate::server::{CreateArgs, InsertArgs, PathArgs, RenameArgs, SearchArgs, StrReplaceArgs, ViewArgs, resource_uri};
use crate::text;

/// A tool's answer: text for the model, or a refusal it can read and act on.
pub(crate) type Answer = Result<String, String>;

/// The digest of each file (by tool path) as the model last saw it, through `view` or its own
/// write: an edit of a file it has not seen as it is now is refused.
pub(crate) type Seen = Arc<Mutex<HashMap<String, String>>>;

/// The stores one request is served with, and the credential it acts with.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) client: Client,
    pub(crate) mounts: Arc<Vec<Mount>>,
    pub(crate) seen: Seen,
    /// The mounts are every store the credential reaches (`/mcp`), so one search across the
    /// workspace covers them; else each mount's store is searched on its own.
    pub(crate) whole_workspace: bool,
}

impl Caller {
    pub(crate) fn mount_of(&self, store: &mnemo_api::MemoryStoreId) -> Option<&Mount> {
        self.mounts.iter().find(|m| m.store == *store)
    }

    /// Whether `uri` is a resource of one of this caller's stores.
    pub(crate) fn serves(&self, uri: &str) -> bool {
        self.mounts.iter().any(|m| uri.strip_prefix(&resource_uri(m, "/")).is_some())
    }

    fn saw(&self, at: String, sha: &str) {
        self.seen.lock().expect("seen map poisoned").insert(at, sha.to_owned());
    }

    fn forget(&self, at: &str) {
        self.seen.lock().expect("seen map poisoned").remove(at);
    }

    /// The precondition of an edit of `memory`: the digest the model saw, which must be its
    /// current one (else the model would overwrite a change it never saw).
    fn seen_as_now(&self, mount: &Mount, memory: &Memory) -> Result<Precondition, String> {
        let at = mount.tool_path(&memory.path);
        match self.seen.lock().expect("seen map poisoned").get(&at) {
            None => Err(format!("{at} exists and has not been viewed in this session: view it first, then edit it")),
            Some(sha) if *sha != memory.content_sha256 => Err(format!(
                "{at} changed since you last viewed it (someone else wrote it): view it again, then redo the edit"
            )),
            Some(sha) => Ok(Precondition::ContentSha256 { content_sha256: sha.clone() }),
        }
    }

    fn target<'a>(&'a self, raw: &str) -> Result<Target<'a>, String> {
        paths::resolve(&self.mounts, raw)
    }

    /// The memory at `path` of `mount`, with its content, if there is one.
    pub(crate) async fn memory(&self, mount: &Mount, path: &MemoryPath) -> Result<Option<Memory>, String> {
        let folder = match path.as_str().rfind('/') {
            Some(at) => &path.as_str()[..=at],
            None => "/",
        };
        let listed = self.client.list_folder(&mount.store, folder).await.map_err(|e| failed(mount, &e))?;
        let Some(found) = listed.into_iter().find(|m| m.path == path.as_str()) else { return Ok(None) };
        self.client.get_memory(&mount.store, &found.id, Some(View::Full)).await.map(Some).map_err(|e| failed(mount, &e))
    }

    /// Every memory under folder `path` of `mount` (the whole store for `None`), content-free.
    pub(crate) async fn under(&self, mount: &Mount, path: Option<&MemoryPath>) -> Result<Vec<Memory>, String> {
        let prefix = path.map_or_else(|| "/".to_owned(), |p| format!("{}/", p.as_str()));
        let mut params = ListMemoriesParams {
            path_prefix: Some(prefix),
            limit: Some(100),
            view: Some(View::Basic),
            ..Default::default()
        };
        let mut out = Vec::new();
        loop {
            let page = self.client.list_memories(&mount.store, &params).await.map_err(|e| failed(mount, &e))?;
            out.extend(page.data.into_iter().filter_map(|item| match item {
                mnemo_api::MemoryListItem::Memory(m) => Some(m),
                mnemo_api::MemoryListItem::Prefix(_) => None,
            }));
            match page.next_page.filter(|p| !p.is_empty()) {
                Some(next) => params.page = Some(next),
                None => return Ok(out),
            }
        }
    }

    /// A file's mount, path and current memory; refuses folders and the root.
    async fn file(&self, raw: &str) -> Result<(&Mount, MemoryPath, Option<Memory>), String> {
        match self.target(raw)? {
            Target::Root | Target::In(_, None) => Err(format!("`{raw}` is a folder, not a file")),
            Target::In(mount, Some(path)) => {
                let memory = self.memory(mount, &path).await?;
                Ok((mount, path, memory))
            }
        }
    }

    /// Writes `content` to `path` of `mount`: a new memory, or a new version of `current` that
    /// only lands if nobody changed it since it was read.
    async fn write(&self, mount: &Mount, path: &MemoryPath, current: Option<&Memory>, content: &str) -> Answer {
        writable(mount)?;
        let written = match current {
            None => self.client.create_memory(&mount.store, path.as_str(), content, Some(View::Basic)).await,
            Some(memory) => {
                let precondition = Some(self.seen_as_now(mount, memory)?);
                let body = UpdateMemory { content: Some(content.to_owned()), path: None, precondition };
                self.client.update_memory(&mount.store, &memory.id, &body, Some(View::Basic)).await
            }
        };
        let at = mount.tool_path(path.as_str());
        let written = written.map_err(|e| changed(mount, path, &e))?;
        self.saw(at.clone(), &written.content_sha256);
        Ok(format!("saved {at}"))
    }

    pub(crate) async fn view(&self, args: ViewArgs) -> Answer {
        match self.target(&args.path)? {
            Target::Root => {
                let mut out = format!("The memory stores under {ROOT}:\n");
                for m in self.mounts.iter() {
                    let access = if m.read_only { "read-only" } else { "read-write" };
                    out.push_str(&format!("{}\t({}, {access})\n", m.folder, m.name));
                }
                Ok(out)
            }
            Target::In(mount, path) => {
                if let Some(path) = &path
                    && let Some(memory) = self.memory(mount, path).await?
                {
                    self.saw(mount.tool_path(&memory.path), &memory.content_sha256);
                    return text::numbered(memory.content.as_deref().unwrap_or_default(), args.view_range);
                }
                let base = path.as_ref().map_or(0, |p| p.segments().count());
                let files = self.under(mount, path.as_ref()).await?;
                if files.is_empty() && path.is_some() {
                    return Err(format!("{} does not exist", args.path.trim_end_matches('/')));
                }
                let mut out = format!("{} file(s) in {}:\n", files.len(), args.path.trim_end_matches('/'));
                let mut folders = std::collections::BTreeSet::new();
                for m in &files {
                    let depth = m.path[1..].split('/').count() - base;
                    if depth <= 2 {
                        out.push_str(&format!("{}\t{}\n", size(m.content_size_bytes), mount.tool_path(&m.path)));
                    } else {
                        let cut: Vec<&str> = m.path[1..].split('/').take(base + 2).collect();
                        folders.insert(mount.tool_path(&format!("/{}/", cut.join("/"))));
                    }
                }
                for folder in folders {
                    out.push_str(&format!("-\t{folder} (deeper files: view this folder)\n"));
                }
                Ok(out)
            }
        }
    }

    pub(crate) async fn create(&self, args: CreateArgs) -> Answer {
        let (mount, path, current) = self.file(&args.path).await?;
        self.write(mount, &path, current.as_ref(), &args.file_text).await
    }

    pub(crate) async fn str_replace(&self, args: StrReplaceArgs) -> Answer {
        let (mount, path, current) = self.file(&args.path).await?;
        let memory = current.ok_or_else(|| format!("{} does not exist: create it first", args.path))?;
        // The edit was made against what the model saw: judge that first.
        self.seen_as_now(mount, &memory)?;
        let next = text::str_replace(memory.content.as_deref().unwrap_or_default(), &args.old_str, &args.new_str)?;
        self.write(mount, &path, Some(&memory), &next).await
    }

    pub(crate) async fn insert(&self, args: InsertArgs) -> Answer {
        let (mount, path, current) = self.file(&args.path).await?;
        let memory = current.ok_or_else(|| format!("{} does not exist: create it first", args.path))?;
        self.seen_as_now(mount, &memory)?;
        let next = text::insert(memory.content.as_deref().unwrap_or_default(), args.insert_line, &args.insert_text)?;
        self.write(mount, &path, Some(&memory), &next).await
    }

    pub(crate) async fn delete(&self, args: PathArgs) -> Answer {
        let Target::In(mount, Some(path)) = self.target(&args.path)? else {
            return Err(format!("`{}` is a whole store or the root: delete the files in it instead", args.path));
        };
        writable(mount)?;
        // A file must be deleted as the model saw it; a folder as it is now, file by file.
        let doomed = match self.memory(mount, &path).await? {
            Some(memory) => {
                self.seen_as_now(mount, &memory)?;
                vec![memory]
            }
            None => self.under(mount, Some(&path)).await?,
        };
        if doomed.is_empty() {
            return Err(format!("{} does not exist", args.path));
        }
        for memory in &doomed {
            let path = MemoryPath::parse(&memory.path).map_err(|e| e.to_string())?;
            self.client
                .delete_memory(&mount.store, &memory.id, Some(&memory.content_sha256))
                .await
                .map_err(|e| changed(mount, &path, &e))?;
            self.forget(&mount.tool_path(path.as_str()));
        }
        Ok(format!("deleted {} file(s) at {}", doomed.len(), args.path))
    }

    pub(crate) async fn rename(&self, args: RenameArgs) -> Answer {
        let (mount, path, current) = self.file(&args.old_path).await?;
        let memory = current.ok_or_else(|| format!("{} does not exist", args.old_path))?;
        let Target::In(to_mount, Some(to)) = self.target(&args.new_path)? else {
            return Err(format!("`{}` is not a file path", args.new_path));
        };
        if to_mount.store != mount.store {
            return Err("a file moves within its store: create it in the other store and delete this one".into());
        }
        writable(mount)?;
        let precondition = Some(self.seen_as_now(mount, &memory)?);
        let body = UpdateMemory { content: None, path: Some(to.as_str().to_owned()), precondition };
        let moved = self
            .client
            .update_memory(&mount.store, &memory.id, &body, Some(View::Basic))
            .await
            .map_err(|e| changed(mount, &path, &e))?;
        let to = mount.tool_path(to.as_str());
        self.forget(&mount.tool_path(path.as_str()));
        self.saw(to.clone(), &moved.content_sha256);
        Ok(format!("moved {} to {to}", args.old_path))
    }

    pub(crate) async fn history(&self, args: PathArgs) -> Answer {
        let (mount, _, current) = self.file(&args.path).await?;
        let memory = current.ok_or_else(|| format!("{} does not exist", args.path))?;
        let params = ListMemoryVersionsParams { memory_id: Some(memory.id.to_string()), ..Default::default() };
        let versions =
            self.client.list_all_memory_versions(&mount.store, params).await.map_err(|e| failed(mount, &e))?;
        let mut out = format!("{} version(s) of {}:\n", versions.len(), args.path);
        for v in versions {
            let by = v.created_by.as_ref().map_or_else(|| "unknown".to_owned(), actor);
            let size = v.content_size_bytes.map_or_else(|| "-".to_owned(), size);
            let redacted = if v.redacted_at.is_some() { " (redacted)" } else { "" };
            out.push_str(&format!(
                "{}\t{}\t{size}\t{by}\t{}{redacted}\n",
                v.created_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                v.operation.as_str(),
                v.id
            ));
        }
        Ok(out)
    }

    pub(crate) async fn search(&self, args: SearchArgs) -> Answer {
        let limit = args.limit.unwrap_or(SEARCH_LIMIT).clamp(1, SEARCH_LIMIT_MAX);
        let mode = args.mode.as_deref().map(mnemo_api::SearchMode::parse).transpose()?;
        let mut params = SearchMemoriesParams { q: args.query.clone(), limit: Some(limit), mode, ..Default::default() };
        // Where to look: one store (or a folder of it), or every store served.
        let scope: Vec<&Mount> = match args.path.as_deref().map(|p| self.target(p)).transpose()? {
            None | Some(Target::Root) => self.mounts.iter().collect(),
            Some(Target::In(mount, folder)) => {
                params.path_prefix = folder.map(|f| format!("{}/", f.as_str()));
                vec![mount]
            }
        };
        let (mut hits, mut notice) = (Vec::new(), None);
        if self.whole_workspace && scope.len() == self.mounts.len() && scope.len() > 1 {
            let page = self.client.search_memories(None, &params).await.map_err(|e| unsearchable(&e))?;
            hits.extend(page.data);
            notice = page.notice;
        } else {
            for mount in &scope {
                let page =
                    self.client.search_memories(Some(&mount.store), &params).await.map_err(|e| unsearchable(&e))?;
                hits.extend(page.data);
                notice = notice.or(page.notice);
            }
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit as usize);
        let mut out = format!("{} match(es) for {:?}, best first (matches marked «…»):\n", hits.len(), args.query);
        if let Some(notice) = notice {
            out.insert_str(0, &format!("Note: {notice}\n"));
        }
        for hit in &hits {
            let Some(mount) = self.mount_of(&hit.memory_store_id) else { continue };
            out.push_str(&format!("{}\n    {}\n", mount.tool_path(&hit.path), hit.snippet));
        }
        Ok(out)
    }

    /// The memory a `mnemo://STORE/PATH` URI names, if it is one of this caller's.
    pub(crate) async fn resource(&self, uri: &str) -> Result<Option<Memory>, String> {
        let Some((store, path)) = uri.strip_prefix("mnemo://").and_then(|rest| rest.split_once('/')) else {
            return Ok(None);
        };
        let Some(mount) = self.mounts.iter().find(|m| m.store.as_str() == store) else { return Ok(None) };
        let Ok(path) = MemoryPath::parse(&format!("/{path}")) else { return Ok(None) };
        self.memory(mount, &path).await
    }
}

/// Matches a search returns by default, and at most.
const SEARCH_LIMIT: u32 = 10;
const SEARCH_LIMIT_MAX: u32 = 50;

/// A failed search: a malformed query in the API's words; a server without search said so.
fn unsearchable(e: &ClientError) -> String {
    match e {
        // A store it serves is known, so a 404 means the route: the hosted API has no search.
        ClientError::Api { error, .. } if e.status() == Some(404) && !error.message.contains("memory store") => {
            "this memory server has no search (it is a mnemo extension): view folders instead".to_owned()
        }
        ClientError::Api { error, .. } => format!("search refused: {}", error.message),
        other => format!("the memory service did not answer: {other}"),
    }
}

/// Refuses writes to a read-only mount.
fn writable(mount: &Mount) -> Result<(), String> {
    if mount.read_only {
        return Err(format!("{} is read-only: it can be viewed, not changed", mount.folder));
    }
    Ok(())
}

/// A failed call, in the API's words (they never hold a credential).
fn failed(mount: &Mount, e: &ClientError) -> String {
    match e {
        ClientError::Api { error, .. } => format!("{}: {}", mount.folder, error.message),
        other => format!("{}: the memory service did not answer: {other}", mount.folder),
    }
}

/// A failed write: a precondition or path conflict says what to do next.
fn changed(mount: &Mount, path: &MemoryPath, e: &ClientError) -> String {
    let at = mount.tool_path(path.as_str());
    if e.is_conflict() || e.error_code() == Some("precondition_failed") || e.status() == Some(412) {
        return format!("{at} changed since it was read (someone else wrote it): view it again, then redo the edit");
    }
    failed(mount, e)
}

/// Who wrote a version, in a few words.
fn actor(a: &mnemo_api::Actor) -> String {
    match a {
        mnemo_api::Actor::SessionActor { session_id } => format!("session {session_id}"),
        mnemo_api::Actor::ApiActor { api_key_id } => format!("API key {api_key_id}"),
        mnemo_api::Actor::UserActor { user_id } => format!("user {user_id}"),
        mnemo_api::Actor::ServiceAccountActor { service_account_id } => format!("service account {service_account_id}"),
    }
}

/// A size as the memory tool shows it: bytes under 1 KiB, else one decimal and a unit.
fn size(bytes: u64) -> String {
    match bytes {
        0..1024 => format!("{bytes}"),
        1024..1_048_576 => format!("{:.1}K", bytes as f64 / 1024.0),
        _ => format!("{:.1}M", bytes as f64 / 1_048_576.0),
    }
}
