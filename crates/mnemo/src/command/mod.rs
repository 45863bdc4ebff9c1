//! The subcommands, one file each.

mod args;
mod db;
mod env_key;
mod mount;
mod quickstart;
mod serve;
mod session;
mod signals;
mod worker;

use clap::{Parser, Subcommand};

use crate::logging::LogFormat;

/// mnemo: memory that survives agent sessions.
#[derive(Debug, Parser)]
#[command(name = "mnemo", version, about)]
pub(crate) struct Cli {
    /// Log line format (logs go to stderr).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "MNEMO_LOG_FORMAT")]
    pub(crate) log_format: LogFormat,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the API server (memory stores, memories, versions).
    Serve(serve::Serve),
    /// Mint, list and revoke environment keys (workers authenticate with them).
    #[command(subcommand)]
    EnvKey(env_key::EnvKey),
    /// Drive sessions as their agent (the external agent driver).
    #[command(subcommand)]
    Session(session::Session),
    /// Mount one memory store as a local folder and keep it in sync until SIGINT/SIGTERM.
    Mount(mount::Mount),
    /// Serve a self-hosted environment's sessions: tools, memory mounts and sync.
    #[command(subcommand)]
    Worker(worker::Worker),
    /// See the whole product in a minute: a server on a temporary SQLite database, a demo
    /// store, environment and agent, a worker in this process, and two scripted sessions that
    /// show memory surviving from one to the next; then serves until Ctrl-C and cleans up.
    Quickstart(quickstart::Quickstart),
    /// Database maintenance: copy a deployment between SQLite and PostgreSQL.
    #[command(subcommand)]
    Db(db::Db),
}

impl Command {
    /// Whether this runs on a sandbox host next to an agent (worker, mount) rather than serving.
    pub(crate) fn is_sandbox_side(&self) -> bool {
        matches!(self, Self::Worker(_) | Self::Mount(_))
    }

    /// Whether the command prints its own story, so logs default to warnings only.
    pub(crate) fn is_chatty(&self) -> bool {
        matches!(self, Self::Quickstart(_))
    }

    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Serve(cmd) => cmd.run().await,
            Self::Mount(cmd) => cmd.run().await,
            Self::EnvKey(cmd) => cmd.run().await,
            Self::Session(cmd) => cmd.run().await,
            Self::Worker(cmd) => cmd.run().await,
            Self::Db(cmd) => cmd.run().await,
            Self::Quickstart(cmd) => cmd.run().await,
        }
    }
}
