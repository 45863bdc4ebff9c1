//! `mnemo env-key`: mint and revoke environment keys on a mnemo server.

use anyhow::Context;
use clap::{Args, Subcommand};
use mnemo_api::{EnvironmentId, EnvironmentKeyId};
use mnemo_client::Client;

/// Where and as whom to call the server.
#[derive(Debug, Args)]
pub(crate) struct Server {
    /// The mnemo server.
    #[arg(long, env = "ANTHROPIC_BASE_URL", default_value = "http://127.0.0.1:8080")]
    base_url: String,

    /// An API key of that server.
    #[arg(long, env = "ANTHROPIC_API_KEY", hide_env_values = true)]
    api_key: mnemo_api::Secret,
}

impl Server {
    pub(crate) fn client(&self) -> anyhow::Result<Client> {
        Ok(Client::new(&self.base_url, self.api_key.expose())?)
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum EnvKey {
    /// Mint a key for a self-hosted environment and print it alone on stdout.
    Create {
        /// The self-hosted environment (`env_…`).
        environment_id: EnvironmentId,
        #[command(flatten)]
        server: Server,
    },
    /// Revoke a key: workers using it are refused from then on.
    Revoke {
        /// The environment the key belongs to (`env_…`).
        environment_id: EnvironmentId,
        /// The key to revoke: its id as `list` shows it, never the secret.
        key_id: EnvironmentKeyId,
        #[command(flatten)]
        server: Server,
    },
    /// List an environment's keys (ids and dates, never secrets).
    List {
        /// The self-hosted environment (`env_…`).
        environment_id: EnvironmentId,
        #[command(flatten)]
        server: Server,
    },
}

impl EnvKey {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Create { environment_id, server } => {
                let key = server.client()?.create_environment_key(&environment_id).await?;
                tracing::info!(environment_key.id = %key.id, "created environment key");
                println!("{}", key.key.context("the server returned no secret")?.expose());
            }
            Self::Revoke { environment_id, key_id, server } => {
                let key = server.client()?.revoke_environment_key(&environment_id, &key_id).await?;
                println!("{} revoked at {}", key.id, key.revoked_at.unwrap_or_default());
            }
            Self::List { environment_id, server } => {
                for key in server.client()?.list_environment_keys(&environment_id).await?.data {
                    let state = key.revoked_at.map_or_else(|| "active".to_owned(), |at| format!("revoked {at}"));
                    println!("{}\t{}\t{state}", key.id, key.created_at);
                }
            }
        }
        Ok(())
    }
}
