//! `mnemo mcp`: memory stores as a Model Context Protocol server on stdin/stdout, for any
//! agent that speaks MCP (`docs/MCP.md`).

use anyhow::Context;
use clap::Args;
use mnemo_api::MemoryStoreId;

use super::args::Api;

#[derive(Debug, Args)]
pub(crate) struct Mcp {
    /// A memory store to serve (`memstore_…`; repeatable). Each is the folder
    /// `/memories/<its name>` of the tools' paths.
    #[arg(long = "store", value_name = "ID", required = true)]
    stores: Vec<MemoryStoreId>,

    /// Refuse every write: the agent can view the stores, not change them.
    #[arg(long)]
    read_only: bool,

    #[command(flatten)]
    api: Api,
}

impl Mcp {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let client = self.api.client()?;
        let mounts =
            mnemo_mcp::mounts(&client, &self.stores, self.read_only).await.context("cannot serve the memory stores")?;
        tracing::info!(stores = mounts.len(), read_only = self.read_only, "serving MCP on stdin and stdout");
        mnemo_mcp::serve_stdio(client, mounts).await?;
        Ok(())
    }
}
