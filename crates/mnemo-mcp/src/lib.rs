//! The Model Context Protocol server over memory stores (`mnemo mcp`): any agent that speaks MCP
//! (Claude Code, Claude Desktop, Cursor, …) reads and writes memory stores through the memory
//! tool's commands (`view`, `create`, `str_replace`, `insert`, `delete`, `rename`, plus
//! `history`), and reads each memory as a `mnemo://STORE/PATH` resource.
//!
//! It talks to the stores through the public API ([`mnemo_client::Client`]), so it serves
//! `mnemo serve` and the hosted API alike: every write is a memory version under the caller's
//! credential, with a `content_sha256` precondition (a concurrent change is an error the model
//! can act on, never a silent overwrite); `--read-only` refuses writes.

mod caller;
mod feed;
mod http;
mod paths;
mod server;
mod text;

pub use paths::{Mount, ROOT};
pub use server::{MemoryServer, resource_uri};

use std::sync::Arc;

use mnemo_api::MemoryStoreId;
use mnemo_client::Client;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

/// Why the server could not start or ended badly.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("memory store {store}: {source}")]
    Store { store: MemoryStoreId, source: mnemo_client::ClientError },
    #[error("the MCP session failed: {0}")]
    Session(String),
}

/// Mounts for `stores`, named by their names as the server knows them.
pub async fn mounts(client: &Client, stores: &[MemoryStoreId], read_only: bool) -> Result<Vec<Mount>, McpError> {
    let mut named = Vec::with_capacity(stores.len());
    for id in stores {
        let store =
            client.get_memory_store(id).await.map_err(|source| McpError::Store { store: id.clone(), source })?;
        named.push((store.id, store.name));
    }
    Ok(Mount::all(named, read_only))
}

/// Serves `mounts` through `client` over this process's stdin and stdout until the client closes
/// them, following the stores' change feeds for resource subscriptions.
pub async fn serve_stdio(client: Client, mounts: Vec<Mount>) -> Result<(), McpError> {
    let feed = feed::Feed::start(&client, &mounts).await;
    let server = MemoryServer::new(client, mounts).with_feed(feed);
    let running = server.serve(rmcp::transport::stdio()).await.map_err(|e| McpError::Session(e.to_string()))?;
    running.waiting().await.map_err(|e| McpError::Session(e.to_string()))?;
    Ok(())
}

/// The MCP server over streamable HTTP, for `/mcp` on `mnemo serve`: each request is served as
/// the credential it carries, over the stores that credential may list, through `api` (the
/// server's own address; its credential is never used). Mount it behind the server's
/// authentication, so an unknown key is refused (and throttled) before MCP starts.
pub fn http_service(api: Client) -> StreamableHttpService<MemoryServer, LocalSessionManager> {
    let accounts = Arc::new(http::Accounts::new(api));
    // Every request must carry a valid credential, which a page that rebinds a name to this
    // host cannot send, so the Host check that guards unauthenticated local servers is off:
    // `mnemo serve` answers under whatever name it is published.
    let config = StreamableHttpServerConfig::default().with_allowed_hosts(Vec::<String>::new());
    StreamableHttpService::new(
        move || Ok(MemoryServer::per_request(Arc::clone(&accounts))),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
