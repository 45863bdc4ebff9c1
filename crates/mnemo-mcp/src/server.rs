//! The MCP server: the memory tool's commands over the stores of [`Mount`]s, each write a
//! memory version under the caller's credential with a `content_sha256` precondition, and each
//! memory a `mnemo://` resource.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use mnemo_api::{Memory, MemoryChangeEvent, MemoryPath, Precondition, UpdateMemory, View};
use mnemo_client::{Client, ClientError, ListMemoriesParams, ListMemoryVersionsParams};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    Implementation, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::broadcast;

use crate::feed::{Feed, Note, Whereabouts, notes};
use crate::paths::{self, Mount, ROOT, Target};
use crate::text;

/// A tool's answer: text for the model, or a refusal it can read and act on.
type Answer = Result<String, String>;

/// The memory stores one MCP session serves.
#[derive(Clone)]
pub struct MemoryServer {
    client: Client,
    mounts: Vec<Mount>,
    /// The digest of each file (by tool path) as the model last saw it, through `view` or its
    /// own write: an edit of a file it has not seen as it is now is refused.
    seen: Arc<Mutex<HashMap<String, String>>>,
    /// The stores' changes, when their server has a change feed (subscriptions need it).
    feed: Option<Feed>,
    /// The URIs of `resources/subscribe` (clients before `subscriptions/listen`), and the task
    /// that forwards their changes.
    legacy: Arc<Mutex<Legacy>>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for MemoryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryServer").field("mounts", &self.mounts).finish_non_exhaustive()
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ViewArgs {
    /// A folder (e.g. `/memories` or `/memories/notes`) to list, or a file to read.
    pub(crate) path: String,
    /// Only these lines of a file: `[first, last]`, 1-based and inclusive; `last` -1 is the end.
    pub(crate) view_range: Option<[i64; 2]>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct CreateArgs {
    /// The file, e.g. `/memories/notes/decisions.md`.
    pub(crate) path: String,
    /// Its whole content.
    pub(crate) file_text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct StrReplaceArgs {
    pub(crate) path: String,
    /// The exact text to replace; it must occur once in the file.
    pub(crate) old_str: String,
    /// What replaces it (may be empty).
    pub(crate) new_str: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct InsertArgs {
    pub(crate) path: String,
    /// The line after which the text goes; 0 puts it first.
    pub(crate) insert_line: u64,
    pub(crate) insert_text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct PathArgs {
    /// A file, or (for `delete`) a folder.
    pub(crate) path: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RenameArgs {
    pub(crate) old_path: String,
    /// In the same store.
    pub(crate) new_path: String,
}

impl MemoryServer {
    /// A server over `mounts`, calling the API through `client`.
    pub fn new(client: Client, mounts: Vec<Mount>) -> Self {
        Self {
            client,
            mounts,
            seen: Arc::default(),
            feed: None,
            legacy: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    /// Offers resource subscriptions fed by `feed`.
    pub(crate) fn with_feed(mut self, feed: Option<Feed>) -> Self {
        self.feed = feed;
        self
    }

    fn mount_of(&self, store: &mnemo_api::MemoryStoreId) -> Option<&Mount> {
        self.mounts.iter().find(|m| m.store == *store)
    }

    /// Whether `uri` is a resource of one of this server's stores.
    fn serves(&self, uri: &str) -> bool {
        self.mounts.iter().any(|m| uri.strip_prefix(&resource_uri(m, "/")).is_some())
    }

    fn saw(&self, at: String, sha: &str) {
        self.seen.lock().expect("seen map poisoned").insert(at, sha.to_owned());
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
    async fn memory(&self, mount: &Mount, path: &MemoryPath) -> Result<Option<Memory>, String> {
        let folder = match path.as_str().rfind('/') {
            Some(at) => &path.as_str()[..=at],
            None => "/",
        };
        let listed = self.client.list_folder(&mount.store, folder).await.map_err(|e| failed(mount, &e))?;
        let Some(found) = listed.into_iter().find(|m| m.path == path.as_str()) else { return Ok(None) };
        self.client.get_memory(&mount.store, &found.id, Some(View::Full)).await.map(Some).map_err(|e| failed(mount, &e))
    }

    /// Every memory under folder `path` of `mount` (the whole store for `None`), content-free.
    async fn under(&self, mount: &Mount, path: Option<&MemoryPath>) -> Result<Vec<Memory>, String> {
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
}

/// The subscriptions of a client that predates `subscriptions/listen`.
#[derive(Debug, Default)]
struct Legacy {
    uris: HashSet<String>,
    forwarding: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Legacy {
    fn drop(&mut self) {
        if let Some(task) = self.forwarding.take() {
            task.abort();
        }
    }
}

/// The next change of the feed; `None` once it is gone. A subscriber that fell behind skips
/// what it missed (and says so).
async fn next_change(changes: &mut broadcast::Receiver<MemoryChangeEvent>) -> Option<MemoryChangeEvent> {
    loop {
        match changes.recv().await {
            Ok(change) => return Some(change),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "a subscription fell behind the change feed");
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        }
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

#[tool_router(router = tool_router)]
impl MemoryServer {
    /// List a folder (files up to two levels deep, with sizes) or read a file with line numbers.
    #[tool(
        name = "view",
        description = "Show a memory folder or file. `/memories` lists the memory stores; a folder lists its files \
                       up to two levels deep with their sizes; a file shows its text with line numbers. Look at \
                       /memories before you start a task, to see what earlier sessions left."
    )]
    async fn view(&self, Parameters(args): Parameters<ViewArgs>) -> Answer {
        match self.target(&args.path)? {
            Target::Root => {
                let mut out = format!("The memory stores under {ROOT}:\n");
                for m in &self.mounts {
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

    #[tool(
        name = "create",
        description = "Write a whole file: create it, or replace the content of one that exists (view that one \
                       first; it fails if it changed since). Prefer str_replace or insert for changes to an existing \
                       file."
    )]
    async fn create(&self, Parameters(args): Parameters<CreateArgs>) -> Answer {
        let (mount, path, current) = self.file(&args.path).await?;
        self.write(mount, &path, current.as_ref(), &args.file_text).await
    }

    #[tool(
        name = "str_replace",
        description = "Replace text in a file: old_str must occur exactly once (copy it from view, whitespace \
                       included). View the file first; the edit fails if it changed since you viewed it."
    )]
    async fn str_replace(&self, Parameters(args): Parameters<StrReplaceArgs>) -> Answer {
        let (mount, path, current) = self.file(&args.path).await?;
        let memory = current.ok_or_else(|| format!("{} does not exist: create it first", args.path))?;
        // The edit was made against what the model saw: judge that first.
        self.seen_as_now(mount, &memory)?;
        let next = text::str_replace(memory.content.as_deref().unwrap_or_default(), &args.old_str, &args.new_str)?;
        self.write(mount, &path, Some(&memory), &next).await
    }

    #[tool(name = "insert", description = "Insert text after a line of a file (0: at its start).")]
    async fn insert(&self, Parameters(args): Parameters<InsertArgs>) -> Answer {
        let (mount, path, current) = self.file(&args.path).await?;
        let memory = current.ok_or_else(|| format!("{} does not exist: create it first", args.path))?;
        self.seen_as_now(mount, &memory)?;
        let next = text::insert(memory.content.as_deref().unwrap_or_default(), args.insert_line, &args.insert_text)?;
        self.write(mount, &path, Some(&memory), &next).await
    }

    #[tool(name = "delete", description = "Delete a file, or a folder with every file in it. Its history is kept.")]
    async fn delete(&self, Parameters(args): Parameters<PathArgs>) -> Answer {
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
            self.seen.lock().expect("seen map poisoned").remove(&mount.tool_path(path.as_str()));
        }
        Ok(format!("deleted {} file(s) at {}", doomed.len(), args.path))
    }

    #[tool(name = "rename", description = "Move a file to another path of the same store.")]
    async fn rename(&self, Parameters(args): Parameters<RenameArgs>) -> Answer {
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
        self.seen.lock().expect("seen map poisoned").remove(&mount.tool_path(path.as_str()));
        self.saw(to.clone(), &moved.content_sha256);
        Ok(format!("moved {} to {to}", args.old_path))
    }

    #[tool(name = "history", description = "List a file's versions, newest first: when, by whom, what happened.")]
    async fn history(&self, Parameters(args): Parameters<PathArgs>) -> Answer {
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

/// The resource URI of a memory: `mnemo://STORE_ID/PATH`.
pub fn resource_uri(mount: &Mount, path: &str) -> String {
    format!("mnemo://{}{path}", mount.store)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_resources();
        let capabilities = match self.feed {
            Some(_) => capabilities.enable_resources_subscribe().enable_resources_list_changed().build(),
            None => capabilities.build(),
        };
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new("mnemo", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(format!(
            "Persistent memory shared across sessions: each memory store is a folder under {ROOT}. View {ROOT} \
             first; write down what later sessions should know. Every write is kept as a version."
        ));
        info
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut resources: Vec<Resource> = Vec::new();
        for mount in &self.mounts {
            let memories = self.under(mount, None).await.map_err(|e| ErrorData::internal_error(e, None))?;
            for m in memories {
                let resource = Resource::new(resource_uri(mount, &m.path), mount.tool_path(&m.path))
                    .with_mime_type("text/plain")
                    .with_size(m.content_size_bytes);
                resources.push(resource);
            }
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        self.feed.as_ref()?;
        let mut accepted = SubscriptionFilter::new();
        accepted.resources_list_changed = requested.resources_list_changed;
        accepted.resource_subscriptions = requested
            .resource_subscriptions
            .as_ref()
            .map(|uris| uris.iter().filter(|u| self.serves(u)).cloned().collect());
        Some(accepted)
    }

    /// Tells the client of each change to a resource it subscribed to (a new version, a move,
    /// a deletion), and of resources appearing or going when it asked for that, until it stops
    /// listening.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let Some(feed) = &self.feed else { return Ok(()) };
        let mut changes = feed.subscribe();
        let accepted = context.accepted().clone();
        let uris: HashSet<String> = accepted.resource_subscriptions.unwrap_or_default().into_iter().collect();
        let list_changed = accepted.resources_list_changed == Some(true);
        let mut whereabouts = Whereabouts::new();
        loop {
            let change = tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = next_change(&mut changes) => change,
            };
            let Some(change) = change else { return Ok(()) };
            let Some(mount) = self.mount_of(&change.memory_store_id) else { continue };
            for note in notes(&change, |p| resource_uri(mount, p), &mut whereabouts) {
                let sent = match note {
                    Note::Updated(uri) if uris.contains(&uri) => context.sink().notify_resource_updated(uri).await,
                    Note::ListChanged if list_changed => context.sink().notify_resource_list_changed().await,
                    _ => Ok(()),
                };
                if sent.is_err() {
                    return Ok(());
                }
            }
        }
    }

    /// `resources/subscribe` of clients on protocol versions before `subscriptions/listen`:
    /// the first starts forwarding this session's changes to its peer.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(feed) = &self.feed else {
            return Err(ErrorData::invalid_request("this server's memory stores have no change feed", None));
        };
        if !self.serves(&request.uri) {
            return Err(ErrorData::resource_not_found(
                format!("no memory store of this server at {}", request.uri),
                None,
            ));
        }
        let mut legacy = self.legacy.lock().expect("subscriptions poisoned");
        legacy.uris.insert(request.uri);
        if legacy.forwarding.is_none() {
            // The task holds the subscriptions weakly: dropping the server drops them and so
            // aborts it.
            let (mounts, peer, mut changes) = (self.mounts.clone(), context.peer, feed.subscribe());
            let subscribed = Arc::downgrade(&self.legacy);
            legacy.forwarding = Some(tokio::spawn(async move {
                let mut whereabouts = Whereabouts::new();
                while let Some(change) = next_change(&mut changes).await {
                    let Some(mount) = mounts.iter().find(|m| m.store == change.memory_store_id) else { continue };
                    for note in notes(&change, |p| resource_uri(mount, p), &mut whereabouts) {
                        let wanted = |uri: &String| {
                            subscribed
                                .upgrade()
                                .is_some_and(|s| s.lock().expect("subscriptions poisoned").uris.contains(uri))
                        };
                        let sent = match note {
                            Note::Updated(uri) if wanted(&uri) => {
                                peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await
                            }
                            Note::ListChanged => peer.notify_resource_list_changed().await,
                            Note::Updated(_) => Ok(()),
                        };
                        if sent.is_err() {
                            return;
                        }
                    }
                }
            }));
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.legacy.lock().expect("subscriptions poisoned").uris.remove(&request.uri);
        Ok(())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let unknown = || ErrorData::resource_not_found(format!("no memory at {}", request.uri), None);
        let rest = request.uri.strip_prefix("mnemo://").ok_or_else(unknown)?;
        let (store, path) = rest.split_once('/').ok_or_else(unknown)?;
        let mount = self.mounts.iter().find(|m| m.store.as_str() == store).ok_or_else(unknown)?;
        let path = MemoryPath::parse(&format!("/{path}")).map_err(|_| unknown())?;
        let memory = self.memory(mount, &path).await.map_err(|e| ErrorData::internal_error(e, None))?;
        let memory = memory.ok_or_else(unknown)?;
        let text = memory.content.unwrap_or_default();
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, request.uri.clone())]).into())
    }
}
