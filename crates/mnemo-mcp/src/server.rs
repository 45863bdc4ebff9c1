//! The MCP server: the memory tool's commands over the stores of [`Mount`]s, each write a
//! memory version under the caller's credential with a `content_sha256` precondition, and each
//! memory a `mnemo://` resource.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use mnemo_api::MemoryChangeEvent;
use mnemo_client::Client;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    Extensions, Implementation, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::broadcast;

use crate::caller::{Answer, Caller};
use crate::feed::{Feed, Note, Whereabouts, notes};
use crate::http::Accounts;
use crate::paths::{Mount, ROOT};

/// Whom a request is served as.
#[derive(Clone)]
enum Source {
    /// `mnemo mcp` on stdio: one credential and the stores named on its command line.
    Fixed { caller: Caller, feed: Option<Feed> },
    /// `/mcp` on `mnemo serve`: each request as its own credential, over its workspace's stores.
    PerRequest(Arc<Accounts>),
}

/// The memory stores one MCP session serves.
#[derive(Clone)]
pub struct MemoryServer {
    source: Source,
    /// The URIs of `resources/subscribe` (clients before `subscriptions/listen`), and the task
    /// that forwards their changes.
    legacy: Arc<Mutex<Legacy>>,
    tool_router: ToolRouter<Self>,
}

impl std::fmt::Debug for MemoryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("MemoryServer");
        match &self.source {
            Source::Fixed { caller, .. } => out.field("mounts", &caller.mounts),
            Source::PerRequest(_) => out.field("mounts", &"each caller's workspace"),
        };
        out.finish_non_exhaustive()
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
pub(crate) struct SearchArgs {
    /// What to find: words (all must occur), "an exact phrase", -excluded, prefix*, path:notes/.
    /// Parts of identifiers match too (`staging-db`, `snake_case`).
    pub(crate) query: String,
    /// Only under this store or folder, e.g. `/memories/team-notes/infra` (default: every store).
    pub(crate) path: Option<String>,
    /// How many matches at most (default 10, at most 50).
    pub(crate) limit: Option<u32>,
    /// `text` (default: every word must occur), `semantic` (by meaning: finds "postgres" for
    /// "database"), or `hybrid` (both). The last two work when the server has an embeddings
    /// provider.
    pub(crate) mode: Option<String>,
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
        let caller = Caller { client, mounts: Arc::new(mounts), seen: Arc::default(), whole_workspace: false };
        Self::with_source(Source::Fixed { caller, feed: None })
    }

    /// A server for the callers of `/mcp`, each served with its own credential.
    pub(crate) fn per_request(accounts: Arc<Accounts>) -> Self {
        Self::with_source(Source::PerRequest(accounts))
    }

    fn with_source(source: Source) -> Self {
        Self { source, legacy: Arc::default(), tool_router: Self::tool_router() }
    }

    /// Offers resource subscriptions fed by `feed`.
    pub(crate) fn with_feed(mut self, feed: Option<Feed>) -> Self {
        if let Source::Fixed { feed: f, .. } = &mut self.source {
            *f = feed;
        }
        self
    }

    /// Whom the request with `extensions` is served as.
    async fn caller(&self, extensions: &Extensions) -> Result<Caller, String> {
        match &self.source {
            Source::Fixed { caller, .. } => Ok(caller.clone()),
            Source::PerRequest(accounts) => accounts.caller(extensions).await,
        }
    }

    /// The change feed of `caller`'s stores, if their server has one.
    async fn feed(&self, extensions: &Extensions, caller: &Caller) -> Option<Feed> {
        match &self.source {
            Source::Fixed { feed, .. } => feed.clone(),
            Source::PerRequest(accounts) => accounts.feed(extensions, caller).await,
        }
    }

    /// Whether subscriptions can be offered at all.
    fn may_subscribe(&self) -> bool {
        match &self.source {
            Source::Fixed { feed, .. } => feed.is_some(),
            Source::PerRequest(_) => true,
        }
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

#[tool_router(router = tool_router)]
impl MemoryServer {
    /// List a folder (files up to two levels deep, with sizes) or read a file with line numbers.
    #[tool(
        name = "view",
        description = "Show a memory folder or file. `/memories` lists the memory stores; a folder lists its files \
                       up to two levels deep with their sizes; a file shows its text with line numbers. Look at \
                       /memories before you start a task, to see what earlier sessions left."
    )]
    async fn view(&self, request: Extensions, Parameters(args): Parameters<ViewArgs>) -> Answer {
        self.caller(&request).await?.view(args).await
    }

    #[tool(
        name = "create",
        description = "Write a whole file: create it, or replace the content of one that exists (view that one \
                       first; it fails if it changed since). Prefer str_replace or insert for changes to an existing \
                       file."
    )]
    async fn create(&self, request: Extensions, Parameters(args): Parameters<CreateArgs>) -> Answer {
        self.caller(&request).await?.create(args).await
    }

    #[tool(
        name = "str_replace",
        description = "Replace text in a file: old_str must occur exactly once (copy it from view, whitespace \
                       included). View the file first; the edit fails if it changed since you viewed it."
    )]
    async fn str_replace(&self, request: Extensions, Parameters(args): Parameters<StrReplaceArgs>) -> Answer {
        self.caller(&request).await?.str_replace(args).await
    }

    #[tool(name = "insert", description = "Insert text after a line of a file (0: at its start).")]
    async fn insert(&self, request: Extensions, Parameters(args): Parameters<InsertArgs>) -> Answer {
        self.caller(&request).await?.insert(args).await
    }

    #[tool(name = "delete", description = "Delete a file, or a folder with every file in it. Its history is kept.")]
    async fn delete(&self, request: Extensions, Parameters(args): Parameters<PathArgs>) -> Answer {
        self.caller(&request).await?.delete(args).await
    }

    #[tool(name = "rename", description = "Move a file to another path of the same store.")]
    async fn rename(&self, request: Extensions, Parameters(args): Parameters<RenameArgs>) -> Answer {
        self.caller(&request).await?.rename(args).await
    }

    #[tool(name = "history", description = "List a file's versions, newest first: when, by whom, what happened.")]
    async fn history(&self, request: Extensions, Parameters(args): Parameters<PathArgs>) -> Answer {
        self.caller(&request).await?.history(args).await
    }
    #[tool(
        name = "search",
        description = "Find memories by what they say: words (all must occur), \"an exact phrase\", -excluded, \
                       prefix*, path:folder/. Parts of identifiers match (staging-db, snake_case). Answers the \
                       best matches first, each file's path and a snippet with the matches marked «…»; view a \
                       file to read it whole. Use it before creating a file, to add to what exists."
    )]
    async fn search(&self, request: Extensions, Parameters(args): Parameters<SearchArgs>) -> Answer {
        self.caller(&request).await?.search(args).await
    }
}

/// The resource URI of a memory: `mnemo://STORE_ID/PATH`.
pub fn resource_uri(mount: &Mount, path: &str) -> String {
    format!("mnemo://{}{path}", mount.store)
}

/// A refusal of a request the caller cannot be served for (its stores could not be listed).
fn refused(message: String) -> ErrorData {
    ErrorData::invalid_request(message, None)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_resources();
        let capabilities = if self.may_subscribe() {
            capabilities.enable_resources_subscribe().enable_resources_list_changed().build()
        } else {
            capabilities.build()
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
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = self.caller(&context.extensions).await.map_err(refused)?;
        let mut resources: Vec<Resource> = Vec::new();
        for mount in caller.mounts.iter() {
            let memories = caller.under(mount, None).await.map_err(|e| ErrorData::internal_error(e, None))?;
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
        let serves = |uri: &String| match &self.source {
            Source::Fixed { caller, feed } => feed.is_some() && caller.serves(uri),
            // Whose stores they are is known per request: `listen` filters by the caller's.
            Source::PerRequest(_) => uri.starts_with("mnemo://"),
        };
        if !self.may_subscribe() {
            return None;
        }
        let mut accepted = SubscriptionFilter::new();
        accepted.resources_list_changed = requested.resources_list_changed;
        accepted.resource_subscriptions =
            requested.resource_subscriptions.as_ref().map(|uris| uris.iter().filter(|u| serves(u)).cloned().collect());
        Some(accepted)
    }

    /// Tells the client of each change to a resource it subscribed to (a new version, a move,
    /// a deletion), and of resources appearing or going when it asked for that, until it stops
    /// listening.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let extensions = &context.request_context().extensions;
        let caller = self.caller(extensions).await.map_err(refused)?;
        let Some(feed) = self.feed(extensions, &caller).await else { return Ok(()) };
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
            let Some(mount) = caller.mount_of(&change.memory_store_id) else { continue };
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
        let caller = self.caller(&context.extensions).await.map_err(refused)?;
        let Some(feed) = self.feed(&context.extensions, &caller).await else {
            return Err(ErrorData::invalid_request("this server's memory stores have no change feed", None));
        };
        if !caller.serves(&request.uri) {
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
            let (mounts, peer, mut changes) = (caller.mounts.clone(), context.peer, feed.subscribe());
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
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&context.extensions).await.map_err(refused)?;
        let memory = caller.resource(&request.uri).await.map_err(|e| ErrorData::internal_error(e, None))?;
        let memory =
            memory.ok_or_else(|| ErrorData::resource_not_found(format!("no memory at {}", request.uri), None))?;
        let text = memory.content.unwrap_or_default();
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, request.uri.clone())]).into())
    }
}
